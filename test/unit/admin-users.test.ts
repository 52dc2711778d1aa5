import fc from 'fast-check';
import { type DirectoryMessage, sessionUserId, type NewUser, type PublicUser, type SessionView, type SummarySync, type UserMessage } from '../../actors/accounts/messages.js';
import { describe, expect, it } from 'vitest';
import type { TurnContext } from '../../runtime/index.js';
import type { FlowCall } from '../../actors/flow-call.js';
import {
  listUsers,
  loadDirectory,
  stepDirectory,
  type DirectoryState,
} from '../../actors/accounts/directory-state.js';
import {
  initialUserState,
  stepUser,
  type UserState,
} from '../../actors/accounts/user-state.js';
import { splitValues } from '../../http/routes/admin.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests of the admin ops of the user and the directory's user summaries. */
const T0 = Date.UTC(2026, 0, 1);
const userCtx = (now: number, key = 'usr_1'): TurnContext => fixedContext(now, 'user', key);
const dirCtx = (now = T0): TurnContext => fixedContext(now, 'user-directory', 'global');

const alice: NewUser = {
  id: 'usr_1',
  email: 'Alice@Example.com',
  username: 'Alice_1',
  display_name: 'Alice',
  role: 'user',
  password_hash: 'scrypt$10$8$1$salt$hash',
};

function created(newUser: NewUser = alice, now = T0) {
  return stepUser(initialUserState(), { op: 'create', user: newUser }, userCtx(now, newUser.id));
}

function send(state: UserState, message: UserMessage, now = T0) {
  return stepUser(state, message, userCtx(now, state.user?.id ?? 'usr_1'));
}

/** The same message, as an ask (a request id the step may defer). */
function ask(state: UserState, message: UserMessage, request_id: string, now = T0) {
  return stepUser(state, message, { ...userCtx(now, state.user?.id ?? 'usr_1'), request_id });
}

function syncOf(result: { sends?: { kind: string; key: string; message: unknown }[] }): SummarySync {
  expect(result.sends).toHaveLength(1);
  expect(result.sends![0]).toMatchObject({ kind: 'user-directory', key: 'global' });
  return result.sends![0].message as SummarySync;
}

function dir(state: DirectoryState, message: DirectoryMessage, now = T0) {
  return stepDirectory(state, message, dirCtx(now));
}

function claimed(users: NewUser[]): DirectoryState {
  let state = loadDirectory('global', []);
  for (const u of users) state = dir(state, { op: 'claim', user: u }).state;
  return state;
}

describe('user summaries', () => {
  it('create sends revision 1 of the summary; a repeated create sends nothing', () => {
    const first = created();
    const sync = syncOf(first);
    expect(sync).toEqual({ op: 'sync', user_id: 'usr_1', rev: 1, user: first.reply, release: {} });
    const again = send(first.state, { op: 'create', user: alice });
    expect(again.sends).toBeUndefined();
  });

  it('every change the list shows bumps the revision: 2FA on/off, patch, ban, unban', () => {
    let state = created().state;
    const patched = send(state, { op: 'admin-patch', patch: { display_name: 'Ada', role: 'admin', email_verified: true } }, T0 + 1);
    expect(syncOf(patched)).toMatchObject({ rev: 2, user: { display_name: 'Ada', role: 'admin', email_verified: true } });
    expect((patched.reply as { user: PublicUser }).user).toMatchObject({ display_name: 'Ada', role: 'admin', email_verified: true });
    expect((patched.reply as { sync: SummarySync }).sync).toEqual(syncOf(patched));
    state = patched.state;
    const banned = send(state, { op: 'ban', reason: 'spam', banned_by: 'usr_admin' }, T0 + 2);
    expect(syncOf(banned)).toMatchObject({ rev: 3, user: { banned: true } });
    const unbanned = send(banned.state, { op: 'unban' }, T0 + 3);
    expect(syncOf(unbanned)).toMatchObject({ rev: 4, user: { banned: false } });
  });

  it('a legacy user (no revision yet) publishes its summary on its next authenticate, once', () => {
    const base = created().state;
    const opened = send(base, { op: 'open-session', refresh_hash: 'h', ttl_seconds: 60, ip_address: '::1', user_agent: 'ua' });
    const session_id = (opened.reply as { session_id: string }).session_id;
    const legacy: UserState = { ...opened.state };
    delete legacy.summary_rev;
    const first = send(legacy, { op: 'authenticate', session_id });
    expect(syncOf(first)).toMatchObject({ rev: 1, user: { id: 'usr_1' } });
    expect(send(first.state, { op: 'authenticate', session_id }).sends).toBeUndefined();
  });
});

describe('admin user ops', () => {
  it('detail counts live sessions only and shows the ban while banned', () => {
    let state = created().state;
    for (const ttl of [60, 3600]) {
      state = send(state, { op: 'open-session', refresh_hash: `h${ttl}`, ttl_seconds: ttl, ip_address: '::1', user_agent: 'ua' }).state;
    }
    const later = T0 + 120_000;
    expect(send(state, { op: 'admin-detail' }, later).reply).toMatchObject({ active_session_count: 1, ban: null });
    state = send(state, { op: 'ban', reason: 'spam', banned_by: 'usr_9' }, later).state;
    expect(send(state, { op: 'admin-detail' }, later).reply).toMatchObject({
      active_session_count: 0,
      user: { banned: true },
      ban: { reason: 'spam', banned_at_ms: later, banned_by: 'usr_9' },
    });
    state = send(state, { op: 'unban' }, later).state;
    expect(send(state, { op: 'admin-detail' }, later).reply).toMatchObject({ user: { banned: false }, ban: null });
  });

  it('a ban ends every session and refuses new ones; unban allows new sessions, not the old ones; a second ban keeps the first', () => {
    let state = created().state;
    const opened = send(state, { op: 'open-session', refresh_hash: 'h1', ttl_seconds: 3600, ip_address: '::1', user_agent: 'ua' });
    const session_id = (opened.reply as { session_id: string }).session_id;
    state = send(opened.state, { op: 'ban', reason: 'spam', banned_by: 'usr_9' }, T0 + 1).state;
    expect(codeOf(() => send(state, { op: 'authenticate', session_id }))).toBe('unauthorized');
    expect(codeOf(() => send(state, { op: 'refresh', session_id, presented_hash: 'h1', new_hash: 'h2', ttl_seconds: 60 }))).toBe('invalid_refresh_token');
    expect(codeOf(() => send(state, { op: 'open-session', refresh_hash: 'x', ttl_seconds: 60, ip_address: '', user_agent: '' }))).toBe('forbidden');
    const again = send(state, { op: 'ban', reason: 'other', banned_by: 'usr_8' }, T0 + 2);
    expect(again.reply).toEqual({ changed: false, sync: null });
    expect(again.state).toBe(state);
    expect(Object.values(state.sessions).map((s) => s.ended_at_ms)).toEqual([T0 + 1]);
    state = send(state, { op: 'unban' }, T0 + 3).state;
    expect(codeOf(() => send(state, { op: 'authenticate', session_id }))).toBe('unauthorized');
    const reopened = send(state, { op: 'open-session', refresh_hash: 'h3', ttl_seconds: 60, ip_address: '', user_agent: '' }, T0 + 4);
    const fresh = (reopened.reply as { session_id: string }).session_id;
    expect(send(reopened.state, { op: 'authenticate', session_id: fresh }).reply).toMatchObject({ user_id: 'usr_1', session_id: fresh });
    expect(send(state, { op: 'unban' }).reply).toEqual({ changed: false, sync: null });
  });

  it('patch of e-mail or username releases the old name only when it really changed', () => {
    const state = created().state;
    const reserving = send(state, { op: 'admin-patch', patch: { email: 'new@example.com', username: 'alice_1' } });
    const { flow_id } = (reserving.sends![0].message as FlowCall).reply_to;
    const renamed = send(reserving.state, { op: 'flow-answer', flow_id, step: 'reserve', ok: true, reply: { reserved: true } });
    expect(syncOf(renamed).release).toEqual({ email: 'Alice@Example.com' });
    const empty = send(state, { op: 'admin-patch', patch: {} });
    expect(syncOf(empty)).toMatchObject({ rev: 2, release: {} });
  });

  it('delete ends everything, leaves a tombstone that a late create cannot revive, and releases the names', () => {
    let state = created().state;
    const opened = send(state, { op: 'open-session', refresh_hash: 'h1', ttl_seconds: 3600, ip_address: '::1', user_agent: 'ua' });
    const session_id = (opened.reply as { session_id: string }).session_id;
    const deleted = send(opened.state, { op: 'admin-delete' }, T0 + 5);
    expect(syncOf(deleted)).toEqual({ op: 'sync', user_id: 'usr_1', rev: 2, user: null, release: { email: alice.email, username: alice.username } });
    state = deleted.state;
    expect(codeOf(() => send(state, { op: 'authenticate', session_id }))).toBe('unauthorized');
    expect(codeOf(() => send(state, { op: 'refresh', session_id, presented_hash: 'h1', new_hash: 'h2', ttl_seconds: 60 }))).toBe('invalid_refresh_token');
    expect(codeOf(() => send(state, { op: 'create', user: alice }))).toBe('conflict');
    expect(codeOf(() => send(state, { op: 'admin-detail' }))).toBe('not_found');
    expect(codeOf(() => send(state, { op: 'admin-delete' }))).toBe('not_found');
    expect(codeOf(() => send(state, { op: 'list-sessions' }))).toBe('not_found');
    const late2fa = send(state, {
      op: '2fa-login', challenge_id: 'chl_1', presented: { code: '123456', code_hash: 'x' }, password_fingerprint: null,
      refresh_hash: 'h', ttl_seconds: 60, ip_address: '', user_agent: '',
    });
    expect(late2fa.reply).toEqual({ ok: false });
  });

  it('new session ids carry the user id; old-style ids resolve to null', () => {
    const opened = send(created().state, { op: 'open-session', refresh_hash: 'h1', ttl_seconds: 60, ip_address: '::1', user_agent: 'ua' });
    const session_id = (opened.reply as { session_id: string }).session_id;
    expect(session_id.startsWith('ses_usr_1~')).toBe(true);
    expect(session_id).not.toContain('.');
    expect(sessionUserId(session_id)).toBe('usr_1');
    expect(sessionUserId('ses_AbC-_x')).toBeNull();
    expect(sessionUserId('ses_~x')).toBeNull();
    expect(sessionUserId('usr_1~x')).toBeNull();
  });

  it('list-sessions shows live and ended sessions newest first; admin-end-session ends one, 404 for unknown', () => {
    let state = created().state;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const opened = send(state, { op: 'open-session', refresh_hash: `h${i}`, ttl_seconds: 3600, ip_address: `10.0.0.${i}`, user_agent: 'ua' }, T0 + i);
      state = opened.state;
      ids.push((opened.reply as { session_id: string }).session_id);
    }
    const ended = send(state, { op: 'admin-end-session', session_id: ids[1] }, T0 + 10);
    expect(ended.reply).toEqual({ ended: true, user_id: 'usr_1' });
    state = ended.state;
    expect(send(state, { op: 'admin-end-session', session_id: ids[1] }, T0 + 11).reply).toEqual({ ended: false, user_id: 'usr_1' });
    expect(codeOf(() => send(state, { op: 'admin-end-session', session_id: 'ses_usr_1~nope' }))).toBe('not_found');
    expect(codeOf(() => send(state, { op: 'authenticate', session_id: ids[1] }))).toBe('unauthorized');
    const list = send(state, { op: 'list-sessions' }, T0 + 20).reply as SessionView[];
    expect(list.map((s) => s.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(list.map((s) => s.active)).toEqual([true, false, true]);
    expect(list[0]).toEqual({
      id: ids[2], user_id: 'usr_1', active: true, created_at_ms: T0 + 2, expires_at_ms: T0 + 2 + 3600_000,
      ip_address: '10.0.0.2', user_agent: 'ua', impersonated_by: null,
    });
  });
});

describe('directory summaries', () => {
  const bob: NewUser = { ...alice, id: 'usr_2', email: 'bob@example.com', username: 'bob', display_name: 'Bob Builder' };
  const summary = (u: NewUser, extra: Partial<PublicUser> = {}): PublicUser => ({
    id: u.id, email: u.email, username: u.username, display_name: u.display_name, role: u.role,
    email_verified: false, two_factor_enabled: false, banned: false, created_at_ms: T0, ...extra,
  });
  const sync = (user_id: string, rev: number, user: PublicUser | null, release: SummarySync['release'] = {}): SummarySync =>
    ({ op: 'sync', user_id, rev, user, release });

  it('applies summaries in revision order: a late or repeated one changes nothing', () => {
    let state = claimed([alice]);
    const r2 = dir(state, sync('usr_1', 2, summary(alice, { banned: true })));
    expect(r2.reply).toEqual({ applied: true });
    expect(r2.writes).toEqual([{ subkey: 'p:usr_1', value: { rev: 2, user: summary(alice, { banned: true }) } }]);
    state = r2.state;
    for (const rev of [1, 2]) {
      const late = dir(state, sync('usr_1', rev, summary(alice)));
      expect(late.reply).toEqual({ applied: false });
      expect(late.writes).toBeUndefined();
    }
    expect(listUsers(state, { page: 1, page_size: 20 }).users).toEqual([summary(alice, { banned: true })]);
  });

  it('a delete tombstone drops the user from the list, frees its names, and a late summary cannot revive it', () => {
    let state = claimed([alice]);
    state = dir(state, sync('usr_1', 1, summary(alice))).state;
    const deleted = dir(state, sync('usr_1', 2, null, { email: alice.email, username: alice.username }));
    expect(deleted.writes).toEqual([
      { subkey: 'p:usr_1', value: { rev: 2, user: null } },
      { subkey: 'e:alice@example.com', value: undefined },
      { subkey: 'u:alice_1', value: undefined },
    ]);
    state = deleted.state;
    expect(listUsers(state, { page: 1, page_size: 20 }).total).toBe(0);
    expect(dir(state, sync('usr_1', 1, summary(alice))).reply).toEqual({ applied: false });
    expect(listUsers(state, { page: 1, page_size: 20 }).total).toBe(0);
    // The e-mail and username can be registered again, by a new user.
    const again = dir(state, { op: 'claim', user: { ...alice, id: 'usr_3' } });
    expect(again.reply).toEqual({ user_id: 'usr_3' });
    // A late release for the old user leaves the new owner's names alone.
    const stale = dir(again.state, sync('usr_1', 3, null, { email: alice.email, username: alice.username }));
    expect(stale.state.byEmail.get('alice@example.com')).toBe('usr_3');
    expect(stale.state.byUsername.get('alice_1')).toBe('usr_3');
  });

  it('reserve claims new names for the same user, refuses names of others (409), and a rename frees the old name', () => {
    let state = claimed([alice, bob]);
    state = dir(state, sync('usr_1', 1, summary(alice))).state;
    state = dir(state, sync('usr_2', 1, summary(bob))).state;
    expect(codeOf(() => dir(state, { op: 'reserve', user_id: 'usr_1', email: 'BOB@example.com' }))).toBe('email_taken');
    expect(codeOf(() => dir(state, { op: 'reserve', user_id: 'usr_1', username: 'Bob' }))).toBe('username_taken');
    // Its own current name is no conflict and writes nothing.
    expect(dir(state, { op: 'reserve', user_id: 'usr_1', email: 'alice@example.com' }).writes).toEqual([]);
    const reserved = dir(state, { op: 'reserve', user_id: 'usr_1', email: 'ada@example.com' });
    expect(reserved.writes).toEqual([{ subkey: 'e:ada@example.com', value: 'usr_1' }]);
    state = reserved.state;
    state = dir(state, sync('usr_1', 2, summary(alice, { email: 'ada@example.com' }), { email: alice.email })).state;
    expect(dir(state, { op: 'lookup', login: 'alice@example.com' }).reply).toEqual({ user_id: null });
    expect(dir(state, { op: 'lookup', login: 'ADA@example.com' }).reply).toEqual({ user_id: 'usr_1' });
    expect(dir(state, { op: 'lookup', login: 'alice_1' }).reply).toEqual({ user_id: 'usr_1' });
    // A user without a summary yet may reserve (the edge checked it exists); a deleted one may not.
    expect(dir(state, { op: 'reserve', user_id: 'usr_7', email: 'seven@example.com' }).reply).toEqual({ reserved: true });
    state = dir(state, sync('usr_2', 2, null, { email: bob.email, username: bob.username })).state;
    expect(codeOf(() => dir(state, { op: 'reserve', user_id: 'usr_2', email: 'x@example.com' }))).toBe('not_found');
  });

  it('survives a reload from its records', () => {
    let state = claimed([alice]);
    const records: [string, unknown][] = [['e:alice@example.com', 'usr_1'], ['u:alice_1', 'usr_1']];
    const r = dir(state, sync('usr_1', 4, summary(alice, { role: 'admin' })));
    for (const w of r.writes!) records.push([w.subkey, w.value]);
    state = loadDirectory('global', records);
    expect(listUsers(state, { page: 1, page_size: 20 }).users).toEqual([summary(alice, { role: 'admin' })]);
    expect(dir(state, sync('usr_1', 3, summary(alice))).reply).toEqual({ applied: false });
  });

  it('lists with q, role, banned and email_verified filters, oldest first, paginated', () => {
    let state = loadDirectory('global', []);
    const users: PublicUser[] = [];
    for (let i = 0; i < 25; i++) {
      const u = summary({ ...alice, id: `usr_${String(i).padStart(2, '0')}`, email: `user${i}@example.com`, username: `name${i}`, display_name: `Person ${i}` }, {
        created_at_ms: T0 + i,
        role: i % 5 === 0 ? 'admin' : 'user',
        banned: i % 2 === 0,
        email_verified: i % 3 === 0,
      });
      users.push(u);
      state = dir(state, sync(u.id, 1, u)).state;
    }
    const ids = (q: Parameters<typeof listUsers>[1]) => listUsers(state, q).users.map((u) => u.id);
    expect(listUsers(state, { page: 1, page_size: 20 }).total).toBe(25);
    expect(ids({ page: 2, page_size: 20 })).toEqual(users.slice(20).map((u) => u.id));
    expect(ids({ page: 3, page_size: 20 })).toEqual([]);
    expect(ids({ page: 1, page_size: 100, roles: ['admin'] })).toEqual(['usr_00', 'usr_05', 'usr_10', 'usr_15', 'usr_20']);
    expect(ids({ page: 1, page_size: 100, roles: ['admin', 'user'] })).toHaveLength(25);
    expect(ids({ page: 1, page_size: 100, banned: true, roles: ['admin'] })).toEqual(['usr_00', 'usr_10', 'usr_20']);
    expect(ids({ page: 1, page_size: 100, email_verified: true, banned: false })).toEqual(['usr_03', 'usr_09', 'usr_15', 'usr_21']);
    expect(ids({ page: 1, page_size: 100, q: 'USER1@' })).toEqual(['usr_01']);
    expect(ids({ page: 1, page_size: 100, q: 'name2' })).toEqual(['usr_02', 'usr_20', 'usr_21', 'usr_22', 'usr_23', 'usr_24']);
    expect(ids({ page: 1, page_size: 100, q: 'person 7' })).toEqual(['usr_07']);
    expect(ids({ page: 1, page_size: 100, q: '  ' })).toHaveLength(25);
  });
});

describe('directory summaries, property', () => {
  it('after any delivery order (with repeats) of any users\' summaries, the list is the newest summary of each live user, oldest first, in every reload', () => {
    const summaryArb = (id: string) =>
      fc.record({
        rev: fc.integer({ min: 1, max: 6 }),
        deleted: fc.boolean(),
        banned: fc.boolean(),
        created: fc.integer({ min: 0, max: 3 }),
      }).map(({ rev, deleted, banned, created }) => ({ id, rev, deleted, banned, created }));
    const ids = ['usr_a', 'usr_b', 'usr_c', 'usr_d'];
    fc.assert(
      fc.property(fc.array(fc.oneof(...ids.map(summaryArb)), { maxLength: 30 }), (messages) => {
        let state = loadDirectory('global', []);
        const records = new Map<string, unknown>();
        for (const m of messages) {
          // A user's creation time never changes: derive it from the id.
          const user: PublicUser | null = m.deleted ? null : {
            id: m.id, email: `${m.id}@x.io`, username: m.id, display_name: m.id, role: 'user',
            email_verified: false, two_factor_enabled: false, banned: m.banned, created_at_ms: T0 + (m.id.charCodeAt(4) % 2),
          };
          const r = dir(state, { op: 'sync', user_id: m.id, rev: m.rev, user, release: {} });
          state = r.state;
          for (const w of r.writes ?? []) records.set(w.subkey, w.value);
        }
        // Model: for each id the first message with its highest revision wins.
        const winner = new Map<string, (typeof messages)[number]>();
        for (const m of messages) if (!winner.has(m.id) || winner.get(m.id)!.rev < m.rev) winner.set(m.id, m);
        const expected = [...winner.values()].filter((m) => !m.deleted)
          .map((m) => ({ id: m.id, banned: m.banned, created: T0 + (m.id.charCodeAt(4) % 2) }))
          .sort((a, b) => a.created - b.created || (a.id < b.id ? -1 : 1));
        const view = (st: DirectoryState) => listUsers(st, { page: 1, page_size: 100 }).users.map((u) => ({ id: u.id, banned: u.banned, created: u.created_at_ms }));
        expect(view(state)).toEqual(expected);
        expect(view(loadDirectory('global', records))).toEqual(expected);
        const bannedOnly = listUsers(state, { page: 1, page_size: 100, banned: true });
        expect(bannedOnly.total).toBe(expected.filter((e) => e.banned).length);
      }),
      { numRuns: 300 },
    );
  });
});

describe('query values', () => {
  it('splits on , and |, trims and de-duplicates', () => {
    expect(splitValues('a,b|c')).toEqual(['a', 'b', 'c']);
    expect(splitValues(' a , ,a|| b ')).toEqual(['a', 'b']);
    expect(splitValues('')).toEqual([]);
    expect(splitValues(undefined)).toEqual([]);
  });
});

describe('admin changes as flows of the user actor', () => {
  it('a rename reserves the names in the directory first, then applies, and answers once the directory shows it', () => {
    const state = created().state;
    const started = ask(state, { op: 'admin-patch', patch: { email: 'new@example.com' } }, 'req_1');
    expect(started.defer).toBe(true);
    expect(started.state.user!.email).toBe(alice.email);
    const reserve = started.sends![0];
    expect(reserve).toMatchObject({
      kind: 'user-directory',
      key: 'global',
      message: { op: 'flow-call', call: { op: 'reserve', user_id: 'usr_1', email: 'new@example.com' }, reply_to: { kind: 'user', key: 'usr_1', step: 'reserve' } },
    });
    const { flow_id } = (reserve.message as FlowCall).reply_to;

    // The directory reserves and answers through the outbox (actors/flow-call.ts).
    let directory = loadDirectory('global', []);
    directory = dir(directory, syncOf(created()) as DirectoryMessage).state;
    const reserved = dir(directory, reserve.message as DirectoryMessage);
    expect(reserved.sends).toEqual([{ kind: 'user', key: 'usr_1', message: { op: 'flow-answer', flow_id, step: 'reserve', ok: true, reply: { reserved: true } } }]);
    // An answer to a rename that is not in flight changes nothing.
    expect(send(started.state, { op: 'flow-answer', flow_id: 'ren_other', step: 'reserve', ok: true, reply: { reserved: true } }).state).toBe(started.state);

    const applied = send(started.state, reserved.sends![0].message as UserMessage);
    expect(applied.state.user!.email).toBe('new@example.com');
    expect(applied.defer).toBe(true);
    const sync = syncOf(applied);
    expect(sync.ack).toBe(true);
    expect(applied.replies ?? []).toEqual([]);

    // The directory applies the summary and acknowledges it: the held reply goes out.
    const synced = dir(reserved.state, sync as DirectoryMessage);
    expect(synced.sends).toEqual([{ kind: 'user', key: 'usr_1', message: { op: 'sync-applied', rev: sync.rev } }]);
    const answered = send(applied.state, synced.sends![0].message as UserMessage);
    expect(answered.replies).toHaveLength(1);
    expect(answered.replies![0]).toMatchObject({ request_id: 'req_1', reply: { user: { email: 'new@example.com' } } });
    expect(answered.state.awaiting_sync).toBeUndefined();
    expect(listUsers(synced.state, { page: 1, page_size: 10 }).users[0].email).toBe('new@example.com');
  });

  it('a name taken by another user is refused to the asker, and nothing changes', () => {
    const state = created().state;
    const started = ask(state, { op: 'admin-patch', patch: { username: 'bob_1' } }, 'req_2');
    let directory = loadDirectory('global', []);
    directory = dir(directory, { op: 'claim', user: { ...alice, id: 'usr_2', email: 'bob@example.com', username: 'bob_1' } }).state;
    const refused = dir(directory, started.sends![0].message as DirectoryMessage);
    expect(refused.writes ?? []).toEqual([]);
    const answered = send(started.state, refused.sends![0].message as UserMessage);
    expect(answered.replies).toEqual([{ request_id: 'req_2', error: { code: 'username_taken', message: expect.any(String) } }]);
    expect(answered.state.user!.username).toBe(alice.username);
    expect(answered.state.renames).toBeUndefined();
  });

  it('a user deleted while its new names were reserved gives them back (compensation) and answers 404', () => {
    const state = created().state;
    const started = ask(state, { op: 'admin-patch', patch: { email: 'gone@example.com' } }, 'req_3');
    const deleted = send(started.state, { op: 'admin-delete' });
    const { flow_id } = (started.sends![0].message as FlowCall).reply_to;
    const answered = send(deleted.state, { op: 'flow-answer', flow_id, step: 'reserve', ok: true, reply: { reserved: true } });
    expect(answered.replies).toEqual([{ request_id: 'req_3', error: { code: 'not_found', message: 'No such user.' } }]);
    expect(answered.sends).toEqual([{ kind: 'user-directory', key: 'global', message: { op: 'release', user_id: 'usr_1', email: 'gone@example.com', username: undefined } }]);
    let directory = loadDirectory('global', []);
    directory = dir(directory, { op: 'reserve', user_id: 'usr_1', email: 'gone@example.com' }).state;
    directory = dir(directory, syncOf(deleted) as DirectoryMessage).state;
    const released = dir(directory, answered.sends![0].message as DirectoryMessage);
    expect(released.writes).toEqual([{ subkey: 'e:gone@example.com', value: undefined }]);
  });

  it('ban, unban, delete and e-mail confirmation asked: held until the directory applied the summary', () => {
    const state = created().state;
    const banned = ask(state, { op: 'ban', reason: 'spam', banned_by: 'usr_admin' }, 'req_4');
    expect(banned.defer).toBe(true);
    expect(banned.state.user!.banned).toBe(true);
    const rev = syncOf(banned).rev;
    // An older acknowledgement releases nothing; this one does.
    expect(send(banned.state, { op: 'sync-applied', rev: rev - 1 }).replies).toBeUndefined();
    expect(send(banned.state, { op: 'sync-applied', rev }).replies).toEqual([{ request_id: 'req_4', reply: { changed: true, sync: expect.objectContaining({ rev }) } }]);
    // A told ban (no asker) answers at once, as before.
    expect(send(state, { op: 'ban', reason: 'spam', banned_by: 'usr_admin' }).defer).toBeUndefined();
  });

  it('admin-impersonate refuses an admin or a banned user, and opens a session or a challenge', () => {
    const admin = created({ ...alice, id: 'usr_9', role: 'admin' }).state;
    const start = { op: 'admin-impersonate' as const, admin_id: 'usr_admin', challenge_ttl_seconds: 300, refresh_hash: 'h', ttl_seconds: 86_400, ip_address: '', user_agent: '' };
    expect(codeOf(() => send(admin, start))).toBe('forbidden');
    const state = created().state;
    const opened = send(state, start);
    expect(opened.reply).toMatchObject({ requires_2fa: false, user: { id: 'usr_1' } });
    const banned = send(state, { op: 'ban', reason: 'x', banned_by: 'usr_admin' }).state;
    expect(codeOf(() => send(banned, start))).toBe('forbidden');
  });
});
