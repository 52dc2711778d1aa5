import { describe, expect, it } from 'vitest';
import type { Bundle } from '../../actors/handshake/messages.js';
import type { PlacementUnit } from '../../actors/items/messages.js';
import { World } from './handshake-world.js';

/**
 * Item legs of a handshake settlement over the items area's real container
 * step (pure, no runtime): stage locks what the caller gives, the second
 * confirm holds room in the receiving containers and then commits funds and
 * items together; a refusal, cancel or the deadline gives every hold, lock
 * and room back. Messages are delivered in every order the test picks, and
 * twice, to show nothing applies twice.
 */
const A = 'alice';
const B = 'bob';
const sword: PlacementUnit = { definition_id: 'sword', stackable: false, max_stack: 1, weight_m: 5_000, volume_m: 0, durability: { current: 9, max: 10 }, collection_tags: [] };
const ore: PlacementUnit = { definition_id: 'ore', stackable: true, max_stack: 50, weight_m: 1_000, volume_m: 0, durability: null, collection_tags: [] };

/** Alice gives her sword and 10 ore; Bob gives 500 USD. */
function setUp(bobSlots = 10) {
  const world = new World();
  world.fund(B, 1_000);
  world.container('a-bag', A, 10, [{ unit: sword, quantity: 1 }, { unit: ore, quantity: 30 }]);
  const bobBag = world.container('b-bag', B, bobSlots);
  const aliceBag = world.container('a-bag', A, 10);
  const [blade] = world.items('a-bag').filter((item) => item.definition_id === 'sword');
  const [stack] = world.items('a-bag').filter((item) => item.definition_id === 'ore');
  const bundle: Bundle = {
    initiator_gives: { currency_legs: [], item_legs: [{ item_id: blade.item_id, quantity: 1, container_id: 'a-bag' }, { item_id: stack.item_id, quantity: 10, container_id: 'a-bag' }], terms: [] },
    responder_gives: { currency_legs: [{ currency_id: 'USD', amount: 500 }], item_legs: [], terms: [] },
  };
  world.create('s1', A, B, {}, bundle);
  world.session('s1', { op: 'accept', caller: B, offer_id: 's1.o1' });
  return { world, blade, stack, bobBag, aliceBag };
}

function stageBoth(world: World, bobBag: ReturnType<World['container']>) {
  const a = world.session('s1', { op: 'stage', caller: A, receive: null });
  const b = world.session('s1', { op: 'stage', caller: B, receive: bobBag });
  world.drain();
  return { a, b };
}

describe('handshake item legs', () => {
  it('stage locks the giver\'s units; the receiver must name a container it owns', () => {
    const { world, bobBag, aliceBag } = setUp();
    expect(world.session('s1', { op: 'stage', caller: B, receive: null }).error?.code).toBe('BAD_REQUEST');
    expect(world.session('s1', { op: 'stage', caller: B, receive: aliceBag }).error?.code).toBe('items_container_not_found');
    const staged = world.session('s1', { op: 'stage', caller: A, receive: null }, 'stage-a');
    expect(staged).toEqual({});
    world.drain();
    const view = world.outcomes.get('stage-a')!.reply;
    expect(view.initiator_stage).toMatchObject({ staged: true, item_lock_ids: ['s1.s.initiator.0.i0', 's1.s.initiator.0.i1'], ledger_hold_ids: [] });
    expect(world.heldLocks('a-bag')).toBe(2);
    world.session('s1', { op: 'stage', caller: B, receive: bobBag });
    world.drain();
    expect(world.state('s1').settlement!.view.responder_stage).toMatchObject({ staged: true, receive_container_id: 'b-bag' });
  });

  it('confirm by both holds room, then moves funds and items together, once', () => {
    const { world, blade, stack, bobBag } = setUp();
    stageBoth(world, bobBag);
    expect(world.session('s1', { op: 'confirm', caller: A }).reply.outcome).toBe('WAITING_FOR_COUNTERPARTY');
    expect(world.session('s1', { op: 'confirm', caller: B }, 'confirm-b')).toEqual({});
    expect(world.state('s1').settlement!.view.preparing).toBe(true);
    // Deliver the room, then every capture and transfer, each twice.
    while (world.inFlight.length > 0) {
      world.deliver(0, true);
      world.deliver(0);
    }
    expect(world.outcomes.get('confirm-b')!.reply.outcome).toBe('COMMITTED');
    const view = world.state('s1').settlement!.view;
    expect(view).toMatchObject({ status: 'SETTLED', holds_captured: 1, items_transferred: 2, preparing: false });
    expect(world.funds(A).balance).toBe(500);
    expect(world.funds(B)).toEqual({ balance: 500, held: 0, available: 500 });
    const bobs = world.items('b-bag');
    expect(bobs.map((item) => [item.definition_id, item.quantity]).sort()).toEqual([['ore', 10], ['sword', 1]]);
    expect(bobs.find((item) => item.definition_id === 'sword')!.item_id).toBe(blade.item_id);
    expect(world.items('a-bag').map((item) => [item.item_id, item.quantity])).toEqual([[stack.item_id, 20]]);
    expect(world.heldLocks('a-bag') + world.heldRooms('b-bag')).toBe(0);
  });

  it('no room in the receiver: the rooms are released, the receiver is un-confirmed, nothing moves; it confirms again once it has room', () => {
    const { world, bobBag } = setUp(1);
    stageBoth(world, bobBag);
    world.session('s1', { op: 'confirm', caller: B });
    world.session('s1', { op: 'confirm', caller: A }, 'confirm-a');
    world.drain();
    expect(world.outcomes.get('confirm-a')!.error?.code).toBe('items_capacity_exceeded');
    const view = world.state('s1').settlement!.view;
    expect(view).toMatchObject({ status: 'STAGING', preparing: false });
    expect(view.responder_stage.confirmed).toBe(false);
    expect(view.initiator_stage.confirmed).toBe(true);
    expect(world.heldRooms('b-bag')).toBe(0);
    expect(world.funds(B).held).toBe(500);
    expect(world.heldLocks('a-bag')).toBe(2);
  });

  it('cancel and the deadline give every hold, lock and room back, whatever order the messages arrive in', () => {
    for (const how of ['cancel', 'deadline', 'cancel-while-preparing'] as const) {
      const { world, bobBag } = setUp();
      world.session('s1', { op: 'stage', caller: A, receive: null });
      world.session('s1', { op: 'stage', caller: B, receive: bobBag });
      if (how === 'cancel-while-preparing') {
        world.drain();
        world.session('s1', { op: 'confirm', caller: A });
        world.session('s1', { op: 'confirm', caller: B });
      } else {
        // The locks and the hold are still on their way: the rollback overtakes them.
        world.deliver(0);
      }
      if (how === 'deadline') {
        world.now = world.state('s1').settlement!.view.deadline_at_ms;
        world.alarm('s1', 'settlement');
      } else {
        expect(world.session('s1', { op: 'cancel', caller: B }).reply.rolled_back).toBe(true);
      }
      // Releases first, then whatever was in flight: the tombstones refuse the late placements.
      world.inFlight.reverse();
      world.drain();
      expect(world.state('s1').settlement!.view.status, how).toBe('ROLLED_BACK');
      expect(world.heldLocks('a-bag'), how).toBe(0);
      expect(world.heldRooms('b-bag'), how).toBe(0);
      expect(world.funds(B), how).toEqual({ balance: 1_000, held: 0, available: 1_000 });
      expect(world.items('a-bag').map((item) => item.quantity).sort(), how).toEqual([1, 30]);
      expect(world.items('b-bag'), how).toEqual([]);
    }
  });

  it('a lock refused (not the giver\'s item) refuses the stage and gives back the other legs; the next attempt uses fresh ids', () => {
    const world = new World();
    world.fund(A, 1_000);
    world.container('b-bag', B, 5, [{ unit: sword, quantity: 1 }]);
    const [bobsSword] = world.items('b-bag');
    const bundle: Bundle = {
      initiator_gives: { currency_legs: [{ currency_id: 'USD', amount: 100 }], item_legs: [{ item_id: bobsSword.item_id, quantity: 1, container_id: 'b-bag' }], terms: [] },
      responder_gives: { currency_legs: [], item_legs: [], terms: [{ key: 'thanks', value: 'yes', binding: false }] },
    };
    world.create('s1', A, B, {}, bundle);
    world.session('s1', { op: 'accept', caller: B, offer_id: 's1.o1' });
    world.session('s1', { op: 'stage', caller: A, receive: null }, 'stage-a');
    world.drain();
    expect(world.outcomes.get('stage-a')!.error?.code).toBe('items_item_not_found');
    expect(world.funds(A)).toEqual({ balance: 1_000, held: 0, available: 1_000 });
    expect(world.heldLocks('b-bag')).toBe(0);
    expect(world.state('s1').settlement!.progress.initiator.attempt).toBe(1);
    expect(world.state('s1').settlement!.view.initiator_stage).toMatchObject({ staged: false, staging: false });
  });
});
