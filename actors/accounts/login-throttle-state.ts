import { type ActorSend, type AlarmChange, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  FAILURE_MEMORY_MS,
  LOGIN_FLOW_KIND,
  THROTTLE_WINDOW_MS,
  type LoginFlowMessage,
  type ThrottleMessage,
  type ThrottleOutcome,
  type ThrottlePolicy,
} from './messages.js';

/**
 * Login throttling: one actor per counted subject, kind `login-throttle`
 * (docs/api/accounts.md, "Login throttling", has the subjects and numbers).
 * Two policies, chosen by the login flow for each subject:
 *
 * - `backoff` (password guesses: an account from one address, an account
 *   from anywhere, one address against any account): `free` failures pass;
 *   from then on each failure locks the subject for BACKOFF_BASE_MS doubled
 *   per failure past `free`, at most BACKOFF_MAX_MS, and only one guess at a
 *   time is let through when a lock ends. Failures are forgotten
 *   FAILURE_MEMORY_MS after the last one, or cleared by a success. An
 *   exponential delay instead of a fixed wall: a user who mistypes a few
 *   times waits seconds, a guesser waits ever longer.
 * - `window` (registrations per address, second-step codes per user): at most
 *   `limit` counted attempts in a fixed THROTTLE_WINDOW_MS window.
 *
 * `take` (from a login flow, actors/accounts/flows.ts) reserves a place
 * before the slow check runs (the password KDF, a code), atomically, so a
 * burst of simultaneous guesses cannot all pass a check that has not yet
 * seen the others' outcomes: counted attempts plus reservations never exceed
 * what the policy allows. While they would, the flow waits in this actor's
 * queue (bounded, first come first served) and is answered through the
 * outbox when a reservation ends; once the subject is locked (or at its
 * window's limit) every waiter is refused with Retry-After. Each reservation
 * ends with `count` (a wrong password or code, or a registration), `release`
 * (no check ran, or it was not a guess) or `reset` (a correct password or
 * code: the count is cleared). `clear` (a completed password reset) forgets
 * the count without a reservation. A reservation whose end never arrives (a
 * crash, an unreachable actor) lapses after RESERVATION_TTL_MS.
 */

/** A reservation lapses after this long (far longer than a queued KDF run takes). */
export const RESERVATION_TTL_MS = 60_000;
/** Flows queued per subject; beyond, a new one is refused at once (429, Retry-After 1). */
export const WAITERS_MAX = 256;

export interface ThrottleState {
  /** The policy of the latest `take` (the flow chooses it by subject; it does not change for a subject). */
  policy?: ThrottlePolicy;
  /** `window`: when the window opened (null: none open). */
  window_start_ms: number | null;
  /** Counted attempts: failures (or registrations) in the window, or remembered failures for `backoff`. */
  failures: number;
  /** `backoff`: when the last failure was counted. */
  last_failure_ms?: number;
  /** When each reservation still in flight was made. */
  in_flight_ms?: number[];
  /** Flows waiting for a place, oldest first (absent: none). At most WAITERS_MAX. */
  waiting?: ThrottleWaiter[];
}

export interface ThrottleWaiter {
  /** The login flow's key. */
  flow: string;
  policy: ThrottlePolicy;
}

export function initialThrottleState(): ThrottleState {
  return { window_start_ms: null, failures: 0 };
}

const WINDOW_ALARM = 'window';
/** `backoff`: due when the failures are forgotten. */
const MEMORY_ALARM = 'memory';
/** Due when the oldest reservation lapses while flows wait, so a lost reservation cannot hold them. */
const LAPSE_ALARM = 'lapse';

/** The lock a backoff subject is under after `failures` failures, the last at `last_failure_ms` (0: none). */
export function backoffLockMs(failures: number, free: number): number {
  if (failures < free) return 0;
  return Math.min(BACKOFF_BASE_MS * 2 ** Math.min(failures - free, 30), BACKOFF_MAX_MS);
}

/** The state as of `now`: an ended window or forgotten failures are gone, and so are lapsed reservations. */
function live(state: ThrottleState, now: number): ThrottleState {
  let current = state;
  if (state.policy?.kind === 'backoff') {
    if (state.last_failure_ms !== undefined && now >= state.last_failure_ms + FAILURE_MEMORY_MS) {
      current = { policy: state.policy, window_start_ms: null, failures: 0, in_flight_ms: state.in_flight_ms };
    }
  } else if (state.window_start_ms === null || now >= state.window_start_ms + THROTTLE_WINDOW_MS) {
    current = { ...(state.policy ? { policy: state.policy } : {}), window_start_ms: null, failures: 0, in_flight_ms: state.policy ? state.in_flight_ms : [] };
    if (state.policy === undefined) return initialThrottleState();
  }
  const in_flight_ms = current.in_flight_ms ?? [];
  const kept = in_flight_ms.filter((at) => now < at + RESERVATION_TTL_MS);
  return kept.length === in_flight_ms.length ? current : { ...current, in_flight_ms: kept };
}

/** Until when the subject refuses every attempt (null: it does not). */
function lockedUntil(state: ThrottleState, policy: ThrottlePolicy): number | null {
  if (policy.kind === 'window') {
    return state.window_start_ms !== null && state.failures >= policy.limit ? state.window_start_ms + THROTTLE_WINDOW_MS : null;
  }
  if (state.failures < policy.free || state.last_failure_ms === undefined) return null;
  return state.last_failure_ms + backoffLockMs(state.failures, policy.free);
}

/** Places the policy allows in flight at once now. */
function capacity(state: ThrottleState, policy: ThrottlePolicy): number {
  if (policy.kind === 'window') return policy.limit - state.failures;
  // Past the free failures, one guess at a time once the lock has ended.
  return Math.max(1, policy.free - state.failures);
}

/** Without one reservation made at `reserved_at_ms` (none if it lapsed or its window ended). */
function withoutReservation(state: ThrottleState, reserved_at_ms: number): number[] {
  const in_flight_ms = [...(state.in_flight_ms ?? [])];
  const index = in_flight_ms.indexOf(reserved_at_ms);
  if (index >= 0) in_flight_ms.splice(index, 1);
  return in_flight_ms;
}

/** Nothing counted and nothing in flight: the state is dropped (and its alarms go), so the next attempt starts afresh. */
function settled(previous: ThrottleState, next: ThrottleState): TurnResult<ThrottleState, unknown> {
  if (next.failures === 0 && (next.in_flight_ms ?? []).length === 0) {
    if (previous.window_start_ms === null && previous.failures === 0 && (previous.in_flight_ms ?? []).length === 0) return { state: previous, reply: null };
    return {
      state: initialThrottleState(),
      reply: null,
      alarms: [
        { name: WINDOW_ALARM, due_ms: null },
        { name: MEMORY_ALARM, due_ms: null },
      ],
    };
  }
  return { state: next, reply: null };
}

function secondsUntil(until_ms: number, now: number): number {
  return Math.max(1, Math.ceil((until_ms - now) / 1000));
}

function answer(context: TurnContext, flow: string, outcome: ThrottleOutcome): ActorSend {
  const message: LoginFlowMessage = { op: 'throttle', subject: context.key, outcome };
  return { kind: LOGIN_FLOW_KIND, key: flow, message };
}

/**
 * One turn of the throttle: the counting ops (stepCounts) see the state
 * without its queue; afterwards the queue is served, oldest first, with the
 * places that turn freed (or refused, once the subject is locked).
 */
export function stepThrottle(state: ThrottleState, message: ThrottleMessage | AlarmMessage, context: TurnContext): TurnResult<ThrottleState, unknown> {
  const { waiting = [], ...counts } = state;
  if (message.op === 'give-up') {
    const kept = waiting.filter((w) => w.flow !== message.flow);
    if (kept.length === waiting.length) return { state, reply: null };
    return { state: { ...counts, ...(kept.length > 0 ? { waiting: kept } : {}) }, reply: null };
  }
  if (message.op === 'take') {
    const waiter: ThrottleWaiter = { flow: message.flow, policy: message.policy };
    if (waiting.some((w) => w.flow === message.flow)) return { state, reply: null };
    const current = live({ ...counts, policy: message.policy }, context.now);
    const until = lockedUntil(current, message.policy);
    if (until !== null && context.now < until) {
      return { state, reply: null, sends: [answer(context, message.flow, { admitted: false, retry_after_seconds: secondsUntil(until, context.now) })] };
    }
    if (waiting.length >= WAITERS_MAX) return { state, reply: null, sends: [answer(context, message.flow, { admitted: false, retry_after_seconds: 1 })] };
    return served({ state: { ...counts, policy: message.policy }, reply: null }, [...waiting, waiter], context);
  }
  if (waiting.length === 0) return stepCounts(state, message, context);
  return served(stepCounts(counts, message, context), waiting, context);
}

/** Admits the waiters the places allow, in order; refuses them all while the subject is locked. */
function served(result: TurnResult<ThrottleState, unknown>, waiting: ThrottleWaiter[], context: TurnContext): TurnResult<ThrottleState, unknown> {
  const now = context.now;
  let current = live(result.state, now);
  const sends: ActorSend[] = [...(result.sends ?? [])];
  const alarms: AlarmChange[] = [...(result.alarms ?? [])];
  const queue = [...waiting];
  while (queue.length > 0) {
    const { flow, policy } = queue[0];
    const in_flight_ms = current.in_flight_ms ?? [];
    const until = lockedUntil(current, policy);
    if (until !== null && now < until) {
      sends.push(answer(context, flow, { admitted: false, retry_after_seconds: secondsUntil(until, now) }));
    } else if (in_flight_ms.length < capacity(current, policy)) {
      if (policy.kind === 'window' && current.window_start_ms === null) alarms.push({ name: WINDOW_ALARM, due_ms: now + THROTTLE_WINDOW_MS });
      const window_start_ms = policy.kind === 'window' ? (current.window_start_ms ?? now) : null;
      current = { ...current, policy, window_start_ms, in_flight_ms: [...in_flight_ms, now] };
      sends.push(answer(context, flow, { admitted: true, reserved_at_ms: now }));
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
    case 'count': {
      // Counted even if the reservation lapsed or its window ended: the check did run.
      const current = live(state, now);
      const in_flight_ms = withoutReservation(current, message.reserved_at_ms);
      if (current.policy?.kind === 'backoff') {
        const next: ThrottleState = { ...current, failures: current.failures + 1, last_failure_ms: now, in_flight_ms };
        return { state: next, reply: null, alarms: [{ name: MEMORY_ALARM, due_ms: now + FAILURE_MEMORY_MS }] };
      }
      const window_start_ms = current.window_start_ms ?? now;
      const next: ThrottleState = { ...current, window_start_ms, failures: current.failures + 1, in_flight_ms };
      const alarms = current.window_start_ms === null ? [{ name: WINDOW_ALARM, due_ms: window_start_ms + THROTTLE_WINDOW_MS }] : [];
      return { state: next, reply: null, alarms };
    }
    case 'release': {
      const current = live(state, now);
      return settled(state, { ...current, in_flight_ms: withoutReservation(current, message.reserved_at_ms) });
    }
    case 'reset': {
      const current = live(state, now);
      const { last_failure_ms: _forgotten, ...rest } = current;
      return settled(state, { ...rest, failures: 0, in_flight_ms: withoutReservation(current, message.reserved_at_ms) });
    }
    case 'clear': {
      // A completed password reset: the failures are forgotten, attempts in flight keep their places.
      const current = live(state, now);
      const { last_failure_ms: _forgotten, ...rest } = current;
      return settled(state, { ...rest, failures: 0 });
    }
    case '$alarm': {
      const current = live(state, now);
      if (current.failures === 0 && (current.in_flight_ms ?? []).length === 0) return settled(state, current);
      return current === state ? { state } : { state: current };
    }
  }
}
