import { ServiceError, type AlarmChange, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { verifyPkce, type PkceMethod } from './pkce.js';
import { scopeSubset } from './scope.js';
import { sameHash } from '../same-hash.js';
import { loadGrant, stepTokenAnswer, stepTokenRequest, type PendingGrant } from './flows.js';
import {
  OAUTH_CLIENT_KIND,
  type ClientRegistration,
  type ClientView,
  type DeleteReply,
  type OAuthClientMessage,
  type RedeemReply,
  type RotateReply,
} from './messages.js';

/**
 * One OAuth 2.0 client (spec doc 1 §2 OAuthClient, §4.3; RFC 6749, 7591, 7636).
 * The actor key is the client_id (`records` storage, see OAuthClientState). The state holds the registration, the hash
 * of the client secret (confidential clients), the authorization codes issued
 * to the client while they can still matter, and the sessions opened through
 * it (so a refresh token is only accepted from the client it was issued to).
 *
 * Codes are stored by sha256 of the code; each is single-use, bound to the
 * user, redirect_uri, PKCE challenge and scope, and lives CODE_TTL_MS. A
 * redeemed code is kept (marked used) until it expires so a replay is told
 * apart from garbage: a replay is `invalid_grant` and also answers the session
 * opened with the code, so the edge can end it (RFC 6749 §4.1.2).
 */
export { OAUTH_CLIENT_KIND };
export const CODE_TTL_MS = 60_000;
/** Sessions remembered per client (oldest forgotten first; their refresh tokens then stop working with this client). */
export const CLIENT_SESSIONS_MAX = 10_000;
export const CODES_MAX = 1_000;
const CODES_ALARM = 'codes';

export interface ClientRecord extends ClientRegistration {
  client_id: string;
  created_at_ms: number;
  /** Set when a platform admin deleted the client: the record stays as a tombstone. */
  deleted_at_ms?: number | null;
  deleted_by?: string | null;
}

export interface CodeRecord {
  user_id: string;
  redirect_uri: string;
  /** False when the authorization request left redirect_uri out (absent in codes issued before: given). */
  redirect_uri_given?: boolean;
  code_challenge: string;
  code_challenge_method: PkceMethod;
  scope: string[];
  expires_at_ms: number;
  used: boolean;
  session_id: string | null;
}

/**
 * A user session opened through this client. The client holds its own refresh
 * token (`ort.<client_id>.<session_id>.<secret>`, only sha256(secret) kept
 * here); the session's own refresh token never leaves the server: its hash is
 * kept here so the edge can rotate the session for the client, and so a
 * client can never turn its grant into an unscoped session token.
 */
export interface SessionBinding {
  user_id: string;
  scope: string[];
  bound_at_ms: number;
  refresh_hash: string;
  previous_refresh_hash: string | null;
  session_refresh_hash: string;
}

/**
 * `records` storage: subkey `client` holds the registration, `c:<code hash>`
 * one code, `s:<session_id>` one session binding, so a turn writes only what
 * it changed however many sessions a client has. `sessions` iterates oldest
 * first (load sorts by bound_at_ms; new bindings are appended).
 */
export interface OAuthClientState {
  client: ClientRecord | null;
  codes: Map<string, CodeRecord>;
  sessions: Map<string, SessionBinding>;
  /** Token requests waiting for the user actor (subkey `f:<flow_id>`; actors/oauth/flows.ts). */
  grants: Map<string, PendingGrant>;
}

export function initialOAuthClientState(): OAuthClientState {
  return { client: null, codes: new Map(), sessions: new Map(), grants: new Map() };
}

export function loadOAuthClient(_key: string, records: Iterable<[string, unknown]>): OAuthClientState {
  const state = initialOAuthClientState();
  const sessions: [string, SessionBinding][] = [];
  for (const [subkey, value] of records) {
    if (subkey === 'client') state.client = value as ClientRecord;
    else if (subkey.startsWith('c:')) state.codes.set(subkey.slice(2), value as CodeRecord);
    else if (subkey.startsWith('s:')) sessions.push([subkey.slice(2), value as SessionBinding]);
    else if (subkey.startsWith('f:')) loadGrant(state, value);
  }
  sessions.sort((a, b) => a[1].bound_at_ms - b[1].bound_at_ms);
  for (const [id, binding] of sessions) state.sessions.set(id, binding);
  return state;
}

export function clientView(client: ClientRecord): ClientView {
  const { secret_hash: _hash, created_at_ms, owner_user_id: _owner, deleted_at_ms: _deleted, deleted_by: _by, ...rest } = client;
  return { ...rest, client_id_issued_at: Math.floor(created_at_ms / 1000) };
}

/** The client, unless it was never registered or was deleted. */
export function liveClient(state: OAuthClientState): ClientRecord | null {
  return state.client && !state.client.deleted_at_ms ? state.client : null;
}

function registered(state: OAuthClientState): ClientRecord {
  const client = liveClient(state);
  if (!client) throw new ServiceError('not_found', 'No such OAuth client.');
  return client;
}

/** Drops expired codes (mutating `state`); returns their deletions and the alarm for the next expiry. */
function sweepCodes(state: OAuthClientState, now: number): { writes: RecordWrite[]; alarm: AlarmChange } {
  const writes: RecordWrite[] = [];
  let due: number | null = null;
  for (const [hash, code] of state.codes) {
    if (code.expires_at_ms <= now) {
      state.codes.delete(hash);
      writes.push({ subkey: `c:${hash}`, value: undefined });
    } else if (due === null || code.expires_at_ms < due) {
      due = code.expires_at_ms;
    }
  }
  return { writes, alarm: { name: CODES_ALARM, due_ms: due } };
}

function putCode(state: OAuthClientState, hash: string, code: CodeRecord): RecordWrite {
  state.codes.set(hash, code);
  return { subkey: `c:${hash}`, value: code };
}

export function stepOAuthClient(
  state: OAuthClientState,
  message: OAuthClientMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<OAuthClientState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'register': {
      if (state.client) throw new ServiceError('conflict', 'OAuth client id already in use.');
      const client: ClientRecord = { ...message.client, client_id: context.key, created_at_ms: now, owner_user_id: message.client.owner_user_id ?? null };
      state.client = client;
      return { state, reply: clientView(client), writes: [{ subkey: 'client', value: client }] };
    }

    case 'get':
      return { state, reply: clientView(registered(state)) };

    case 'delete': {
      // A tombstone: `get` (asked on every request with a client token),
      // `authenticate` and every grant now answer as for an unknown client, so
      // its client_credentials tokens stop working at once. Codes and session
      // bindings go; the reply names the sessions so the edge can end them.
      const client = registered(state);
      const writes: RecordWrite[] = [];
      const sessions: DeleteReply['sessions'] = [];
      for (const [session_id, binding] of state.sessions) {
        sessions.push({ user_id: binding.user_id, session_id });
        writes.push({ subkey: `s:${session_id}`, value: undefined });
      }
      for (const hash of state.codes.keys()) writes.push({ subkey: `c:${hash}`, value: undefined });
      state.sessions.clear();
      state.codes.clear();
      const tombstone: ClientRecord = { ...client, secret_hash: null, deleted_at_ms: now, deleted_by: message.deleted_by };
      state.client = tombstone;
      writes.push({ subkey: 'client', value: tombstone });
      return { state, writes, alarms: [{ name: CODES_ALARM, due_ms: null }], reply: { sessions } satisfies DeleteReply };
    }

    case 'authenticate': {
      // One answer for every failure: unknown or deleted client, wrong secret, wrong method.
      const client = liveClient(state);
      const ok =
        client !== null &&
        (client.secret_hash === null
          ? message.secret_hash === null
          : message.secret_hash !== null && sameHash(client.secret_hash, message.secret_hash));
      return { state, reply: ok ? { ok: true, client: clientView(client!) } : { ok: false } };
    }

    case 'issue-code': {
      const client = registered(state);
      if (!client.redirect_uris.includes(message.redirect_uri)) {
        throw new ServiceError('BAD_REQUEST', 'redirect_uri is not registered for this client.');
      }
      let live = 0;
      for (const code of state.codes.values()) if (code.expires_at_ms > now) live++;
      if (live >= CODES_MAX) {
        throw new ServiceError('rate_limited', 'Too many outstanding authorization codes for this client; try again in a minute.');
      }
      const expires_at_ms = now + CODE_TTL_MS;
      const write = putCode(state, message.code_hash, {
        user_id: message.user_id,
        redirect_uri: message.redirect_uri,
        redirect_uri_given: message.redirect_uri_given !== false,
        code_challenge: message.code_challenge,
        code_challenge_method: message.code_challenge_method,
        scope: [...message.scope],
        expires_at_ms,
        used: false,
        session_id: null,
      });
      const swept = sweepCodes(state, now);
      return { state, reply: { expires_at_ms }, writes: [...swept.writes, write], alarms: [swept.alarm] };
    }

    case 'redeem-code': {
      registered(state);
      const code = state.codes.get(message.code_hash);
      if (!code || code.expires_at_ms <= now) {
        return { state, reply: { ok: false, reason: 'invalid_grant', description: 'The authorization code is invalid or expired.' } satisfies RedeemReply };
      }
      if (code.used) {
        const reply: RedeemReply = {
          ok: false,
          reason: 'invalid_grant',
          description: 'The authorization code was already used.',
          ...(code.session_id ? { revoke: { user_id: code.user_id, session_id: code.session_id } } : {}),
        };
        return { state, reply };
      }
      // A request missing what the code needs is malformed, not a wrong guess: the code stays for the retry.
      if (message.redirect_uri === null && code.redirect_uri_given !== false) {
        throw new ServiceError('oauth_invalid_request', 'redirect_uri is required: the authorization request named it.');
      }
      // Any redemption attempt uses the code up, so a wrong verifier cannot be retried.
      const writes = [putCode(state, message.code_hash, { ...code, used: true })];
      // RFC 6749 §4.1.3: required, and identical, if the authorization request included it; if not, optional.
      if (message.redirect_uri === null ? code.redirect_uri_given !== false : code.redirect_uri !== message.redirect_uri) {
        return { state, writes, reply: { ok: false, reason: 'invalid_grant', description: 'redirect_uri does not match the authorization request.' } satisfies RedeemReply };
      }
      if (!verifyPkce(message.code_verifier, code.code_challenge, code.code_challenge_method)) {
        return { state, writes, reply: { ok: false, reason: 'invalid_grant', description: 'code_verifier does not match the code_challenge.' } satisfies RedeemReply };
      }
      return { state, writes, reply: { ok: true, user_id: code.user_id, scope: code.scope } satisfies RedeemReply };
    }

    case 'bind-session': {
      registered(state);
      const writes: RecordWrite[] = [];
      const binding: SessionBinding = {
        user_id: message.user_id,
        scope: [...message.scope],
        bound_at_ms: now,
        refresh_hash: message.refresh_hash,
        previous_refresh_hash: null,
        session_refresh_hash: message.session_refresh_hash,
      };
      state.sessions.delete(message.session_id);
      state.sessions.set(message.session_id, binding);
      writes.push({ subkey: `s:${message.session_id}`, value: binding });
      for (const oldest of state.sessions.keys()) {
        if (state.sessions.size <= CLIENT_SESSIONS_MAX) break;
        state.sessions.delete(oldest);
        writes.push({ subkey: `s:${oldest}`, value: undefined });
      }
      const code = state.codes.get(message.code_hash);
      if (code) writes.push(putCode(state, message.code_hash, { ...code, session_id: message.session_id }));
      return { state, writes, reply: { ok: true } };
    }

    case 'rotate-refresh': {
      const binding = liveClient(state) ? state.sessions.get(message.session_id) : undefined;
      if (!binding) return { state, reply: { ok: false, reused: false } satisfies RotateReply };
      if (binding.refresh_hash !== null && sameHash(binding.refresh_hash, message.presented_hash)) {
        // Checked before anything changes: a refused scope leaves the presented
        // token current, so the client can retry without looking like a thief.
        if (message.scope !== undefined && !scopeSubset(message.scope, binding.scope)) {
          return { state, reply: { ok: false, reused: false, invalid_scope: true } satisfies RotateReply };
        }
        const next: SessionBinding = {
          ...binding,
          refresh_hash: message.new_hash,
          previous_refresh_hash: binding.refresh_hash,
          session_refresh_hash: message.new_session_refresh_hash,
        };
        state.sessions.set(message.session_id, next);
        return {
          state,
          writes: [{ subkey: `s:${message.session_id}`, value: next }],
          reply: { ok: true, user_id: binding.user_id, scope: binding.scope, session_refresh_hash: binding.session_refresh_hash } satisfies RotateReply,
        };
      }
      if (binding.previous_refresh_hash !== null && sameHash(binding.previous_refresh_hash, message.presented_hash)) {
        // A rotated-out refresh token came back: it was copied. Forget the
        // binding; the edge ends the session (refresh token reuse detection).
        state.sessions.delete(message.session_id);
        return {
          state,
          writes: [{ subkey: `s:${message.session_id}`, value: undefined }],
          reply: { ok: false, reused: true, user_id: binding.user_id } satisfies RotateReply,
        };
      }
      return { state, reply: { ok: false, reused: false } satisfies RotateReply };
    }

    case 'token':
      return stepTokenRequest(state, message, context);

    case 'flow-answer':
      return stepTokenAnswer(state, message, context);

    case '$alarm': {
      if (message.name !== CODES_ALARM) return { state };
      const swept = sweepCodes(state, now);
      return { state, writes: swept.writes, alarms: [swept.alarm] };
    }

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown oauth-client operation ${(message as { op?: unknown }).op as string}.`);
  }
}
