import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadUserApiKeys, stepUserApiKeys, type UserApiKeysMessage, type UserApiKeysState } from './index-state.js';
import { API_KEY_KIND, initialApiKeyState, stepApiKey, USER_API_KEYS_KIND, type ApiKeyMessage, type ApiKeyState } from './state.js';

export { API_KEY_KIND, USER_API_KEYS_KIND };

export const apiKeyActor: SnapshotActorDefinition<ApiKeyState, ApiKeyMessage, unknown> = {
  kind: API_KEY_KIND,
  storage: 'snapshot',
  initial: initialApiKeyState,
  step: stepApiKey,
};

export const userApiKeysActor: RecordsActorDefinition<UserApiKeysState, UserApiKeysMessage, unknown> = {
  kind: USER_API_KEYS_KIND,
  storage: 'records',
  load: loadUserApiKeys,
  step: stepUserApiKeys,
};
