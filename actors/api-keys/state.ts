import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { sameHash } from '../same-hash.js';
import { LAST_USED_WRITE_INTERVAL_MS, type ApiKeyMessage, type ApiKeyRecord, type ApiKeyView, type VerifiedKey } from './messages.js';

/**
 * One API key (spec doc 1 §2 ApiKey, §4.2). The actor key is the key id (the
 * `<key_id>` part of `pk_<key_id>_<secret>`); the state holds only
 * sha256(secret), never the secret. Every management message names the
 * calling user and a key of anyone else is `not_found`, so a key id reveals
 * nothing to another user.
 *
 * Revoking is one-way (`update` with `revoked: true`). Creating and deleting
 * are steps of the owner's index (`user-api-keys`): they come as flow-calls,
 * and the index adds or drops its entry when the answer comes back.
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
      return { state: null, reply: apiKeyView(record) };
    }

    case 'verify': {
      if (!state || !sameHash(state.key_hash, message.key_hash) || !isKeyUsable(state, now)) {
        throw new ServiceError('unauthorized', UNAUTHORIZED_MESSAGE);
      }
      const reply: VerifiedKey = {
        api_key_id: state.api_key_id,
        user_id: state.user_id,
        org_id: state.org_id ?? null,
        scopes: state.scopes,
        expires_at_ms: state.expires_at_ms,
      };
      if (state.last_used_at_ms !== null && now - state.last_used_at_ms < LAST_USED_WRITE_INTERVAL_MS) {
        return { state, reply };
      }
      return { state: { ...state, last_used_at_ms: now }, reply };
    }

    case 'flow-call':
      return answerFlowCall<ApiKeyState, ApiKeyMessage>(stepApiKey, state, message, context);

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown api-key operation ${(message as { op?: unknown }).op as string}.`);
  }
}
