import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LedgerAccountMessage } from '../../actors/ledger/messages.js';
import { usd, World } from './handshake-world.js';

/**
 * Property: whatever stage, confirm, cancel, deadline and sweep calls happen
 * on a few sessions, with every message between the sessions and the ledger
 * delivered in a random order and some delivered twice, money is conserved:
 * the sum of every balance (held funds included) plus the transfers still on
 * their way equals what was credited; no account holds more than it has; and
 * once everything is delivered and every session is past its deadline, no
 * hold is open, and each settled session moved exactly its bundle.
 */
const USERS = ['u1', 'u2', 'u3'];
const SESSIONS = ['s1', 's2', 's3'];
const FUNDS = 500;
const PAIRS: Record<string, [string, string]> = { s1: ['u1', 'u2'], s2: ['u2', 'u3'], s3: ['u3', 'u1'] };

const op = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('stage' as const), session: fc.constantFrom(...SESSIONS), initiator: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('confirm' as const), session: fc.constantFrom(...SESSIONS), initiator: fc.boolean() }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('deliver' as const), pick: fc.nat(), duplicate: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), session: fc.constantFrom(...SESSIONS), initiator: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('deadline' as const), session: fc.constantFrom(...SESSIONS), sweep: fc.boolean() }) },
);

function inFlightTransfers(world: World): number {
  let total = 0;
  const counted = new Set<string>();
  for (const send of world.inFlight) {
    const message = send.message as LedgerAccountMessage;
    if (message.op !== 'transfer_in' || counted.has(message.transfer_id)) continue;
    counted.add(message.transfer_id);
    if (!world.accounts.get(send.key)?.transfers.has(message.transfer_id)) total += message.amount;
  }
  return total;
}

function checkConservation(world: World): void {
  let total = 0;
  for (const account of world.accounts.values()) {
    const balance = account.balances.get('USD') ?? 0;
    const held = account.held.get('USD') ?? 0;
    expect(held).toBeGreaterThanOrEqual(0);
    expect(held).toBeLessThanOrEqual(balance);
    total += balance;
  }
  expect(total + inFlightTransfers(world)).toBe(USERS.length * FUNDS);
}

describe('ledger conservation under handshake settlements', () => {
  it('balance plus holds is conserved; holds end closed; a settled swap moves its bundle exactly once', () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 80 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 400 })), { minLength: 3, maxLength: 3 }),
        (ops, amounts) => {
          const world = new World();
          for (const user of USERS) world.fund(user, FUNDS);
          SESSIONS.forEach((session, index) => {
            const [initiator, responder] = PAIRS[session];
            const [give, take] = amounts[index];
            world.create(session, initiator, responder, {}, usd(give || 1, take));
            world.session(session, { op: 'accept', caller: responder, offer_id: `${session}.o1` });
          });
          for (const step of ops) {
            if (step.kind === 'deliver') {
              if (world.inFlight.length > 0) world.deliver(step.pick % world.inFlight.length, step.duplicate);
            } else if (step.kind === 'deadline') {
              world.now += 100_000;
              if (step.sweep) world.session(step.session, { op: 'sweep' });
              else world.alarm(step.session, 'settlement');
            } else {
              const [initiator, responder] = PAIRS[step.session];
              world.session(step.session, { op: step.kind, caller: step.initiator ? initiator : responder });
            }
            checkConservation(world);
          }
          world.drain();
          world.now += 1_000_000;
          for (const session of SESSIONS) world.alarm(session, 'settlement');
          world.drain();
          checkConservation(world);
          const expected = new Map(USERS.map((user) => [user, FUNDS]));
          SESSIONS.forEach((session, index) => {
            const state = world.state(session);
            const status = state.settlement!.view.status;
            expect(['SETTLED', 'ROLLED_BACK']).toContain(status);
            if (status === 'SETTLED') {
              const [initiator, responder] = PAIRS[session];
              const [give, take] = amounts[index];
              const paid = give || 1;
              expected.set(initiator, expected.get(initiator)! - paid + take);
              expected.set(responder, expected.get(responder)! + paid - take);
            }
          });
          for (const user of USERS) expect(world.funds(user)).toEqual({ balance: expected.get(user), held: 0, available: expected.get(user) });
        },
      ),
      { numRuns: 300 },
    );
  });
});
