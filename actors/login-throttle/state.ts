import { ServiceError, type AlarmMessage, type SnapshotActorDefinition, type TurnContext, type TurnResult } from '../../runtime/index.js';

/**
 * Login throttling (issue 4 security): one actor per counted subject, kind
 * `login-throttle`, key `acct:<user id or normalised login>` or `ip:<address>`.
 * A fixed window opens at the first failure; once `limit` failures are counted
 * in it, `check` refuses (429 rate_limited, Retry-After = rest of the window).
 * The edge checks before the password KDF runs, records failures after it,
 * and resets the account subject on a successful login.
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

export interface ThrottleState {
  window_start_ms: number | null;
  failures: number;
}

export type ThrottleMessage =
  | { op: 'check'; limit: number }
  | { op: 'fail'; limit: number }
  | { op: 'reset' };

export function initialThrottleState(): ThrottleState {
  return { window_start_ms: null, failures: 0 };
}

function live(state: ThrottleState, now: number): ThrottleState {
  if (state.window_start_ms === null || now >= state.window_start_ms + THROTTLE_WINDOW_MS) return initialThrottleState();
  return state;
}

function refuseIfBlocked(state: ThrottleState, limit: number, now: number): void {
  if (state.window_start_ms !== null && state.failures >= limit) {
    const retry = Math.max(1, Math.ceil((state.window_start_ms + THROTTLE_WINDOW_MS - now) / 1000));
    throw new ServiceError('rate_limited', 'Too many failed sign-in attempts; try again later.', { retryAfterSeconds: retry });
  }
}

export function stepThrottle(state: ThrottleState, message: ThrottleMessage | AlarmMessage, context: TurnContext): TurnResult<ThrottleState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'check': {
      refuseIfBlocked(live(state, now), message.limit, now);
      return { state, reply: null };
    }
    case 'fail': {
      const current = live(state, now);
      const window_start_ms = current.window_start_ms ?? now;
      const next: ThrottleState = { window_start_ms, failures: current.failures + 1 };
      const alarms = current.window_start_ms === null ? [{ name: 'window', due_ms: window_start_ms + THROTTLE_WINDOW_MS }] : [];
      return { state: next, reply: { failures: next.failures, blocked: next.failures >= message.limit }, alarms };
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
