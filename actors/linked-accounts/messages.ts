/**
 * The linked-accounts area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { IDENTITY_INDEX_KIND, IDENTITY_LINKS_KIND } from './actor.js';
export { identityIndexKey } from './state.js';
export type { LinkRecord } from './state.js';
