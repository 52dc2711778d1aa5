/**
 * The scim area's public surface: the scim-directory kind, the messages it
 * takes (its own and the flows' answers) and the views it answers with.
 * Other layers import this file only. The pure SCIM parsers others need
 * (filter, PATCH document, attribute checks) stay in their files and are
 * named here.
 */
import type { FlowAnswer } from '../flow-call.js';
import type { FilterNode } from './filter.js';
import type { ScimChange } from './patch.js';

export { parseFilter } from './filter.js';
export type { FilterNode } from './filter.js';
export { parsePatch, scimError, scimBoolean, scimDisplayName } from './patch.js';
export type { ScimChange, ScimErrorCode } from './patch.js';
export { takeToken, refill } from './rate.js';
export type { TokenBucket, BucketRule } from './rate.js';

/** One directory per organization (key = org_id). */
export const SCIM_DIRECTORY_KIND = 'scim-directory';
/** A create in progress holds its userName this long before a retry may resume it. */
export const SCIM_PENDING_LEASE_MS = 60_000;
/** Provisioning tokens one organization may hold at once. */
export const SCIM_TOKENS_PER_ORG_MAX = 20;
/** Users one organization's directory may hold. */
export const SCIM_USERS_PER_ORG_MAX = 100_000;
/** Flows (provisioning, changes, deprovisioning, token management) one directory runs at once. */
export const SCIM_FLOWS_MAX = 1_000;
/** A provisioning token's lifetime when none is asked for, and the longest one may ask for (days). */
export const SCIM_TOKEN_TTL_DEFAULT_DAYS = 90;
export const SCIM_TOKEN_TTL_MAX_DAYS = 365;
/**
 * Creations (POST /Users attempts) per organization: a token bucket of
 * SCIM_CREATE_BURST refilled at SCIM_CREATE_PER_SECOND (300 a minute), so an
 * identity provider's initial sync of 3,000 users passes in about 10 minutes
 * while a squatting spree is held to the same pace (docs/api/scim.md, Limits).
 */
export const SCIM_CREATE_PER_SECOND = 5;
export const SCIM_CREATE_BURST = 100;

/**
 * The credential a provisioning token was minted with: the token works only
 * while it does (the session not ended or expired, the API key not deleted,
 * revoked or expired, and its user not banned or deleted).
 */
export type ScimMintedBy = { kind: 'session'; session_id: string } | { kind: 'api_key'; api_key_id: string };

export interface ScimName {
  formatted?: string;
  familyName?: string;
  givenName?: string;
  middleName?: string;
  honorificPrefix?: string;
  honorificSuffix?: string;
}

export interface ScimEmail {
  value: string;
  type: string;
  primary: boolean;
}

/** The attributes an identity provider sets (and this server stores). */
export interface ScimAttributes {
  userName: string;
  externalId: string | null;
  displayName: string | null;
  name: ScimName | null;
  emails: ScimEmail[];
}

export interface ScimUserRecord extends ScimAttributes {
  id: string;
  user_id: string;
  active: boolean;
  /** Creation order in this directory (lists are in this order, also for creations in the same millisecond). */
  seq: number;
  created_at_ms: number;
  updated_at_ms: number;
  /** Set while the create is in progress: until then the user is invisible. */
  pending_until_ms: number | null;
}

export interface ScimTokenView {
  id: string;
  name: string;
  created_by: string;
  created_at_ms: number;
  /** null only on tokens minted before tokens expired (they are refused: see token-verify). */
  expires_at_ms: number | null;
  /** What minted it; null on tokens minted before this was recorded (refused at use). */
  minted_with: ScimMintedBy['kind'] | null;
}

/** token-verify's answer: the token and what its use depends on (the edge checks the minting credential is live). */
export interface ScimVerifiedToken {
  token_id: string;
  created_by: string;
  /** null: minted before the credential was recorded; the edge refuses it. */
  minted_by: ScimMintedBy | null;
}

export interface ScimUserPage {
  total: number;
  users: ScimUserRecord[];
}

export interface ScimUpdateReply {
  user: ScimUserRecord;
  /** The user was active before this turn and is not now (or was already deactivated: retries repeat the cut-off). */
  deactivated: boolean;
  displayName_changed: boolean;
}

/** The platform account a provisioning creates (its id is the reserved record's user_id). */
export interface ScimPlatformUser {
  email: string;
  username: string;
  display_name: string;
  password_hash: string;
}

/** A token to create (token-manage): the edge draws the secret, the expiry and names the minting credential. */
export interface ScimTokenCreate {
  token_id: string;
  name: string;
  secret_hash: string;
  expires_at_ms: number;
  minted_by: ScimMintedBy;
}

/** Who manages the organization's SCIM tokens: the organization actor checks the role in the flow. */
export interface ScimTokenManager {
  user_id: string;
  platform_admin: boolean;
}

/** The answer of a user flow: the record, and the users whose sessions it ended (for the edge's session cache). */
export interface ScimFlowReply {
  user: ScimUserRecord;
  revoked_user_ids: string[];
}

export type ScimDirectoryMessage =
  | { op: 'token-create'; token_id: string; name: string; secret_hash: string; created_by: string; expires_at_ms: number; minted_by: ScimMintedBy }
  | { op: 'token-list' }
  | { op: 'token-revoke'; token_id: string }
  | { op: 'token-verify'; token_id: string; secret_hash: string }
  | { op: 'user-reserve'; scim_id: string; user_id: string; attributes: ScimAttributes }
  | { op: 'user-activate'; scim_id: string; active: boolean }
  | { op: 'user-abort'; scim_id: string }
  | { op: 'user-get'; scim_id: string }
  | { op: 'user-list'; filter: FilterNode | null; start_index: number; count: number }
  | { op: 'user-update'; scim_id: string; displayName?: string; active?: boolean }
  | { op: 'user-delete'; scim_id: string }
  // Flows (actors/scim/flows.ts): one ask each, answered when the flow ends.
  /**
   * POST /Users: take a creation from the organization's bucket, ask the organization whether the e-mail's
   * domain is verified (when `verified_domains_only`), reserve the userName, then claim the e-mail, create
   * the account, add the member, ban if inactive, activate.
   */
  | { op: 'user-provision'; scim_id: string; user_id: string; attributes: ScimAttributes; active: boolean; platform: ScimPlatformUser; verified_domains_only: boolean }
  /** PATCH and PUT /Users/{id}: apply the change here, then ban and rename the platform account. `userName` (PUT) must not change. */
  | { op: 'user-change'; scim_id: string; change: ScimChange; userName?: string }
  /** DELETE /Users/{id}: the member leaves the organization, the account is deleted, the record removed. */
  | { op: 'user-deprovision'; scim_id: string }
  /** Token management, checked against the caller's role in the organization: create (`token` set) or revoke. */
  | { op: 'token-manage'; by: ScimTokenManager; create?: ScimTokenCreate; revoke?: { token_id: string } }
  /** A flow step's answer from another actor (actors/flow-call.ts). */
  | FlowAnswer;
