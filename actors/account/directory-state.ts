import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import type { NewUser } from './user-state.js';

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
}

export type DirectoryMessage =
  | { op: 'claim'; user: NewUser }
  | { op: 'lookup'; login: string };

export const DIRECTORY_KEY = 'global';

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function normalizeUsername(username: string): string {
  return username.trim().toLowerCase();
}

export function loadDirectory(_key: string, records: Iterable<[string, unknown]>): DirectoryState {
  const state: DirectoryState = { byEmail: new Map(), byUsername: new Map() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith('e:')) state.byEmail.set(subkey.slice(2), value as string);
    else if (subkey.startsWith('u:')) state.byUsername.set(subkey.slice(2), value as string);
  }
  return state;
}

export function stepDirectory(
  state: DirectoryState,
  message: DirectoryMessage | AlarmMessage,
  _context: TurnContext,
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
        sends: [{ kind: 'user', key: message.user.id, message: { op: 'create', user: message.user } }],
      };
    }
    case 'lookup': {
      const login = message.login.trim().toLowerCase();
      const user_id = state.byEmail.get(login) ?? state.byUsername.get(login) ?? null;
      return { state, reply: { user_id } };
    }
    case '$alarm':
      return { state };
  }
}
