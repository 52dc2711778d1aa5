import { describe, expect, it } from 'vitest';
import { type NewUser, type UserMessage, ACCOUNT_FAILURES_MAX, type ThrottleAttempt, type ThrottleMessage } from '../../actors/accounts/messages.js';
import { ServiceError } from '../../runtime/index.js';
import {
  IMPERSONATION_SESSION_TTL_MS,
  initialUserState,
  stepUser,
  type UserState,
} from '../../actors/accounts/user-state.js';
import {
  initialThrottleState,
  stepThrottle,
  RESERVATION_TTL_MS,
  THROTTLE_WINDOW_MS,
  type ThrottleState,
} from '../../actors/accounts/login-throttle-state.js';
import { base32Decode, totp } from '../../actors/accounts/totp.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests: the login throttle, and impersonation on the user. */
const T0 = Date.UTC(2026, 0, 1);

describe('login throttle', () => {
  const run = (state: ThrottleState, message: ThrottleMessage, now: number) => stepThrottle(state, message, fixedContext(now, 'login-throttle', 'acct:x'));
  const limit = ACCOUNT_FAILURES_MAX;
  /** One attempt: its reservation time, or undefined if not admitted (a refusal throws). */
  const attempt = (state: ThrottleState, now: number) => {
    const result = run(state, { op: 'attempt', limit }, now);
    const reply = result.reply as ThrottleAttempt;
    return { state: result.state, reserved_at_ms: reply.admitted ? reply.reserved_at_ms : undefined, alarms: result.alarms };
  };
  /** `count` attempts that each ended as failures. */
  const failures = (count: number, now = T0) => {
    let state = initialThrottleState();
    for (let i = 0; i < count; i++) {
      const a = attempt(state, now);
      state = run(a.state, { op: 'count', reserved_at_ms: a.reserved_at_ms! }, now).state;
    }
    return state;
  };

  it('refuses once `limit` failures are counted, until the window ends, with Retry-After', () => {
    const state = failures(limit);
    try {
      run(state, { op: 'attempt', limit }, T0 + 60_000);
      expect.unreachable();
    } catch (error) {
      expect((error as ServiceError).code).toBe('rate_limited');
      expect((error as ServiceError).retryAfterSeconds).toBe((THROTTLE_WINDOW_MS - 60_000) / 1000);
    }
    expect(attempt(state, T0 + THROTTLE_WINDOW_MS).reserved_at_ms).toBe(T0 + THROTTLE_WINDOW_MS);
  });

  it('reservations in flight fill the limit: a burst gets exactly `limit` places, the rest wait (not admitted, nothing changes)', () => {
    // The runtime runs an actor's messages one turn at a time: this is what concurrent requests see.
    let state = initialThrottleState();
    const reserved: number[] = [];
    for (let i = 0; i < 30; i++) {
      const a = attempt(state, T0 + i);
      if (a.reserved_at_ms === undefined) expect(a.state).toBe(state);
      else reserved.push(a.reserved_at_ms);
      state = a.state;
    }
    expect(reserved).toHaveLength(limit);
    expect(state).toEqual({ window_start_ms: T0, failures: 0, in_flight_ms: reserved });
    // As each ends as a failure, the waiting attempts are finally refused, never admitted.
    for (const at of reserved) {
      expect(attempt(state, T0 + 100).reserved_at_ms).toBeUndefined();
      state = run(state, { op: 'count', reserved_at_ms: at }, T0 + 100).state;
    }
    expect(state).toEqual({ window_start_ms: T0, failures: limit, in_flight_ms: [] });
    expect(codeOf(() => run(state, { op: 'attempt', limit }, T0 + 101))).toBe('rate_limited');
  });

  it('release hands a place back; with nothing counted or in flight the window closes and its alarm goes', () => {
    const first = attempt(initialThrottleState(), T0);
    expect(first.alarms).toEqual([{ name: 'window', due_ms: T0 + THROTTLE_WINDOW_MS }]);
    const second = attempt(first.state, T0 + 1);
    expect(second.alarms).toEqual([]);
    const one = run(second.state, { op: 'release', reserved_at_ms: first.reserved_at_ms! }, T0 + 2);
    expect(one.state).toEqual({ window_start_ms: T0, failures: 0, in_flight_ms: [T0 + 1] });
    const none = run(one.state, { op: 'release', reserved_at_ms: second.reserved_at_ms! }, T0 + 3);
    expect(none.state).toEqual(initialThrottleState());
    expect(none.alarms).toEqual([{ name: 'window', due_ms: null }]);
    // Releasing again changes nothing.
    expect(run(none.state, { op: 'release', reserved_at_ms: second.reserved_at_ms! }, T0 + 4).state).toEqual(initialThrottleState());
  });

  it('reset clears the count but keeps the other reservations in flight', () => {
    const counted = failures(3);
    const mine = attempt(counted, T0 + 1);
    const other = attempt(mine.state, T0 + 2);
    const reset = run(other.state, { op: 'reset', reserved_at_ms: mine.reserved_at_ms! }, T0 + 3);
    expect(reset.state).toEqual({ window_start_ms: T0, failures: 0, in_flight_ms: [T0 + 2] });
    const last = run(reset.state, { op: 'reset', reserved_at_ms: other.reserved_at_ms! }, T0 + 4);
    expect(last.state).toEqual(initialThrottleState());
    expect(last.alarms).toEqual([{ name: 'window', due_ms: null }]);
  });

  it('a reservation whose end never comes lapses after RESERVATION_TTL_MS; a late count still counts', () => {
    let state = initialThrottleState();
    const stuck: number[] = [];
    for (let i = 0; i < limit; i++) {
      const a = attempt(state, T0);
      stuck.push(a.reserved_at_ms!);
      state = a.state;
    }
    expect(attempt(state, T0 + RESERVATION_TTL_MS - 1).reserved_at_ms).toBeUndefined();
    const later = attempt(state, T0 + RESERVATION_TTL_MS);
    expect(later.reserved_at_ms).toBe(T0 + RESERVATION_TTL_MS);
    expect(later.state.in_flight_ms).toEqual([T0 + RESERVATION_TTL_MS]);
    const counted = run(later.state, { op: 'count', reserved_at_ms: stuck[0] }, T0 + RESERVATION_TTL_MS + 1).state;
    expect(counted).toEqual({ window_start_ms: T0, failures: 1, in_flight_ms: [T0 + RESERVATION_TTL_MS] });
  });

  it('the window alarm clears the state; a count after the window starts a new one', () => {
    const state = failures(limit);
    expect(stepThrottle(state, { op: '$alarm', name: 'window', due_ms: T0 + THROTTLE_WINDOW_MS }, fixedContext(T0 + THROTTLE_WINDOW_MS)).state).toEqual(initialThrottleState());
    const next = run(state, { op: 'count', reserved_at_ms: T0 }, T0 + THROTTLE_WINDOW_MS);
    expect(next.state).toEqual({ window_start_ms: T0 + THROTTLE_WINDOW_MS, failures: 1, in_flight_ms: [] });
    expect(next.alarms).toHaveLength(1);
  });

  it('reads state stored before reservations existed (no in_flight_ms)', () => {
    const old: ThrottleState = { window_start_ms: T0, failures: limit - 1 };
    const a = attempt(old, T0 + 1);
    expect(a.state).toEqual({ window_start_ms: T0, failures: limit - 1, in_flight_ms: [T0 + 1] });
    expect(attempt(a.state, T0 + 2).reserved_at_ms).toBeUndefined();
  });
});

describe('user: impersonation', () => {
  const alice: NewUser = { id: 'usr_1', email: 'a@example.com', username: 'alice', display_name: 'A', role: 'user', password_hash: 'x' };
  const send = (state: UserState, message: UserMessage, now: number) => stepUser(state, message, fixedContext(now, 'user', 'usr_1'));
  const fresh = () => send(initialUserState(), { op: 'create', user: alice }, T0).state;

  const impersonate = (state: UserState, now: number) =>
    send(state, { op: 'admin-impersonate', admin_id: 'usr_admin', challenge_ttl_seconds: 300, refresh_hash: 'r', ttl_seconds: 30 * 86400, ip_address: '::1', user_agent: '' }, now);

  it('admin-impersonate opens a session with impersonated_by and at most an hour', () => {
    const opened = impersonate(fresh(), T0);
    const session = Object.values(opened.state.sessions)[0];
    expect(session.impersonated_by).toBe('usr_admin');
    expect(session.expires_at_ms).toBe(T0 + IMPERSONATION_SESSION_TTL_MS);
    // The per-request check names the admin, so the edge can refuse what an impersonation may not do.
    expect(send(opened.state, { op: 'authenticate', session_id: session.id }, T0 + 1).reply).toMatchObject({ impersonated_by: 'usr_admin' });
    const refreshed = send(opened.state, { op: 'refresh', session_id: session.id, presented_hash: 'r', new_hash: 'r2', ttl_seconds: 30 * 86400 }, T0 + 1000);
    expect(refreshed.state.sessions[session.id].expires_at_ms).toBe(T0 + IMPERSONATION_SESSION_TTL_MS);
  });

  it('admin-impersonate of a user with two-factor opens a challenge instead of a session', () => {
    const state = fresh();
    const withTwoFactor: UserState = { ...state, user: { ...state.user!, two_factor_enabled: true } };
    const challenged = impersonate(withTwoFactor, T0);
    const { challenge_id } = challenged.reply as { requires_2fa: true; challenge_id: string };
    expect(challenged.reply).toMatchObject({ requires_2fa: true, challenge_id: expect.stringMatching(/^chl_/) });
    expect(challenged.state.sessions).toEqual({});
    expect(challenged.state.impersonation_challenges).toEqual([[challenge_id, 'usr_admin', T0 + 300_000]]);
  });

  it('2fa-login: SSO enforced since the password step refuses a login challenge before judging the code; an impersonation challenge is not gated', () => {
    const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
    const code = (at: number) => totp(base32Decode(SECRET)!, at);
    const setup = send(fresh(), { op: '2fa-setup', secret_b32: SECRET, backup_hashes: [] }, T0).state;
    const enabled = send(setup, { op: '2fa-verify-setup', code: code(T0) }, T0).state;
    const at = T0 + 60_000;
    const login = (state: UserState, challenge_id: string, sso_required_by: { name: string | null } | null) =>
      send(state, {
        op: '2fa-login',
        challenge_id,
        presented: { code: code(at), code_hash: 'none' },
        sso_required_by,
        refresh_hash: 'r',
        ttl_seconds: 3600,
        ip_address: '',
        user_agent: '',
      }, at);

    try {
      login(enabled, 'chl_login', { name: 'Strict Org' });
      expect.unreachable();
    } catch (error) {
      expect((error as ServiceError).code).toBe('sso_required');
      expect((error as ServiceError).message).toContain('Strict Org');
    }
    // Nothing was used up: without enforcement the same challenge and code open a session.
    const opened = login(enabled, 'chl_login', null);
    expect(opened.reply).toMatchObject({ ok: true, session_id: expect.any(String) });

    const challenged = impersonate(enabled, T0);
    const { challenge_id } = challenged.reply as { challenge_id: string };
    const impersonated = login(challenged.state, challenge_id, { name: 'Strict Org' });
    expect(impersonated.reply).toMatchObject({ ok: true });
    const session = impersonated.state.sessions[(impersonated.reply as { session_id: string }).session_id];
    expect(session.impersonated_by).toBe('usr_admin');
  });
});
