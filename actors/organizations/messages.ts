import type { FlowAnswer, FlowCall } from '../flow-call.js';
/**
 * The organizations area's public surface: the actor kinds and keys, the
 * messages each kind takes, the views it answers with and the area's caps.
 * Other layers (http/, bench/, other areas, tests of other areas) import this
 * file only. The state files and flows.ts import their types from here.
 *
 * Kinds:
 * - `organization` (key org_id): the organization, its members and
 *   invitations, and the coordinator of the area's flows (flows.ts);
 * - `user-orgs` (key user_id): the user's memberships, with a copy of each
 *   organization's name and SSO policy, and the slots held for memberships in
 *   the making (USER_ORGS_MAX);
 * - `org-invitation-index` (key normalized e-mail): pending invitations by
 *   address (INVITATIONS_PER_EMAIL_MAX);
 * - `org-directory` (key ORG_DIRECTORY_KEY): slugs and the admin list;
 * - `org-domain` (key a domain, see parseDomain): the organization that
 *   verified it (one per domain).
 */

export {
  DOMAIN_LENGTH_MAX,
  DOMAIN_VERIFICATION_LABEL,
  DOMAIN_VERIFICATION_PREFIX,
  emailDomain,
  ORG_DOMAINS_MAX,
  parseDomain,
  txtHolds,
  verificationRecordName,
  verificationRecordValue,
  type DomainCheck,
} from './domains.js';

export const ORGANIZATION_KIND = 'organization';
export const USER_ORGS_KIND = 'user-orgs';
export const INVITATION_INDEX_KIND = 'org-invitation-index';
export const ORG_DIRECTORY_KIND = 'org-directory';
export const ORG_DIRECTORY_KEY = 'global';
export const ORG_DOMAIN_KIND = 'org-domain';

export type OrgRole = 'owner' | 'admin' | 'member';
export const ORG_ROLES: readonly OrgRole[] = ['owner', 'admin', 'member'];

/** Members one organization may hold (the SCIM directory's cap is the same). */
export const ORG_MEMBERS_MAX = 100_000;
/** Pending invitations one organization may hold at once. */
export const ORG_INVITATIONS_MAX = 1_000;
/** Users exempt from SSO enforcement in one organization. */
export const SSO_EXEMPT_USERS_MAX = 1_000;
/** Organizations one user may create or be invited into (`POST /api/v1/orgs`, accepting an invitation). */
export const USER_ORGS_MAX = 100;
/** Pending invitations one address may hold, across organizations. */
export const INVITATIONS_PER_EMAIL_MAX = 100;
/** Default invitation lifetime: 7 days. */
export const INVITATION_TTL_MS_DEFAULT = 7 * 24 * 3600 * 1000;
/**
 * How long an expired invitation is remembered (so accepting it says `invitation_expired`,
 * not "unknown"), after which the alarm purges it.
 */
export const INVITATION_RETENTION_MS = 30 * 24 * 3600 * 1000;
/** Longest `q` of the admin list. */
export const ORG_QUERY_MAX = 100;
/** A derived slug that is taken is tried again with a random suffix this many times. */
export const DERIVED_SLUG_RETRIES = 3;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function normalizeSlug(slug: string): string {
  return slug.trim().toLowerCase();
}

/** A slug from a name: lower-case letters and digits, hyphen-separated. */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/g, '');
  return slug || 'org';
}

// ---------------------------------------------------------------- views

/** The Organization of the spec, with ms timestamps (ISO at the edge). */
export interface OrgView {
  org_id: string;
  name: string;
  slug: string;
  created_by: string;
  created_at_ms: number;
  updated_at_ms: number;
  logo_url: string | null;
  metadata: unknown;
  sso_enforced: boolean;
  sso_exempt_user_ids: string[];
  member_count: number;
}

/** An organization as one of its members sees it: with their role. */
export interface MyOrgView extends OrgView {
  role: OrgRole;
}

export interface Member {
  user_id: string;
  role: OrgRole;
  joined_at_ms: number;
}

export interface InvitationView {
  invitation_id: string;
  org_id: string;
  email: string;
  role: OrgRole;
  invited_by: string;
  created_at_ms: number;
  expires_at_ms: number;
}

/** One invitation as the address's index keeps it. */
export interface IndexEntry {
  invitation_id: string;
  org_id: string;
  role: OrgRole;
  invited_by: string;
  created_at_ms: number;
  expires_at_ms: number;
}

/** One membership of a user, with the organization's name as last synced. */
export interface Membership {
  org_id: string;
  org_name: string;
  role: OrgRole;
  joined_at_ms: number;
}

/** Who asks for a change: a member acting under their org role, or a platform admin (acts as an owner). */
export interface Actor {
  user_id: string;
  platform_admin: boolean;
}

/** Replies of the organization's flows. */
export interface InvitationCreated {
  invitation: InvitationView;
  org_name: string;
}
export interface InvitationAccepted {
  member: Member;
  organization: OrgView;
}

export type DomainStatus = 'pending' | 'verified';

/** One domain of an organization, with the DNS TXT record that proves control of it. */
export interface DomainView {
  domain: string;
  status: DomainStatus;
  method: 'dns_txt';
  record_name: string;
  record_value: string;
  created_at_ms: number;
  verified_at_ms: number | null;
}

// ---------------------------------------------------------------- flows

/**
 * The organization's flows (flows.ts) call the other kinds with
 * actors/flow-call.ts: `{op: 'flow-call', call, reply_to}`, answered
 * `{op: 'flow-answer', flow_id, step, ok, reply | error}` through the outbox.
 * Steps (FlowReplyTo.step) of the organization's flows.
 */
export type OrgFlowStep =
  /** The user actor's `get` (the account exists; its e-mail and whether it is verified). */
  | 'user'
  /** The accounts directory's `lookup` of an invited address. */
  | 'lookup'
  /** user-orgs `reserve`: a membership slot. */
  | 'reserve'
  /** org-directory `claim`: the slug. */
  | 'claim'
  /** org-invitation-index `reserve`: the invitation under INVITATIONS_PER_EMAIL_MAX. */
  | 'index'
  /** org-domain `claim`: the verified domain, one organization per domain. */
  | 'domain'
  /** An index applied one of the organization's changes (read-your-writes). */
  | 'ack';

// ---------------------------------------------------------------- messages

export type OrganizationMessage =
  /**
   * The creation flow (flows.ts): hold the owner's membership slot (under
   * USER_ORGS_MAX when `capped`), claim the slug (derived from the name, with a
   * random suffix on retry, when `slug` is absent), then create. Reply OrgView.
   */
  | {
      op: 'create';
      org_id: string;
      name: string;
      slug?: string;
      created_by: string;
      logo_url?: string | null;
      metadata?: unknown;
      owner_user_id?: string;
      capped?: boolean;
      /** The owner must be an account: the flow asks the user actor first (not_found "No such user."). */
      check_owner?: boolean;
    }
  /** OrgView; with `by`, a non-member gets not_found and the reply is a MyOrgView. */
  | { op: 'get'; by?: Actor }
  | { op: 'get_member'; user_id: string }
  /** With `check_user`, a flow: the user actor is asked first that the account exists (not_found "No such user."). */
  | { op: 'add_member'; user_id: string; role: OrgRole; by?: Actor; check_user?: boolean }
  | { op: 'remove_member'; user_id: string; by?: Actor }
  | { op: 'set_role'; user_id: string; role: OrgRole; by?: Actor }
  /** With `by`, members only. */
  | { op: 'list_members'; page: number; page_size: number; by?: Actor }
  | { op: 'update'; name?: string; logo_url?: string | null; metadata?: unknown; by?: Actor }
  | { op: 'set_sso'; sso_enforced: boolean; sso_exempt_user_ids?: string[] }
  | { op: 'delete'; by?: Actor }
  /**
   * The invitation flow: rules checked here; the accounts directory is asked
   * for the account with this address (a member needs no invitation); the
   * address's index holds it under INVITATIONS_PER_EMAIL_MAX. Reply InvitationCreated.
   */
  | { op: 'invite'; invitation_id: string; email: string; role: OrgRole; token_hash: string; ttl_ms: number; by: Actor }
  /** With `by`, owners and admins only; reply `{invitations, org_name}`. */
  | { op: 'list_invitations'; by?: Actor }
  | { op: 'revoke_invitation'; invitation_id: string; by: Actor }
  /**
   * The acceptance flow: the user actor is asked for the account's e-mail and
   * whether it is verified (the proof, with the token); a new member's slot
   * is held under USER_ORGS_MAX. Reply InvitationAccepted.
   */
  | { op: 'accept_invitation'; invitation_id: string; user_id: string; token_hash?: string }
  /** The decline flow: the same proof as accept, from the user actor. Reply `{declined: true}`. */
  | { op: 'decline_invitation'; invitation_id: string; user_id: string; token_hash?: string }
  /**
   * Verified domains (owners and admins; with `by` absent, a trusted caller).
   * `add_domain`: `domain` as parseDomain gives it, `token` the random part of
   * the TXT value (used only when the domain is new). Reply `{domain: DomainView, created}`;
   * an existing domain is returned as it is. At most ORG_DOMAINS_MAX (409 conflict).
   */
  | { op: 'add_domain'; domain: string; token: string; by?: Actor }
  /** `{domains: DomainView[]}`, oldest first; with `by`, members only. */
  | { op: 'list_domains'; by?: Actor }
  /** One domain (DomainView), owners and admins; not_found when the organization has no such domain. */
  | { op: 'get_domain'; domain: string; by?: Actor }
  /**
   * The verification flow: `txt` is what the edge's DNS lookup of the record
   * name found (each record's strings; [] when nothing). The organization
   * compares: no match is 409 domain_not_verified (nothing changes); a match
   * claims the domain in `org-domain` (409 domain_taken when another
   * organization holds it). Reply DomainView (verified).
   */
  | { op: 'verify_domain'; domain: string; txt: string[][]; by?: Actor }
  /** Drops the domain and releases its claim. Reply `{removed: true}`; not_found when unknown. */
  | { op: 'remove_domain'; domain: string; by?: Actor }
  /**
   * For other areas (SCIM): has this organization verified exactly this
   * domain (see emailDomain)? `{verified: boolean}`; false for an unknown or
   * deleted organization. A read.
   */
  | { op: 'domain_verified'; domain: string }
  /** The answer to one of the organization's flow-calls. */
  | FlowAnswer
  /** Another area's flow (SCIM provisioning) running one single-turn op here, answered through the outbox (actors/flow-call.ts). */
  | FlowCall<OrganizationMessage>;

/**
 * One membership, from the organization to the user's index: `role` null =
 * no longer a member; `seq` orders membership changes, `rev` the copy of the
 * organization's name and SSO policy (for this user).
 */
export interface UserOrgSync {
  op: 'sync';
  org_id: string;
  role: OrgRole | null;
  joined_at_ms: number;
  seq: number;
  rev: number;
  name: string;
  sso_enforced: boolean;
  sso_exempt: boolean;
}

export type UserOrgsMessage =
  | UserOrgSync
  /** Hold a slot for a membership in the making (`flow_id` names it); refused with 409 conflict at USER_ORGS_MAX. */
  | { op: 'reserve'; org_id: string; flow_id: string; capped: boolean }
  /** Compensation: give the slot back. */
  | { op: 'release'; org_id: string; flow_id: string }
  /** `{memberships: Membership[]}` in joining order. */
  | { op: 'list' }
  /** `{enforced_by: {org_id, name} | null}`: the first organization enforcing SSO on this user. */
  | { op: 'sso_policy' }
  /** One of the above as a step of the organization's flow (actors/flow-call.ts). */
  | FlowCall<UserOrgsMessage>;

export type InvitationIndexMessage =
  /**
   * Index a new invitation under INVITATIONS_PER_EMAIL_MAX (other organizations'
   * pending invitations count), after removing `replaces`; refused with 409
   * conflict at the cap (the removals stay: a FlowRefusal).
   */
  | { op: 'reserve'; entry: IndexEntry; replaces: { invitation_id: string; expires_at_ms: number }[] }
  | { op: 'remove'; invitation_id: string; expires_at_ms: number }
  | { op: 'list' }
  /** One entry that is not removed, expired or not (null if unknown). */
  | { op: 'get'; invitation_id: string }
  /** One of the above as a step of the organization's flow (actors/flow-call.ts). */
  | FlowCall<InvitationIndexMessage>;

export interface OrgDirectorySync {
  op: 'sync';
  org_id: string;
  rev: number;
  slug: string;
  org: OrgView | null;
}

export interface OrgListQuery {
  q?: string;
  sso_enforced?: boolean;
  page: number;
  page_size: number;
}

export type OrgDomainMessage =
  /** Take the domain for the organization (kept when it is already its own): `{claimed: true, domain}`, or 409 domain_taken. */
  | { op: 'claim'; org_id: string }
  /** Give the domain up, if the organization holds it: `{released: boolean}`. */
  | { op: 'release'; org_id: string }
  /** `{org_id: string | null}`: the organization that verified the domain. A read. */
  | { op: 'get' }
  /** One of the above as a step of the organization's flow (actors/flow-call.ts). */
  | FlowCall<OrgDomainMessage>;

export type OrgDirectoryMessage =
  /** Take the slug for the organization: `{claimed: true, slug}`, or 409 org_slug_taken. */
  | { op: 'claim'; org_id: string; slug: string }
  | OrgDirectorySync
  | ({ op: 'list' } & OrgListQuery)
  /** One of the above as a step of the organization's flow (actors/flow-call.ts). */
  | FlowCall<OrgDirectoryMessage>;
