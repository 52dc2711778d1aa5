import { describe, expect, it } from 'vitest';
import { type NewUser, type UserMessage } from '../../actors/accounts/messages.js';
import { type TurnContext } from '../../runtime/index.js';
import {
  loadDirectory,
  stepDirectory,
  type DirectoryState,
} from '../../actors/accounts/directory-state.js';
import {
  ENDED_SESSION_RETENTION_MS,
  initialUserState,
  isSessionLive,
  SESSIONS_PER_USER_MAX,
  stepUser,
  type UserState,
} from '../../actors/accounts/user-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests of the user and the user directory. */
const T0 = Date.UTC(2026, 0, 1);
const contextAt = (now: number, kind = 'user', key = 'usr_1'): TurnContext => fixedContext(now, kind, key);

const alice: NewUser = {
  id: 'usr_1',
  email: 'Alice@Example.com',
  username: 'Alice_1',
  display_name: 'Alice',
  role: 'user',
  password_hash: 'scrypt$10$8$1$salt$hash',
};

function user(now = T0): UserState {
  return stepUser(initialUserState(), { op: 'create', user: alice }, contextAt(now)).state;
}

function send(state: UserState, message: UserMessage, now: number) {
  return stepUser(state, message, contextAt(now));
}

function openSession(state: UserState, now: number, refresh_hash = 'h1', ttl_seconds = 3600) {
  const result = send(state, { op: 'open-session', refresh_hash, ttl_seconds, ip_address: '127.0.0.1', user_agent: 'test' }, now);
  return { state: result.state, session_id: (result.reply as { session_id: string }).session_id };
}

describe('user step', () => {
  it('create makes the user with defaults and is idempotent for the same id', () => {
    const created = stepUser(initialUserState(), { op: 'create', user: alice }, contextAt(T0));
    expect(created.reply).toEqual({
      id: 'usr_1',
      email: 'Alice@Example.com',
      username: 'Alice_1',
      display_name: 'Alice',
      role: 'user',
      email_verified: false,
      two_factor_enabled: false,
      banned: false,
      created_at_ms: T0,
    });
    expect(created.reply).not.toHaveProperty('password_hash');
    const again = stepUser(created.state, { op: 'create', user: { ...alice, password_hash: 'other' } }, contextAt(T0 + 5));
    expect(again.state).toBe(created.state);
    expect(again.reply).toEqual(created.reply);
    expect(codeOf(() => stepUser(created.state, { op: 'create', user: { ...alice, id: 'usr_2' } }, contextAt(T0)))).toBe('conflict');
  });

  it('get and credentials of a user that does not exist are not_found', () => {
    expect(codeOf(() => send(initialUserState(), { op: 'get' }, T0))).toBe('not_found');
    expect(codeOf(() => send(initialUserState(), { op: 'credentials' }, T0))).toBe('not_found');
    expect(codeOf(() => send(initialUserState(), { op: 'open-session', refresh_hash: 'h', ttl_seconds: 60, ip_address: '', user_agent: '' }, T0))).toBe('not_found');
  });

  it('credentials carry the hash; get does not', () => {
    const state = user();
    expect(send(state, { op: 'credentials' }, T0).reply).toEqual({
      user_id: 'usr_1',
      password_hash: alice.password_hash,
      banned: false,
      two_factor_enabled: false,
      known_address: false,
    });
    expect(send(state, { op: 'get' }, T0).reply).not.toHaveProperty('password_hash');
  });

  it('credentials say whether the asked address is one the user signed in from (not by impersonation)', () => {
    const { state } = openSession(user(), T0, 'h1', 60);
    const address = Object.values(state.sessions)[0].ip_address;
    expect((send(state, { op: 'credentials', ip_address: address }, T0).reply as { known_address: boolean }).known_address).toBe(true);
    expect((send(state, { op: 'credentials', ip_address: '198.51.100.9' }, T0).reply as { known_address: boolean }).known_address).toBe(false);
    expect((send(state, { op: 'credentials', ip_address: null }, T0).reply as { known_address: boolean }).known_address).toBe(false);
  });

  it('open-session adds a live session; authenticate accepts it until it expires', () => {
    const { state, session_id } = openSession(user(), T0, 'h1', 60);
    expect(state.sessions[session_id]).toMatchObject({ created_at_ms: T0, expires_at_ms: T0 + 60_000, refresh_hash: 'h1', ended_at_ms: null, ip_address: '127.0.0.1' });
    expect(send(state, { op: 'authenticate', session_id }, T0 + 59_999).reply).toEqual({ user_id: 'usr_1', session_id, role: 'user', expires_at_ms: T0 + 60_000, impersonated_by: null });
    expect(codeOf(() => send(state, { op: 'authenticate', session_id }, T0 + 60_000))).toBe('unauthorized');
    expect(codeOf(() => send(state, { op: 'authenticate', session_id: 'ses_unknown' }, T0))).toBe('unauthorized');
    expect(codeOf(() => send(initialUserState(), { op: 'authenticate', session_id }, T0))).toBe('unauthorized');
  });

  it('end-session ends only that session; authenticate and refresh on it fail; ending twice is a no-op', () => {
    let state = user();
    const first = openSession(state, T0, 'h1');
    const second = openSession(first.state, T0 + 1, 'h2');
    state = second.state;
    const ended = send(state, { op: 'end-session', session_id: first.session_id }, T0 + 10);
    expect(ended.reply).toEqual({ ended: true });
    expect(ended.state.sessions[first.session_id].ended_at_ms).toBe(T0 + 10);
    expect(state.sessions[first.session_id].ended_at_ms).toBeNull(); // not mutated
    expect(codeOf(() => send(ended.state, { op: 'authenticate', session_id: first.session_id }, T0 + 11))).toBe('unauthorized');
    expect(codeOf(() => send(ended.state, { op: 'refresh', session_id: first.session_id, presented_hash: 'h1', new_hash: 'h1b', ttl_seconds: 60 }, T0 + 11))).toBe(
      'invalid_refresh_token',
    );
    expect(send(ended.state, { op: 'authenticate', session_id: second.session_id }, T0 + 11).reply).toMatchObject({ session_id: second.session_id });
    const twice = send(ended.state, { op: 'end-session', session_id: first.session_id }, T0 + 12);
    expect(twice.reply).toEqual({ ended: false });
    expect(twice.state).toBe(ended.state);
    expect(send(ended.state, { op: 'end-session', session_id: 'ses_unknown' }, T0).reply).toEqual({ ended: false });
  });

  it('refresh rotates: the new hash works, the old one is detected as reuse and ends the session', () => {
    const { state, session_id } = openSession(user(), T0, 'h1', 60);
    const rotated = send(state, { op: 'refresh', session_id, presented_hash: 'h1', new_hash: 'h2', ttl_seconds: 60 }, T0 + 30_000);
    expect(rotated.reply).toMatchObject({ reused: false, session_id, user: { id: 'usr_1' } });
    expect(rotated.state.sessions[session_id]).toMatchObject({ refresh_hash: 'h2', previous_refresh_hash: 'h1', expires_at_ms: T0 + 90_000 });
    // The session lives on past its first expiry because the refresh extended it.
    expect(send(rotated.state, { op: 'authenticate', session_id }, T0 + 80_000).reply).toMatchObject({ session_id });

    const again = send(rotated.state, { op: 'refresh', session_id, presented_hash: 'h2', new_hash: 'h3', ttl_seconds: 60 }, T0 + 31_000);
    expect(again.reply).toMatchObject({ reused: false });

    // h1 was rotated out two steps ago: simply invalid.
    expect(codeOf(() => send(again.state, { op: 'refresh', session_id, presented_hash: 'h1', new_hash: 'x', ttl_seconds: 60 }, T0 + 32_000))).toBe('invalid_refresh_token');
    // h2 was just rotated out: presenting it again is theft; the session ends for everyone.
    const reuse = send(again.state, { op: 'refresh', session_id, presented_hash: 'h2', new_hash: 'x', ttl_seconds: 60 }, T0 + 32_000);
    expect(reuse.reply).toEqual({ reused: true });
    expect(reuse.state.sessions[session_id].ended_at_ms).toBe(T0 + 32_000);
    expect(codeOf(() => send(reuse.state, { op: 'refresh', session_id, presented_hash: 'h3', new_hash: 'h4', ttl_seconds: 60 }, T0 + 33_000))).toBe(
      'invalid_refresh_token',
    );
    expect(codeOf(() => send(reuse.state, { op: 'authenticate', session_id }, T0 + 33_000))).toBe('unauthorized');
  });

  it('refresh with an unknown hash, an unknown session or an expired session is invalid_refresh_token', () => {
    const { state, session_id } = openSession(user(), T0, 'h1', 60);
    expect(codeOf(() => send(state, { op: 'refresh', session_id, presented_hash: 'nope', new_hash: 'x', ttl_seconds: 60 }, T0))).toBe('invalid_refresh_token');
    expect(state.sessions[session_id].ended_at_ms).toBeNull();
    expect(codeOf(() => send(state, { op: 'refresh', session_id: 'ses_x', presented_hash: 'h1', new_hash: 'x', ttl_seconds: 60 }, T0))).toBe('invalid_refresh_token');
    expect(codeOf(() => send(state, { op: 'refresh', session_id, presented_hash: 'h1', new_hash: 'x', ttl_seconds: 60 }, T0 + 60_000))).toBe('invalid_refresh_token');
  });

  it('a banned user cannot open a session, authenticate or refresh', () => {
    const { state, session_id } = openSession(user(), T0, 'h1');
    const banned: UserState = { ...state, user: { ...state.user!, banned: true } };
    expect(codeOf(() => send(banned, { op: 'open-session', refresh_hash: 'h', ttl_seconds: 60, ip_address: '', user_agent: '' }, T0))).toBe('forbidden');
    expect(codeOf(() => send(banned, { op: 'authenticate', session_id }, T0))).toBe('unauthorized');
    expect(codeOf(() => send(banned, { op: 'refresh', session_id, presented_hash: 'h1', new_hash: 'x', ttl_seconds: 60 }, T0))).toBe('invalid_refresh_token');
  });

  it('keeps sessions bounded: old dead sessions are pruned, live ones kept', () => {
    let state = user();
    const first = openSession(state, T0, 'h0', 60);
    state = send(first.state, { op: 'end-session', session_id: first.session_id }, T0 + 1).state;
    // Past the retention the ended session is dropped at the next open-session.
    state = openSession(state, T0 + ENDED_SESSION_RETENTION_MS + 10).state;
    expect(state.sessions[first.session_id]).toBeUndefined();
    for (let i = 0; i < SESSIONS_PER_USER_MAX + 20; i++) state = openSession(state, T0 + ENDED_SESSION_RETENTION_MS + 100 + i, `h${i}`, 3600).state;
    const sessions = Object.values(state.sessions);
    expect(sessions.length).toBeLessThanOrEqual(SESSIONS_PER_USER_MAX);
    const now = T0 + ENDED_SESSION_RETENTION_MS + 200;
    expect(sessions.every((s) => isSessionLive(s, now))).toBe(true);
  });
});

describe('directory step', () => {
  const empty = (): DirectoryState => loadDirectory('global', []);
  const claim = (state: DirectoryState, u: Partial<NewUser>) =>
    stepDirectory(state, { op: 'claim', user: { ...alice, ...u } }, contextAt(T0, 'user-directory', 'global'));
  const lookup = (state: DirectoryState, login: string) =>
    (stepDirectory(state, { op: 'lookup', login }, contextAt(T0, 'user-directory', 'global')).reply as { user_id: string | null }).user_id;

  it('claims e-mail and username, writes two records and sends the user create through the outbox', () => {
    const result = claim(empty(), {});
    expect(result.reply).toEqual({ user_id: 'usr_1' });
    expect(result.writes).toEqual([
      { subkey: 'e:alice@example.com', value: 'usr_1' },
      { subkey: 'u:alice_1', value: 'usr_1' },
    ]);
    expect(result.sends).toEqual([{ kind: 'user', key: 'usr_1', message: { op: 'create', user: alice } }]);
  });

  it('e-mail and username are unique case-insensitively; a refused claim changes nothing', () => {
    const state = claim(empty(), {}).state;
    expect(codeOf(() => claim(state, { id: 'usr_2', email: 'ALICE@example.COM', username: 'bob' }))).toBe('email_taken');
    expect(codeOf(() => claim(state, { id: 'usr_2', email: ' alice@example.com ', username: 'bob' }))).toBe('email_taken');
    expect(codeOf(() => claim(state, { id: 'usr_2', email: 'bob@example.com', username: 'ALICE_1' }))).toBe('username_taken');
    expect(state.byEmail.size).toBe(1);
    expect(state.byUsername.size).toBe(1);
    expect(lookup(state, 'bob@example.com')).toBeNull();
    expect(lookup(state, 'bob')).toBeNull();
    const bob = claim(state, { id: 'usr_2', email: 'bob@example.com', username: 'bob' });
    expect(bob.reply).toEqual({ user_id: 'usr_2' });
  });

  it('looks up by e-mail or username, any case, trimmed', () => {
    const state = claim(empty(), {}).state;
    for (const login of ['alice@example.com', 'ALICE@EXAMPLE.COM', 'alice_1', 'Alice_1', '  alice_1 ']) expect(lookup(state, login)).toBe('usr_1');
    expect(lookup(state, 'alice')).toBeNull();
    expect(lookup(state, '')).toBeNull();
  });

  it('load rebuilds the state from the written records', () => {
    const first = claim(empty(), {});
    const second = claim(first.state, { id: 'usr_2', email: 'bob@example.com', username: 'bob' });
    const records = [...first.writes!, ...second.writes!].map((w) => [w.subkey, w.value] as [string, unknown]);
    const loaded = loadDirectory('global', records);
    expect(lookup(loaded, 'bob')).toBe('usr_2');
    expect(lookup(loaded, 'alice@example.com')).toBe('usr_1');
    expect(codeOf(() => claim(loaded, { id: 'usr_3', email: 'x@example.com', username: 'BOB' }))).toBe('username_taken');
  });
});
