/**
 * The oauth area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { OAUTH_CLIENT_KIND } from './actor.js';
export type { AuthMethod, ClientView, DeleteReply, GrantType, RedeemReply, RotateReply } from './client-state.js';
export { isValidChallenge, s256Challenge } from './pkce.js';
export type { PkceMethod } from './pkce.js';
export { scopeSubset } from './scope.js';
