import { ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { sameHash } from '../same-hash.js';
import { answerFlowCall, type FlowCall } from '../flow-call.js';

/**
 * One organization (kind `organization`, key = org_id; organizations are
 * global, not per tenant): its record, one record per member and one per
 * pending invitation (`records` storage, so adding a member writes one record
 * however large the organization is).
 *
 * Records: `meta` (the organization), `m:<user_id>` (a member), `i:<invitation_id>`
 * (a pending invitation). A deleted organization keeps only its `meta` record as a
 * tombstone, so its id is never reused and late messages cannot bring it back.
 *
 * Kept in step through the outbox (at-least-once; every receiver is idempotent):
 * - `user-orgs` (key user_id): the user's memberships, each sync carrying the
 *   organization's membership sequence number so an old sync never wins;
 * - `org-invitation-index` (key normalized e-mail): pending invitations by address;
 * - `org-directory`: the organization's summary (list and slug uniqueness), by revision.
 *
 * Invariant: a live organization always has at least one owner (`last_owner`).
 */
export const ORGANIZATION_KIND = 'organization';
export const USER_ORGS_KIND = 'user-orgs';
export const INVITATION_INDEX_KIND = 'org-invitation-index';
export const ORG_DIRECTORY_KIND = 'org-directory';
export const ORG_DIRECTORY_KEY = 'global';

export type OrgRole = 'owner' | 'admin' | 'member';
export const ORG_ROLES: readonly OrgRole[] = ['owner', 'admin', 'member'];

/** Members one organization may hold (the SCIM directory's cap is the same). */
export const ORG_MEMBERS_MAX = 100_000;
/** Pending invitations one organization may hold at once. */
export const ORG_INVITATIONS_MAX = 1_000;
/** Users exempt from SSO enforcement in one organization. */
export const SSO_EXEMPT_USERS_MAX = 1_000;
/** Default invitation lifetime: 7 days. */
export const INVITATION_TTL_MS_DEFAULT = 7 * 24 * 3600 * 1000;
/**
 * How long an expired invitation is remembered (so accepting it says `invitation_expired`,
 * not "unknown"), after which the alarm purges it.
 */
export const INVITATION_RETENTION_MS = 30 * 24 * 3600 * 1000;
export const INVITATION_ALARM = 'invitations';

export interface OrgMeta {
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
  /** Membership change counter: every user-orgs sync carries the value after its change. */
  seq: number;
  /** Summary revision for the org directory. */
  rev: number;
  deleted: boolean;
}

export interface Member {
  user_id: string;
  role: OrgRole;
  joined_at_ms: number;
}

export interface Invitation {
  invitation_id: string;
  /** Normalized (trimmed, lower-case). */
  email: string;
  role: OrgRole;
  token_hash: string;
  invited_by: string;
  created_at_ms: number;
  expires_at_ms: number;
}

export interface OrganizationState {
  meta: OrgMeta | null;
  members: Map<string, Member>;
  invitations: Map<string, Invitation>;
  owner_count: number;
}

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

export interface InvitationView {
  invitation_id: string;
  org_id: string;
  email: string;
  role: OrgRole;
  invited_by: string;
  created_at_ms: number;
  expires_at_ms: number;
}

/** Who asks for a change: a member acting under their org role, or a platform admin (acts as an owner). */
export interface Actor {
  user_id: string;
  platform_admin: boolean;
}

/** The user-orgs message for one membership: role null = no longer a member. */
export interface UserOrgSync {
  op: 'sync';
  org_id: string;
  role: OrgRole | null;
  joined_at_ms: number;
  seq: number;
}

export interface IndexEntry {
  invitation_id: string;
  org_id: string;
  role: OrgRole;
  invited_by: string;
  created_at_ms: number;
  expires_at_ms: number;
}

export type OrganizationMessage =
  | { op: 'create'; org_id: string; name: string; slug: string; created_by: string; logo_url?: string | null; metadata?: unknown; owner_user_id?: string }
  | { op: 'get' }
  | { op: 'get_member'; user_id: string }
  | { op: 'add_member'; user_id: string; role: OrgRole; by?: Actor }
  | { op: 'remove_member'; user_id: string; by?: Actor }
  | { op: 'set_role'; user_id: string; role: OrgRole; by?: Actor }
  | { op: 'list_members'; page: number; page_size: number }
  | { op: 'member_sync'; user_id: string }
  /** The current directory summary (also of a deleted organization), for the edge's read-your-writes apply. */
  | { op: 'directory_sync' }
  | { op: 'update'; name?: string; logo_url?: string | null; metadata?: unknown; by?: Actor }
  | { op: 'set_sso'; sso_enforced: boolean; sso_exempt_user_ids?: string[] }
  | { op: 'sso_policy'; user_id: string }
  | { op: 'delete'; by?: Actor }
  | { op: 'invite'; invitation_id: string; email: string; role: OrgRole; token_hash: string; ttl_ms: number; by: Actor }
  | { op: 'list_invitations' }
  | { op: 'revoke_invitation'; invitation_id: string; by: Actor }
  | { op: 'accept_invitation'; invitation_id: string; user_id: string; email: string; email_verified: boolean; token_hash?: string }
  | { op: 'decline_invitation'; invitation_id: string; email: string; email_verified: boolean; token_hash?: string }
  /** A flow's step (SCIM provisioning): any message above, answered through the outbox (actors/flow-call.ts). */
  | FlowCall<OrganizationMessage>;

const ROLE_RANK: Record<OrgRole, number> = { member: 1, admin: 2, owner: 3 };

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function loadOrganization(_key: string, records: Iterable<[string, unknown]>): OrganizationState {
  const state: OrganizationState = { meta: null, members: new Map(), invitations: new Map(), owner_count: 0 };
  for (const [subkey, value] of records) {
    if (subkey === 'meta') state.meta = value as OrgMeta;
    else if (subkey.startsWith('m:')) {
      const member = value as Member;
      state.members.set(member.user_id, member);
      if (member.role === 'owner') state.owner_count++;
    } else if (subkey.startsWith('i:')) {
      const invitation = value as Invitation;
      state.invitations.set(invitation.invitation_id, invitation);
    }
  }
  return state;
}

export function orgView(state: OrganizationState): OrgView {
  const meta = state.meta!;
  return {
    org_id: meta.org_id,
    name: meta.name,
    slug: meta.slug,
    created_by: meta.created_by,
    created_at_ms: meta.created_at_ms,
    updated_at_ms: meta.updated_at_ms,
    logo_url: meta.logo_url,
    metadata: meta.metadata,
    sso_enforced: meta.sso_enforced,
    sso_exempt_user_ids: [...meta.sso_exempt_user_ids],
    member_count: state.members.size,
  };
}

function invitationView(org_id: string, invitation: Invitation): InvitationView {
  return {
    invitation_id: invitation.invitation_id,
    org_id,
    email: invitation.email,
    role: invitation.role,
    invited_by: invitation.invited_by,
    created_at_ms: invitation.created_at_ms,
    expires_at_ms: invitation.expires_at_ms,
  };
}

function memberView(member: Member): Member {
  return { user_id: member.user_id, role: member.role, joined_at_ms: member.joined_at_ms };
}

function requireLive(state: OrganizationState): OrgMeta {
  if (!state.meta || state.meta.deleted) throw new ServiceError('not_found', 'No such organization.');
  return state.meta;
}

/** The acting role: a platform admin acts as an owner; a non-member gets 404 (the organization is not revealed). */
function actingRole(state: OrganizationState, by: Actor | undefined): OrgRole {
  if (!by || by.platform_admin) return 'owner';
  const member = state.members.get(by.user_id);
  if (!member) throw new ServiceError('not_found', 'No such organization.');
  return member.role;
}

function requireManager(role: OrgRole): void {
  if (role === 'member') throw new ServiceError('forbidden', 'Only an owner or admin of the organization can do this.');
}

interface Effects {
  writes: RecordWrite[];
  sends: ActorSend[];
}

function syncMessage(meta: OrgMeta, user_id: string, member: Member | null): UserOrgSync {
  return { op: 'sync', org_id: meta.org_id, role: member?.role ?? null, joined_at_ms: member?.joined_at_ms ?? 0, seq: meta.seq };
}

/** Bumps the summary revision and queues the directory sync (with the meta write). */
function touch(state: OrganizationState, effects: Effects, now: number): void {
  const meta = state.meta!;
  meta.rev++;
  meta.updated_at_ms = Math.max(meta.updated_at_ms, now);
  effects.writes.push({ subkey: 'meta', value: meta });
  effects.sends.push({ kind: ORG_DIRECTORY_KIND, key: ORG_DIRECTORY_KEY, message: directorySync(state) });
}

export interface OrgDirectorySync {
  op: 'sync';
  org_id: string;
  rev: number;
  slug: string;
  org: OrgView | null;
}

export function directorySync(state: OrganizationState): OrgDirectorySync {
  const meta = state.meta!;
  return { op: 'sync', org_id: meta.org_id, rev: meta.rev, slug: meta.slug, org: meta.deleted ? null : orgView(state) };
}

/** Sets (or, with role null, removes) a membership: record, owner count, seq and the user-orgs sync. */
function putMember(state: OrganizationState, effects: Effects, user_id: string, member: Member | null): void {
  const meta = state.meta!;
  const previous = state.members.get(user_id);
  if (previous?.role === 'owner') state.owner_count--;
  if (member) {
    state.members.set(user_id, member);
    if (member.role === 'owner') state.owner_count++;
  } else {
    state.members.delete(user_id);
  }
  meta.seq++;
  effects.writes.push({ subkey: `m:${user_id}`, value: member ?? undefined });
  effects.sends.push({ kind: USER_ORGS_KIND, key: user_id, message: syncMessage(meta, user_id, member) });
}

function indexAdd(org_id: string, invitation: Invitation): ActorSend {
  const entry: IndexEntry = {
    invitation_id: invitation.invitation_id,
    org_id,
    role: invitation.role,
    invited_by: invitation.invited_by,
    created_at_ms: invitation.created_at_ms,
    expires_at_ms: invitation.expires_at_ms,
  };
  return { kind: INVITATION_INDEX_KIND, key: invitation.email, message: { op: 'add', entry } };
}

function indexRemove(invitation: Invitation): ActorSend {
  return { kind: INVITATION_INDEX_KIND, key: invitation.email, message: { op: 'remove', invitation_id: invitation.invitation_id, expires_at_ms: invitation.expires_at_ms } };
}

function dropInvitation(state: OrganizationState, effects: Effects, invitation: Invitation): void {
  state.invitations.delete(invitation.invitation_id);
  effects.writes.push({ subkey: `i:${invitation.invitation_id}`, value: undefined });
  effects.sends.push(indexRemove(invitation));
}

/** The alarm for the earliest purge of an expired invitation (null cancels). */
function invitationAlarm(state: OrganizationState): { name: string; due_ms: number | null } {
  let due: number | null = null;
  for (const invitation of state.invitations.values()) {
    const purge = invitation.expires_at_ms + INVITATION_RETENTION_MS;
    if (due === null || purge < due) due = purge;
  }
  return { name: INVITATION_ALARM, due_ms: due };
}

/** The invitation an invitee may act on: unknown, other address -> not found; expired -> invitation_expired. */
function invitationFor(state: OrganizationState, invitation_id: string, email: string, now: number): Invitation {
  const invitation = state.invitations.get(invitation_id);
  if (!invitation || invitation.email !== normalizeEmail(email)) throw new ServiceError('invitation_not_found', 'No such pending invitation for your e-mail address.');
  if (invitation.expires_at_ms <= now) throw new ServiceError('invitation_expired', 'This invitation has expired; ask for a new one.');
  return invitation;
}

/**
 * Proof that the invitee controls the address: the token from the invitation
 * e-mail, or an account e-mail already verified. A token, when presented, must match.
 */
function requireProof(invitation: Invitation, email_verified: boolean, token_hash: string | undefined): void {
  if (token_hash !== undefined) {
    if (!sameHash(token_hash, invitation.token_hash)) throw new ServiceError('forbidden', 'The invitation token is not valid.');
    return;
  }
  if (!email_verified) {
    throw new ServiceError('forbidden', 'Verify your e-mail address first, or use the link from the invitation e-mail (its token).');
  }
}

export function stepOrganization(
  state: OrganizationState,
  message: OrganizationMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<OrganizationState, unknown> {
  const now = context.now;
  const effects: Effects = { writes: [], sends: [] };
  const done = (reply: unknown, alarm = false): TurnResult<OrganizationState, unknown> => ({
    state,
    reply,
    writes: effects.writes,
    sends: effects.sends,
    ...(alarm ? { alarms: [invitationAlarm(state)] } : {}),
  });

  switch (message.op) {
    case 'create': {
      if (state.meta) {
        // A retried create (the directory's outbox repeats it) returns the organization unchanged.
        if (!state.meta.deleted && state.meta.created_by === message.created_by && state.meta.slug === message.slug) return { state, reply: orgView(state) };
        throw new ServiceError('conflict', 'An organization with this id already exists.');
      }
      state.meta = {
        org_id: message.org_id,
        name: message.name,
        slug: message.slug,
        created_by: message.created_by,
        created_at_ms: now,
        updated_at_ms: now,
        logo_url: message.logo_url ?? null,
        metadata: message.metadata ?? {},
        sso_enforced: false,
        sso_exempt_user_ids: [],
        seq: 0,
        rev: 0,
        deleted: false,
      };
      const owner = message.owner_user_id ?? message.created_by;
      putMember(state, effects, owner, { user_id: owner, role: 'owner', joined_at_ms: now });
      touch(state, effects, now);
      return done(orgView(state));
    }

    case 'get':
      requireLive(state);
      return { state, reply: orgView(state) };

    case 'get_member': {
      requireLive(state);
      const member = state.members.get(message.user_id);
      if (!member) throw new ServiceError('not_found', 'Not a member of this organization.');
      return { state, reply: memberView(member) };
    }

    case 'member_sync': {
      const meta = requireLive(state);
      return { state, reply: syncMessage(meta, message.user_id, state.members.get(message.user_id) ?? null) };
    }

    case 'directory_sync':
      if (!state.meta) throw new ServiceError('not_found', 'No such organization.');
      return { state, reply: directorySync(state) };

    case 'list_members': {
      requireLive(state);
      const all = [...state.members.values()].sort((a, b) => a.joined_at_ms - b.joined_at_ms || (a.user_id < b.user_id ? -1 : a.user_id > b.user_id ? 1 : 0));
      const start = (message.page - 1) * message.page_size;
      return { state, reply: { total: all.length, members: all.slice(start, start + message.page_size).map(memberView) } };
    }

    case 'add_member': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      if (message.by) {
        requireManager(acting);
        if (message.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can make another owner.');
      }
      const existing = state.members.get(message.user_id);
      if (existing) {
        if (existing.role === message.role) return { state, reply: memberView(existing) };
        if (message.by && existing.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', "Only an owner can change an owner's role.");
        if (existing.role === 'owner' && state.owner_count <= 1) throw new ServiceError('last_owner', 'The last owner of an organization cannot be demoted.');
      } else if (state.members.size >= ORG_MEMBERS_MAX) {
        throw new ServiceError('conflict', `An organization may hold at most ${ORG_MEMBERS_MAX} members.`);
      }
      const member: Member = { user_id: message.user_id, role: message.role, joined_at_ms: existing?.joined_at_ms ?? now };
      putMember(state, effects, message.user_id, member);
      touch(state, effects, now);
      return done(memberView(member));
    }

    case 'set_role': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      const existing = state.members.get(message.user_id);
      if (message.by) requireManager(acting);
      if (!existing) throw new ServiceError('not_found', 'Not a member of this organization.');
      if (message.by && acting !== 'owner' && (existing.role === 'owner' || message.role === 'owner')) {
        throw new ServiceError('forbidden', 'Only an owner can grant or take the owner role.');
      }
      if (existing.role === message.role) return { state, reply: memberView(existing) };
      if (existing.role === 'owner' && state.owner_count <= 1) throw new ServiceError('last_owner', 'The last owner of an organization cannot be demoted; make someone else an owner first.');
      const member: Member = { ...existing, role: message.role };
      putMember(state, effects, message.user_id, member);
      touch(state, effects, now);
      return done(memberView(member));
    }

    case 'remove_member': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      const existing = state.members.get(message.user_id);
      const self = message.by !== undefined && !message.by.platform_admin && message.by.user_id === message.user_id;
      if (message.by && !self) {
        requireManager(acting);
        if (existing?.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can remove an owner.');
      }
      if (!existing) return { state, reply: { removed: false } };
      if (existing.role === 'owner' && state.owner_count <= 1) {
        throw new ServiceError('last_owner', 'The last owner cannot leave or be removed; make someone else an owner first, or delete the organization.');
      }
      putMember(state, effects, message.user_id, null);
      touch(state, effects, now);
      return done({ removed: true });
    }

    case 'update': {
      requireLive(state);
      requireManager(actingRole(state, message.by));
      const meta = state.meta!;
      if (message.name !== undefined) meta.name = message.name;
      if (message.logo_url !== undefined) meta.logo_url = message.logo_url;
      if (message.metadata !== undefined) meta.metadata = message.metadata;
      meta.updated_at_ms = now;
      touch(state, effects, now);
      return done(orgView(state));
    }

    case 'set_sso': {
      const meta = requireLive(state);
      if (message.sso_exempt_user_ids && message.sso_exempt_user_ids.length > SSO_EXEMPT_USERS_MAX) {
        throw new ServiceError('BAD_REQUEST', `At most ${SSO_EXEMPT_USERS_MAX} exempt users.`, { details: [{ field: 'sso_exempt_user_ids', message: `At most ${SSO_EXEMPT_USERS_MAX} items.` }] });
      }
      meta.sso_enforced = message.sso_enforced;
      if (message.sso_exempt_user_ids !== undefined) meta.sso_exempt_user_ids = [...new Set(message.sso_exempt_user_ids)];
      meta.updated_at_ms = now;
      touch(state, effects, now);
      return done(orgView(state));
    }

    case 'sso_policy': {
      // A deleted organization enforces nothing (its members lost their membership).
      const meta = state.meta;
      if (!meta || meta.deleted) return { state, reply: { org_id: context.key, name: null, enforced: false } };
      const enforced = meta.sso_enforced && state.members.has(message.user_id) && !meta.sso_exempt_user_ids.includes(message.user_id);
      return { state, reply: { org_id: meta.org_id, name: meta.name, enforced } };
    }

    case 'delete': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      if (acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can delete the organization.');
      const meta = state.meta!;
      // Members lose their membership: their records go; user-orgs entries of a
      // deleted organization are skipped and pruned when read (no fan-out here).
      for (const user_id of state.members.keys()) effects.writes.push({ subkey: `m:${user_id}`, value: undefined });
      state.members.clear();
      state.owner_count = 0;
      for (const invitation of [...state.invitations.values()]) dropInvitation(state, effects, invitation);
      meta.deleted = true;
      meta.sso_exempt_user_ids = [];
      touch(state, effects, now);
      return done({ deleted: true }, true);
    }

    case 'invite': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      requireManager(acting);
      if (message.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can invite an owner.');
      const email = normalizeEmail(message.email);
      const replaced = [...state.invitations.values()].filter((invitation) => invitation.email === email);
      let pending = 0;
      for (const invitation of state.invitations.values()) if (invitation.expires_at_ms > now && invitation.email !== email) pending++;
      if (pending >= ORG_INVITATIONS_MAX) {
        throw new ServiceError('conflict', `An organization may hold at most ${ORG_INVITATIONS_MAX} pending invitations; revoke some first.`);
      }
      // Inviting an address again replaces its pending invitation (the old token stops working).
      for (const invitation of replaced) dropInvitation(state, effects, invitation);
      const invitation: Invitation = {
        invitation_id: message.invitation_id,
        email,
        role: message.role,
        token_hash: message.token_hash,
        invited_by: message.by.user_id,
        created_at_ms: now,
        expires_at_ms: now + message.ttl_ms,
      };
      state.invitations.set(invitation.invitation_id, invitation);
      effects.writes.push({ subkey: `i:${invitation.invitation_id}`, value: invitation });
      effects.sends.push(indexAdd(state.meta!.org_id, invitation));
      return done(invitationView(state.meta!.org_id, invitation), true);
    }

    case 'list_invitations': {
      const meta = requireLive(state);
      const pending = [...state.invitations.values()]
        .filter((i) => i.expires_at_ms > now)
        .sort((a, b) => a.created_at_ms - b.created_at_ms || (a.invitation_id < b.invitation_id ? -1 : 1))
        .map((i) => invitationView(meta.org_id, i));
      return { state, reply: { invitations: pending } };
    }

    case 'revoke_invitation': {
      requireLive(state);
      requireManager(actingRole(state, message.by));
      const invitation = state.invitations.get(message.invitation_id);
      if (!invitation) throw new ServiceError('invitation_not_found', 'No such pending invitation.');
      dropInvitation(state, effects, invitation);
      return done({ revoked: true, invitation: invitationView(state.meta!.org_id, invitation) }, true);
    }

    case 'accept_invitation': {
      requireLive(state);
      const invitation = invitationFor(state, message.invitation_id, message.email, now);
      requireProof(invitation, message.email_verified, message.token_hash);
      const existing = state.members.get(message.user_id);
      if (!existing && state.members.size >= ORG_MEMBERS_MAX) throw new ServiceError('conflict', `An organization may hold at most ${ORG_MEMBERS_MAX} members.`);
      dropInvitation(state, effects, invitation);
      // An existing member keeps their role (an invitation never demotes anyone).
      let member = existing;
      if (!member) {
        member = { user_id: message.user_id, role: invitation.role, joined_at_ms: now };
        putMember(state, effects, message.user_id, member);
      }
      touch(state, effects, now);
      return done({ member: memberView(member), organization: orgView(state) }, true);
    }

    case 'decline_invitation': {
      requireLive(state);
      const invitation = invitationFor(state, message.invitation_id, message.email, now);
      requireProof(invitation, message.email_verified, message.token_hash);
      dropInvitation(state, effects, invitation);
      return done({ declined: true }, true);
    }

    case '$alarm': {
      if (message.name !== INVITATION_ALARM) return { state };
      for (const invitation of [...state.invitations.values()]) {
        if (invitation.expires_at_ms + INVITATION_RETENTION_MS <= now) dropInvitation(state, effects, invitation);
      }
      return done(undefined, true);
    }

    // Additive, for flows (scim): the same messages, answered to the flow that sent them.
    case 'flow-call':
      return answerFlowCall<OrganizationState, OrganizationMessage>(stepOrganization, state, message, context);
  }
}

export function roleAtLeast(role: OrgRole, minimum: OrgRole): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[minimum];
}
