import { describe, expect, it } from 'vitest';
import { emptyAccount, loadAccount, stepAccount, type AccountState } from '../../actors/ledger/account-state.js';
import { ledgerAccountKey, type LedgerAccountMessage } from '../../actors/ledger/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** One ledger account as pure steps: credits, holds placed, captured and released exactly once. */
const key = ledgerAccountKey('org', 'alice');
const payee = { tenant: 'org', user_id: 'bob' };
const purpose = { area: 'test', ref: 'r' };

function run(state: AccountState, message: LedgerAccountMessage) {
  return stepAccount(state, message, fixedContext(1_000));
}
function funded(amount = 100): AccountState {
  const state = emptyAccount(key);
  run(state, { op: 'credit', tenant: 'org', user_id: 'alice', reference: 'seed', currency: 'USD', amount, by: 'admin' });
  return state;
}
const view = (state: AccountState) => (run(state, { op: 'get', tenant: 'org', user_id: 'alice' }).reply as { balances: unknown[] }).balances;

describe('ledger account', () => {
  it('credits once per reference; the same reference with another amount is a conflict', () => {
    const state = funded();
    expect(run(state, { op: 'credit', tenant: 'org', user_id: 'alice', reference: 'seed', currency: 'USD', amount: 100, by: 'admin' }).reply).toMatchObject({ idempotent: true, balance: { balance: 100 } });
    expect(codeOf(() => run(state, { op: 'credit', tenant: 'org', user_id: 'alice', reference: 'seed', currency: 'USD', amount: 5, by: 'admin' }))).toBe('ledger_reference_conflict');
    expect(view(state)).toEqual([{ currency: 'USD', balance: 100, held: 0, available: 100 }]);
  });

  it('a hold reserves available funds and never more than them', () => {
    const state = funded();
    run(state, { op: 'place_hold', hold_id: 'h1', currency: 'USD', amount: 70, purpose });
    expect(codeOf(() => run(state, { op: 'place_hold', hold_id: 'h2', currency: 'USD', amount: 31, purpose }))).toBe('insufficient_funds');
    expect(run(state, { op: 'place_hold', hold_id: 'h1', currency: 'USD', amount: 70, purpose }).reply).toMatchObject({ idempotent: true });
    expect(codeOf(() => run(state, { op: 'place_hold', hold_id: 'h1', currency: 'USD', amount: 71, purpose }))).toBe('conflict');
    expect(view(state)).toEqual([{ currency: 'USD', balance: 100, held: 70, available: 30 }]);
  });

  it('a capture moves the amount to the payee once (transfer id = hold id) and returns the rest', () => {
    const state = funded();
    run(state, { op: 'place_hold', hold_id: 'h1', currency: 'USD', amount: 70, purpose });
    const captured = run(state, { op: 'capture_hold', hold_id: 'h1', amount: 60, payee });
    expect(captured.sends).toEqual([{ kind: 'ledger-account', key: ledgerAccountKey('org', 'bob'), message: { op: 'transfer_in', transfer_id: 'h1', from: { tenant: 'org', user_id: 'alice' }, currency: 'USD', amount: 60 } }]);
    const again = run(state, { op: 'capture_hold', hold_id: 'h1', amount: 60, payee });
    expect(again.reply).toMatchObject({ idempotent: true });
    expect(again.sends ?? []).toEqual([]);
    expect(codeOf(() => run(state, { op: 'release_hold', hold_id: 'h1' }))).toBe('hold_closed');
    expect(view(state)).toEqual([{ currency: 'USD', balance: 40, held: 0, available: 40 }]);
    const bob = emptyAccount(ledgerAccountKey('org', 'bob'));
    const transfer = captured.sends![0].message as LedgerAccountMessage;
    stepAccount(bob, transfer, fixedContext(1_000));
    stepAccount(bob, transfer, fixedContext(1_001));
    expect(bob.balances.get('USD')).toBe(60);
  });

  it('a transfer the payee\'s balance cannot take (past 2^53 - 1) goes back to the payer, once: no money vanishes', () => {
    const state = funded();
    run(state, { op: 'place_hold', hold_id: 'h1', currency: 'USD', amount: 70, purpose });
    const transfer = run(state, { op: 'capture_hold', hold_id: 'h1', amount: 50, payee }).sends![0].message as LedgerAccountMessage;
    const bob = emptyAccount(ledgerAccountKey('org', 'bob'));
    stepAccount(bob, { op: 'credit', tenant: 'org', user_id: 'bob', reference: 'rich', currency: 'USD', amount: Number.MAX_SAFE_INTEGER - 5, by: 'admin' }, fixedContext(1_000));
    const bounced = stepAccount(bob, transfer, fixedContext(1_001));
    expect(bounced.reply).toEqual({ applied: false });
    expect(bob.balances.get('USD')).toBe(Number.MAX_SAFE_INTEGER - 5);
    expect(bounced.sends).toEqual([{ kind: 'ledger-account', key, message: { op: 'transfer_in', transfer_id: 'returned:h1', from: payee, currency: 'USD', amount: 50 } }]);
    // Redelivered: remembered, nothing sent twice.
    expect(stepAccount(bob, transfer, fixedContext(1_002)).sends ?? []).toEqual([]);
    // The payer gets it back (the 50 captured from its 100), once.
    const back = bounced.sends![0].message as LedgerAccountMessage;
    run(state, back);
    run(state, back);
    expect(view(state)).toEqual([{ currency: 'USD', balance: 100, held: 0, available: 100 }]);
  });

  it('a release before its placement is remembered: the late placement is refused', () => {
    const state = funded();
    expect(run(state, { op: 'release_hold', hold_id: 'h9' }).reply).toMatchObject({ idempotent: false, hold: { status: 'released' } });
    expect(codeOf(() => run(state, { op: 'place_hold', hold_id: 'h9', currency: 'USD', amount: 10, purpose }))).toBe('hold_closed');
    expect(codeOf(() => run(state, { op: 'capture_hold', hold_id: 'h9', amount: 1, payee }))).toBe('hold_closed');
    expect(codeOf(() => run(state, { op: 'capture_hold', hold_id: 'nope', amount: 1, payee }))).toBe('not_found');
    expect(view(state)).toEqual([{ currency: 'USD', balance: 100, held: 0, available: 100 }]);
  });

  it('reloads from its records to the same balances and holds', () => {
    const state = funded();
    const writes = new Map<string, unknown>();
    const record = (result: { writes?: { subkey: string; value: unknown }[] }) => result.writes?.forEach((w) => (w.value === undefined ? writes.delete(w.subkey) : writes.set(w.subkey, w.value)));
    const fresh = emptyAccount(key);
    record(run(fresh, { op: 'credit', tenant: 'org', user_id: 'alice', reference: 'seed', currency: 'USD', amount: 100, by: 'admin' }));
    record(run(fresh, { op: 'place_hold', hold_id: 'h1', currency: 'USD', amount: 30, purpose }));
    record(run(fresh, { op: 'place_hold', hold_id: 'h2', currency: 'USD', amount: 20, purpose }));
    record(run(fresh, { op: 'release_hold', hold_id: 'h2' }));
    const reloaded = loadAccount(key, [...writes.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
    expect(view(reloaded)).toEqual([{ currency: 'USD', balance: 100, held: 30, available: 70 }]);
    expect(reloaded.closed).toEqual(['h2']);
    expect(state.balances.get('USD')).toBe(100);
  });
});
