/**
 * The scim area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { parseFilter } from './filter.js';
export { parsePatch, scimError, scimBoolean, scimDisplayName } from './patch.js';
export type { ScimChange, ScimErrorCode } from './patch.js';
export { SCIM_DIRECTORY_KIND } from './state.js';
export type { ScimAttributes, ScimEmail, ScimName, ScimTokenView, ScimUpdateReply, ScimUserPage, ScimUserRecord } from './state.js';
