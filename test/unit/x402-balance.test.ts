import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CHARGE_HOLD_MS, CHARGE_RETENTION_MS, type BalanceMessage, type ChargeReply, type CreditReply } from '../../actors/x402/messages.js';
import { loadBalance, stepBalance, type BalanceState } from '../../actors/x402/balance-state.js';
import type { RecordWrite } from '../../runtime/index.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** A balance actor driven turn by turn, its records kept as the runtime would (so a reload can be checked). */
class World {
  state: BalanceState = loadBalance('k', []);
  records = new Map<string, unknown>();
  alarm: number | null = null;

  send<Reply>(message: BalanceMessage | { op: '$alarm'; name: string; due_ms: number }, now: number): Reply {
    const result = stepBalance(this.state, message, fixedContext(now, 'x402-balance', 'k'));
    this.state = result.state;
    for (const write of (result.writes ?? []) as RecordWrite[]) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, write.value);
    }
    for (const alarm of result.alarms ?? []) this.alarm = alarm.due_ms;
    return result.reply as Reply;
  }

  reloaded(): BalanceState {
    return loadBalance('k', [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
  }
}

const credit = (world: World, amount_atomic: number, transaction = `t${amount_atomic}`, now = 0) =>
  world.send<CreditReply>({ op: 'credit', transaction, amount_atomic, source: 'test' }, now);
const charge = (world: World, charge_id: string, amount_atomic: number, now = 0, settle: 'hold' | 'final' = 'hold') =>
  world.send<ChargeReply>({ op: 'charge', charge_id, amount_atomic, settle }, now);

describe('x402 balance actor', () => {
  it('charges within the balance and refuses beyond it, without going negative', () => {
    const world = new World();
    credit(world, 1_000);
    expect(charge(world, 'a', 600)).toMatchObject({ outcome: 'charged', attempt: 1, balance_atomic: 400 });
    expect(charge(world, 'b', 600)).toEqual({ outcome: 'insufficient', balance_atomic: 400 });
    expect(charge(world, 'c', 400)).toMatchObject({ outcome: 'charged', balance_atomic: 0 });
    expect(world.reloaded().balance_atomic).toBe(0);
  });

  it('never charges one charge id twice', () => {
    const world = new World();
    credit(world, 1_000);
    charge(world, 'same', 300);
    expect(charge(world, 'same', 300)).toMatchObject({ outcome: 'duplicate', attempt: 1, balance_atomic: 700 });
    world.send({ op: 'settle', charge_id: 'same', attempt: 1 }, 1);
    expect(charge(world, 'same', 300)).toMatchObject({ outcome: 'duplicate', balance_atomic: 700 });
  });

  it('refunds once: a repeated refund and a late refund of an older attempt change nothing', () => {
    const world = new World();
    credit(world, 1_000);
    charge(world, 'r', 300);
    world.send({ op: 'refund', charge_id: 'r', attempt: 1 }, 1);
    world.send({ op: 'refund', charge_id: 'r', attempt: 1 }, 2);
    expect(world.state.balance_atomic).toBe(1_000);
    // A retry of the refunded request is a new attempt and pays again.
    expect(charge(world, 'r', 300, 3)).toMatchObject({ outcome: 'charged', attempt: 2, balance_atomic: 700 });
    world.send({ op: 'refund', charge_id: 'r', attempt: 1 }, 4);
    expect(world.state.balance_atomic).toBe(700);
    world.send({ op: 'settle', charge_id: 'r', attempt: 2 }, 5);
    world.send({ op: 'refund', charge_id: 'r', attempt: 2 }, 6);
    expect(world.state.balance_atomic).toBe(1_000);
    expect(world.reloaded().balance_atomic).toBe(1_000);
  });

  it('refunds a hold nobody settled once its time is up, and keeps a settled one', () => {
    const world = new World();
    credit(world, 1_000, 'tx', 0);
    charge(world, 'lost', 100, 0);
    charge(world, 'kept', 200, 0);
    world.send({ op: 'settle', charge_id: 'kept', attempt: 1 }, 10);
    expect(world.alarm).toBe(CHARGE_HOLD_MS);
    world.send({ op: '$alarm', name: 'sweep', due_ms: CHARGE_HOLD_MS }, CHARGE_HOLD_MS);
    expect(world.state.balance_atomic).toBe(800);
    expect(world.state.charges.get('lost')?.status).toBe('refunded');
    // A settle that arrives after the expiry refund changes nothing.
    world.send({ op: 'settle', charge_id: 'lost', attempt: 1 }, CHARGE_HOLD_MS + 1);
    expect(world.state.balance_atomic).toBe(800);
    expect(world.reloaded().balance_atomic).toBe(800);
  });

  it('forgets resolved charges after the retention and keeps sweeping while there are records', () => {
    const world = new World();
    credit(world, 1_000, 'tx', 0);
    charge(world, 'f', 100, 0, 'final');
    let now = 0;
    for (let round = 0; round < 5 && world.alarm !== null && world.state.charges.size > 0; round++) {
      now = world.alarm;
      world.send({ op: '$alarm', name: 'sweep', due_ms: now }, now);
    }
    expect(now).toBeGreaterThanOrEqual(CHARGE_RETENTION_MS);
    expect(world.state.charges.size).toBe(0);
    expect(world.records.has('c/f')).toBe(false);
    expect(world.state.balance_atomic).toBe(900);
  });

  it('credits a transaction once and refuses bad amounts', () => {
    const world = new World();
    expect(credit(world, 500, 'tx-1')).toMatchObject({ balance_atomic: 500, credited_atomic: 500, duplicate: false });
    expect(credit(world, 500, 'tx-1')).toMatchObject({ balance_atomic: 500, duplicate: true });
    expect(codeOf(() => stepBalance(world.state, { op: 'credit', transaction: 'x', amount_atomic: 0, source: '' }, fixedContext(0)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepBalance(world.state, { op: 'credit', transaction: 'x', amount_atomic: 1.5, source: '' }, fixedContext(0)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepBalance(world.state, { op: 'charge', charge_id: 'x', amount_atomic: -1, settle: 'hold' }, fixedContext(0)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepBalance(world.state, { op: 'credit', transaction: 'big', amount_atomic: 1_000_000_000_000_000, source: '' }, fixedContext(0)))).toBe('x402_balance_limit_reached');
    expect(world.state.balance_atomic).toBe(500);
    // A paid credit (the payment already settled) is never refused for the maximum: the money is not lost.
    expect(stepBalance(world.state, { op: 'credit', transaction: 'paid-big', amount_atomic: 1_000_000_000_000_000, source: '', paid: true }, fixedContext(0)).reply).toMatchObject({ balance_atomic: 1_000_000_000_000_500 });
  });

  it('under any interleaving of many callers, the balance never goes negative and equals credits minus unrefunded charges', () => {
    // Each simulated caller charges under its own ids and may then settle, refund (5xx) or retry;
    // the messages of all callers arrive in an arbitrary order, some twice (a repeated delivery).
    const op = fc.oneof(
      fc.record({ kind: fc.constant('charge' as const), id: fc.integer({ min: 0, max: 15 }), amount: fc.integer({ min: 1, max: 400 }), hold: fc.boolean() }),
      fc.record({ kind: fc.constant('settle' as const), id: fc.integer({ min: 0, max: 15 }), attempt: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ kind: fc.constant('refund' as const), id: fc.integer({ min: 0, max: 15 }), attempt: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ kind: fc.constant('credit' as const), tx: fc.integer({ min: 0, max: 5 }), amount: fc.integer({ min: 1, max: 500 }) }),
      fc.record({ kind: fc.constant('sweep' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 200 }), (ops) => {
        const world = new World();
        let now = 0;
        for (const step of ops) {
          now += 7_000;
          if (step.kind === 'charge') charge(world, `c${step.id}`, step.amount, now, step.hold ? 'hold' : 'final');
          else if (step.kind === 'settle') world.send({ op: 'settle', charge_id: `c${step.id}`, attempt: step.attempt }, now);
          else if (step.kind === 'refund') world.send({ op: 'refund', charge_id: `c${step.id}`, attempt: step.attempt }, now);
          else if (step.kind === 'credit') credit(world, step.amount, `t${step.tx}`, now);
          else world.send({ op: '$alarm', name: 'sweep', due_ms: now }, now);
          expect(world.state.balance_atomic).toBeGreaterThanOrEqual(0);
          const credited = [...world.state.credits.values()].reduce((sum, c) => sum + c.amount_atomic, 0);
          const charged = [...world.state.charges.values()].filter((c) => c.status !== 'refunded').reduce((sum, c) => sum + c.amount_atomic, 0);
          expect(world.state.balance_atomic).toBe(credited - charged);
          expect(Number.isSafeInteger(world.state.balance_atomic)).toBe(true);
        }
        expect(world.reloaded().balance_atomic).toBe(world.state.balance_atomic);
      }),
      { numRuns: 300 },
    );
  });
});
