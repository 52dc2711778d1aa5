import { describe, expect, it } from 'vitest';
import {
  DIRECTORY_KEY,
  DIRECTORY_KIND,
  LOGIN_FLOW_KIND,
  LOGIN_THROTTLE_KIND,
  PASSWORD_RESET_RESEND_MS,
  PASSWORD_RESET_TTL_MS,
  PASSWORD_RESETS_PER_ADDRESS_MAX,
  REFRESH_REUSE_GRACE_MS,
  USER_KIND,
  type FlowAnswer,
  type NewUser,
  type UserMessage,
} from '../../actors/accounts/messages.js';
import { initialThrottleState, stepThrottle, type ThrottleState } from '../../actors/accounts/login-throttle-state.js';
import { initialUserState, isSessionLive, stepUser, type UserState } from '../../actors/accounts/user-state.js';
import type { TurnResult } from '../../runtime/index.js';
import { World, WORLD_T0 } from '../helpers/flow-world.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/**
 * Password change and reset, and the refresh reuse grace (docs/api/accounts.md):
 * the user actor's ops as pure steps, and the login flow's new purposes through
 * the real step functions of every actor (test/helpers/flow-world.ts).
 */
const T0 = Date.UTC(2026, 0, 1);
const alice: NewUser = { id: 'usr_1', email: 'alice@example.com', username: 'alice', display_name: 'Alice', role: 'user', password_hash: 'scrypt$old' };
const send = (state: UserState, message: UserMessage, now: number) => stepUser(state, message, fixedContext(now, USER_KIND, 'usr_1'));

function withSessions(count: number, now = T0): { state: UserState; ids: string[] } {
  let state = send(initialUserState(), { op: 'create', user: alice }, now).state;
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const opened = send(state, { op: 'open-session', refresh_hash: `h${i}`, ttl_seconds: 3600, ip_address: '10.0.0.1', user_agent: 'ua' }, now);
    state = opened.state;
    ids.push((opened.reply as { session_id: string }).session_id);
  }
  return { state, ids };
}

const live = (state: UserState, id: string, now: number) => isSessionLive(state.sessions[id], now);

describe('user actor: password change and reset', () => {
  it('password-change stores the hash and ends every session but the caller\'s (impersonation sessions too)', () => {
    const { state, ids } = withSessions(3);
    const issued = send(state, { op: 'password-reset-issue', token_hash: 'tok' }, T0).state;
    const changed = send(issued, { op: 'password-change', password_hash: 'scrypt$new', keep_session_id: ids[1] }, T0 + 10);
    expect(changed.reply).toEqual({ user_id: 'usr_1', sessions_ended: 2 });
    expect(changed.state.user!.password_hash).toBe('scrypt$new');
    expect(ids.map((id) => live(changed.state, id, T0 + 10))).toEqual([false, true, false]);
    // A pending reset link would set another password over the new one: it is gone.
    expect(codeOf(() => send(changed.state, { op: 'password-reset-check', token_hash: 'tok' }, T0 + 20))).toBe('invalid_reset_token');
  });

  it('password-reset-issue: one token at a time, at most one a minute, none for a banned or unknown user', () => {
    const { state } = withSessions(0);
    const first = send(state, { op: 'password-reset-issue', token_hash: 'a' }, T0);
    expect(first.reply).toEqual({ issued: true, email: 'alice@example.com', expires_at_ms: T0 + PASSWORD_RESET_TTL_MS });
    // Within the minute: nothing sent, and the first link stays the valid one.
    const soon = send(first.state, { op: 'password-reset-issue', token_hash: 'b' }, T0 + PASSWORD_RESET_RESEND_MS - 1);
    expect(soon.reply).toEqual({ issued: false });
    expect(send(soon.state, { op: 'password-reset-check', token_hash: 'a' }, T0 + 1000).reply).toBeNull();
    // After it, a new token replaces the old one.
    const later = send(soon.state, { op: 'password-reset-issue', token_hash: 'c' }, T0 + PASSWORD_RESET_RESEND_MS);
    expect(later.reply).toMatchObject({ issued: true });
    expect(codeOf(() => send(later.state, { op: 'password-reset-check', token_hash: 'a' }, T0 + PASSWORD_RESET_RESEND_MS))).toBe('invalid_reset_token');
    expect(send(later.state, { op: 'password-reset-check', token_hash: 'c' }, T0 + PASSWORD_RESET_RESEND_MS).reply).toBeNull();

    const banned = send(state, { op: 'ban', reason: 'spam', banned_by: 'usr_admin' }, T0).state;
    expect(send(banned, { op: 'password-reset-issue', token_hash: 'a' }, T0).reply).toEqual({ issued: false });
    expect(send(initialUserState(), { op: 'password-reset-issue', token_hash: 'a' }, T0).reply).toEqual({ issued: false });
  });

  it('password-reset-complete: single use, within 30 minutes, to the address it was sent to; every session ends and the e-mail is verified', () => {
    const { state, ids } = withSessions(2);
    const issued = send(state, { op: 'password-reset-issue', token_hash: 'tok' }, T0).state;
    expect(codeOf(() => send(issued, { op: 'password-reset-complete', token_hash: 'other', password_hash: 'x' }, T0))).toBe('invalid_reset_token');
    expect(codeOf(() => send(issued, { op: 'password-reset-complete', token_hash: 'tok', password_hash: 'x' }, T0 + PASSWORD_RESET_TTL_MS))).toBe('invalid_reset_token');
    const renamed = send(issued, { op: 'admin-patch', patch: { display_name: 'A' } }, T0).state;
    const moved: UserState = { ...renamed, user: { ...renamed.user!, email: 'new@example.com' } };
    expect(codeOf(() => send(moved, { op: 'password-reset-check', token_hash: 'tok' }, T0))).toBe('invalid_reset_token');

    const done = send(issued, { op: 'password-reset-complete', token_hash: 'tok', password_hash: 'scrypt$new' }, T0 + PASSWORD_RESET_TTL_MS - 1);
    expect(done.reply).toEqual({ user_id: 'usr_1', sessions_ended: 2 });
    expect(done.state.user).toMatchObject({ password_hash: 'scrypt$new', email_verified: true });
    expect(ids.map((id) => live(done.state, id, T0 + PASSWORD_RESET_TTL_MS))).toEqual([false, false]);
    // The admin list learns email_verified through the summary.
    expect(done.sends).toContainEqual(expect.objectContaining({ kind: DIRECTORY_KIND, message: expect.objectContaining({ op: 'sync', user: expect.objectContaining({ email_verified: true }) }) }));
    expect(codeOf(() => send(done.state, { op: 'password-reset-complete', token_hash: 'tok', password_hash: 'y' }, T0 + PASSWORD_RESET_TTL_MS - 1))).toBe('invalid_reset_token');
  });
});

describe('user actor: refresh reuse grace', () => {
  const client = { ip_address: '10.0.0.1', user_agent: 'ua' };
  const refresh = (state: UserState, id: string, presented: string, next: string, now: number, by: typeof client | null = client) =>
    send(state, { op: 'refresh', session_id: id, presented_hash: presented, new_hash: next, ttl_seconds: 3600, ...(by ? { client: by } : {}) }, now);

  it('the same client presenting the token it just rotated out is refused without ending the session', () => {
    const { state, ids } = withSessions(1);
    const rotated = refresh(state, ids[0], 'h0', 'h1', T0 + 1000);
    expect(rotated.reply).toMatchObject({ reused: false });
    const concurrent = () => refresh(rotated.state, ids[0], 'h0', 'hx', T0 + 1000 + REFRESH_REUSE_GRACE_MS - 1);
    expect(codeOf(concurrent)).toBe('invalid_refresh_token');
    // The session lives on and the new token works.
    expect(refresh(rotated.state, ids[0], 'h1', 'h2', T0 + 2000).reply).toMatchObject({ reused: false });
  });

  it('after the window, from another client, or without a client (OAuth): reuse ends the session', () => {
    const { state, ids } = withSessions(1);
    const rotated = refresh(state, ids[0], 'h0', 'h1', T0 + 1000).state;
    const cases: [string, TurnResult<UserState, unknown>][] = [
      ['after the window', refresh(rotated, ids[0], 'h0', 'hx', T0 + 1000 + REFRESH_REUSE_GRACE_MS)],
      ['another address', refresh(rotated, ids[0], 'h0', 'hx', T0 + 1001, { ip_address: '10.0.0.2', user_agent: 'ua' })],
      ['another user agent', refresh(rotated, ids[0], 'h0', 'hx', T0 + 1001, { ip_address: '10.0.0.1', user_agent: 'other' })],
      ['no client', refresh(rotated, ids[0], 'h0', 'hx', T0 + 1001, null)],
    ];
    for (const [name, result] of cases) {
      expect(result.reply, name).toEqual({ reused: true });
      expect(live(result.state, ids[0], T0 + 1001), name).toBe(false);
    }
    // A rotation without a client (OAuth) grants no grace either.
    const oauth = refresh(state, ids[0], 'h0', 'h1', T0 + 1000, null).state;
    expect(refresh(oauth, ids[0], 'h0', 'hx', T0 + 1001).reply).toEqual({ reused: true });
  });
});

describe('login throttle: clear', () => {
  it('forgets the failures of a locked subject; a reservation in flight keeps its place', () => {
    const policy = { kind: 'backoff' as const, free: 2 };
    const at = (message: Parameters<typeof stepThrottle>[1], state: ThrottleState, now = T0) => stepThrottle(state, message, fixedContext(now, LOGIN_THROTTLE_KIND, 'acct:usr_1'));
    let state = at({ op: 'take', policy, flow: 'f1' }, initialThrottleState()).state;
    state = at({ op: 'count', reserved_at_ms: T0 }, state).state;
    state = at({ op: 'take', policy, flow: 'f2' }, state, T0 + 1).state;
    expect(state.failures).toBe(1);
    const cleared = at({ op: 'clear' }, state, T0 + 2);
    expect(cleared.state).toMatchObject({ failures: 0, in_flight_ms: [T0 + 1] });
    expect(cleared.state.last_failure_ms).toBeUndefined();
    // Nothing counted and nothing in flight: the subject is dropped.
    expect(at({ op: 'clear' }, at({ op: 'release', reserved_at_ms: T0 + 1 }, cleared.state, T0 + 3).state, T0 + 4).state).toEqual(initialThrottleState());
  });
});

describe('login flow: password change and reset (through every actor)', () => {
  const IP = '10.0.0.1';

  function world(): World {
    const w = new World();
    expect(w.ask(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'claim', user: alice })).toHaveProperty('reply');
    return w;
  }
  function openSession(w: World, ip_address = IP): string {
    const opened = w.ask(USER_KIND, 'usr_1', { op: 'open-session', refresh_hash: 'h', ttl_seconds: 3600, ip_address, user_agent: 'ua' });
    return (opened as { reply: { session_id: string } }).reply.session_id;
  }
  const flowReply = <T>(outcome: ReturnType<World['ask']>) => (outcome as { reply: FlowAnswer<T> }).reply;
  const throttleOf = (w: World, key: string) => w.state<ThrottleState>(LOGIN_THROTTLE_KIND, key);
  const user = (w: World) => w.state<UserState>(USER_KIND, 'usr_1');

  it('change: a wrong current password counts on the pair; a right one sets the hash and ends every other session', () => {
    const w = world();
    const mine = openSession(w);
    const other = openSession(w, '10.0.0.9');
    const begin = (flow: string) => flowReply<{ user_id: string; password_hash: string }>(w.ask(LOGIN_FLOW_KIND, flow, { op: 'change-password', user_id: 'usr_1', session_id: mine, ip_address: IP }));
    expect(begin('f1')).toEqual({ ok: true, value: { user_id: 'usr_1', password_hash: 'scrypt$old' } });
    const wrong = flowReply(w.ask(LOGIN_FLOW_KIND, 'f1', { op: 'current-password-checked', verified: false, new_password_hash: null }));
    expect(wrong).toEqual({ ok: false, refusal: { code: 'invalid_credentials', message: 'The current password is not correct.' } });
    // The address is one the account signed in from: counted on the pair only, as a login from it would be.
    expect(throttleOf(w, `pair:usr_1|${IP}`).failures).toBe(1);
    expect(throttleOf(w, 'acct:usr_1').failures).toBe(0);

    begin('f2');
    const right = flowReply(w.ask(LOGIN_FLOW_KIND, 'f2', { op: 'current-password-checked', verified: true, new_password_hash: 'scrypt$new' }));
    expect(right).toEqual({ ok: true, value: { user_id: 'usr_1', sessions_ended: 1 }, revoked_user_ids: ['usr_1'] });
    expect(user(w).user!.password_hash).toBe('scrypt$new');
    expect(live(user(w), mine, w.now)).toBe(true);
    expect(live(user(w), other, w.now)).toBe(false);
    // A right password clears the pair's count, like a login.
    expect(throttleOf(w, `pair:usr_1|${IP}`).failures).toBe(0);
    expect(w.state(LOGIN_FLOW_KIND, 'f2')).toBeNull();
  });

  it('reset request: answered once the place is held; then every request counts, and only an account gets a token', () => {
    const w = world();
    const request = (flow: string, email: string) => {
      expect(flowReply(w.ask(LOGIN_FLOW_KIND, flow, { op: 'reset-request', ip_address: IP }))).toEqual({ ok: true, value: null });
      return flowReply(w.ask(LOGIN_FLOW_KIND, flow, { op: 'reset-issue', email, token_hash: `tok-${flow}` }));
    };
    expect(request('f1', 'nobody@example.com')).toEqual({ ok: true, value: null });
    expect(request('f2', ' Alice@Example.com ')).toEqual({ ok: true, value: { user_id: 'usr_1', email: 'alice@example.com', expires_at_ms: WORLD_T0 + PASSWORD_RESET_TTL_MS } });
    // Within the minute: no mail.
    expect(request('f3', 'alice@example.com')).toEqual({ ok: true, value: null });
    expect(user(w).password_reset!.token_hash).toBe('tok-f2');
    for (let i = 4; i <= PASSWORD_RESETS_PER_ADDRESS_MAX; i++) request(`f${i}`, 'nobody@example.com');
    expect(throttleOf(w, `pwreset:${IP}`).failures).toBe(PASSWORD_RESETS_PER_ADDRESS_MAX);
    expect(flowReply(w.ask(LOGIN_FLOW_KIND, 'f99', { op: 'reset-request', ip_address: IP }))).toMatchObject({ ok: false, refusal: { code: 'rate_limited' } });
  });

  it('reset confirm: a bad token is refused before any KDF and counted; a good one ends every session and lifts the login locks', () => {
    const w = world();
    const session = openSession(w);
    // Locks to lift: account-wide failures and this address's pair.
    for (const key of ['acct:usr_1', `pair:usr_1|${IP}`]) {
      w.ask(LOGIN_THROTTLE_KIND, key, { op: 'take', policy: { kind: 'backoff', free: 1 }, flow: 'x' });
      w.ask(LOGIN_THROTTLE_KIND, key, { op: 'count', reserved_at_ms: w.now });
    }
    w.ask(USER_KIND, 'usr_1', { op: 'password-reset-issue', token_hash: 'tok' });
    const confirm = (flow: string, token_hash: string) => flowReply(w.ask(LOGIN_FLOW_KIND, flow, { op: 'reset-confirm', user_id: 'usr_1', token_hash, ip_address: IP }));
    expect(confirm('f1', 'bad')).toEqual({ ok: false, refusal: { code: 'invalid_reset_token', message: expect.any(String) } });
    expect(throttleOf(w, `pwreset:${IP}`).failures).toBe(1);

    expect(confirm('f2', 'tok')).toEqual({ ok: true, value: null });
    const done = flowReply(w.ask(LOGIN_FLOW_KIND, 'f2', { op: 'reset-complete', password_hash: 'scrypt$new' }));
    expect(done).toEqual({ ok: true, value: { user_id: 'usr_1', sessions_ended: 1 }, revoked_user_ids: ['usr_1'] });
    expect(live(user(w), session, w.now)).toBe(false);
    expect(user(w).user).toMatchObject({ password_hash: 'scrypt$new', email_verified: true });
    expect(throttleOf(w, 'acct:usr_1').failures).toBe(0);
    expect(throttleOf(w, `pair:usr_1|${IP}`).failures).toBe(0);
    // A good confirmation is not counted; the token is used up.
    expect(throttleOf(w, `pwreset:${IP}`).failures).toBe(1);
    expect(confirm('f3', 'tok')).toMatchObject({ ok: false, refusal: { code: 'invalid_reset_token' } });
  });

  it('two confirmations with one token at once: both pass the check, one sets the password, the other is refused', () => {
    const w = world();
    w.ask(USER_KIND, 'usr_1', { op: 'password-reset-issue', token_hash: 'tok' });
    const start = (flow: string) => flowReply(w.ask(LOGIN_FLOW_KIND, flow, { op: 'reset-confirm', user_id: 'usr_1', token_hash: 'tok', ip_address: null }));
    expect(start('f1')).toEqual({ ok: true, value: null });
    expect(start('f2')).toEqual({ ok: true, value: null });
    expect(flowReply(w.ask(LOGIN_FLOW_KIND, 'f1', { op: 'reset-complete', password_hash: 'one' }))).toMatchObject({ ok: true });
    expect(flowReply(w.ask(LOGIN_FLOW_KIND, 'f2', { op: 'reset-complete', password_hash: 'two' }))).toMatchObject({ ok: false, refusal: { code: 'invalid_reset_token' } });
    expect(user(w).user!.password_hash).toBe('one');
  });
});
