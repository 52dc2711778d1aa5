import { describe, expect, it } from 'vitest';
import { loadAuctionIndex, stepAuctionIndex } from '../../actors/auctions/index-state.js';
import { itemLockId } from '../../actors/auctions/item-transfer.js';
import { AUCTION_KIND, auctionKey, type AuctionSpec, type CloseReply } from '../../actors/auctions/messages.js';
import { initialContainerState, stepContainer } from '../../actors/items/container-state.js';
import { ITEM_CATALOG_KIND, ITEM_CONTAINER_KIND, itemCatalogKey, itemContainerKey, type ContainerConfig, type ContainerMessage, type PlacementUnit } from '../../actors/items/messages.js';
import type { FlowAnswer } from '../../actors/flow-call.js';
import { fixedContext } from '../helpers/step.js';
import { SELLER, TENANT, World } from './auctions-world.js';

/**
 * Auctions that sell an item of the items area (pure steps of the auction,
 * its index, the ledger, the catalog and the containers): the index locks
 * the item before creating the auction (all or nothing), settlement moves
 * the item to the winner's delivery container with the funds, and no winner
 * or a cancellation releases the lock.
 */
const DOMAIN = 'rpg';
const sword: PlacementUnit = { definition_id: 'sword', stackable: false, max_stack: 1, weight_m: 5_000, volume_m: 0, durability: { current: 4, max: 10 }, collection_tags: [] };

function config(container_id: string, owner_id: string): ContainerConfig {
  return { container_id, kind: 'slotted', owner_id, parent_container_id: null, slots: 5, max_weight_m: null, max_volume_m: null, created_at_ms: 0 };
}

function spec(auction_id: string, item_id: string, overrides: Partial<AuctionSpec> = {}): AuctionSpec {
  return {
    auction_id,
    item_id,
    item: { domain: DOMAIN, container_id: 'stall', quantity: 1 },
    currency: 'USD',
    starting_price: 10,
    bid_increment: 1,
    reserve_price: null,
    buy_it_now_price: null,
    soft_close_seconds: 0,
    start_ms: 1_000_000,
    end_ms: 1_000_000 + 3_600_000,
    ...overrides,
  };
}

/** A world with the seller's stall holding a sword; the sword's item id. */
function stocked(world: World): string {
  world.ask(ITEM_CATALOG_KIND, itemCatalogKey(TENANT, DOMAIN), { op: 'container_create', container: { container_id: 'stall', owner_id: SELLER, parent_container_id: null, slots: 5, max_weight_m: null, max_volume_m: null } }, 'ctr');
  world.ask(ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, 'stall'), { op: 'place', config: config('stall', SELLER), placements: [{ unit: sword, quantity: 1 }] } satisfies ContainerMessage, 'place');
  return world.container(DOMAIN, 'stall').items[0].item_id;
}

/** Lock the sword for the auction as the index does, then create the auction. */
function listed(world: World, auction_id: string, item_id: string) {
  world.ask(ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, 'stall'), { op: 'lock', lock_id: itemLockId(auction_id), item_id, quantity: 1, owner_id: SELLER, holder: { area: 'auctions', ref: auction_id } }, 'lock');
  world.ask(AUCTION_KIND, auctionKey(TENANT, auction_id), { op: 'init', tenant: TENANT, seller_id: SELLER, spec: spec(auction_id, item_id, { start_ms: world.now, end_ms: world.now + 3_600_000 }) }, `create-${auction_id}`);
}

describe('auction index: the item is locked before the auction exists', () => {
  function run(owner: string) {
    const index = loadAuctionIndex('', []);
    const stall = initialContainerState();
    const key = JSON.stringify([TENANT]);
    stepContainer(stall, { op: 'place', config: config('stall', owner), placements: [{ unit: sword, quantity: 1 }] }, fixedContext(1, ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, 'stall')));
    const item_id = [...stall.items.keys()][0];
    const context = { ...fixedContext(2, 'auction-index', key), request_id: 'req' };
    const created = stepAuctionIndex(index, { op: 'create', tenant: TENANT, seller_id: SELLER, specs: [spec('auc_1', item_id), spec('auc_2', 'a-label', { item: null })] }, context);
    expect(created.defer).toBe(true);
    // Only the lock leaves: no auction is created before it is answered.
    expect(created.sends!.map((send) => send.kind)).toEqual([ITEM_CONTAINER_KIND]);
    const locked = stepContainer(stall, created.sends![0].message as ContainerMessage, fixedContext(3, ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, 'stall')));
    const answer = locked.sends![0].message as FlowAnswer;
    const after = stepAuctionIndex(index, answer, fixedContext(4, 'auction-index', key));
    return { index, stall, item_id, after, answer };
  }

  it('a lock placed: the auctions are created', () => {
    const { after, stall } = run(SELLER);
    expect(after.sends!.map((send) => send.kind)).toEqual([AUCTION_KIND, AUCTION_KIND]);
    expect([...stall.locks.values()].map((lock) => lock.status)).toEqual(['held']);
  });

  it('a lock refused (not the seller\'s item): nothing is created, the items are free, the caller gets the refusal', () => {
    const { after, index, answer } = run('someone-else');
    expect(answer.ok).toBe(false);
    expect(after.sends!.map((send) => (send.message as { op: string }).op)).toEqual(['unlock']);
    expect(after.replies).toMatchObject([{ request_id: 'req', error: { code: 'items_item_not_found' } }]);
    expect(index.items.size).toBe(0);
    expect(index.pending.size).toBe(0);
  });
});

describe('auction settlement with an item', () => {
  it('the winner pays and the item moves to the winner\'s delivery container, each once', () => {
    const w = new World();
    const item_id = stocked(w);
    w.fund('bob', 1_000);
    listed(w, 'a1', item_id);
    w.bid('a1', 'bob', 100, false, 'b1');
    w.drain();
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a1'), { op: 'close', caller: { user_id: SELLER, admin: false } }, 'close');
    // Deliver every step twice (no outbox de-duplication here).
    while (w.inFlight.length > 0) {
      w.deliver(0, true);
      w.deliver(0);
    }
    const closed = w.outcomes.get('close')!.reply as CloseReply;
    expect(closed.settlement).toMatchObject({ status: 'settled', winner_id: 'bob', funds_settled: true, item_transferred: true, item_transfer_reason: null, item_container_id: 'auction:a1' });
    expect(w.container(DOMAIN, 'stall')).toEqual({ items: [], locks: 0 });
    expect(w.container(DOMAIN, 'auction:a1').items).toMatchObject([{ item_id, definition_id: 'sword', quantity: 1 }]);
    expect(w.catalogs.get(itemCatalogKey(TENANT, DOMAIN))!.containers.get('auction:a1')).toMatchObject({ owner_id: 'bob', slots: 1 });
    expect(w.funds('bob')).toEqual({ balance: 900, held: 0, available: 900 });
    expect(w.funds(SELLER).balance).toBe(100);
  });

  it('no winner (reserve not met) and cancellation release the lock: the item stays with the seller', () => {
    for (const how of ['reserve', 'cancel'] as const) {
      const w = new World();
      const item_id = stocked(w);
      w.fund('bob', 1_000);
      listed(w, 'a1', item_id);
      if (how === 'reserve') w.auctions.get(auctionKey(TENANT, 'a1'))!.core!.view.reserve_price = 500;
      w.bid('a1', 'bob', 100, false, 'b1');
      w.drain();
      expect(w.container(DOMAIN, 'stall').locks).toBe(1);
      const message = how === 'cancel' ? { op: 'set_status', caller: { user_id: SELLER, admin: false }, status: 'cancelled' } : { op: 'close', caller: { user_id: SELLER, admin: false } };
      w.ask(AUCTION_KIND, auctionKey(TENANT, 'a1'), message, 'end');
      w.drain();
      const { settlement } = w.outcomes.get('end')!.reply as CloseReply;
      expect(settlement.item_transferred, how).toBe(false);
      expect(settlement.item_transfer_reason, how).toMatch(/lock was released/);
      expect(w.container(DOMAIN, 'stall'), how).toMatchObject({ items: [{ item_id }], locks: 0 });
      expect(w.funds('bob'), how).toEqual({ balance: 1_000, held: 0, available: 1_000 });
    }
  });
});
