import { ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { sameHash } from '../same-hash.js';
import {
  INVITATION_INDEX_KIND,
  INVITATION_RETENTION_MS,
  normalizeEmail,
  parseDomain,
  ORG_DIRECTORY_KEY,
  ORG_DIRECTORY_KIND,
  ORG_DOMAIN_KIND,
  ORG_DOMAINS_MAX,
  ORG_INVITATIONS_MAX,
  ORG_MEMBERS_MAX,
  SSO_EXEMPT_USERS_MAX,
  USER_ORGS_KIND,
  verificationRecordName,
  verificationRecordValue,
  type Actor,
  type DomainStatus,
  type DomainView,
  type IndexEntry,
  type InvitationView,
  type Member,
  type MyOrgView,
  type OrganizationMessage,
  type OrgDirectorySync,
  type OrgRole,
  type OrgView,
  type UserOrgSync,
} from './messages.js';
import type { OrgFlow } from './flows.js';

/**
 * One organization (kind `organization`, key = org_id; organizations are
 * global, not per tenant): its record, one record per member and one per
 * pending invitation (`records` storage, so adding a member writes one record
 * however large the organization is).
 *
 * Records: `meta` (the organization), `m:<user_id>` (a member), `i:<invitation_id>`
 * (a pending invitation), `d:<domain>` (a domain, pending or verified). A deleted organization keeps only its `meta` record as a
 * tombstone, so its id is never reused and late messages cannot bring it back.
 *
 * Kept in step through the outbox (at-least-once; every receiver is idempotent):
 * - `user-orgs` (key user_id): the user's memberships, each sync carrying the
 *   organization's membership sequence number so an old sync never wins;
 * - `org-invitation-index` (key normalized e-mail): pending invitations by address;
 * - `org-directory`: the organization's summary (list and slug uniqueness), by revision;
 * - `org-domain` (key domain): the claim of each verified domain (one organization per domain).
 *
 * Invariant: a live organization always has at least one owner (`last_owner`).
 */
export const INVITATION_ALARM = 'invitations';

/** The organization's stored record: its view (less the member count, which the members give) plus bookkeeping. */
export interface OrgMeta extends Omit<OrgView, 'member_count'> {
  /** Membership change counter: every user-orgs sync carries the value after its change. */
  seq: number;
  /** Summary revision for the org directory. */
  rev: number;
  deleted: boolean;
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

/** A domain of the organization (record `d:<domain>`); verified once its claim in `org-domain` is held. */
export interface OrgDomain {
  domain: string;
  /** The random part of the TXT value (not a secret: it is published in DNS). */
  token: string;
  status: DomainStatus;
  created_at_ms: number;
  verified_at_ms: number | null;
}

export interface OrganizationState {
  meta: OrgMeta | null;
  members: Map<string, Member>;
  invitations: Map<string, Invitation>;
  domains: Map<string, OrgDomain>;
  owner_count: number;
  /** Flows this organization coordinates that are not done (flows.ts), by flow_id: records `f:<flow_id>`. */
  flows: Map<string, OrgFlow>;
}

const ROLE_RANK: Record<OrgRole, number> = { member: 1, admin: 2, owner: 3 };

export function loadOrganization(_key: string, records: Iterable<[string, unknown]>): OrganizationState {
  const state: OrganizationState = { meta: null, members: new Map(), invitations: new Map(), domains: new Map(), owner_count: 0, flows: new Map() };
  for (const [subkey, value] of records) {
    if (subkey === 'meta') state.meta = value as OrgMeta;
    else if (subkey.startsWith('m:')) {
      const member = value as Member;
      state.members.set(member.user_id, member);
      if (member.role === 'owner') state.owner_count++;
    } else if (subkey.startsWith('i:')) {
      const invitation = value as Invitation;
      state.invitations.set(invitation.invitation_id, invitation);
    } else if (subkey.startsWith('d:')) {
      const domain = value as OrgDomain;
      state.domains.set(domain.domain, domain);
    } else if (subkey.startsWith('f:')) {
      const flow = value as OrgFlow;
      state.flows.set(flow.flow_id, flow);
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

export function invitationView(org_id: string, invitation: Invitation): InvitationView {
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

export function domainView(domain: OrgDomain): DomainView {
  return {
    domain: domain.domain,
    status: domain.status,
    method: 'dns_txt',
    record_name: verificationRecordName(domain.domain),
    record_value: verificationRecordValue(domain.token),
    created_at_ms: domain.created_at_ms,
    verified_at_ms: domain.verified_at_ms,
  };
}

/** The organization's domain, for an owner or admin (not_found otherwise: unknown domain). */
export function requireDomain(state: OrganizationState, domain: string): OrgDomain {
  const found = state.domains.get(domain.toLowerCase());
  if (!found) throw new ServiceError('not_found', 'This organization has no such domain.');
  return found;
}

/** Gives the domain's claim up in `org-domain` (a no-op there when the organization does not hold it). */
export function releaseDomain(org_id: string, domain: string): ActorSend {
  return { kind: ORG_DOMAIN_KIND, key: domain, message: { op: 'release', org_id } };
}

export function memberView(member: Member): Member {
  return { user_id: member.user_id, role: member.role, joined_at_ms: member.joined_at_ms };
}

export function requireLive(state: OrganizationState): OrgMeta {
  if (!state.meta || state.meta.deleted) throw new ServiceError('not_found', 'No such organization.');
  return state.meta;
}

/** The acting role: a platform admin acts as an owner; a non-member gets 404 (the organization is not revealed). */
export function actingRole(state: OrganizationState, by: Actor | undefined): OrgRole {
  if (!by || by.platform_admin) return 'owner';
  const member = state.members.get(by.user_id);
  if (!member) throw new ServiceError('not_found', 'No such organization.');
  return member.role;
}

export function requireManager(role: OrgRole, message = 'Only an owner or admin of the organization can do this.'): void {
  if (role === 'member') throw new ServiceError('forbidden', message);
}

/** What a turn changes: its record writes and its outbox messages. */
export interface Effects {
  writes: RecordWrite[];
  sends: ActorSend[];
}

/** The user-orgs sync of one user's membership (null: none), with the organization's name and SSO policy for them. */
export function syncMessage(meta: OrgMeta, user_id: string, member: Member | null): UserOrgSync {
  return {
    op: 'sync',
    org_id: meta.org_id,
    role: member?.role ?? null,
    joined_at_ms: member?.joined_at_ms ?? 0,
    seq: meta.seq,
    rev: meta.rev,
    name: meta.name,
    sso_enforced: meta.sso_enforced && !meta.deleted,
    sso_exempt: meta.sso_exempt_user_ids.includes(user_id),
  };
}

/** Bumps the summary revision and queues the directory sync (with the meta write). */
export function touch(state: OrganizationState, effects: Effects, now: number): void {
  const meta = state.meta!;
  meta.rev++;
  meta.updated_at_ms = Math.max(meta.updated_at_ms, now);
  effects.writes.push({ subkey: 'meta', value: meta });
  effects.sends.push({ kind: ORG_DIRECTORY_KIND, key: ORG_DIRECTORY_KEY, message: directorySync(state) });
}

/** Sends every member the organization's current name and SSO policy (after a rename or a policy change). */
function fanOut(state: OrganizationState, effects: Effects): void {
  const meta = state.meta!;
  for (const member of state.members.values()) effects.sends.push({ kind: USER_ORGS_KIND, key: member.user_id, message: syncMessage(meta, member.user_id, member) });
}

export function directorySync(state: OrganizationState): OrgDirectorySync {
  const meta = state.meta!;
  return { op: 'sync', org_id: meta.org_id, rev: meta.rev, slug: meta.slug, org: meta.deleted ? null : orgView(state) };
}

/** Sets (or, with null, removes) a membership: record, owner count, seq and the user-orgs sync. */
export function putMember(state: OrganizationState, effects: Effects, user_id: string, member: Member | null): void {
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

export function indexEntry(org_id: string, invitation: Invitation): IndexEntry {
  return {
    invitation_id: invitation.invitation_id,
    org_id,
    role: invitation.role,
    invited_by: invitation.invited_by,
    created_at_ms: invitation.created_at_ms,
    expires_at_ms: invitation.expires_at_ms,
  };
}

function indexRemove(invitation: Invitation): ActorSend {
  return { kind: INVITATION_INDEX_KIND, key: invitation.email, message: { op: 'remove', invitation_id: invitation.invitation_id, expires_at_ms: invitation.expires_at_ms } };
}

/** Drops an invitation; `indexed` false when the address's index never held it (a refused invitation flow). */
export function dropInvitation(state: OrganizationState, effects: Effects, invitation: Invitation, indexed = true): void {
  state.invitations.delete(invitation.invitation_id);
  effects.writes.push({ subkey: `i:${invitation.invitation_id}`, value: undefined });
  if (indexed) effects.sends.push(indexRemove(invitation));
}

/** The alarm for the earliest purge of an expired invitation (null cancels). */
export function invitationAlarm(state: OrganizationState): { name: string; due_ms: number | null } {
  let due: number | null = null;
  for (const invitation of state.invitations.values()) {
    const purge = invitation.expires_at_ms + INVITATION_RETENTION_MS;
    if (due === null || purge < due) due = purge;
  }
  return { name: INVITATION_ALARM, due_ms: due };
}

/** The invitation an invitee may act on: unknown, other address -> not found; expired -> invitation_expired. */
export function invitationFor(state: OrganizationState, invitation_id: string, email: string, now: number): Invitation {
  const invitation = state.invitations.get(invitation_id);
  if (!invitation || invitation.email !== normalizeEmail(email)) throw new ServiceError('invitation_not_found', 'No such pending invitation for your e-mail address.');
  if (invitation.expires_at_ms <= now) throw new ServiceError('invitation_expired', 'This invitation has expired; ask for a new one.');
  return invitation;
}

/**
 * Proof that the invitee controls the address: the token from the invitation
 * e-mail, or an account e-mail already verified. A token, when presented, must match.
 */
export function requireProof(invitation: Invitation, email_verified: boolean, token_hash: string | undefined): void {
  if (token_hash !== undefined) {
    if (!sameHash(token_hash, invitation.token_hash)) throw new ServiceError('forbidden', 'The invitation token is not valid.');
    return;
  }
  if (!email_verified) {
    throw new ServiceError('forbidden', 'Verify your e-mail address first, or use the link from the invitation e-mail (its token).');
  }
}

/** Room for one more member (an existing member takes none). */
export function requireMemberRoom(state: OrganizationState, user_id: string): void {
  if (!state.members.has(user_id) && state.members.size >= ORG_MEMBERS_MAX) throw new ServiceError('conflict', `An organization may hold at most ${ORG_MEMBERS_MAX} members.`);
}

/** Invitations pending in the organization, not counting those to `email` (an invitation to it replaces them). */
export function requireInvitationRoom(state: OrganizationState, email: string, now: number): void {
  let pending = 0;
  for (const invitation of state.invitations.values()) if (invitation.expires_at_ms > now && invitation.email !== email) pending++;
  if (pending >= ORG_INVITATIONS_MAX) {
    throw new ServiceError('conflict', `An organization may hold at most ${ORG_INVITATIONS_MAX} pending invitations; revoke some first.`);
  }
}

/** Ops of one organization's own turn; create, invite, accept, decline and verify_domain are flows (flows.ts), and so is add_member with `check_user`. */
export type SingleTurnMessage = Exclude<OrganizationMessage, { op: 'create' | 'invite' | 'accept_invitation' | 'decline_invitation' | 'verify_domain' | 'flow-call' | 'flow-answer' }>;

/** The decline flow's last step: the invitee's proof (`email`, `email_verified` from the user actor) checked and the invitation dropped. */
export function declineInvitation(
  state: OrganizationState,
  decline: { invitation_id: string; email: string; email_verified: boolean; token_hash?: string },
  context: TurnContext,
): TurnResult<OrganizationState, unknown> {
  requireLive(state);
  const invitation = invitationFor(state, decline.invitation_id, decline.email, context.now);
  requireProof(invitation, decline.email_verified, decline.token_hash);
  const effects: Effects = { writes: [], sends: [] };
  dropInvitation(state, effects, invitation);
  return { state, reply: { declined: true }, ...effects, alarms: [invitationAlarm(state)] };
}

/**
 * The organization's own rules, one turn each. Its outbox messages to the
 * indexes are plain here; flows.ts (the actor's step) asks them to
 * acknowledge and answers an ask when they have (read-your-writes).
 */
export function stepOrganization(state: OrganizationState, message: SingleTurnMessage | AlarmMessage, context: TurnContext): TurnResult<OrganizationState, unknown> {
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
    case 'get': {
      requireLive(state);
      if (!message.by) return { state, reply: orgView(state) };
      const view: MyOrgView = { ...orgView(state), role: actingRole(state, { ...message.by, platform_admin: false }) };
      return { state, reply: view };
    }

    case 'get_member': {
      requireLive(state);
      const member = state.members.get(message.user_id);
      if (!member) throw new ServiceError('not_found', 'Not a member of this organization.');
      return { state, reply: memberView(member) };
    }

    case 'list_members': {
      requireLive(state);
      actingRole(state, message.by);
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
      }
      requireMemberRoom(state, message.user_id);
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
      const renamed = message.name !== undefined && message.name !== meta.name;
      if (message.name !== undefined) meta.name = message.name;
      if (message.logo_url !== undefined) meta.logo_url = message.logo_url;
      if (message.metadata !== undefined) meta.metadata = message.metadata;
      meta.updated_at_ms = now;
      touch(state, effects, now);
      if (renamed) fanOut(state, effects);
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
      fanOut(state, effects);
      return done(orgView(state));
    }

    case 'delete': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      if (acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can delete the organization.');
      const meta = state.meta!;
      // Members lose their membership: their records go, and each member's index hears it.
      const members = [...state.members.keys()];
      for (const user_id of members) effects.writes.push({ subkey: `m:${user_id}`, value: undefined });
      state.members.clear();
      state.owner_count = 0;
      for (const invitation of [...state.invitations.values()]) dropInvitation(state, effects, invitation);
      // Its domains go, and their claims with them (a claim still in flight is released when its answer comes: flows.ts).
      for (const domain of state.domains.keys()) {
        effects.writes.push({ subkey: `d:${domain}`, value: undefined });
        effects.sends.push(releaseDomain(meta.org_id, domain));
      }
      state.domains.clear();
      meta.deleted = true;
      meta.sso_exempt_user_ids = [];
      meta.seq++;
      touch(state, effects, now);
      for (const user_id of members) effects.sends.push({ kind: USER_ORGS_KIND, key: user_id, message: syncMessage(meta, user_id, null) });
      return done({ deleted: true }, true);
    }

    case 'list_invitations': {
      const meta = requireLive(state);
      if (message.by) requireManager(actingRole(state, message.by), 'Only an owner or admin of the organization can see its invitations.');
      const pending = [...state.invitations.values()]
        .filter((i) => i.expires_at_ms > now)
        .sort((a, b) => a.created_at_ms - b.created_at_ms || (a.invitation_id < b.invitation_id ? -1 : 1))
        .map((i) => invitationView(meta.org_id, i));
      return { state, reply: { invitations: pending, org_name: meta.name } };
    }

    case 'revoke_invitation': {
      requireLive(state);
      const acting = actingRole(state, message.by);
      requireManager(acting);
      const invitation = state.invitations.get(message.invitation_id);
      if (!invitation) throw new ServiceError('invitation_not_found', 'No such pending invitation.');
      // Only an owner grants the owner role, so only an owner takes such a grant back.
      if (invitation.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can revoke an invitation to the owner role.');
      dropInvitation(state, effects, invitation);
      return done({ revoked: true, invitation: invitationView(state.meta!.org_id, invitation) }, true);
    }

    case 'add_domain': {
      requireLive(state);
      requireManager(actingRole(state, message.by), 'Only an owner or admin of the organization can manage its domains.');
      const check = parseDomain(message.domain);
      if (!check.ok) throw new ServiceError('BAD_REQUEST', `Not a valid domain: ${check.reason}`, { details: [{ field: 'domain', message: check.reason }] });
      const existing = state.domains.get(check.domain);
      if (existing) return { state, reply: { domain: domainView(existing), created: false } };
      if (state.domains.size >= ORG_DOMAINS_MAX) throw new ServiceError('conflict', `An organization may hold at most ${ORG_DOMAINS_MAX} domains; remove one first.`);
      const domain: OrgDomain = { domain: check.domain, token: message.token, status: 'pending', created_at_ms: now, verified_at_ms: null };
      state.domains.set(domain.domain, domain);
      effects.writes.push({ subkey: `d:${domain.domain}`, value: domain });
      return done({ domain: domainView(domain), created: true });
    }

    case 'list_domains': {
      requireLive(state);
      actingRole(state, message.by);
      const domains = [...state.domains.values()].sort((a, b) => a.created_at_ms - b.created_at_ms || (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0));
      return { state, reply: { domains: domains.map(domainView) } };
    }

    case 'get_domain': {
      requireLive(state);
      requireManager(actingRole(state, message.by), 'Only an owner or admin of the organization can manage its domains.');
      return { state, reply: domainView(requireDomain(state, message.domain)) };
    }

    case 'remove_domain': {
      const meta = requireLive(state);
      requireManager(actingRole(state, message.by), 'Only an owner or admin of the organization can manage its domains.');
      const domain = requireDomain(state, message.domain);
      if ([...state.flows.values()].some((flow) => flow.kind === 'domain' && flow.domain === domain.domain)) {
        throw new ServiceError('conflict', 'This domain is being verified; try again in a moment.');
      }
      state.domains.delete(domain.domain);
      effects.writes.push({ subkey: `d:${domain.domain}`, value: undefined });
      // Released even when pending: the index ignores a release of what the organization does not hold.
      effects.sends.push(releaseDomain(meta.org_id, domain.domain));
      return done({ removed: true });
    }

    case 'domain_verified': {
      if (!state.meta || state.meta.deleted) return { state, reply: { verified: false } };
      return { state, reply: { verified: state.domains.get(message.domain.toLowerCase())?.status === 'verified' } };
    }

    case '$alarm': {
      if (message.name !== INVITATION_ALARM) return { state };
      for (const invitation of [...state.invitations.values()]) {
        if (invitation.expires_at_ms + INVITATION_RETENTION_MS <= now) dropInvitation(state, effects, invitation);
      }
      return done(undefined, true);
    }
  }
}

export function roleAtLeast(role: OrgRole, minimum: OrgRole): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[minimum];
}
