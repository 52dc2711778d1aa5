import { ServiceError, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import {
  LEDGER_ACCOUNT_KIND,
  ledgerAccountKey,
  ledgerPolicy as policy,
  type AccountView,
  type BalanceView,
  type CreditReply,
  type HoldCall,
  type HoldReply,
  type HoldsPage,
  type HoldView,
  type LedgerAccountMessage,
  type LedgerParty,
} from './messages.js';

/**
 * One ledger account: pure domain logic of the `ledger-account` actor
 * (storage `records`, key = ledgerAccountKey(tenant, user_id)).
 *
 * Records: `bal:<currency>` the funds per currency (held ones included),
 * `h:<hold_id>` every hold (open, and the newest closed ones, so a repeated
 * capture or release answers as the first did), `c:<reference>` each admin
 * credit, `t:<transfer_id>` each capture credited here (the newest).
 *
 * Invariants, checked in the turn that could break them: for every currency
 * 0 <= held <= balance <= amount_max, where held is the sum of the open
 * holds. A hold moves from `held` to `captured` or `released` once; every
 * later call on it answers from the record.
 */
export const BALANCE_PREFIX = 'bal:';
export const HOLD_PREFIX = 'h:';
export const CREDIT_PREFIX = 'c:';
export const TRANSFER_PREFIX = 't:';

interface CreditRecord {
  reference: string;
  currency: string;
  amount: number;
  by: string;
  at_ms: number;
}

interface TransferRecord {
  transfer_id: string;
  currency: string;
  amount: number;
  at_ms: number;
  /** The balance could not take it: it went back to the payer (RETURNED_PREFIX + transfer_id). */
  returned?: boolean;
  /** A returned transfer the payer's balance could not take either: the part above amount_max, kept on record. */
  unapplied?: number;
}

/** The id of a transfer sent back to its payer because the payee's balance could not take it. */
const RETURNED_PREFIX = 'returned:';

export interface AccountState {
  readonly key: string;
  /** currency -> funds owned (held ones included). */
  balances: Map<string, number>;
  /** currency -> sum of open holds. */
  held: Map<string, number>;
  holds: Map<string, HoldView>;
  /** Closed hold ids, oldest closed first (pruned past closed_holds_kept_max). */
  closed: string[];
  credits: Map<string, CreditRecord>;
  /** Transfer ids applied, oldest first. */
  transfers: Map<string, TransferRecord>;
}

type Result = TurnResult<AccountState, unknown>;

export function emptyAccount(key: string): AccountState {
  return { key, balances: new Map(), held: new Map(), holds: new Map(), closed: [], credits: new Map(), transfers: new Map() };
}

export function loadAccount(key: string, records: Iterable<[string, unknown]>): AccountState {
  const state = emptyAccount(key);
  const transfers: TransferRecord[] = [];
  for (const [subkey, value] of records) {
    if (subkey.startsWith(BALANCE_PREFIX)) state.balances.set(subkey.slice(BALANCE_PREFIX.length), value as number);
    else if (subkey.startsWith(HOLD_PREFIX)) {
      const hold = value as HoldView;
      state.holds.set(hold.hold_id, hold);
      if (hold.status === 'held') state.held.set(hold.currency, (state.held.get(hold.currency) ?? 0) + hold.amount);
    } else if (subkey.startsWith(CREDIT_PREFIX)) {
      const credit = value as CreditRecord;
      state.credits.set(credit.reference, credit);
    } else if (subkey.startsWith(TRANSFER_PREFIX)) transfers.push(value as TransferRecord);
  }
  state.closed = [...state.holds.values()]
    .filter((hold) => hold.status !== 'held')
    .sort((a, b) => (a.closed_at_ms ?? 0) - (b.closed_at_ms ?? 0))
    .map((hold) => hold.hold_id);
  for (const transfer of transfers.sort((a, b) => a.at_ms - b.at_ms)) state.transfers.set(transfer.transfer_id, transfer);
  return state;
}

export function stepAccount(state: AccountState, message: LedgerAccountMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'place_hold':
    case 'capture_hold':
    case 'release_hold':
      return holdCall(state, message, context);
    case 'flow-call':
      return answerFlowCall(stepAccount, state, message as never, context);
    case 'credit':
      return credit(state, message, context);
    case 'transfer_in':
      return transferIn(state, message, context);
    case 'get':
      return { state, reply: accountView(state, message) };
    case 'holds':
      return { state, reply: holdsPage(state, message) };
    default:
      return { state };
  }
}

export function balanceOf(state: AccountState, currency: string): BalanceView {
  const balance = state.balances.get(currency) ?? 0;
  const held = state.held.get(currency) ?? 0;
  return { currency, balance, held, available: balance - held };
}

function accountView(state: AccountState, party: LedgerParty): AccountView {
  const currencies = [...new Set([...state.balances.keys(), ...state.held.keys()])].sort();
  const holds = [...state.holds.values()].filter((hold) => hold.status === 'held').sort((a, b) => a.created_at_ms - b.created_at_ms || (a.hold_id < b.hold_id ? -1 : 1));
  return { tenant: party.tenant, user_id: party.user_id, balances: currencies.map((currency) => balanceOf(state, currency)), holds };
}

function holdsPage(state: AccountState, query: Extract<LedgerAccountMessage, { op: 'holds' }>): HoldsPage {
  const matched = [...state.holds.values()]
    .filter((hold) => query.status === undefined || hold.status === query.status)
    .sort((a, b) => b.created_at_ms - a.created_at_ms || (a.hold_id < b.hold_id ? 1 : -1));
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, holds: matched.slice(start, start + query.page_size) };
}

function setBalance(state: AccountState, currency: string, balance: number, writes: RecordWrite[]): void {
  state.balances.set(currency, balance);
  writes.push({ subkey: BALANCE_PREFIX + currency, value: balance });
}

function addHeld(state: AccountState, currency: string, delta: number): void {
  const held = (state.held.get(currency) ?? 0) + delta;
  if (held === 0) state.held.delete(currency);
  else state.held.set(currency, held);
}

/** Marks a hold closed and forgets the oldest closed ones past the bound. */
function close(state: AccountState, hold: HoldView, writes: RecordWrite[]): void {
  state.holds.set(hold.hold_id, hold);
  writes.push({ subkey: HOLD_PREFIX + hold.hold_id, value: hold });
  state.closed.push(hold.hold_id);
  while (state.closed.length > policy.closed_holds_kept_max) {
    const oldest = state.closed.shift()!;
    state.holds.delete(oldest);
    writes.push({ subkey: HOLD_PREFIX + oldest, value: undefined });
  }
}

function holdCall(state: AccountState, call: HoldCall, context: TurnContext): TurnResult<AccountState, HoldReply> {
  const existing = state.holds.get(call.hold_id);
  switch (call.op) {
    case 'place_hold': {
      if (existing) {
        if (existing.status !== 'held') throw new ServiceError('hold_closed', `Hold ${call.hold_id} is already ${existing.status}.`, { details: { hold: existing } });
        if (existing.amount !== call.amount || existing.currency !== call.currency) {
          throw new ServiceError('conflict', `Hold ${call.hold_id} exists with another amount or currency.`);
        }
        return { state, reply: { hold: existing, idempotent: true, account: partyOf(state) } };
      }
      const open = state.holds.size - state.closed.length;
      if (open >= policy.open_holds_max) throw new ServiceError('ledger_limit_reached', `An account may have at most ${policy.open_holds_max} open holds.`);
      const { available } = balanceOf(state, call.currency);
      if (call.amount > available) {
        throw new ServiceError('insufficient_funds', `A hold of ${call.amount} ${call.currency} needs more than the ${available} available.`, {
          details: { currency: call.currency, requested: call.amount, available },
        });
      }
      const hold: HoldView = {
        hold_id: call.hold_id,
        currency: call.currency,
        amount: call.amount,
        status: 'held',
        purpose: call.purpose,
        captured_amount: 0,
        payee: null,
        created_at_ms: context.now,
        closed_at_ms: null,
      };
      state.holds.set(hold.hold_id, hold);
      addHeld(state, hold.currency, hold.amount);
      return { state, reply: { hold, idempotent: false, account: partyOf(state) }, writes: [{ subkey: HOLD_PREFIX + hold.hold_id, value: hold }] };
    }
    case 'release_hold': {
      if (existing?.status === 'released') return { state, reply: { hold: existing, idempotent: true, account: partyOf(state) } };
      if (existing?.status === 'captured') throw new ServiceError('hold_closed', `Hold ${call.hold_id} was captured; it cannot be released.`, { details: { hold: existing } });
      const writes: RecordWrite[] = [];
      // Unknown: remembered as released (a tombstone), so a late placement is refused.
      const released: HoldView = existing
        ? { ...existing, status: 'released', closed_at_ms: context.now }
        : { hold_id: call.hold_id, currency: '', amount: 0, status: 'released', purpose: null, captured_amount: 0, payee: null, created_at_ms: context.now, closed_at_ms: context.now };
      if (existing) addHeld(state, existing.currency, -existing.amount);
      close(state, released, writes);
      return { state, reply: { hold: released, idempotent: false, account: partyOf(state) }, writes };
    }
    case 'capture_hold': {
      if (!existing) throw new ServiceError('not_found', `No hold ${call.hold_id} on this account.`);
      if (existing.status === 'captured') return { state, reply: { hold: existing, idempotent: true, account: partyOf(state) } };
      if (existing.status === 'released') throw new ServiceError('hold_closed', `Hold ${call.hold_id} was released; it cannot be captured.`, { details: { hold: existing } });
      if (call.amount > existing.amount) throw new ServiceError('conflict', `Hold ${call.hold_id} reserves ${existing.amount}; it cannot capture ${call.amount}.`);
      const writes: RecordWrite[] = [];
      const captured: HoldView = { ...existing, status: 'captured', captured_amount: call.amount, payee: call.payee, closed_at_ms: context.now };
      addHeld(state, existing.currency, -existing.amount);
      setBalance(state, existing.currency, (state.balances.get(existing.currency) ?? 0) - call.amount, writes);
      close(state, captured, writes);
      const sends =
        call.amount === 0
          ? []
          : [
              {
                kind: LEDGER_ACCOUNT_KIND,
                key: ledgerAccountKey(call.payee.tenant, call.payee.user_id),
                message: { op: 'transfer_in', transfer_id: call.hold_id, from: partyOf(state), currency: existing.currency, amount: call.amount } satisfies LedgerAccountMessage,
              },
            ];
      return { state, reply: { hold: captured, idempotent: false, account: partyOf(state) }, writes, sends };
    }
  }
}

const parties = new WeakMap<AccountState, LedgerParty>();

/** The account's owner, parsed from its key once per activation. */
function partyOf(state: AccountState): LedgerParty {
  let party = parties.get(state);
  if (!party) {
    const [tenant, user_id] = JSON.parse(state.key) as [string, string];
    party = { tenant, user_id };
    parties.set(state, party);
  }
  return party;
}

function credit(state: AccountState, message: Extract<LedgerAccountMessage, { op: 'credit' }>, context: TurnContext): TurnResult<AccountState, CreditReply> {
  const previous = state.credits.get(message.reference);
  if (previous) {
    if (previous.currency !== message.currency || previous.amount !== message.amount) {
      throw new ServiceError('ledger_reference_conflict', `Reference ${JSON.stringify(message.reference)} was credited with ${previous.amount} ${previous.currency} on this account.`, {
        details: { reference: previous.reference, currency: previous.currency, amount: previous.amount },
      });
    }
    return { state, reply: { reference: previous.reference, currency: previous.currency, amount: previous.amount, idempotent: true, balance: balanceOf(state, previous.currency) } };
  }
  const current = state.balances.get(message.currency) ?? 0;
  if (current + message.amount > policy.amount_max) {
    throw new ServiceError('ledger_limit_reached', `The balance would pass ${policy.amount_max} minor units.`);
  }
  const writes: RecordWrite[] = [];
  setBalance(state, message.currency, current + message.amount, writes);
  const record: CreditRecord = { reference: message.reference, currency: message.currency, amount: message.amount, by: message.by, at_ms: context.now };
  state.credits.set(record.reference, record);
  writes.push({ subkey: CREDIT_PREFIX + record.reference, value: record });
  return { state, reply: { reference: record.reference, currency: record.currency, amount: record.amount, idempotent: false, balance: balanceOf(state, record.currency) }, writes };
}

/**
 * A capture's credit, exactly once per transfer id. The payer's funds already
 * left, so it is never dropped: a balance that cannot take it (it would pass
 * amount_max, where arithmetic stops being exact) sends it back to the payer
 * as a transfer of its own, and the money is where it came from. A returned
 * transfer the payer cannot take either (both balances at the bound, out of
 * reach of any real ledger) saturates, and the part above the bound stays on
 * its record (`unapplied`).
 */
function transferIn(state: AccountState, message: Extract<LedgerAccountMessage, { op: 'transfer_in' }>, context: TurnContext): Result {
  if (state.transfers.has(message.transfer_id)) return { state, reply: { applied: false } };
  const writes: RecordWrite[] = [];
  const current = state.balances.get(message.currency) ?? 0;
  const record: TransferRecord = { transfer_id: message.transfer_id, currency: message.currency, amount: message.amount, at_ms: context.now };
  const sends: TurnResult<AccountState, unknown>['sends'] = [];
  if (current + message.amount <= policy.amount_max) setBalance(state, message.currency, current + message.amount, writes);
  else if (!message.transfer_id.startsWith(RETURNED_PREFIX)) {
    record.returned = true;
    sends.push({
      kind: LEDGER_ACCOUNT_KIND,
      key: ledgerAccountKey(message.from.tenant, message.from.user_id),
      message: { op: 'transfer_in', transfer_id: RETURNED_PREFIX + message.transfer_id, from: partyOf(state), currency: message.currency, amount: message.amount } satisfies LedgerAccountMessage,
    });
  } else {
    record.unapplied = current + message.amount - policy.amount_max;
    setBalance(state, message.currency, policy.amount_max, writes);
  }
  state.transfers.set(record.transfer_id, record);
  writes.push({ subkey: TRANSFER_PREFIX + record.transfer_id, value: record });
  while (state.transfers.size > policy.closed_holds_kept_max) {
    const oldest = state.transfers.keys().next().value as string;
    state.transfers.delete(oldest);
    writes.push({ subkey: TRANSFER_PREFIX + oldest, value: undefined });
  }
  return { state, reply: { applied: !record.returned }, writes, sends };
}
