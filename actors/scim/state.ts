import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { matchesFilter, type FilterSubject } from './filter.js';
import { sameHash } from '../same-hash.js';
import { loadFlow, stepFlowAnswer, stepTokenManage, stepUserChange, stepUserDeprovision, stepUserProvision, type ScimFlow } from './flows.js';
import {
  SCIM_DIRECTORY_KIND,
  SCIM_PENDING_LEASE_MS,
  SCIM_TOKENS_PER_ORG_MAX,
  SCIM_USERS_PER_ORG_MAX,
  type ScimDirectoryMessage,
  type ScimMintedBy,
  type ScimTokenView,
  type ScimVerifiedToken,
  type TokenBucket,
  type ScimUpdateReply,
  type ScimUserPage,
  type ScimUserRecord,
} from './messages.js';

/**
 * The SCIM directory of one organization (kind `scim-directory`, key = org_id;
 * organizations are global, so the key carries no other tenant). `records`
 * storage: one record per provisioned user (`u:<scim id>`) and one per
 * provisioning token (`t:<token id>`), so a change writes one record however
 * large the directory is.
 *
 * Users are created by a flow (actors/scim/flows.ts), because the platform
 * user and the org membership live in other actors: `user-reserve` claims the
 * userName (a pending record with a lease), the flow creates the platform
 * user and the membership, then `user-activate` makes the record visible. A
 * create that stopped half-way leaves a pending record; once its lease runs
 * out, a create with the same userName resumes it (same scim id and platform
 * user id).
 *
 * Tokens: only sha256 of the secret is stored; verification compares in
 * constant time. Each token records the credential that minted it
 * (`minted_by`); token-verify hands it to the edge, which lets the request
 * through only while that credential is live (docs/api/scim.md).
 *
 * The creation bucket (record `b:create`, actors/scim/rate.ts) is taken in
 * the turn that starts a provisioning (flows.ts).
 */
export interface ScimTokenRecord {
  id: string;
  name: string;
  secret_hash: string;
  created_by: string;
  created_at_ms: number;
  /** null only on tokens stored before tokens expired. */
  expires_at_ms: number | null;
  /** Absent on tokens stored before it was recorded: they are refused at use. */
  minted_by?: ScimMintedBy;
}

export interface ScimDirectoryState {
  users: Map<string, ScimUserRecord>;
  /** Lower-cased userName -> scim id (pending records included). */
  byUserName: Map<string, string>;
  tokens: Map<string, ScimTokenRecord>;
  /** The next user's seq. */
  next_seq: number;
  /** Flows in progress (record `f:<flow_id>`; actors/scim/flows.ts). */
  flows: Map<string, ScimFlow>;
  /** The creation rate's bucket (record `b:create`); null: full. */
  create_bucket: TokenBucket | null;
}

export function loadScimDirectory(_key: string, records: Iterable<[string, unknown]>): ScimDirectoryState {
  const state: ScimDirectoryState = { users: new Map(), byUserName: new Map(), tokens: new Map(), next_seq: 1, flows: new Map(), create_bucket: null };
  for (const [subkey, value] of records) {
    if (subkey.startsWith('u:')) {
      const user = value as ScimUserRecord;
      state.users.set(user.id, user);
      state.byUserName.set(user.userName.toLowerCase(), user.id);
      state.next_seq = Math.max(state.next_seq, user.seq + 1);
    } else if (subkey.startsWith('t:')) {
      const token = value as ScimTokenRecord;
      state.tokens.set(token.id, token);
    } else if (subkey.startsWith('f:')) {
      loadFlow(state, value);
    } else if (subkey === 'b:create') {
      state.create_bucket = value as TokenBucket;
    }
  }
  return state;
}

export function tokenView(token: ScimTokenRecord): ScimTokenView {
  return {
    id: token.id,
    name: token.name,
    created_by: token.created_by,
    created_at_ms: token.created_at_ms,
    expires_at_ms: token.expires_at_ms,
    minted_with: token.minted_by?.kind ?? null,
  };
}

function scimError(code: 'scim_mutability' | 'scim_uniqueness' | 'conflict' | 'not_found', message: string): ServiceError {
  return new ServiceError(code, message);
}

export function visibleUser(state: ScimDirectoryState, scim_id: string): ScimUserRecord {
  const user = state.users.get(scim_id);
  if (!user || user.pending_until_ms !== null) throw scimError('not_found', `Resource ${scim_id} not found.`);
  return user;
}

export function filterSubject(user: ScimUserRecord): FilterSubject {
  return {
    id: user.id,
    userName: user.userName,
    externalId: user.externalId,
    displayName: user.displayName,
    emails: user.emails.map((e) => e.value),
    active: user.active,
  };
}

function userWrite(user: ScimUserRecord): RecordWrite {
  return { subkey: `u:${user.id}`, value: user };
}

export function stepScimDirectory(
  state: ScimDirectoryState,
  message: ScimDirectoryMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<ScimDirectoryState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'token-create': {
      if (state.tokens.has(message.token_id)) return { state, reply: tokenView(state.tokens.get(message.token_id)!) };
      if (state.tokens.size >= SCIM_TOKENS_PER_ORG_MAX) {
        throw new ServiceError('conflict', `An organization may hold at most ${SCIM_TOKENS_PER_ORG_MAX} SCIM tokens; revoke one first.`);
      }
      const token: ScimTokenRecord = {
        id: message.token_id,
        name: message.name,
        secret_hash: message.secret_hash,
        created_by: message.created_by,
        created_at_ms: now,
        expires_at_ms: message.expires_at_ms,
        minted_by: message.minted_by,
      };
      state.tokens.set(token.id, token);
      return { state, reply: tokenView(token), writes: [{ subkey: `t:${token.id}`, value: token }] };
    }

    case 'token-list': {
      const tokens = [...state.tokens.values()].sort((a, b) => a.created_at_ms - b.created_at_ms || (a.id < b.id ? -1 : 1));
      return { state, reply: tokens.map(tokenView) };
    }

    case 'token-revoke': {
      if (!state.tokens.delete(message.token_id)) throw new ServiceError('not_found', 'No such SCIM token.');
      return { state, reply: { revoked: true }, writes: [{ subkey: `t:${message.token_id}`, value: undefined }] };
    }

    case 'token-verify': {
      const token = state.tokens.get(message.token_id);
      const valid = token !== undefined && sameHash(token.secret_hash, message.secret_hash) && (token.expires_at_ms === null || token.expires_at_ms > now);
      if (!valid) throw new ServiceError('unauthorized', 'The SCIM token is invalid, revoked or expired.');
      const reply: ScimVerifiedToken = { token_id: token.id, created_by: token.created_by, minted_by: token.minted_by ?? null };
      return { state, reply };
    }

    case 'user-reserve': {
      const key = message.attributes.userName.toLowerCase();
      const holder = state.byUserName.get(key);
      if (holder !== undefined) {
        const existing = state.users.get(holder)!;
        if (existing.pending_until_ms === null || existing.pending_until_ms > now) {
          throw scimError('scim_uniqueness', `userName ${message.attributes.userName} is already in use in this directory.`);
        }
        // A create that stopped half-way: resume it with the same ids and the new attributes.
        const resumed: ScimUserRecord = { ...existing, ...message.attributes, updated_at_ms: now, pending_until_ms: now + SCIM_PENDING_LEASE_MS };
        state.users.set(resumed.id, resumed);
        return { state, reply: { user: resumed, resumed: true }, writes: [userWrite(resumed)] };
      }
      if (state.users.size >= SCIM_USERS_PER_ORG_MAX) {
        throw scimError('conflict', `A directory may hold at most ${SCIM_USERS_PER_ORG_MAX} users.`);
      }
      const user: ScimUserRecord = {
        ...message.attributes,
        id: message.scim_id,
        user_id: message.user_id,
        active: true,
        seq: state.next_seq++,
        created_at_ms: now,
        updated_at_ms: now,
        pending_until_ms: now + SCIM_PENDING_LEASE_MS,
      };
      state.users.set(user.id, user);
      state.byUserName.set(key, user.id);
      return { state, reply: { user, resumed: false }, writes: [userWrite(user)] };
    }

    case 'user-activate': {
      const existing = state.users.get(message.scim_id);
      if (!existing) throw scimError('not_found', `Resource ${message.scim_id} not found.`);
      if (existing.pending_until_ms === null) return { state, reply: existing };
      const user: ScimUserRecord = { ...existing, active: message.active, pending_until_ms: null, updated_at_ms: now };
      state.users.set(user.id, user);
      return { state, reply: user, writes: [userWrite(user)] };
    }

    case 'user-abort': {
      const existing = state.users.get(message.scim_id);
      if (!existing || existing.pending_until_ms === null) return { state, reply: { aborted: false } };
      state.users.delete(existing.id);
      if (state.byUserName.get(existing.userName.toLowerCase()) === existing.id) state.byUserName.delete(existing.userName.toLowerCase());
      return { state, reply: { aborted: true }, writes: [{ subkey: `u:${existing.id}`, value: undefined }] };
    }

    case 'user-get':
      return { state, reply: visibleUser(state, message.scim_id) };

    case 'user-list': {
      // Creation order, so startIndex pages are stable.
      const all = [...state.users.values()]
        .filter((u) => u.pending_until_ms === null && (message.filter === null || matchesFilter(message.filter, filterSubject(u))))
        .sort((a, b) => a.seq - b.seq);
      const start = Math.max(1, message.start_index) - 1;
      const reply: ScimUserPage = { total: all.length, users: message.count > 0 ? all.slice(start, start + message.count) : [] };
      return { state, reply };
    }

    case 'user-update': {
      const existing = visibleUser(state, message.scim_id);
      if (message.active === true && !existing.active) {
        throw scimError('scim_mutability', 'Reactivating a deactivated user is not supported; an administrator must restore the account.');
      }
      const next: ScimUserRecord = { ...existing };
      const displayName_changed = message.displayName !== undefined && message.displayName !== existing.displayName;
      if (displayName_changed) next.displayName = message.displayName!;
      const deactivating = message.active === false;
      if (deactivating) next.active = false;
      const reply: ScimUpdateReply = { user: next, deactivated: deactivating, displayName_changed };
      if (!displayName_changed && (!deactivating || !existing.active)) return { state, reply: { ...reply, user: existing } };
      next.updated_at_ms = now;
      state.users.set(next.id, next);
      return { state, reply, writes: [userWrite(next)] };
    }

    case 'user-delete': {
      const existing = visibleUser(state, message.scim_id);
      state.users.delete(existing.id);
      if (state.byUserName.get(existing.userName.toLowerCase()) === existing.id) state.byUserName.delete(existing.userName.toLowerCase());
      return { state, reply: existing, writes: [{ subkey: `u:${existing.id}`, value: undefined }] };
    }

    case 'user-provision':
      return stepUserProvision(state, message, context);

    case 'user-change':
      return stepUserChange(state, message, context);

    case 'user-deprovision':
      return stepUserDeprovision(state, message, context);

    case 'token-manage':
      return stepTokenManage(state, message, context);

    case 'flow-answer':
      return stepFlowAnswer(state, message, context);

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown scim-directory operation ${(message as { op?: unknown }).op as string}.`);
  }
}
