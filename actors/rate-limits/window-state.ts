import { isAlarm, ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { webhookPublish } from '../webhooks/messages.js';
import { RATE_LIMIT_EXCEEDED_EVENT, rateLimitPolicy, type Limit, type ReserveReply, type WindowMessage } from './messages.js';

/**
 * One caller's sliding window for one limit, counted in leases.
 *
 * The edge does not ask this actor per request: it reserves a lease of n
 * tokens, spends them locally until the lease ends, and gives back what it
 * did not spend. A lease's tokens count from the turn that grants it until
 * lease end + window: every request the node admits on the lease happens
 * before the lease ends, so it is still counted one full window after it was
 * admitted. Hence, exactly and on any number of nodes: the requests admitted
 * in any interval of window_seconds never exceed max_requests. The price is
 * on the other side: an unspent token counts until it is given back (or its
 * lease expires), so a caller may be refused slightly early, never admitted
 * late. Entries are kept ordered by expiry.
 */
export interface WindowEntry {
  lease_id: string;
  count: number;
  until_ms: number;
}

export interface WindowState {
  entries: WindowEntry[];
  /** A breach before this time publishes nothing (one event per caller and window). */
  notified_until_ms: number;
}

export type WindowStateOrNone = WindowState | null;

type Result = TurnResult<WindowStateOrNone, ReserveReply | null>;

export function initialWindowState(): WindowStateOrNone {
  return null;
}

/** Requests counted at `now`: the live entries' tokens. */
export function usedAt(entries: readonly WindowEntry[], now: number): number {
  let used = 0;
  for (const entry of entries) if (entry.until_ms > now) used += entry.count;
  return used;
}

/** When the window next has a free token under `max` (now if it has one). */
export function nextFreeAt(entries: readonly WindowEntry[], max: number, now: number): number {
  let used = usedAt(entries, now);
  if (used < max) return now;
  for (const entry of entries) {
    if (entry.until_ms <= now) continue;
    used -= entry.count;
    if (used < max) return entry.until_ms;
  }
  return now;
}

function validLimit(limit: Limit): boolean {
  return (
    Number.isSafeInteger(limit.max_requests) &&
    limit.max_requests >= 1 &&
    limit.max_requests <= rateLimitPolicy.max_requests_max &&
    Number.isSafeInteger(limit.window_seconds) &&
    limit.window_seconds >= 1 &&
    limit.window_seconds <= rateLimitPolicy.window_seconds_max
  );
}

/** Inserts keeping the order by expiry; past the bound, the two oldest merge (the later expiry: it never counts less). */
function withEntry(entries: WindowEntry[], entry: WindowEntry): WindowEntry[] {
  const next = [...entries];
  let at = next.length;
  while (at > 0 && next[at - 1]!.until_ms > entry.until_ms) at--;
  next.splice(at, 0, entry);
  while (next.length > rateLimitPolicy.window_entries_max) {
    const [first, second] = next as [WindowEntry, WindowEntry];
    next.splice(0, 2, { lease_id: second.lease_id, count: first.count + second.count, until_ms: Math.max(first.until_ms, second.until_ms) });
  }
  return next;
}

/** The lease's unspent tokens leave the window (the node promised not to spend them). */
function givenBack(entries: WindowEntry[], lease_id: string, unused: number): WindowEntry[] {
  if (!Number.isSafeInteger(unused) || unused <= 0) return entries;
  return entries.map((entry) => (entry.lease_id === lease_id ? { ...entry, count: Math.max(0, entry.count - unused) } : entry));
}

function live(entries: WindowEntry[], now: number): WindowEntry[] {
  return entries.filter((entry) => entry.until_ms > now && entry.count > 0);
}

function reserve(state: WindowStateOrNone, message: Extract<WindowMessage, { op: 'reserve' }>, context: TurnContext): Result {
  if (!validLimit(message.limit)) throw new ServiceError('BAD_REQUEST', 'The limit is out of range.');
  if (!Number.isSafeInteger(message.want) || message.want < 1) throw new ServiceError('BAD_REQUEST', 'want must be a positive integer.');
  if (!Number.isSafeInteger(message.lease_ms) || message.lease_ms < 1 || message.lease_ms > 60_000) throw new ServiceError('BAD_REQUEST', 'lease_ms is out of range.');
  const now = context.now;
  const window_ms = message.limit.window_seconds * 1000;
  const max = message.limit.max_requests;
  let entries = state?.entries ?? [];
  if (message.give_back) entries = givenBack(entries, message.give_back.lease_id, message.give_back.unused);
  entries = live(entries, now);
  const available = Math.max(0, max - usedAt(entries, now));
  const granted = Math.min(message.want, available);
  let notified_until_ms = state?.notified_until_ms ?? 0;
  let lease_id: string | null = null;
  const lease_end_ms = now + message.lease_ms;
  const sends: Result['sends'] = [];
  const events: Result['events'] = [];
  if (granted > 0) {
    lease_id = context.newId('lease_');
    entries = withEntry(entries, { lease_id, count: granted, until_ms: lease_end_ms + window_ms });
  } else if (now >= notified_until_ms) {
    // The first refusal of this caller in this window: one event, however many requests are refused.
    notified_until_ms = now + window_ms;
    const data = {
      caller: message.caller.id,
      user_id: message.caller.user_id,
      tenant: message.caller.tenant,
      policy: message.policy,
      endpoint: message.endpoint,
      method: message.method,
      max_requests: max,
      window_seconds: message.limit.window_seconds,
      retry_after_seconds: Math.max(1, Math.ceil((nextFreeAt(entries, max, now) - now) / 1000)),
    };
    events.push({ type: RATE_LIMIT_EXCEEDED_EVENT, data });
    if (message.caller.tenant !== null) {
      sends.push(webhookPublish(message.caller.tenant, { id: context.newId('evt_'), type: RATE_LIMIT_EXCEEDED_EVENT, timestamp_ms: now, data }));
    }
  }
  const retry_at_ms = granted < message.want || available - granted === 0 ? nextFreeAt(entries, max, now) : now;
  const reply: ReserveReply = {
    granted,
    lease_id,
    lease_end_ms,
    remaining: available - granted,
    retry_at_ms,
    reset_at_ms: entries.length > 0 ? entries[entries.length - 1]!.until_ms : now,
  };
  const changed = granted > 0 || message.give_back !== undefined || notified_until_ms !== (state?.notified_until_ms ?? 0) || entries.length !== (state?.entries.length ?? 0);
  return { state: changed ? { entries, notified_until_ms } : state, reply, sends, events };
}

export function stepWindow(state: WindowStateOrNone, message: WindowMessage | AlarmMessage, context: TurnContext): Result {
  if (isAlarm(message)) return { state };
  switch (message.op) {
    case 'reserve':
      return reserve(state, message, context);
    case 'give_back': {
      if (!state) return { state, reply: null };
      return { state: { ...state, entries: live(givenBack(state.entries, message.lease_id, message.unused), context.now) }, reply: null };
    }
    case 'forget': {
      if (!state) return { state, reply: null };
      const entries = live(state.entries, context.now);
      // Nothing counts any more and the breach notice is over: the record goes.
      if (entries.length === 0 && state.notified_until_ms <= context.now) return { state: null, reply: null };
      return { state: entries.length === state.entries.length ? state : { ...state, entries }, reply: null };
    }
  }
}
