import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { LOGIN_FLOW_KIND, type LoginFlowMessage, type ThrottleAttempt, type ThrottleMessage, type ThrottleOutcome } from './messages.js';

/**
 * Login throttling (issue 4 security): one actor per counted subject, kind
 * `login-throttle`, key `acct:<user id or normalised login>`, `2fa:<user id>`,
 * `ip:<address>` or `reg:<address>`. A fixed window opens at the first
 * attempt; once `limit` attempts are counted in it, `attempt` refuses (429
 * rate_limited, Retry-After = rest of the window).
 *
 * `take` (from a login flow, actors/accounts/flows.ts) is atomic and
 * reserves a place before the slow check runs (the password KDF, a code), so
 * a burst of simultaneous guesses cannot all pass a check that has not yet
 * seen the others' outcomes: counted attempts plus reservations never exceed
 * the limit. While they would, the flow waits in this actor's queue (bounded,
 * first come first served) and is answered through the outbox when a
 * reservation ends: the reservations in flight end within a KDF run, so
 * legitimate simultaneous sign-ins from one address get through, and once
 * the count reaches the limit every waiter is refused. (`attempt` is the same
 * check for an asker, answering `admitted: false` instead of queueing.) Each
 * reservation ends with `count` (a wrong password or code, or a registration:
 * it counts), `release` (it does not: no check ran, or it was not a guess) or
 * `reset` (a correct password or code: the count is cleared). A reservation
 * whose end never arrives (a crash, an unreachable actor) lapses after
 * RESERVATION_TTL_MS.
 */
export const THROTTLE_WINDOW_MS = 15 * 60_000;
/** A reservation lapses after this long (far longer than a queued KDF run takes). */
export const RESERVATION_TTL_MS = 60_000;

export interface ThrottleState {
  window_start_ms: number | null;
  /** Attempts counted in the window: failures (or registrations). */
  failures: number;
  /** When each reservation still in flight was made (absent on state stored before reservations). At most `limit`. */
  in_flight_ms?: number[];
  /** Flows waiting for a place, oldest first (absent: none). At most WAITERS_MAX. */
  waiting?: ThrottleWaiter[];
}

export interface ThrottleWaiter {
  /** The login flow's key. */
  flow: string;
  limit: number;
}

/** Flows queued per subject; beyond, a new one is refused at once (429, Retry-After 1). */
export const WAITERS_MAX = 256;

export function initialThrottleState(): ThrottleState {
  return { window_start_ms: null, failures: 0 };
}

const WINDOW_ALARM = 'window';
/** Due when the oldest reservation lapses while flows wait, so a lost reservation cannot hold them. */
const LAPSE_ALARM = 'lapse';

/** The state as of `now`: an ended window is gone, and so are lapsed reservations. */
function live(state: ThrottleState, now: number): ThrottleState {
  if (state.window_start_ms === null || now >= state.window_start_ms + THROTTLE_WINDOW_MS) return initialThrottleState();
  const in_flight_ms = state.in_flight_ms ?? [];
  const kept = in_flight_ms.filter((at) => now < at + RESERVATION_TTL_MS);
  return kept.length === in_flight_ms.length ? state : { ...state, in_flight_ms: kept };
}

/** Without one reservation made at `reserved_at_ms` (none if it lapsed or its window ended). */
function withoutReservation(state: ThrottleState, reserved_at_ms: number): number[] {
  const in_flight_ms = [...(state.in_flight_ms ?? [])];
  const index = in_flight_ms.indexOf(reserved_at_ms);
  if (index >= 0) in_flight_ms.splice(index, 1);
  return in_flight_ms;
}

/** Nothing counted and nothing in flight: the window closes (and its alarm goes), so the next attempt opens a new one. */
function settled(previous: ThrottleState, next: ThrottleState): TurnResult<ThrottleState, unknown> {
  if (next.failures === 0 && (next.in_flight_ms ?? []).length === 0) {
    if (previous.window_start_ms === null) return { state: previous, reply: null };
    return { state: initialThrottleState(), reply: null, alarms: [{ name: WINDOW_ALARM, due_ms: null }] };
  }
  return { state: next, reply: null };
}

/** The seconds until the window ends (at least 1). */
function retryAfter(state: ThrottleState, now: number): number {
  return Math.max(1, Math.ceil(((state.window_start_ms ?? now) + THROTTLE_WINDOW_MS - now) / 1000));
}

function answer(context: TurnContext, flow: string, outcome: ThrottleOutcome): ActorSend {
  const message: LoginFlowMessage = { op: 'throttle', subject: context.key, outcome };
  return { kind: LOGIN_FLOW_KIND, key: flow, message };
}

/**
 * One turn of the throttle: the counting ops (stepCounts) see the state
 * without its queue; afterwards the queue is served, oldest first, with the
 * places that turn freed (or refused, once the count reached the limit).
 */
export function stepThrottle(state: ThrottleState, message: ThrottleMessage | AlarmMessage, context: TurnContext): TurnResult<ThrottleState, unknown> {
  const { waiting = [], ...counts } = state;
  if (message.op === 'give-up') {
    const kept = waiting.filter((w) => w.flow !== message.flow);
    if (kept.length === waiting.length) return { state, reply: null };
    return { state: { ...counts, ...(kept.length > 0 ? { waiting: kept } : {}) }, reply: null };
  }
  if (message.op === 'take') {
    const waiter: ThrottleWaiter = { flow: message.flow, limit: message.limit };
    if (waiting.some((w) => w.flow === message.flow)) return { state, reply: null };
    const current = live(counts, context.now);
    if (current.window_start_ms !== null && current.failures >= message.limit) {
      return { state, reply: null, sends: [answer(context, message.flow, { admitted: false, retry_after_seconds: retryAfter(current, context.now) })] };
    }
    if (waiting.length >= WAITERS_MAX) return { state, reply: null, sends: [answer(context, message.flow, { admitted: false, retry_after_seconds: 1 })] };
    return served({ state: counts, reply: null }, [...waiting, waiter], context);
  }
  if (waiting.length === 0) return stepCounts(state, message, context);
  return served(stepCounts(counts, message, context), waiting, context);
}

/** Admits the waiters the places allow, in order; refuses them all once the count is at their limit. */
function served(result: TurnResult<ThrottleState, unknown>, waiting: ThrottleWaiter[], context: TurnContext): TurnResult<ThrottleState, unknown> {
  const now = context.now;
  let current = live(result.state, now);
  const sends: ActorSend[] = [...(result.sends ?? [])];
  const alarms: AlarmChange[] = [...(result.alarms ?? [])];
  const queue = [...waiting];
  while (queue.length > 0) {
    const waiter = queue[0];
    const in_flight_ms = current.in_flight_ms ?? [];
    if (current.window_start_ms !== null && current.failures >= waiter.limit) {
      sends.push(answer(context, waiter.flow, { admitted: false, retry_after_seconds: retryAfter(current, now) }));
    } else if (current.failures + in_flight_ms.length < waiter.limit) {
      if (current.window_start_ms === null) alarms.push({ name: WINDOW_ALARM, due_ms: now + THROTTLE_WINDOW_MS });
      current = { window_start_ms: current.window_start_ms ?? now, failures: current.failures, in_flight_ms: [...in_flight_ms, now] };
      sends.push(answer(context, waiter.flow, { admitted: true, reserved_at_ms: now }));
    } else {
      break;
    }
    queue.shift();
  }
  if (queue.length === 0) return { ...result, state: current, sends, alarms: [...alarms, { name: LAPSE_ALARM, due_ms: null }] };
  const oldest = Math.min(...(current.in_flight_ms ?? [now]));
  return { ...result, state: { ...current, waiting: queue }, sends, alarms: [...alarms, { name: LAPSE_ALARM, due_ms: oldest + RESERVATION_TTL_MS }] };
}

function stepCounts(state: ThrottleState, message: Exclude<ThrottleMessage, { op: 'take' } | { op: 'give-up' }> | AlarmMessage, context: TurnContext): TurnResult<ThrottleState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'attempt': {
      const current = live(state, now);
      if (current.window_start_ms !== null && current.failures >= message.limit) {
        const retry = Math.max(1, Math.ceil((current.window_start_ms + THROTTLE_WINDOW_MS - now) / 1000));
        throw new ServiceError('rate_limited', 'Too many attempts; try again later.', { retryAfterSeconds: retry });
      }
      const in_flight_ms = current.in_flight_ms ?? [];
      if (current.failures + in_flight_ms.length >= message.limit) {
        const reply: ThrottleAttempt = { admitted: false };
        return { state, reply };
      }
      const window_start_ms = current.window_start_ms ?? now;
      const next: ThrottleState = { window_start_ms, failures: current.failures, in_flight_ms: [...in_flight_ms, now] };
      const alarms = current.window_start_ms === null ? [{ name: WINDOW_ALARM, due_ms: window_start_ms + THROTTLE_WINDOW_MS }] : [];
      const reply: ThrottleAttempt = { admitted: true, reserved_at_ms: now };
      return { state: next, reply, alarms };
    }
    case 'count': {
      // Counted even if the reservation lapsed or its window ended: the check did run.
      const current = live(state, now);
      const window_start_ms = current.window_start_ms ?? now;
      const next: ThrottleState = { window_start_ms, failures: current.failures + 1, in_flight_ms: withoutReservation(current, message.reserved_at_ms) };
      const alarms = current.window_start_ms === null ? [{ name: WINDOW_ALARM, due_ms: window_start_ms + THROTTLE_WINDOW_MS }] : [];
      return { state: next, reply: null, alarms };
    }
    case 'release': {
      const current = live(state, now);
      return settled(state, { ...current, in_flight_ms: withoutReservation(current, message.reserved_at_ms) });
    }
    case 'reset': {
      const current = live(state, now);
      return settled(state, { ...current, failures: 0, in_flight_ms: withoutReservation(current, message.reserved_at_ms) });
    }
    case '$alarm': {
      const current = live(state, now);
      if (current === state) return { state };
      return { state: current };
    }
  }
}
