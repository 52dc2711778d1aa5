import { describe, expect, it } from 'vitest';
import { concessions } from '../../actors/handshake/concessions.js';
import { OFFER_MOVES, SESSION_MOVES, SETTLEMENT_MOVES, canMove } from '../../actors/handshake/status-machine.js';
import { usd, World } from './handshake-world.js';

/**
 * The handshake's session, offer and settlement state machines as pure steps
 * (docs/api/handshake.md, "Statuses"), with the ledger's real step behind the
 * settlement: negotiation rounds and who may answer, expiry by alarm, the
 * two-phase settlement (stage, confirm, commit), and rollback by cancel,
 * deadline and sweep.
 */
const A = 'alice';
const B = 'bob';

function agreed(world: World, bundle = usd(300, 100)) {
  world.create('s1', A, B, {}, bundle);
  const accepted = world.session('s1', { op: 'accept', caller: B, offer_id: 's1.o1' });
  expect(accepted.error).toBeUndefined();
  return accepted.reply;
}

describe('handshake negotiation', () => {
  it('opens NEGOTIATING with the opening offer as round 1, and only the other party may accept or reject', () => {
    const world = new World();
    const created = world.create('s1', A, B, {}, usd(100, 0));
    expect(created.reply.session).toMatchObject({ status: 'NEGOTIATING', round: 1, active_offer_id: 's1.o1' });
    expect(created.reply.opening_offer).toMatchObject({ status: 'OPEN', proposed_by: A, round: 1 });
    expect(world.session('s1', { op: 'accept', caller: A, offer_id: 's1.o1' }).error?.code).toBe('forbidden');
    expect(world.session('s1', { op: 'reject', caller: A, offer_id: 's1.o1' }).error?.code).toBe('forbidden');
    expect(world.session('s1', { op: 'withdraw', caller: B, offer_id: 's1.o1' }).error?.code).toBe('forbidden');
    expect(world.session('s1', { op: 'get', caller: 'mallory' }).error?.code).toBe('not_found');
  });

  it('one open offer at a time: the proposer must wait, the other party counters', () => {
    const world = new World();
    world.create('s1', A, B, {}, usd(100, 0));
    expect(world.session('s1', { op: 'offer', caller: A, bundle: usd(120, 0) }).error?.code).toBe('handshake_offer_open');
    const counter = world.session('s1', { op: 'offer', caller: B, bundle: usd(150, 0) });
    expect(counter.reply).toMatchObject({ round: 2, proposed_by: B, in_reply_to: 's1.o1', status: 'OPEN' });
    expect(world.state('s1').offers[0].status).toBe('COUNTERED');
    expect(world.session('s1', { op: 'accept', caller: B, offer_id: 's1.o1' }).error?.code).toBe('handshake_offer_not_open');
  });

  it('refuses offers past max_rounds, and expires the session when the last round closes unanswered', () => {
    const world = new World();
    world.create('s1', A, B, { max_rounds: 2 }, usd(100, 0));
    world.session('s1', { op: 'offer', caller: B, bundle: usd(150, 0) });
    expect(world.session('s1', { op: 'offer', caller: A, bundle: usd(140, 0) }).error?.code).toBe('handshake_max_rounds');
    expect(world.session('s1', { op: 'reject', caller: A, offer_id: 's1.o2' }).reply.status).toBe('REJECTED');
    expect(world.state('s1').session).toMatchObject({ status: 'EXPIRED', closed_reason: 'max_rounds' });
    expect(world.session('s1', { op: 'offer', caller: A, bundle: usd(1, 0) }).error?.code).toBe('handshake_invalid_state');
  });

  it('expires an offer by alarm (not before its time), and the session at its ttl', () => {
    const world = new World();
    world.create('s1', A, B, { offer_ttl_seconds: 60, session_ttl_seconds: 600 }, usd(100, 0));
    world.alarm('s1', 'offer');
    expect(world.state('s1').offers[0].status).toBe('OPEN');
    world.now += 60_000;
    expect(world.session('s1', { op: 'accept', caller: B, offer_id: 's1.o1' }).error?.code).toBe('handshake_offer_not_open');
    world.alarm('s1', 'offer');
    expect(world.state('s1').offers[0].status).toBe('EXPIRED');
    expect(world.state('s1').session!.status).toBe('NEGOTIATING');
    world.now += 600_000;
    world.alarm('s1', 'session');
    expect(world.state('s1').session).toMatchObject({ status: 'EXPIRED', closed_reason: 'session_ttl' });
  });

  it('withdraw by the proposer; cancel ends the session and cancels the open offer', () => {
    const world = new World();
    world.create('s1', A, B, {}, usd(100, 0));
    expect(world.session('s1', { op: 'withdraw', caller: A, offer_id: 's1.o1' }).reply.status).toBe('WITHDRAWN');
    world.session('s1', { op: 'offer', caller: A, bundle: usd(90, 0) });
    const cancelled = world.session('s1', { op: 'cancel', caller: B });
    expect(cancelled.reply).toMatchObject({ rolled_back: false, session: { status: 'CANCELLED', closed_reason: 'cancelled_by_responder' } });
    expect(world.state('s1').offers[1].status).toBe('CANCELLED');
    expect(world.session('s1', { op: 'cancel', caller: A }).error?.code).toBe('handshake_invalid_state');
  });

  it('the concessions view gives per-round deltas of what each side gives', () => {
    const world = new World();
    world.create('s1', A, B, {}, usd(100, 50, [{ key: 'delivery', value: 'now', binding: true }]));
    world.session('s1', { op: 'offer', caller: B, bundle: usd(120, 40) });
    const rounds = concessions(world.state('s1').offers, A, B);
    expect(rounds[1].deltas).toEqual([
      { party_id: A, role: 'initiator', currency_deltas: [{ currency_id: 'USD', delta: 20 }], items_added: [], items_removed: [], terms_changed: ['delivery'] },
      { party_id: B, role: 'responder', currency_deltas: [{ currency_id: 'USD', delta: -10 }], items_added: [], items_removed: [], terms_changed: [] },
    ]);
  });
});

describe('handshake settlement', () => {
  it('accept opens STAGING with a deadline; stage places the holds; the first confirm waits, the second commits', () => {
    const world = new World();
    world.fund(A, 1_000);
    world.fund(B, 1_000);
    const settlement = agreed(world);
    expect(settlement).toMatchObject({ status: 'STAGING', deadline_at_ms: world.now + 300_000 });
    expect(world.state('s1').session!.status).toBe('AGREED');
    expect(world.session('s1', { op: 'confirm', caller: A }).error?.code).toBe('handshake_not_staged');
    world.session('s1', { op: 'stage', caller: A }, 'stage-a');
    expect(world.outcomes.get('stage-a')).toBeUndefined();
    expect(world.session('s1', { op: 'stage', caller: A }).error?.code).toBe('handshake_stage_in_progress');
    world.drain();
    expect(world.outcomes.get('stage-a')!.reply.initiator_stage).toMatchObject({ staged: true, ledger_hold_ids: ['s1.s.initiator.0.0'] });
    expect(world.funds(A)).toEqual({ balance: 1_000, held: 300, available: 700 });
    expect(world.session('s1', { op: 'confirm', caller: A }).reply.outcome).toBe('WAITING_FOR_COUNTERPARTY');
    world.session('s1', { op: 'stage', caller: B });
    world.drain();
    const committed = world.session('s1', { op: 'confirm', caller: B });
    expect(committed.reply).toMatchObject({ outcome: 'COMMITTED', settlement: { status: 'COMMITTING' } });
    expect(world.session('s1', { op: 'cancel', caller: A }).error?.code).toBe('handshake_invalid_state');
    world.drain();
    expect(world.state('s1').settlement!.view).toMatchObject({ status: 'SETTLED', holds_captured: 2 });
    expect(world.state('s1').session!.status).toBe('SETTLED');
    expect(world.funds(A)).toEqual({ balance: 800, held: 0, available: 800 });
    expect(world.funds(B)).toEqual({ balance: 1_200, held: 0, available: 1_200 });
    expect(world.session('s1', { op: 'confirm', caller: A }).reply.outcome).toBe('ALREADY_CONFIRMED');
  });

  it('a refused hold fails the stage, leaves nothing held, and a later stage uses fresh hold ids', () => {
    const world = new World();
    world.fund(A, 100);
    agreed(world);
    world.session('s1', { op: 'stage', caller: A }, 'stage-a');
    world.drain();
    expect(world.outcomes.get('stage-a')!.error?.code).toBe('insufficient_funds');
    expect(world.funds(A).held).toBe(0);
    world.fund(A, 500);
    world.session('s1', { op: 'stage', caller: A }, 'stage-a2');
    world.drain();
    expect(world.outcomes.get('stage-a2')!.reply.initiator_stage.ledger_hold_ids).toEqual(['s1.s.initiator.1.0']);
    expect(world.funds(A).held).toBe(300);
  });

  it('cancel while holds are being placed rolls back: the late placement is refused and nothing stays held', () => {
    const world = new World();
    world.fund(A, 1_000);
    agreed(world);
    world.session('s1', { op: 'stage', caller: A }, 'stage-a');
    const cancelled = world.session('s1', { op: 'cancel', caller: B });
    expect(cancelled.reply).toMatchObject({ rolled_back: true, session: { status: 'CANCELLED' } });
    expect(world.outcomes.get('stage-a')!.error?.code).toBe('handshake_invalid_state');
    // The release is delivered before the placement: the ledger remembers it.
    world.deliver(world.inFlight.length - 1);
    world.drain();
    expect(world.funds(A)).toEqual({ balance: 1_000, held: 0, available: 1_000 });
    expect(world.state('s1').settlement!.view).toMatchObject({ status: 'ROLLED_BACK', rollback_reason: 'cancelled_by_responder' });
  });

  it('the deadline (alarm or sweep) rolls back a STAGING settlement, not before its time', () => {
    const world = new World();
    world.fund(A, 1_000);
    world.fund(B, 1_000);
    agreed(world);
    world.session('s1', { op: 'stage', caller: A });
    world.session('s1', { op: 'stage', caller: B });
    world.drain();
    world.session('s1', { op: 'sweep' });
    expect(world.state('s1').settlement!.view.status).toBe('STAGING');
    world.now += 300_000;
    world.session('s1', { op: 'sweep' });
    world.alarm('s1', 'settlement');
    world.drain();
    expect(world.state('s1').settlement!.view).toMatchObject({ status: 'ROLLED_BACK', rollback_reason: 'sweep' });
    expect(world.state('s1').session).toMatchObject({ status: 'EXPIRED', closed_reason: 'settlement_deadline' });
    expect(world.funds(A).held + world.funds(B).held).toBe(0);
    expect(world.funds(A).balance + world.funds(B).balance).toBe(2_000);
  });

  it('a side that gives nothing stages at once', () => {
    const world = new World();
    world.fund(A, 1_000);
    agreed(world, usd(300, 0));
    expect(world.session('s1', { op: 'stage', caller: B }).reply.responder_stage).toMatchObject({ staged: true, ledger_hold_ids: [] });
  });
});

describe('handshake status tables', () => {
  it('final statuses allow no move; the live ones only the listed moves', () => {
    for (const status of ['SETTLED', 'CANCELLED', 'EXPIRED'] as const) expect(SESSION_MOVES[status]).toEqual([]);
    expect(canMove(SESSION_MOVES, 'NEGOTIATING', 'SETTLED')).toBe(false);
    expect(canMove(OFFER_MOVES, 'REJECTED', 'ACCEPTED')).toBe(false);
    expect(canMove(SETTLEMENT_MOVES, 'COMMITTING', 'ROLLED_BACK')).toBe(false);
    expect(canMove(SETTLEMENT_MOVES, 'STAGING', 'COMMITTING')).toBe(true);
  });
});
