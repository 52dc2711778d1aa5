/**
 * The accounts area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { DIRECTORY_KIND, USER_KIND } from './actor.js';
export { DIRECTORY_KEY, USER_QUERY_MAX } from './directory-state.js';
export type { UserListQuery } from './directory-state.js';
export { ACCOUNT_FAILURES_MAX, ADDRESS_FAILURES_MAX, LOGIN_THROTTLE_KIND, REGISTRATIONS_PER_ADDRESS_MAX, TWO_FACTOR_FAILURES_MAX } from './login-throttle-state.js';
export type { ThrottleAttempt } from './login-throttle-state.js';
export { base32Decode, base32Encode, otpauthUri, totp } from './totp.js';
export { sessionUserId, ssoRequiredError } from './user-state.js';
export type { AdminPatch, BanRecord, Credentials, NewUser, PublicUser, Role, SessionPrincipal, SessionView, SummarySync } from './user-state.js';
