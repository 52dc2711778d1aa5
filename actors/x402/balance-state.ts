import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { AMOUNT_ATOMIC_MAX } from './money.js';
import {
  CHARGE_HOLD_MS,
  CHARGE_RETENTION_MS,
  CREDIT_RETENTION_MS,
  type BalanceMessage,
  type BalanceView,
  type ChargeReply,
  type CreditReply,
} from './messages.js';

/**
 * One principal's prepaid balance (`x402-balance`, records storage), in
 * atomic units (6 decimals). A charge takes the amount in one turn or
 * refuses it (the balance never goes below zero, whatever the concurrency:
 * the actor runs one turn at a time). Each charge is remembered by its id
 * (the request's idempotency key), so charging the same id again costs
 * nothing; a refund names the charge id and its attempt, so it is applied at
 * most once. A `hold` (verify_then_settle_after) not settled within
 * CHARGE_HOLD_MS is refunded by the sweep alarm: a request whose outcome the
 * edge never reported is not paid for. Credits (top-ups) are remembered by
 * transaction, so a transaction is credited once.
 *
 * Records: `balance` (the number), `c/<charge id>` (Charge), `t/<transaction>` (Credit).
 */
export interface Charge {
  charge_id: string;
  /** Counts charges of this id: a refunded charge charged again (a retry) is attempt 2, and a late refund of attempt 1 is ignored. */
  attempt: number;
  amount_atomic: number;
  status: 'held' | 'settled' | 'refunded';
  created_ms: number;
  /** `held`: refunded by the sweep at this time unless settled before. */
  hold_until_ms: number | null;
  /** When it was settled or refunded (then kept CHARGE_RETENTION_MS). */
  resolved_ms: number | null;
}

export interface Credit {
  transaction: string;
  amount_atomic: number;
  source: string;
  credited_ms: number;
}

export interface BalanceState {
  balance_atomic: number;
  charges: Map<string, Charge>;
  credits: Map<string, Credit>;
  /** When the sweep alarm is set for (null: none set). */
  sweep_due_ms: number | null;
}

/** Records one sweep deletes at most (the next sweep goes on at once). */
const SWEEP_RECORDS_MAX = 2_000;
const SWEEP_ALARM = 'sweep';

export function loadBalance(_key: string, records: Iterable<[string, unknown]>): BalanceState {
  const state: BalanceState = { balance_atomic: 0, charges: new Map(), credits: new Map(), sweep_due_ms: null };
  for (const [subkey, value] of records) {
    if (subkey === 'balance') state.balance_atomic = value as number;
    else if (subkey === 'sweep') state.sweep_due_ms = value as number | null;
    else if (subkey.startsWith('c/')) state.charges.set(subkey.slice(2), value as Charge);
    else if (subkey.startsWith('t/')) state.credits.set(subkey.slice(2), value as Credit);
  }
  return state;
}

type Result<Reply> = TurnResult<BalanceState, Reply>;

function checkAmount(amount_atomic: number): void {
  if (!Number.isSafeInteger(amount_atomic) || amount_atomic <= 0 || amount_atomic > AMOUNT_ATOMIC_MAX) {
    throw new ServiceError('BAD_REQUEST', 'The amount must be a positive whole number of atomic units.');
  }
}

/** Sets the sweep alarm for `due_ms` when none is set for earlier. */
function ensureSweep(state: BalanceState, due_ms: number, writes: RecordWrite[]): TurnResult<BalanceState, never>['alarms'] {
  if (state.sweep_due_ms !== null && state.sweep_due_ms <= due_ms) return [];
  state.sweep_due_ms = due_ms;
  writes.push({ subkey: 'sweep', value: due_ms });
  return [{ name: SWEEP_ALARM, due_ms }];
}

function charge(state: BalanceState, message: Extract<BalanceMessage, { op: 'charge' }>, context: TurnContext): Result<ChargeReply> {
  checkAmount(message.amount_atomic);
  const existing = state.charges.get(message.charge_id);
  if (existing && existing.status !== 'refunded') {
    return { state, reply: { outcome: 'duplicate', charge_id: existing.charge_id, attempt: existing.attempt, balance_atomic: state.balance_atomic } };
  }
  if (state.balance_atomic < message.amount_atomic) return { state, reply: { outcome: 'insufficient', balance_atomic: state.balance_atomic } };
  const held = message.settle === 'hold';
  const record: Charge = {
    charge_id: message.charge_id,
    attempt: (existing?.attempt ?? 0) + 1,
    amount_atomic: message.amount_atomic,
    status: held ? 'held' : 'settled',
    created_ms: context.now,
    hold_until_ms: held ? context.now + CHARGE_HOLD_MS : null,
    resolved_ms: held ? null : context.now,
  };
  state.balance_atomic -= message.amount_atomic;
  state.charges.set(record.charge_id, record);
  const writes: RecordWrite[] = [
    { subkey: 'balance', value: state.balance_atomic },
    { subkey: `c/${record.charge_id}`, value: record },
  ];
  const alarms = ensureSweep(state, held ? record.hold_until_ms! : context.now + CHARGE_RETENTION_MS, writes);
  return {
    state,
    writes,
    alarms,
    reply: { outcome: 'charged', charge_id: record.charge_id, attempt: record.attempt, balance_atomic: state.balance_atomic },
  };
}

/** Settles a hold (a response below 500 confirmed it). Anything else (unknown, settled, refunded, an older attempt) changes nothing. */
function settle(state: BalanceState, charge_id: string, attempt: number, context: TurnContext): Result<BalanceView> {
  const existing = state.charges.get(charge_id);
  if (!existing || existing.attempt !== attempt || existing.status !== 'held') return { state, reply: { balance_atomic: state.balance_atomic } };
  const record: Charge = { ...existing, status: 'settled', hold_until_ms: null, resolved_ms: context.now };
  state.charges.set(charge_id, record);
  const writes: RecordWrite[] = [{ subkey: `c/${charge_id}`, value: record }];
  return { state, writes, alarms: ensureSweep(state, context.now + CHARGE_RETENTION_MS, writes), reply: { balance_atomic: state.balance_atomic } };
}

/** Gives a charge back, once: only a held or settled charge of this attempt is refunded. */
function refund(state: BalanceState, charge_id: string, attempt: number, now: number, writes: RecordWrite[]): void {
  const existing = state.charges.get(charge_id);
  if (!existing || existing.attempt !== attempt || existing.status === 'refunded') return;
  const record: Charge = { ...existing, status: 'refunded', hold_until_ms: null, resolved_ms: now };
  state.charges.set(charge_id, record);
  state.balance_atomic += existing.amount_atomic;
  writes.push({ subkey: `c/${charge_id}`, value: record }, { subkey: 'balance', value: state.balance_atomic });
}

function credit(state: BalanceState, message: Extract<BalanceMessage, { op: 'credit' }>, context: TurnContext): Result<CreditReply> {
  checkAmount(message.amount_atomic);
  if (message.transaction.length === 0 || message.transaction.length > 256) throw new ServiceError('BAD_REQUEST', 'The transaction id must be 1 to 256 characters.');
  const existing = state.credits.get(message.transaction);
  if (existing) {
    return { state, reply: { balance_atomic: state.balance_atomic, credited_atomic: existing.amount_atomic, transaction: existing.transaction, duplicate: true } };
  }
  if (state.balance_atomic + message.amount_atomic > (message.paid ? Number.MAX_SAFE_INTEGER : AMOUNT_ATOMIC_MAX)) {
    throw new ServiceError('x402_balance_limit_reached', 'The balance would exceed its maximum of 1,000,000,000 USD.');
  }
  const record: Credit = { transaction: message.transaction, amount_atomic: message.amount_atomic, source: message.source, credited_ms: context.now };
  state.balance_atomic += message.amount_atomic;
  state.credits.set(record.transaction, record);
  const writes: RecordWrite[] = [
    { subkey: 'balance', value: state.balance_atomic },
    { subkey: `t/${record.transaction}`, value: record },
  ];
  const alarms = ensureSweep(state, context.now + CREDIT_RETENTION_MS, writes);
  return { state, writes, alarms, reply: { balance_atomic: state.balance_atomic, credited_atomic: record.amount_atomic, transaction: record.transaction, duplicate: false } };
}

/** Refunds expired holds, forgets old charges and credits, and sets the next sweep. */
function sweep(state: BalanceState, now: number): Result<undefined> {
  const writes: RecordWrite[] = [];
  let deleted = 0;
  let next: number | null = null;
  const later = (due: number) => {
    next = next === null ? due : Math.min(next, due);
  };
  for (const record of [...state.charges.values()]) {
    if (record.status === 'held') {
      if (record.hold_until_ms! <= now) {
        refund(state, record.charge_id, record.attempt, now, writes);
        later(now + CHARGE_RETENTION_MS);
      } else later(record.hold_until_ms!);
      continue;
    }
    const forget_ms = record.resolved_ms! + CHARGE_RETENTION_MS;
    if (forget_ms <= now && deleted < SWEEP_RECORDS_MAX) {
      state.charges.delete(record.charge_id);
      writes.push({ subkey: `c/${record.charge_id}`, value: undefined });
      deleted++;
    } else later(Math.max(forget_ms, now + 1));
  }
  for (const record of [...state.credits.values()]) {
    const forget_ms = record.credited_ms + CREDIT_RETENTION_MS;
    if (forget_ms <= now && deleted < SWEEP_RECORDS_MAX) {
      state.credits.delete(record.transaction);
      writes.push({ subkey: `t/${record.transaction}`, value: undefined });
      deleted++;
    } else later(Math.max(forget_ms, now + 1));
  }
  state.sweep_due_ms = next;
  writes.push({ subkey: 'sweep', value: next });
  return { state, writes, alarms: next === null ? [] : [{ name: SWEEP_ALARM, due_ms: next }] };
}

export function stepBalance(state: BalanceState, message: BalanceMessage | AlarmMessage, context: TurnContext): Result<unknown> {
  switch (message.op) {
    case 'get':
      return { state, reply: { balance_atomic: state.balance_atomic } satisfies BalanceView };
    case 'charge':
      return charge(state, message, context);
    case 'settle':
      return settle(state, message.charge_id, message.attempt, context);
    case 'refund': {
      const writes: RecordWrite[] = [];
      refund(state, message.charge_id, message.attempt, context.now, writes);
      const alarms = writes.length > 0 ? ensureSweep(state, context.now + CHARGE_RETENTION_MS, writes) : [];
      return { state, writes, alarms, reply: { balance_atomic: state.balance_atomic } satisfies BalanceView };
    }
    case 'credit':
      return credit(state, message, context);
    case '$alarm':
      return message.name === SWEEP_ALARM ? sweep(state, context.now) : { state };
  }
}
