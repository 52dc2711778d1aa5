/**
 * The api-keys area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { API_KEY_KIND, USER_API_KEYS_KIND } from './actor.js';
export type { IndexPage } from './index-state.js';
export type { ApiKeyView, VerifiedKey } from './state.js';
