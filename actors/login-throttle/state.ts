import { ServiceError, type AlarmMessage, type SnapshotActorDefinition, type TurnContext, type TurnResult } from '../../runtime/index.js';

/**
 * Login throttling (issue 4 security): one actor per counted subject, kind
 * `login-throttle`, key `acct:<user id or normalised login>`, `2fa:<user id>`,
 * `ip:<address>` or `reg:<address>`. A fixed window opens at the first counted
 * attempt; once `limit` attempts are counted in it, `attempt` refuses (429
 * rate_limited, Retry-After = rest of the window).
 *
 * `attempt` is atomic: it counts the attempt before the edge runs the slow
 * check (the password KDF, a code), so a burst of simultaneous guesses cannot
 * all pass a check that has not yet seen the others' failures. A failed
 * attempt simply stays counted. An attempt that turned out not to be a guess
 * (right password, refused elsewhere, the check could not run) is handed back
 * with `release`; a correct password or code clears its subject with `reset`.
 */
export const LOGIN_THROTTLE_KIND = 'login-throttle';
export const THROTTLE_WINDOW_MS = 15 * 60_000;
export const ACCOUNT_FAILURES_MAX = 5;
export const ADDRESS_FAILURES_MAX = 20;
/**
 * Wrong second-step codes per user (key `2fa:<user id>`). Counted apart from the
 * password failures because a correct password clears those: with one counter,
 * someone holding the password could guess codes without end.
 */
export const TWO_FACTOR_FAILURES_MAX = 10;
/** Registrations per client address and window (key `reg:<address>`); the node's REGISTRATIONS_PER_ADDRESS_MAX overrides it. */
export const REGISTRATIONS_PER_ADDRESS_MAX = 20;

export interface ThrottleState {
  window_start_ms: number | null;
  /** Attempts counted in the window: failures, plus attempts still in flight. */
  failures: number;
}

export type ThrottleMessage =
  | { op: 'attempt'; limit: number }
  /** Hands back one attempt counted in the window that started at window_start_ms (a later window is left alone). */
  | { op: 'release'; window_start_ms: number }
  | { op: 'reset' };

/** The reply to `attempt`: which window counted it (for `release`), and the count with it. */
export interface ThrottleAttempt {
  window_start_ms: number;
  failures: number;
}

export function initialThrottleState(): ThrottleState {
  return { window_start_ms: null, failures: 0 };
}

function live(state: ThrottleState, now: number): ThrottleState {
  if (state.window_start_ms === null || now >= state.window_start_ms + THROTTLE_WINDOW_MS) return initialThrottleState();
  return state;
}

export function stepThrottle(state: ThrottleState, message: ThrottleMessage | AlarmMessage, context: TurnContext): TurnResult<ThrottleState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'attempt': {
      const current = live(state, now);
      if (current.window_start_ms !== null && current.failures >= message.limit) {
        const retry = Math.max(1, Math.ceil((current.window_start_ms + THROTTLE_WINDOW_MS - now) / 1000));
        throw new ServiceError('rate_limited', 'Too many attempts; try again later.', { retryAfterSeconds: retry });
      }
      const window_start_ms = current.window_start_ms ?? now;
      const next: ThrottleState = { window_start_ms, failures: current.failures + 1 };
      const alarms = current.window_start_ms === null ? [{ name: 'window', due_ms: window_start_ms + THROTTLE_WINDOW_MS }] : [];
      const reply: ThrottleAttempt = { window_start_ms, failures: next.failures };
      return { state: next, reply, alarms };
    }
    case 'release': {
      const current = live(state, now);
      if (current.window_start_ms !== message.window_start_ms || current.failures === 0) return { state, reply: null };
      return { state: { ...current, failures: current.failures - 1 }, reply: null };
    }
    case 'reset':
      if (state.window_start_ms === null) return { state, reply: null };
      return { state: initialThrottleState(), reply: null, alarms: [{ name: 'window', due_ms: null }] };
    case '$alarm': {
      const current = live(state, now);
      if (current === state) return { state };
      return { state: current };
    }
  }
}

export const loginThrottleActor: SnapshotActorDefinition<ThrottleState, ThrottleMessage, unknown> = {
  kind: LOGIN_THROTTLE_KIND,
  storage: 'snapshot',
  initial: initialThrottleState,
  step: stepThrottle,
};
