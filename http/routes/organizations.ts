import { randomBytes } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isServiceError, randomId, ServiceError, type ActorClient, serialisedBytes } from '../../runtime/index.js';
import { USER_KIND, type PublicUser } from '../../actors/accounts/messages.js';
import {
  INVITATION_INDEX_KIND,
  INVITATION_TTL_MS_DEFAULT,
  DOMAIN_LENGTH_MAX,
  normalizeEmail,
  ORG_DIRECTORY_KEY,
  ORG_DIRECTORY_KIND,
  ORG_QUERY_MAX,
  ORG_DOMAINS_MAX,
  ORGANIZATION_KIND,
  parseDomain,
  SSO_EXEMPT_USERS_MAX,
  USER_ORGS_KIND,
  type Actor,
  type DomainView,
  type IndexEntry,
  type InvitationAccepted,
  type InvitationCreated,
  type InvitationView,
  type Member,
  type Membership,
  type MyOrgView,
  type OrgRole,
  type OrgView,
} from '../../actors/organizations/messages.js';
import type { Principal } from '../auth/principal.js';
import { CLIENT_SUBJECT_PREFIX, hashSecret } from '../auth/tokens.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { publicBase } from '../public-base.js';

/**
 * Organizations (spec doc 1 §2 Organization, §4.1 `PUT /admin/auth/org/{id}/sso`,
 * §4.2 `GET /api/v1/auth/invitations`; the rest designed here, see
 * docs/api/organizations.md): platform-admin management under /admin/auth,
 * member self-service under /api/v1/orgs, and the invitation flow.
 *
 * Every change is one ask to the organization actor, which checks the
 * caller's role in the same turn (`by`) and coordinates what spans actors
 * (actors/organizations/flows.ts): caps held in the index actors' own turns,
 * and a reply only once the indexes (user-orgs, the invitation index, the org
 * directory) have the change, so a read right after a write sees it. Other
 * asks here are reads (`readOnly`).
 */

const METADATA_BYTES_MAX = 4096;
const INVITATION_TTL_SEC_MAX = 30 * 24 * 3600;

const ROLE = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')], { description: 'owner > admin > member' });
const ORG_ID = Type.String({ minLength: 1, maxLength: 128 });
const USER_ID = Type.String({ minLength: 1, maxLength: 128 });
const SLUG = Type.String({ pattern: '^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?$', description: '1 to 64 letters, digits and inner hyphens; stored lower-case, unique.' });
const NAME = Type.String({ minLength: 1, maxLength: 100 });
const LOGO_URL = Type.Union([Type.String({ maxLength: 2048, pattern: '^https?://\\S+$' }), Type.Null()]);
const METADATA = Type.Record(Type.String(), Type.Unknown(), { description: `A JSON object, at most ${METADATA_BYTES_MAX} bytes.` });

const IdParams = Type.Object({ id: ORG_ID });
const MemberParams = Type.Object({ id: ORG_ID, user_id: USER_ID });
const InvitationParams = Type.Object({ id: ORG_ID, invitation_id: Type.String({ minLength: 1, maxLength: 128 }) });
const MyInvitationParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const DomainParams = Type.Object({ id: ORG_ID, domain: Type.String({ minLength: 1, maxLength: DOMAIN_LENGTH_MAX }) });
const DomainBody = Type.Object({
  domain: Type.String({
    minLength: 1,
    maxLength: DOMAIN_LENGTH_MAX,
    description: 'A DNS name of at least two labels (example.com), stored lower-case; an IDN in its punycode form (xn--...); no trailing dot, no IP address.',
  }),
});

const CreateBody = Type.Object({
  name: NAME,
  slug: Type.Optional(SLUG),
  logo_url: Type.Optional(LOGO_URL),
  metadata: Type.Optional(METADATA),
});
const AdminCreateBody = Type.Object({
  name: NAME,
  slug: Type.Optional(SLUG),
  logo_url: Type.Optional(LOGO_URL),
  metadata: Type.Optional(METADATA),
  owner_user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'The first owner (default: the calling admin).' })),
});
const PatchBody = Type.Object({ name: Type.Optional(NAME), logo_url: Type.Optional(LOGO_URL), metadata: Type.Optional(METADATA) });
const SsoBody = Type.Object({
  sso_enforced: Type.Boolean(),
  sso_exempt_user_ids: Type.Optional(Type.Array(USER_ID, { maxItems: SSO_EXEMPT_USERS_MAX, description: 'Replaces the exempt list when given; absent keeps it.' })),
});
const AddMemberBody = Type.Object({ user_id: USER_ID, role: Type.Optional(ROLE) });
const RoleBody = Type.Object({ role: ROLE });
const InviteBody = Type.Object({
  email: Type.String({ format: 'email', maxLength: 254 }),
  role: Type.Optional(ROLE),
  ttl_sec: Type.Optional(Type.Integer({ minimum: 60, maximum: INVITATION_TTL_SEC_MAX, description: 'Lifetime in seconds (default 604800, 7 days; at most 30 days), as in Auth0.' })),
  redirect_url: Type.Optional(Type.String({ maxLength: 2048, description: 'http(s) URL the mailed link points to; invitation_id and token are added as query parameters.' })),
});
const TokenBody = Type.Object({ token: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })) });
const ListQuery = Type.Object({ page: Type.Optional(Type.Integer({ minimum: 0 })), page_size: Type.Optional(Type.Integer({ minimum: 0 })) });
const AdminListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: ORG_QUERY_MAX, pattern: '^[^\\u0000-\\u001f\\u007f]*$', description: 'Case-insensitive substring of name or slug.' })),
  sso_enforced: Type.Optional(Type.Boolean()),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
});

const OrganizationSchema = Type.Object(
  {
    org_id: Type.String(),
    name: Type.String(),
    slug: Type.String(),
    created_by: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    logo_url: Type.Union([Type.String(), Type.Null()]),
    metadata: Type.Unknown(),
    member_count: Type.Integer(),
    sso_enforced: Type.Boolean(),
    sso_exempt_user_ids: Type.Array(Type.String()),
  },
  { title: 'Organization' },
);
const MyOrganizationSchema = Type.Object({ ...OrganizationSchema.properties, role: ROLE }, { title: 'MyOrganization' });
const MemberSchema = Type.Object(
  {
    user_id: Type.String(),
    role: ROLE,
    joined_at: Type.String({ format: 'date-time' }),
    user: Type.Union([Type.Object({ email: Type.String(), username: Type.String(), display_name: Type.String() }), Type.Null()], {
      description: 'The account, or null if it was deleted.',
    }),
  },
  { title: 'OrganizationMember' },
);
const MembershipSchema = Type.Object({ user_id: Type.String(), role: ROLE, joined_at: Type.String({ format: 'date-time' }) }, { title: 'OrganizationMembership' });
const InvitationSchema = Type.Object(
  {
    id: Type.String(),
    org_id: Type.String(),
    org_name: Type.String(),
    email: Type.String(),
    role: ROLE,
    invited_by: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { title: 'OrganizationInvitation' },
);
const InvitationCreatedSchema = Type.Object(
  {
    ...InvitationSchema.properties,
    token: Type.String({ description: 'Single-use; returned only here (and mailed to the invitee).' }),
    invitation_url: Type.String(),
  },
  { title: 'OrganizationInvitationCreated' },
);

const DomainSchema = Type.Object(
  {
    domain: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('verified')]),
    verification: Type.Object({
      method: Type.Literal('dns_txt'),
      record_name: Type.String({ description: 'The DNS name to publish the TXT record at: _platform-verification.<domain>.' }),
      record_value: Type.String({ description: 'The value the TXT record must hold: platform-verification=<token>.' }),
    }),
    created_at: Type.String({ format: 'date-time' }),
    verified_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { title: 'OrganizationDomain' },
);

/** TXT records (and strings per record) of one lookup passed on to the organization; the rest are ignored. */
const TXT_RECORDS_MAX = 100;
const TXT_STRINGS_MAX = 64;

const userErrors = (...extra: number[]) => errorResponses(...bearerErrors, ...extra);
const adminErrors = (...extra: number[]) => errorResponses(...bearerErrors, 403, ...extra);

function orgOut(org: OrgView) {
  return {
    org_id: org.org_id,
    name: org.name,
    slug: org.slug,
    created_by: org.created_by,
    created_at: isoTime(org.created_at_ms)!,
    updated_at: isoTime(org.updated_at_ms)!,
    logo_url: org.logo_url,
    metadata: org.metadata,
    member_count: org.member_count,
    sso_enforced: org.sso_enforced,
    sso_exempt_user_ids: org.sso_exempt_user_ids,
  };
}

function domainOut(domain: DomainView) {
  return {
    domain: domain.domain,
    status: domain.status,
    verification: { method: domain.method, record_name: domain.record_name, record_value: domain.record_value },
    created_at: isoTime(domain.created_at_ms)!,
    verified_at: isoTime(domain.verified_at_ms),
  };
}

function membershipOut(member: Member) {
  return { user_id: member.user_id, role: member.role, joined_at: isoTime(member.joined_at_ms)! };
}

function invitationOut(invitation: InvitationView | (IndexEntry & { email: string }), org_name: string) {
  return {
    id: invitation.invitation_id,
    org_id: invitation.org_id,
    org_name,
    email: invitation.email,
    role: invitation.role,
    invited_by: invitation.invited_by,
    created_at: isoTime(invitation.created_at_ms)!,
    expires_at: isoTime(invitation.expires_at_ms)!,
  };
}

function paging(query: { page?: number; page_size?: number }) {
  return { page: Math.max(1, query.page ?? 1), page_size: Math.min(100, query.page_size || 20) };
}

function checkMetadata(metadata: unknown): void {
  if (metadata !== undefined && serialisedBytes(metadata) > METADATA_BYTES_MAX) {
    throw new ServiceError('BAD_REQUEST', 'metadata is too large.', { details: [{ field: 'metadata', message: `At most ${METADATA_BYTES_MAX} bytes of JSON.` }] });
  }
}

/** Organization routes act for a user: an OAuth client credential has no user to be a member. */
function requireUser(request: FastifyRequest): Principal {
  const principal = requirePrincipal(request);
  if (principal.user_id.startsWith(CLIENT_SUBJECT_PREFIX)) throw new ServiceError('forbidden', 'Organizations are managed by users, not OAuth clients.');
  return principal;
}

function requireAdmin(request: FastifyRequest): Principal {
  const principal = requirePrincipal(request);
  if (principal.role !== 'admin') throw new ServiceError('forbidden', 'This needs the admin role.');
  return principal;
}

/** A user's memberships as UserDetail.org_memberships shows them (one read: user-orgs keeps each organization's name). */
export async function orgMembershipsOf(actors: ActorClient, user_id: string): Promise<{ org_id: string; org_name: string; role: OrgRole }[]> {
  const { memberships } = await actors.ask<{ memberships: Membership[] }>(USER_ORGS_KIND, user_id, { op: 'list' }, { readOnly: true });
  return memberships.map((m) => ({ org_id: m.org_id, org_name: m.org_name, role: m.role }));
}

function actorOf(principal: Principal, platform_admin = false): Actor {
  return { user_id: principal.user_id, platform_admin };
}

function linkFor(request: FastifyRequest, redirect_url: string | undefined, invitation_id: string, token: string): string {
  let url: URL;
  if (redirect_url === undefined) {
    url = new URL(`/api/v1/auth/invitations/${encodeURIComponent(invitation_id)}/accept`, publicBase(request));
  } else {
    try {
      url = new URL(redirect_url);
    } catch {
      throw new ServiceError('BAD_REQUEST', 'redirect_url is not a URL.', { details: [{ field: 'redirect_url', message: 'Must be an absolute http or https URL.' }] });
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new ServiceError('BAD_REQUEST', 'redirect_url must be http or https.', { details: [{ field: 'redirect_url', message: 'Must be an absolute http or https URL.' }] });
    }
    url.searchParams.set('invitation_id', invitation_id);
  }
  url.searchParams.set('token', token);
  return url.toString();
}

export function organizationRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const { actors } = services;
  const askOrg = <T>(org_id: string, message: unknown) => actors.ask<T>(ORGANIZATION_KIND, org_id, message);

  const readOrg = <T>(org_id: string, message: unknown) => actors.ask<T>(ORGANIZATION_KIND, org_id, message, { readOnly: true });

  /** The user's live memberships with their organizations (one read each); organizations deleted since are skipped. */
  const membershipsOf = async (user_id: string): Promise<{ membership: Membership; org: OrgView }[]> => {
    const { memberships } = await actors.ask<{ memberships: Membership[] }>(USER_ORGS_KIND, user_id, { op: 'list' }, { readOnly: true });
    const rows = await Promise.all(
      memberships.map(async (membership) => {
        try {
          return { membership, org: await actors.ask<OrgView>(ORGANIZATION_KIND, membership.org_id, { op: 'get' }, { readOnly: true }) };
        } catch (error) {
          if (isServiceError(error) && error.code === 'not_found') return null;
          throw error;
        }
      }),
    );
    return rows.filter((row): row is { membership: Membership; org: OrgView } => row !== null);
  };

  /** A page of members (the organization checks `by` is a member), with their accounts (reads). */
  const membersPage = async (org_id: string, query: { page?: number; page_size?: number }, by?: Actor) => {
    const { page, page_size } = paging(query);
    const listed = await readOrg<{ total: number; members: Member[] }>(org_id, { op: 'list_members', page, page_size, by });
    const members = await Promise.all(
      listed.members.map(async (member) => {
        let user: { email: string; username: string; display_name: string } | null = null;
        try {
          const found = await actors.ask<PublicUser>(USER_KIND, member.user_id, { op: 'get' }, { readOnly: true });
          user = { email: found.email, username: found.username, display_name: found.display_name };
        } catch (error) {
          if (!(isServiceError(error) && error.code === 'not_found')) throw error;
        }
        return { ...membershipOut(member), user };
      }),
    );
    return { pagination: { page, page_size, total: listed.total, has_more: page * page_size < listed.total }, members };
  };

  /**
   * The creation flow (one ask): the organization checks the owner's account
   * (an admin's create), holds the owner's slot in user-orgs (under
   * USER_ORGS_MAX when `capped`), claims the slug (derived from the name when
   * absent) and answers when the indexes have it.
   */
  const createOrg = async (input: { name: string; slug?: string; logo_url?: string | null; metadata?: Record<string, unknown> }, created_by: string, owner: string, by_admin: boolean) => {
    checkMetadata(input.metadata);
    const name = input.name.trim();
    if (!name) throw new ServiceError('BAD_REQUEST', 'name is blank.', { details: [{ field: 'name', message: 'Must not be blank.' }] });
    const org_id = randomId('org_');
    return actors.ask<OrgView>(ORGANIZATION_KIND, org_id, {
      op: 'create',
      org_id,
      name,
      slug: input.slug,
      created_by,
      logo_url: input.logo_url ?? null,
      metadata: input.metadata ?? {},
      owner_user_id: owner,
      // A member's create counts against USER_ORGS_MAX; an admin's may name any owner, whose account the flow checks.
      capped: !by_admin,
      check_owner: by_admin,
    });
  };

  const updateOrg = async (org_id: string, body: Static<typeof PatchBody>, by: Actor) => {
    checkMetadata(body.metadata);
    const name = body.name?.trim();
    if (name === '') throw new ServiceError('BAD_REQUEST', 'name is blank.', { details: [{ field: 'name', message: 'Must not be blank.' }] });
    return orgOut(await askOrg<OrgView>(org_id, { op: 'update', name, logo_url: body.logo_url, metadata: body.metadata, by }));
  };

  const deleteOrg = async (org_id: string, by: Actor) => {
    await askOrg(org_id, { op: 'delete', by });
    return { message: 'Organization deleted.' };
  };

  const setRole = async (org_id: string, user_id: string, role: OrgRole, by: Actor) =>
    membershipOut(await askOrg<Member>(org_id, { op: 'set_role', user_id, role, by }));

  const removeMember = async (org_id: string, user_id: string, by: Actor) => {
    const { removed } = await askOrg<{ removed: boolean }>(org_id, { op: 'remove_member', user_id, by });
    if (!removed) throw new ServiceError('not_found', 'Not a member of this organization.');
  };

  /** Adds a domain (201), or returns the organization's existing record of it (200). */
  const addDomain = async (org_id: string, input: string, by: Actor): Promise<{ created: boolean; domain: DomainView }> => {
    const check = parseDomain(input);
    if (!check.ok) throw new ServiceError('BAD_REQUEST', `Not a valid domain: ${check.reason}`, { details: [{ field: 'domain', message: check.reason }] });
    const token = randomBytes(16).toString('hex');
    return askOrg<{ created: boolean; domain: DomainView }>(org_id, { op: 'add_domain', domain: check.domain, token, by });
  };

  const listDomains = async (org_id: string, by: Actor) => {
    const { domains } = await readOrg<{ domains: DomainView[] }>(org_id, { op: 'list_domains', by });
    return { domains: domains.map(domainOut) };
  };

  /**
   * Verification: a read for the record to look up (which also checks the
   * caller's role and the domain, so a stranger triggers no DNS query), the
   * DNS lookup, then one ask carrying what it found: the organization compares
   * and, on a match, claims the domain (a flow) and answers when it holds it.
   */
  const verifyDomain = async (org_id: string, input: string, by: Actor) => {
    const domain = input.toLowerCase();
    const expected = await readOrg<DomainView>(org_id, { op: 'get_domain', domain, by });
    const found = await services.domainResolver.resolveTxt(expected.record_name);
    const txt = found.slice(0, TXT_RECORDS_MAX).map((strings) => strings.slice(0, TXT_STRINGS_MAX));
    return domainOut(await askOrg<DomainView>(org_id, { op: 'verify_domain', domain, txt, by }));
  };

  const removeDomain = async (org_id: string, input: string, by: Actor) => {
    await askOrg(org_id, { op: 'remove_domain', domain: input.toLowerCase(), by });
    return { message: 'Domain removed.' };
  };

  // ======================= admin (platform role admin) =======================

  app.post<{ Body: Static<typeof AdminCreateBody> }>('/admin/auth/orgs', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Create an organization; owner_user_id (default: the calling admin) becomes its first owner. Slug taken: 409 org_slug_taken.',
      security: bearerSecurity,
      body: AdminCreateBody,
      response: { 201: OrganizationSchema, ...adminErrors(404, 409) },
    },
  }, async (request, reply) => {
    const admin = requireAdmin(request);
    const owner = request.body.owner_user_id ?? admin.user_id;
    const org = await createOrg(request.body, admin.user_id, owner, true);
    return reply.code(201).send(orgOut(org));
  });

  app.get<{ Querystring: Static<typeof AdminListQuery> }>('/admin/auth/orgs', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Every organization, oldest first, filtered by q (name or slug) and sso_enforced.',
      security: bearerSecurity,
      querystring: AdminListQuery,
      response: { 200: Type.Object({ pagination: Pagination, organizations: Type.Array(OrganizationSchema) }), ...adminErrors() },
    },
  }, async (request) => {
    requireAdmin(request);
    const { page, page_size } = paging(request.query);
    const listed = await actors.ask<{ total: number; organizations: OrgView[] }>(
      ORG_DIRECTORY_KIND,
      ORG_DIRECTORY_KEY,
      { op: 'list', q: request.query.q, sso_enforced: request.query.sso_enforced, page, page_size },
      { readOnly: true },
    );
    return { pagination: { page, page_size, total: listed.total, has_more: page * page_size < listed.total }, organizations: listed.organizations.map(orgOut) };
  });

  app.get<{ Params: Static<typeof IdParams> }>('/admin/auth/org/:id', {
    onRequest: authenticate,
    schema: { tags: ['admin'], summary: 'One organization.', security: bearerSecurity, params: IdParams, response: { 200: OrganizationSchema, ...adminErrors(404) } },
  }, async (request) => {
    requireAdmin(request);
    return orgOut(await readOrg<OrgView>(request.params.id, { op: 'get' }));
  });

  app.patch<{ Params: Static<typeof IdParams>; Body: Static<typeof PatchBody> }>('/admin/auth/org/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Change name, logo_url or metadata (all optional; the slug is fixed).',
      security: bearerSecurity,
      params: IdParams,
      body: PatchBody,
      response: { 200: OrganizationSchema, ...adminErrors(404) },
    },
  }, async (request) => updateOrg(request.params.id, request.body, actorOf(requireAdmin(request), true)));

  app.delete<{ Params: Static<typeof IdParams> }>('/admin/auth/org/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Delete an organization: every member loses the membership, pending invitations die, the slug is free again.',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: MessageBody, ...adminErrors(404) },
    },
  }, async (request) => deleteOrg(request.params.id, actorOf(requireAdmin(request), true)));

  app.put<{ Params: Static<typeof IdParams>; Body: Static<typeof SsoBody> }>('/admin/auth/org/:id/sso', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Set SSO enforcement: when on, members not in sso_exempt_user_ids cannot sign in with a password (403 sso_required).',
      security: bearerSecurity,
      params: IdParams,
      body: SsoBody,
      response: { 200: OrganizationSchema, ...adminErrors(404) },
    },
  }, async (request) => {
    requireAdmin(request);
    return orgOut(await askOrg<OrgView>(request.params.id, { op: 'set_sso', sso_enforced: request.body.sso_enforced, sso_exempt_user_ids: request.body.sso_exempt_user_ids }));
  });

  app.get<{ Params: Static<typeof IdParams>; Querystring: Static<typeof ListQuery> }>('/admin/auth/org/:id/members', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Members, in joining order.',
      security: bearerSecurity,
      params: IdParams,
      querystring: ListQuery,
      response: { 200: Type.Object({ pagination: Pagination, members: Type.Array(MemberSchema) }), ...adminErrors(404) },
    },
  }, async (request) => {
    requireAdmin(request);
    return membersPage(request.params.id, request.query);
  });

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof AddMemberBody> }>('/admin/auth/org/:id/members', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Add an existing user (role default member); an existing member gets the given role. Demoting the last owner: 409 last_owner.',
      security: bearerSecurity,
      params: IdParams,
      body: AddMemberBody,
      response: { 201: MembershipSchema, ...adminErrors(404, 409) },
    },
  }, async (request, reply) => {
    const admin = requireAdmin(request);
    // One ask: the organization checks itself, then asks the user actor that the account exists (404 otherwise).
    const member = await askOrg<Member>(request.params.id, { op: 'add_member', user_id: request.body.user_id, role: request.body.role ?? 'member', by: actorOf(admin, true), check_user: true });
    return reply.code(201).send(membershipOut(member));
  });

  app.patch<{ Params: Static<typeof MemberParams>; Body: Static<typeof RoleBody> }>('/admin/auth/org/:id/members/:user_id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: "Change a member's role. Demoting the last owner: 409 last_owner.",
      security: bearerSecurity,
      params: MemberParams,
      body: RoleBody,
      response: { 200: MembershipSchema, ...adminErrors(404, 409) },
    },
  }, async (request) => setRole(request.params.id, request.params.user_id, request.body.role, actorOf(requireAdmin(request), true)));

  app.delete<{ Params: Static<typeof MemberParams> }>('/admin/auth/org/:id/members/:user_id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Remove a member. The last owner: 409 last_owner.',
      security: bearerSecurity,
      params: MemberParams,
      response: { 200: MessageBody, ...adminErrors(404, 409) },
    },
  }, async (request) => {
    await removeMember(request.params.id, request.params.user_id, actorOf(requireAdmin(request), true));
    return { message: 'Member removed.' };
  });

  // ======================= domains (admin) =======================

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof DomainBody> }>('/admin/auth/org/:id/domains', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: `Add a domain to verify (201, pending, with the DNS TXT record to publish); a domain the organization has already: 200 as it is. At most ${ORG_DOMAINS_MAX}: 409 conflict.`,
      security: bearerSecurity,
      params: IdParams,
      body: DomainBody,
      response: { 200: DomainSchema, 201: DomainSchema, ...adminErrors(404, 409) },
    },
  }, async (request, reply) => {
    const { created, domain } = await addDomain(request.params.id, request.body.domain, actorOf(requireAdmin(request), true));
    return reply.code(created ? 201 : 200).send(domainOut(domain));
  });

  app.get<{ Params: Static<typeof IdParams> }>('/admin/auth/org/:id/domains', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: "The organization's domains, pending and verified, oldest first.",
      security: bearerSecurity,
      params: IdParams,
      response: { 200: Type.Object({ domains: Type.Array(DomainSchema) }), ...adminErrors(404) },
    },
  }, async (request) => listDomains(request.params.id, actorOf(requireAdmin(request), true)));

  app.post<{ Params: Static<typeof DomainParams> }>('/admin/auth/org/:id/domains/:domain/verify', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Look up the DNS TXT record and verify the domain. Not found: 409 domain_not_verified; verified by another organization: 409 domain_taken.',
      security: bearerSecurity,
      params: DomainParams,
      response: { 200: DomainSchema, ...adminErrors(404, 409) },
    },
  }, async (request) => verifyDomain(request.params.id, request.params.domain, actorOf(requireAdmin(request), true)));

  app.delete<{ Params: Static<typeof DomainParams> }>('/admin/auth/org/:id/domains/:domain', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Remove a domain; a verified one is free for other organizations again.',
      security: bearerSecurity,
      params: DomainParams,
      response: { 200: MessageBody, ...adminErrors(404, 409) },
    },
  }, async (request) => removeDomain(request.params.id, request.params.domain, actorOf(requireAdmin(request), true)));

  // ======================= members (/api/v1/orgs) =======================

  app.post<{ Body: Static<typeof CreateBody> }>('/api/v1/orgs', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Create an organization; the caller becomes its owner. Slug taken: 409 org_slug_taken.',
      security: bearerSecurity,
      body: CreateBody,
      response: { 201: OrganizationSchema, ...userErrors(403, 409) },
    },
  }, async (request, reply) => {
    const principal = requireUser(request);
    const org = await createOrg(request.body, principal.user_id, principal.user_id, false);
    return reply.code(201).send(orgOut(org));
  });

  app.get<{ Querystring: Static<typeof ListQuery> }>('/api/v1/orgs', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: "The caller's organizations with the caller's role, in joining order.",
      security: bearerSecurity,
      querystring: ListQuery,
      response: { 200: Type.Object({ pagination: Pagination, organizations: Type.Array(MyOrganizationSchema) }), ...userErrors(403) },
    },
  }, async (request) => {
    const principal = requireUser(request);
    const { page, page_size } = paging(request.query);
    const rows = await membershipsOf(principal.user_id);
    const start = (page - 1) * page_size;
    return {
      pagination: { page, page_size, total: rows.length, has_more: page * page_size < rows.length },
      organizations: rows.slice(start, start + page_size).map(({ membership, org }) => ({ ...orgOut(org), role: membership.role })),
    };
  });

  app.get<{ Params: Static<typeof IdParams> }>('/api/v1/orgs/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'One organization the caller belongs to (404 for anyone else).',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: MyOrganizationSchema, ...userErrors(403, 404) },
    },
  }, async (request) => {
    const principal = requireUser(request);
    const org = await readOrg<MyOrgView>(request.params.id, { op: 'get', by: actorOf(principal) });
    return { ...orgOut(org), role: org.role };
  });

  app.patch<{ Params: Static<typeof IdParams>; Body: Static<typeof PatchBody> }>('/api/v1/orgs/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Change name, logo_url or metadata (owner or admin).',
      security: bearerSecurity,
      params: IdParams,
      body: PatchBody,
      response: { 200: OrganizationSchema, ...userErrors(403, 404) },
    },
  }, async (request) => updateOrg(request.params.id, request.body, actorOf(requireUser(request))));

  app.delete<{ Params: Static<typeof IdParams> }>('/api/v1/orgs/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Delete the organization (owner only).',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: MessageBody, ...userErrors(403, 404) },
    },
  }, async (request) => deleteOrg(request.params.id, actorOf(requireUser(request))));

  app.get<{ Params: Static<typeof IdParams>; Querystring: Static<typeof ListQuery> }>('/api/v1/orgs/:id/members', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Members, in joining order (any member may list).',
      security: bearerSecurity,
      params: IdParams,
      querystring: ListQuery,
      response: { 200: Type.Object({ pagination: Pagination, members: Type.Array(MemberSchema) }), ...userErrors(403, 404) },
    },
  }, async (request) => {
    return membersPage(request.params.id, request.query, actorOf(requireUser(request)));
  });

  app.patch<{ Params: Static<typeof MemberParams>; Body: Static<typeof RoleBody> }>('/api/v1/orgs/:id/members/:user_id', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: "Change a member's role: an owner changes any role; an admin only between member and admin, never an owner's. Last owner: 409 last_owner.",
      security: bearerSecurity,
      params: MemberParams,
      body: RoleBody,
      response: { 200: MembershipSchema, ...userErrors(403, 404, 409) },
    },
  }, async (request) => setRole(request.params.id, request.params.user_id, request.body.role, actorOf(requireUser(request))));

  app.delete<{ Params: Static<typeof MemberParams> }>('/api/v1/orgs/:id/members/:user_id', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Remove a member (owner: anyone; admin: admins and members) or, with your own id, leave. Last owner: 409 last_owner.',
      security: bearerSecurity,
      params: MemberParams,
      response: { 200: MessageBody, ...userErrors(403, 404, 409) },
    },
  }, async (request) => {
    await removeMember(request.params.id, request.params.user_id, actorOf(requireUser(request)));
    return { message: 'Member removed.' };
  });

  app.post<{ Params: Static<typeof IdParams> }>('/api/v1/orgs/:id/leave', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Leave the organization. The last owner: 409 last_owner.',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: MessageBody, ...userErrors(403, 404, 409) },
    },
  }, async (request) => {
    const principal = requireUser(request);
    await removeMember(request.params.id, principal.user_id, actorOf(principal));
    return { message: 'You left the organization.' };
  });

  // ======================= domains =======================

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof DomainBody> }>('/api/v1/orgs/:id/domains', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: `Add a domain to verify (owner or admin): 201, pending, with the DNS TXT record to publish; a domain the organization has already: 200 as it is. At most ${ORG_DOMAINS_MAX}: 409 conflict.`,
      security: bearerSecurity,
      params: IdParams,
      body: DomainBody,
      response: { 200: DomainSchema, 201: DomainSchema, ...userErrors(403, 404, 409) },
    },
  }, async (request, reply) => {
    const { created, domain } = await addDomain(request.params.id, request.body.domain, actorOf(requireUser(request)));
    return reply.code(created ? 201 : 200).send(domainOut(domain));
  });

  app.get<{ Params: Static<typeof IdParams> }>('/api/v1/orgs/:id/domains', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: "The organization's domains, pending and verified, oldest first (any member).",
      security: bearerSecurity,
      params: IdParams,
      response: { 200: Type.Object({ domains: Type.Array(DomainSchema) }), ...userErrors(403, 404) },
    },
  }, async (request) => listDomains(request.params.id, actorOf(requireUser(request))));

  app.post<{ Params: Static<typeof DomainParams> }>('/api/v1/orgs/:id/domains/:domain/verify', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Look up the DNS TXT record and verify the domain (owner or admin). Not found: 409 domain_not_verified; verified by another organization: 409 domain_taken.',
      security: bearerSecurity,
      params: DomainParams,
      response: { 200: DomainSchema, ...userErrors(403, 404, 409) },
    },
  }, async (request) => verifyDomain(request.params.id, request.params.domain, actorOf(requireUser(request))));

  app.delete<{ Params: Static<typeof DomainParams> }>('/api/v1/orgs/:id/domains/:domain', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Remove a domain (owner or admin); a verified one is free for other organizations again.',
      security: bearerSecurity,
      params: DomainParams,
      response: { 200: MessageBody, ...userErrors(403, 404, 409) },
    },
  }, async (request) => removeDomain(request.params.id, request.params.domain, actorOf(requireUser(request))));

  // ======================= invitations =======================

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof InviteBody> }>('/api/v1/orgs/:id/invitations', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Invite an e-mail address (owner or admin; only an owner invites owners). The token is returned once and mailed; valid ttl_sec (default 7 days). Re-inviting replaces the pending invitation.',
      security: bearerSecurity,
      params: IdParams,
      body: InviteBody,
      response: { 201: InvitationCreatedSchema, ...userErrors(403, 404, 409) },
    },
  }, async (request, reply) => {
    const principal = requireUser(request);
    const org_id = request.params.id;
    const email = normalizeEmail(request.body.email);
    const role = request.body.role ?? 'member';
    const invitation_id = randomId('inv_');
    const token = `oit_${randomBytes(32).toString('base64url')}`;
    const link = linkFor(request, request.body.redirect_url, invitation_id, token);
    const { invitation, org_name } = await askOrg<InvitationCreated>(org_id, {
      op: 'invite',
      invitation_id,
      email,
      role,
      token_hash: hashSecret(token),
      ttl_ms: request.body.ttl_sec !== undefined ? request.body.ttl_sec * 1000 : INVITATION_TTL_MS_DEFAULT,
      by: actorOf(principal),
    });
    await services.mail.send({
      to: email,
      subject: `You are invited to join ${org_name}`,
      text: `You have been invited to join the organization "${org_name}" as ${role}.\n\nSign in with this e-mail address and accept before ${isoTime(invitation.expires_at_ms)}:\n\n${link}\n\nIf you did not expect this, ignore this message.`,
      link,
    });
    return reply.code(201).send({ ...invitationOut(invitation, org_name), token, invitation_url: link });
  });

  app.get<{ Params: Static<typeof IdParams> }>('/api/v1/orgs/:id/invitations', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Pending (unexpired) invitations of the organization, oldest first (owner or admin).',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: Type.Object({ invitations: Type.Array(InvitationSchema) }), ...userErrors(403, 404) },
    },
  }, async (request) => {
    const principal = requireUser(request);
    const { invitations, org_name } = await readOrg<{ invitations: InvitationView[]; org_name: string }>(request.params.id, { op: 'list_invitations', by: actorOf(principal) });
    return { invitations: invitations.map((i) => invitationOut(i, org_name)) };
  });

  app.delete<{ Params: Static<typeof InvitationParams> }>('/api/v1/orgs/:id/invitations/:invitation_id', {
    onRequest: authenticate,
    schema: {
      tags: ['organizations'],
      summary: 'Revoke a pending invitation (owner or admin): its token stops working.',
      security: bearerSecurity,
      params: InvitationParams,
      response: { 200: MessageBody, ...userErrors(403, 404) },
    },
  }, async (request) => {
    const principal = requireUser(request);
    await askOrg(request.params.id, { op: 'revoke_invitation', invitation_id: request.params.invitation_id, by: actorOf(principal) });
    return { message: 'Invitation revoked.' };
  });

  /**
   * Where one of the caller's pending invitations is (404 otherwise): reads
   * that route the ask (the address's index names the organization). They
   * guard nothing: the organization's flow asks the user actor for the
   * e-mail and whether it is verified, and checks the proof on that answer.
   */
  const myInvitation = async (request: FastifyRequest, invitation_id: string) => {
    const principal = requireUser(request);
    const user = await actors.ask<PublicUser>(USER_KIND, principal.user_id, { op: 'get' }, { readOnly: true });
    const email = normalizeEmail(user.email);
    const { invitation: entry } = await actors.ask<{ invitation: IndexEntry | null }>(INVITATION_INDEX_KIND, email, { op: 'get', invitation_id }, { readOnly: true });
    if (!entry) throw new ServiceError('invitation_not_found', 'No such pending invitation for your e-mail address.');
    return { principal, entry };
  };

  /** Runs an invitee operation on the organization; an organization gone since is just an unknown invitation. */
  const askInvitation = async <T>(org_id: string, message: unknown): Promise<T> => {
    try {
      return await askOrg<T>(org_id, message);
    } catch (error) {
      if (isServiceError(error) && error.code === 'not_found') throw new ServiceError('invitation_not_found', 'No such pending invitation for your e-mail address.');
      throw error;
    }
  };

  app.get('/api/v1/auth/invitations', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: "The caller's pending organization invitations (to the account's e-mail, verified or not), newest first.",
      security: bearerSecurity,
      response: { 200: Type.Object({ invitations: Type.Array(InvitationSchema) }), ...userErrors(403) },
    },
  }, async (request) => {
    const principal = requireUser(request);
    const user = await actors.ask<PublicUser>(USER_KIND, principal.user_id, { op: 'get' }, { readOnly: true });
    const email = normalizeEmail(user.email);
    const { invitations } = await actors.ask<{ invitations: IndexEntry[] }>(INVITATION_INDEX_KIND, email, { op: 'list' }, { readOnly: true });
    const names = new Map<string, string | null>();
    await Promise.all(
      [...new Set(invitations.map((i) => i.org_id))].map(async (org_id) => {
        try {
          names.set(org_id, (await readOrg<OrgView>(org_id, { op: 'get' })).name);
        } catch (error) {
          if (!(isServiceError(error) && error.code === 'not_found')) throw error;
          names.set(org_id, null);
        }
      }),
    );
    return {
      invitations: invitations.filter((i) => names.get(i.org_id)).map((i) => invitationOut({ ...i, email }, names.get(i.org_id)!)),
    };
  });

  const optionalBody = async (request: FastifyRequest) => {
    if (request.body === undefined || request.body === null) request.body = {};
  };

  app.post<{ Params: Static<typeof MyInvitationParams>; Body: Static<typeof TokenBody> }>('/api/v1/auth/invitations/:id/accept', {
    onRequest: authenticate,
    preValidation: optionalBody,
    schema: {
      tags: ['auth'],
      summary: 'Accept an invitation to your e-mail address: with a verified e-mail, or with the token from the invitation e-mail. Expired: 409 invitation_expired.',
      security: bearerSecurity,
      params: MyInvitationParams,
      body: TokenBody,
      response: { 200: Type.Object({ organization: OrganizationSchema, membership: MembershipSchema }), ...userErrors(403, 404, 409) },
    },
  }, async (request) => {
    const { principal, entry } = await myInvitation(request, request.params.id);
    const token = request.body.token;
    const accepted = await askInvitation<InvitationAccepted>(entry.org_id, {
      op: 'accept_invitation',
      invitation_id: entry.invitation_id,
      user_id: principal.user_id,
      token_hash: token === undefined ? undefined : hashSecret(token),
    });
    return { organization: orgOut(accepted.organization), membership: membershipOut(accepted.member) };
  });

  app.post<{ Params: Static<typeof MyInvitationParams>; Body: Static<typeof TokenBody> }>('/api/v1/auth/invitations/:id/decline', {
    onRequest: authenticate,
    preValidation: optionalBody,
    schema: {
      tags: ['auth'],
      summary: 'Decline an invitation to your e-mail address (same proof as accept).',
      security: bearerSecurity,
      params: MyInvitationParams,
      body: TokenBody,
      response: { 200: MessageBody, ...userErrors(403, 404, 409) },
    },
  }, async (request) => {
    const { principal, entry } = await myInvitation(request, request.params.id);
    const token = request.body.token;
    await askInvitation(entry.org_id, {
      op: 'decline_invitation',
      invitation_id: entry.invitation_id,
      user_id: principal.user_id,
      token_hash: token === undefined ? undefined : hashSecret(token),
    });
    return { message: 'Invitation declined.' };
  });
}
