import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadUserApiKeys, stepUserApiKeys, type UserApiKeysState } from './index-state.js';
import { API_KEY_KIND, USER_API_KEYS_KIND, type ApiKeyMessage, type UserApiKeysMessage } from './messages.js';
import { initialApiKeyState, stepApiKey, type ApiKeyState } from './state.js';

/** One API key (key = key id): its hash, scopes and owner. */
export const apiKeyActor: SnapshotActorDefinition<ApiKeyState, ApiKeyMessage, unknown> = {
  kind: API_KEY_KIND,
  storage: 'snapshot',
  initial: initialApiKeyState,
  step: stepApiKey,
};

/** The per-user index of keys (key = user id), one record per key: it holds the cap and coordinates create and delete. */
export const userApiKeysActor: RecordsActorDefinition<UserApiKeysState, UserApiKeysMessage, unknown> = {
  kind: USER_API_KEYS_KIND,
  storage: 'records',
  load: loadUserApiKeys,
  step: stepUserApiKeys,
};
