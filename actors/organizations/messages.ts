/**
 * The organizations area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { INVITATION_INDEX_KIND, ORGANIZATION_KIND, ORG_DIRECTORY_KEY, ORG_DIRECTORY_KIND, USER_ORGS_KIND } from './actor.js';
export { ORG_QUERY_MAX, normalizeSlug } from './directory-state.js';
export { INVITATIONS_PER_EMAIL_MAX } from './invitation-index-state.js';
export { INVITATION_TTL_MS_DEFAULT, SSO_EXEMPT_USERS_MAX, normalizeEmail } from './state.js';
export type { Actor, IndexEntry, InvitationView, Member, OrgDirectorySync, OrgRole, OrgView, UserOrgSync } from './state.js';
export type { Membership } from './user-orgs-state.js';
