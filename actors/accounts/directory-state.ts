import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { USER_KIND, USER_QUERY_MAX, type DirectoryMessage, type PublicUser, type UserListQuery } from './messages.js';
import { answerFlowCall } from '../flow-call.js';

/**
 * The user directory: e-mail and username -> user id, so that both stay
 * unique and a login name finds its user. One actor (kind `user-directory`,
 * key `global`) with one keyed record per name, so a registration writes two
 * records however many users exist. The user record itself is created by an
 * outbox message committed with the claim: a crash between the two cannot
 * leave a claimed name without its user.
 */
export interface DirectoryState {
  byEmail: Map<string, string>;
  byUsername: Map<string, string>;
  /**
   * One summary per user for the admin list (record `p:<user id>`), with the
   * revision it came with; user null is a deleted user's tombstone, kept so a
   * late summary cannot bring it back.
   */
  summaries: Map<string, SummaryRecord>;
  /** Listed users (not deleted), oldest first (created_at, then id): rebuilt on load, kept sorted on change. */
  listed: ListedUser[];
}

/** A listed user with its lower-cased search text (e-mail, username, display name). */
export interface ListedUser {
  user: PublicUser;
  text: string;
}

function listed(user: PublicUser): ListedUser {
  return { user, text: `${user.email}\u0000${user.username}\u0000${user.display_name}`.toLowerCase() };
}

export interface SummaryRecord {
  rev: number;
  user: PublicUser | null;
}


export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function normalizeUsername(username: string): string {
  return username.trim().toLowerCase();
}

export function loadDirectory(_key: string, records: Iterable<[string, unknown]>): DirectoryState {
  const state: DirectoryState = { byEmail: new Map(), byUsername: new Map(), summaries: new Map(), listed: [] };
  for (const [subkey, value] of records) {
    if (subkey.startsWith('e:')) state.byEmail.set(subkey.slice(2), value as string);
    else if (subkey.startsWith('u:')) state.byUsername.set(subkey.slice(2), value as string);
    else if (subkey.startsWith('p:')) state.summaries.set(subkey.slice(2), value as SummaryRecord);
  }
  for (const { user } of state.summaries.values()) if (user) state.listed.push(listed(user));
  state.listed.sort((a, b) => listOrder(a.user, b.user));
  return state;
}

export function stepDirectory(
  state: DirectoryState,
  message: DirectoryMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<DirectoryState, unknown> {
  switch (message.op) {
    case 'claim': {
      const email = normalizeEmail(message.user.email);
      const username = normalizeUsername(message.user.username);
      if (state.byEmail.has(email)) throw new ServiceError('email_taken', 'A user with this e-mail already exists.');
      if (state.byUsername.has(username)) throw new ServiceError('username_taken', 'A user with this username already exists.');
      state.byEmail.set(email, message.user.id);
      state.byUsername.set(username, message.user.id);
      const writes: RecordWrite[] = [
        { subkey: `e:${email}`, value: message.user.id },
        { subkey: `u:${username}`, value: message.user.id },
      ];
      return {
        state,
        writes,
        reply: { user_id: message.user.id },
        sends: [{ kind: USER_KIND, key: message.user.id, message: { op: 'create', user: message.user } }],
      };
    }
    case 'lookup': {
      const login = message.login.trim().toLowerCase();
      const user_id = state.byEmail.get(login) ?? state.byUsername.get(login) ?? null;
      return { state, reply: { user_id } };
    }
    case 'sync': {
      const current = state.summaries.get(message.user_id);
      // The user actor holds an admin's reply until this answer (read-your-writes); a newer summary applied already counts.
      const sends = message.ack ? [{ kind: USER_KIND, key: message.user_id, message: { op: 'sync-applied', rev: message.rev } }] : undefined;
      if (current && current.rev >= message.rev) return { state, reply: { applied: false }, sends };
      const summary: SummaryRecord = { rev: message.rev, user: message.user };
      const at = current?.user ? listedIndex(state.listed, current.user) : -1;
      if (at >= 0 && message.user && listOrder(current!.user!, message.user) === 0) {
        state.listed[at] = listed(message.user); // same place: replace in O(1)
      } else {
        if (at >= 0) state.listed.splice(at, 1);
        if (message.user) state.listed.splice(listedIndex(state.listed, message.user), 0, listed(message.user));
      }
      state.summaries.set(message.user_id, summary);
      const writes: RecordWrite[] = [{ subkey: `p:${message.user_id}`, value: summary }];
      const email = message.release.email === undefined ? undefined : normalizeEmail(message.release.email);
      const username = message.release.username === undefined ? undefined : normalizeUsername(message.release.username);
      // A name is freed only while it still points at this user (it may have been claimed again since).
      if (email !== undefined && state.byEmail.get(email) === message.user_id && normalizeEmail(message.user?.email ?? '') !== email) {
        state.byEmail.delete(email);
        writes.push({ subkey: `e:${email}`, value: undefined });
      }
      if (username !== undefined && state.byUsername.get(username) === message.user_id && normalizeUsername(message.user?.username ?? '') !== username) {
        state.byUsername.delete(username);
        writes.push({ subkey: `u:${username}`, value: undefined });
      }
      return { state, writes, reply: { applied: true }, sends };
    }

    case 'reserve':
      return reserve(state, message);

    case 'release': {
      const summary = state.summaries.get(message.user_id);
      const writes: RecordWrite[] = [];
      const email = message.email === undefined ? undefined : normalizeEmail(message.email);
      const username = message.username === undefined ? undefined : normalizeUsername(message.username);
      if (email !== undefined && state.byEmail.get(email) === message.user_id && normalizeEmail(summary?.user?.email ?? '') !== email) {
        state.byEmail.delete(email);
        writes.push({ subkey: `e:${email}`, value: undefined });
      }
      if (username !== undefined && state.byUsername.get(username) === message.user_id && normalizeUsername(summary?.user?.username ?? '') !== username) {
        state.byUsername.delete(username);
        writes.push({ subkey: `u:${username}`, value: undefined });
      }
      return { state, writes, reply: { released: writes.length } };
    }

    case 'list':
      return { state, reply: listUsers(state, message) };

    // A flow's step (login, registration, a user's rename, SCIM, OAuth): the same messages, answered to the flow that sent them.
    case 'flow-call':
      return answerFlowCall<DirectoryState, DirectoryMessage>(stepDirectory, state, message, context);

    case '$alarm':
      return { state };
  }
}

/** Claims a user's new names. A deleted user's tombstone refuses; a user without a summary yet may reserve. */
function reserve(state: DirectoryState, message: { user_id: string; email?: string; username?: string }): TurnResult<DirectoryState, unknown> {
  const summary = state.summaries.get(message.user_id);
  if (summary && !summary.user) throw new ServiceError('not_found', 'No such user.');
  const email = message.email === undefined ? undefined : normalizeEmail(message.email);
  const username = message.username === undefined ? undefined : normalizeUsername(message.username);
  const emailOwner = email === undefined ? undefined : state.byEmail.get(email);
  const usernameOwner = username === undefined ? undefined : state.byUsername.get(username);
  if (emailOwner !== undefined && emailOwner !== message.user_id) throw new ServiceError('email_taken', 'A user with this e-mail already exists.');
  if (usernameOwner !== undefined && usernameOwner !== message.user_id) throw new ServiceError('username_taken', 'A user with this username already exists.');
  const writes: RecordWrite[] = [];
  if (email !== undefined && emailOwner === undefined) {
    state.byEmail.set(email, message.user_id);
    writes.push({ subkey: `e:${email}`, value: message.user_id });
  }
  if (username !== undefined && usernameOwner === undefined) {
    state.byUsername.set(username, message.user_id);
    writes.push({ subkey: `u:${username}`, value: message.user_id });
  }
  return { state, writes, reply: { reserved: true } };
}

function listOrder(a: PublicUser, b: PublicUser): number {
  return a.created_at_ms - b.created_at_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Where `user` is (or would go) in the sorted list: binary search. */
function listedIndex(list: ListedUser[], user: PublicUser): number {
  let low = 0;
  let high = list.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (listOrder(list[mid].user, user) < 0) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** One pass over the users in order: counts the matches, keeps only the page's. */
export function listUsers(state: DirectoryState, query: UserListQuery): { total: number; users: PublicUser[] } {
  const q = query.q?.trim().toLowerCase().slice(0, USER_QUERY_MAX) || null;
  const roles = query.roles && query.roles.length > 0 ? query.roles : null;
  const start = (query.page - 1) * query.page_size;
  const end = start + query.page_size;
  const users: PublicUser[] = [];
  let total = 0;
  for (const { user, text } of state.listed) {
    if (roles && !roles.includes(user.role)) continue;
    if (query.banned !== undefined && user.banned !== query.banned) continue;
    if (query.email_verified !== undefined && user.email_verified !== query.email_verified) continue;
    if (q && !text.includes(q)) continue;
    if (total >= start && total < end) users.push(user);
    total++;
  }
  return { total, users };
}
