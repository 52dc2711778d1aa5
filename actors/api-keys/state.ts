import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { sameHash } from '../same-hash.js';
import {
  LAST_USED_WRITE_INTERVAL_MS,
  USER_API_KEYS_KIND,
  type ApiKeyMessage,
  type ApiKeyRecord,
  type ApiKeyView,
  type KeyAnswer,
  type VerifiedKey,
} from './messages.js';

/**
 * One API key (spec doc 1 §2 ApiKey, §4.2). The actor key is the key id (the
 * `<key_id>` part of `pk_<key_id>_<secret>`); the state holds only
 * sha256(secret), never the secret. Every management message names the
 * calling user and a key of anyone else is `not_found`, so a key id reveals
 * nothing to another user.
 *
 * Revoking is one-way (`update` with `revoked: true`); deleting removes the
 * record and tells the owner's index (`user-api-keys`) through the outbox.
 */

export type ApiKeyState = ApiKeyRecord | null;

export function initialApiKeyState(): ApiKeyState {
  return null;
}

export function apiKeyView(record: ApiKeyRecord): ApiKeyView {
  const { key_hash: _hash, ...view } = record;
  return view;
}

const UNAUTHORIZED_MESSAGE = 'The API key is invalid, revoked or expired.';

function owned(state: ApiKeyState, user_id: string): ApiKeyRecord {
  if (!state || state.user_id !== user_id) throw new ServiceError('not_found', 'No such API key.');
  return state;
}

export function isKeyUsable(record: ApiKeyRecord, now_ms: number): boolean {
  return !record.revoked && (record.expires_at_ms === null || record.expires_at_ms > now_ms);
}

export function stepApiKey(
  state: ApiKeyState,
  message: ApiKeyMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<ApiKeyState, unknown> {
  if ((message.op === 'create' || message.op === 'delete') && message.flow_id !== undefined) return answeringIndex(state, message, context, message.flow_id);
  return stepKey(state, message, context);
}

/**
 * A create or delete sent by the owner's index (its flow): the outcome, the
 * key's view or the refusal, goes back to the index through the outbox.
 */
function answeringIndex(state: ApiKeyState, message: ApiKeyMessage, context: TurnContext, flow_id: string): TurnResult<ApiKeyState, unknown> {
  const index = (message as { user_id: string }).user_id;
  let result: TurnResult<ApiKeyState, unknown>;
  try {
    result = stepKey(state, message, context);
  } catch (error) {
    if (!(error instanceof ServiceError) || (error.code !== 'not_found' && error.code !== 'conflict')) throw error;
    const answer: KeyAnswer = { op: 'key-answer', flow_id, error: { code: error.code, message: error.message } };
    return { state, sends: [{ kind: USER_API_KEYS_KIND, key: index, message: answer }] };
  }
  const answer: KeyAnswer = { op: 'key-answer', flow_id, view: result.reply as ApiKeyView };
  // The index removes its entry when it gets the answer: no separate `remove`.
  return { state: result.state, reply: result.reply, sends: [{ kind: USER_API_KEYS_KIND, key: index, message: answer }] };
}

function stepKey(state: ApiKeyState, message: ApiKeyMessage | AlarmMessage, context: TurnContext): TurnResult<ApiKeyState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'create': {
      if (state) {
        // A retried create of the same key is answered again; anything else is a clash.
        if (state.user_id === message.user_id && sameHash(state.key_hash, message.key_hash)) {
          return { state, reply: apiKeyView(state) };
        }
        throw new ServiceError('conflict', 'API key id already in use.');
      }
      const record: ApiKeyRecord = {
        api_key_id: context.key,
        user_id: message.user_id,
        org_id: message.org_id ?? null,
        name: message.name,
        scopes: [...message.scopes],
        key_hash: message.key_hash,
        key_prefix: message.key_prefix,
        created_at_ms: now,
        expires_at_ms: message.expires_at_ms,
        last_used_at_ms: null,
        revoked: false,
        updated_at_ms: now,
      };
      return { state: record, reply: apiKeyView(record) };
    }

    case 'get':
      return { state, reply: apiKeyView(owned(state, message.user_id)) };

    case 'update': {
      const record = owned(state, message.user_id);
      if (message.revoked === false && record.revoked) {
        throw new ServiceError('conflict', 'Revoking an API key is permanent: a revoked key cannot be restored.');
      }
      const next: ApiKeyRecord = {
        ...record,
        name: message.name ?? record.name,
        scopes: message.scopes ? [...message.scopes] : record.scopes,
        revoked: record.revoked || message.revoked === true,
        updated_at_ms: now,
      };
      return { state: next, reply: apiKeyView(next) };
    }

    case 'delete': {
      const record = owned(state, message.user_id);
      return {
        state: null,
        reply: apiKeyView(record),
        sends: [{ kind: USER_API_KEYS_KIND, key: record.user_id, message: { op: 'remove', api_key_id: record.api_key_id } }],
      };
    }

    case 'verify': {
      if (!state || !sameHash(state.key_hash, message.key_hash) || !isKeyUsable(state, now)) {
        throw new ServiceError('unauthorized', UNAUTHORIZED_MESSAGE);
      }
      const reply: VerifiedKey = { api_key_id: state.api_key_id, user_id: state.user_id, org_id: state.org_id ?? null, scopes: state.scopes };
      if (state.last_used_at_ms !== null && now - state.last_used_at_ms < LAST_USED_WRITE_INTERVAL_MS) {
        return { state, reply };
      }
      return { state: { ...state, last_used_at_ms: now }, reply };
    }

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown api-key operation ${(message as { op?: unknown }).op as string}.`);
  }
}
