import { describe, expect, it } from 'vitest';
import { backoffLockMs, initialThrottleState, RESERVATION_TTL_MS, stepThrottle, type ThrottleState } from '../../actors/accounts/login-throttle-state.js';
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  FAILURE_MEMORY_MS,
  PAIR_FAILURES_FREE,
  THROTTLE_WINDOW_MS,
  type ThrottleMessage,
  type ThrottleOutcome,
  type ThrottlePolicy,
} from '../../actors/accounts/messages.js';
import { fixedContext } from '../helpers/step.js';

/** Pure step tests of the login throttle actor: the backoff policy (password guesses) and the window policy. */
const T0 = Date.UTC(2026, 0, 1);
const KEY = 'pair:usr_1|203.0.113.7';
const backoff: ThrottlePolicy = { kind: 'backoff', free: PAIR_FAILURES_FREE };
const run = (state: ThrottleState, message: ThrottleMessage, now: number) => stepThrottle(state, message, fixedContext(now, 'login-throttle', KEY));
const outcomeOf = (result: { sends?: { key: string; message: unknown }[] }, flow: string): ThrottleOutcome | undefined =>
  (result.sends ?? []).filter((s) => s.key === flow).map((s) => (s.message as { outcome: ThrottleOutcome }).outcome)[0];

/** `count` failures, each as soon as the subject lets the next guess through; returns the state and the time of the last. */
function failThroughLocks(count: number, start = T0): { state: ThrottleState; now: number } {
  let state = initialThrottleState();
  let now = start;
  for (let i = 0; i < count; i++) {
    if (i >= PAIR_FAILURES_FREE) now += backoffLockMs(state.failures, PAIR_FAILURES_FREE);
    state = fail(state, 1, now);
  }
  return { state, now };
}

/** Takes a place and ends it as a failure, `count` times, each at `now`. Returns the state. */
function fail(state: ThrottleState, count: number, now: number, policy = backoff): ThrottleState {
  for (let i = 0; i < count; i++) {
    const taken = run(state, { op: 'take', policy, flow: `f${now}-${i}` }, now);
    const outcome = outcomeOf(taken, `f${now}-${i}`)!;
    if (!outcome.admitted) throw new Error(`not admitted at failure ${i}: ${JSON.stringify(outcome)}`);
    state = run(taken.state, { op: 'count', reserved_at_ms: outcome.reserved_at_ms }, now).state;
  }
  return state;
}

describe('backoff lock lengths', () => {
  it('none before the free failures, then the base doubling per failure, capped', () => {
    expect(backoffLockMs(4, 5)).toBe(0);
    expect(backoffLockMs(5, 5)).toBe(BACKOFF_BASE_MS);
    expect(backoffLockMs(6, 5)).toBe(2 * BACKOFF_BASE_MS);
    expect(backoffLockMs(7, 5)).toBe(4 * BACKOFF_BASE_MS);
    expect(backoffLockMs(5 + 20, 5)).toBe(BACKOFF_MAX_MS);
    expect(backoffLockMs(1000, 5)).toBe(BACKOFF_MAX_MS);
  });
});

describe('backoff policy', () => {
  it('free failures pass; the next attempt is refused for the lock, with Retry-After; after it one guess goes through', () => {
    const state = fail(initialThrottleState(), PAIR_FAILURES_FREE, T0);
    const locked = run(state, { op: 'take', policy: backoff, flow: 'g' }, T0 + 1000);
    expect(outcomeOf(locked, 'g')).toEqual({ admitted: false, retry_after_seconds: BACKOFF_BASE_MS / 1000 - 1 });
    const after = run(state, { op: 'take', policy: backoff, flow: 'h' }, T0 + BACKOFF_BASE_MS);
    expect(outcomeOf(after, 'h')).toEqual({ admitted: true, reserved_at_ms: T0 + BACKOFF_BASE_MS });
    // Only one guess at a time past the free failures: a second waits in the queue.
    const second = run(after.state, { op: 'take', policy: backoff, flow: 'i' }, T0 + BACKOFF_BASE_MS);
    expect(second.sends).toEqual([]);
    expect(second.state.waiting?.map((w) => w.flow)).toEqual(['i']);
    // The guess fails: the lock doubles and the waiter is refused with it.
    const counted = run(second.state, { op: 'count', reserved_at_ms: T0 + BACKOFF_BASE_MS }, T0 + BACKOFF_BASE_MS + 10);
    expect(outcomeOf(counted, 'i')).toEqual({ admitted: false, retry_after_seconds: (2 * BACKOFF_BASE_MS) / 1000 });
  });

  it('an attacker retrying as soon as each lock ends makes only a handful of guesses an hour', () => {
    let state = fail(initialThrottleState(), PAIR_FAILURES_FREE, T0);
    let now = T0;
    let guesses = PAIR_FAILURES_FREE;
    while (true) {
      now += backoffLockMs(state.failures, PAIR_FAILURES_FREE);
      if (now > T0 + 3600_000) break;
      state = fail(state, 1, now);
      guesses++;
    }
    expect(guesses).toBeLessThanOrEqual(PAIR_FAILURES_FREE + 10);
  });

  it('a correct password (reset) clears the failures and the lock', () => {
    const { state, now } = failThroughLocks(PAIR_FAILURES_FREE + 2);
    const later = now + backoffLockMs(state.failures, PAIR_FAILURES_FREE);
    const taken = run(state, { op: 'take', policy: backoff, flow: 'ok' }, later);
    const outcome = outcomeOf(taken, 'ok') as { admitted: true; reserved_at_ms: number };
    const reset = run(taken.state, { op: 'reset', reserved_at_ms: outcome.reserved_at_ms }, later + 1);
    expect(reset.state).toEqual(initialThrottleState());
  });

  it('failures are forgotten FAILURE_MEMORY_MS after the last one (the memory alarm drops the state)', () => {
    const { state, now } = failThroughLocks(PAIR_FAILURES_FREE + 3);
    const forgotten = run(state, { op: '$alarm', name: 'memory', due_ms: now + FAILURE_MEMORY_MS } as never, now + FAILURE_MEMORY_MS);
    expect(forgotten.state).toEqual(initialThrottleState());
    const taken = run(state, { op: 'take', policy: backoff, flow: 'x' }, now + FAILURE_MEMORY_MS);
    expect(outcomeOf(taken, 'x')).toMatchObject({ admitted: true });
  });

  it('a burst of simultaneous guesses gets exactly the free places; the rest wait and are refused once the lock starts', () => {
    let state = initialThrottleState();
    const admitted: number[] = [];
    for (let i = 0; i < 30; i++) {
      const taken = run(state, { op: 'take', policy: backoff, flow: `b${i}` }, T0 + i);
      const outcome = outcomeOf(taken, `b${i}`);
      if (outcome?.admitted) admitted.push(outcome.reserved_at_ms);
      state = taken.state;
    }
    expect(admitted).toHaveLength(PAIR_FAILURES_FREE);
    expect(state.waiting).toHaveLength(30 - PAIR_FAILURES_FREE);
    let refused = 0;
    for (const at of admitted) {
      const counted = run(state, { op: 'count', reserved_at_ms: at }, T0 + 100);
      refused += (counted.sends ?? []).filter((s) => !(s.message as { outcome: ThrottleOutcome }).outcome.admitted).length;
      expect((counted.sends ?? []).some((s) => (s.message as { outcome: ThrottleOutcome }).outcome.admitted)).toBe(false);
      state = counted.state;
    }
    expect(refused).toBe(30 - PAIR_FAILURES_FREE);
    expect(state.failures).toBe(PAIR_FAILURES_FREE);
  });

  it('a reservation whose end never comes lapses after RESERVATION_TTL_MS', () => {
    let state = initialThrottleState();
    for (let i = 0; i < PAIR_FAILURES_FREE; i++) state = run(state, { op: 'take', policy: backoff, flow: `s${i}` }, T0).state;
    const blocked = run(state, { op: 'take', policy: backoff, flow: 'late' }, T0 + RESERVATION_TTL_MS - 1);
    expect(blocked.sends).toEqual([]);
    const lapsed = run(blocked.state, { op: '$alarm', name: 'lapse', due_ms: T0 + RESERVATION_TTL_MS } as never, T0 + RESERVATION_TTL_MS);
    expect(outcomeOf(lapsed, 'late')).toEqual({ admitted: true, reserved_at_ms: T0 + RESERVATION_TTL_MS });
  });
});

describe('window policy (registrations, second-step codes)', () => {
  const window: ThrottlePolicy = { kind: 'window', limit: 3 };
  it('refuses past the limit until the window ends, then starts afresh', () => {
    const state = fail(initialThrottleState(), 3, T0, window);
    const refused = run(state, { op: 'take', policy: window, flow: 'w' }, T0 + 60_000);
    expect(outcomeOf(refused, 'w')).toEqual({ admitted: false, retry_after_seconds: (THROTTLE_WINDOW_MS - 60_000) / 1000 });
    const next = run(state, { op: 'take', policy: window, flow: 'n' }, T0 + THROTTLE_WINDOW_MS);
    expect(outcomeOf(next, 'n')).toEqual({ admitted: true, reserved_at_ms: T0 + THROTTLE_WINDOW_MS });
    expect(next.alarms).toContainEqual({ name: 'window', due_ms: T0 + 2 * THROTTLE_WINDOW_MS });
  });

  it('release hands a place back; with nothing counted or in flight the state is dropped', () => {
    const taken = run(initialThrottleState(), { op: 'take', policy: window, flow: 'a' }, T0);
    const outcome = outcomeOf(taken, 'a') as { admitted: true; reserved_at_ms: number };
    const released = run(taken.state, { op: 'release', reserved_at_ms: outcome.reserved_at_ms }, T0 + 1);
    expect(released.state).toEqual(initialThrottleState());
  });
});
