import { randomBytes } from 'node:crypto';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isServiceError, randomId, ServiceError } from '../../runtime/index.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import {
  parseFilter,
  parsePatch,
  SCIM_DIRECTORY_KIND,
  SCIM_TOKEN_TTL_DEFAULT_DAYS,
  SCIM_TOKEN_TTL_MAX_DAYS,
  scimBoolean,
  scimDisplayName,
  scimError,
  type ScimAttributes,
  type ScimChange,
  type ScimDirectoryMessage,
  type ScimEmail,
  type ScimFlowReply,
  type ScimName,
  type ScimTokenManager,
  type ScimTokenView,
  type ScimUserPage,
  type ScimUserRecord,
  type ScimVerifiedToken,
} from '../../actors/scim/messages.js';
import { UNUSABLE_PASSWORD_HASH } from '../auth/passwords.js';
import { newScimToken, parseScimToken } from '../scim/tokens.js';
import { mintingCredential, requireLiveMintingCredential } from '../scim/minting-credential.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { addJsonMediaType } from '../plugins/json-body.js';
import { SCIM_CONTENT_TYPE, sendScimError, useErrorFormat } from '../plugins/error-handler.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';
import { publicBase } from '../public-base.js';

/**
 * SCIM 2.0 (RFC 7643/7644, spec doc 1 §4.4) and the issuing of its
 * provisioning tokens. See docs/api/scim.md.
 *
 * - `/api/v1/orgs/{org_id}/scim-tokens`: an org owner or admin (or a platform
 *   admin) issues, lists and revokes the organization's SCIM bearer tokens.
 * - `/scim/v2/...`: a plugin scope of its own, with SCIM's content type
 *   (`application/scim+json`, parsed by the shared JSON body plugin;
 *   `application/json` is accepted on input), SCIM error bodies (the error
 *   handler's 'scim' format), and authentication by SCIM token only: the
 *   organization comes from the token.
 *
 * Every write is one ask of the organization's scim-directory actor, which
 * runs it as a flow (actors/scim/flows.ts). The user body is checked here by
 * hand, not by TypeBox: SCIM attribute names are case-insensitive (RFC 7643
 * §2.1), so a schema could not type `userName` without refusing `username`,
 * and a wrong value must answer scimType invalidValue, not the schema's
 * invalidSyntax.
 */
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
const LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
const SPC_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig';
const RESOURCE_TYPE_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:ResourceType';
const SCHEMA_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Schema';

/** Paging (RFC 7644 §3.4.2.4): count defaults to 100 and is capped at 200 (maxResults). */
export const SCIM_COUNT_DEFAULT = 100;
export const SCIM_COUNT_MAX = 200;
const EMAILS_MAX = 10;
const STRING_MAX = 256;

// ---------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------

const ScimError = Type.Object(
  {
    schemas: Type.Array(Type.String()),
    status: Type.String({ description: 'The HTTP status, as a string (RFC 7644 §3.12).' }),
    scimType: Type.Optional(Type.String()),
    detail: Type.String(),
  },
  { title: 'ScimError' },
);

const ScimNameSchema = Type.Object({
  formatted: Type.Optional(Type.String()),
  familyName: Type.Optional(Type.String()),
  givenName: Type.Optional(Type.String()),
  middleName: Type.Optional(Type.String()),
  honorificPrefix: Type.Optional(Type.String()),
  honorificSuffix: Type.Optional(Type.String()),
});

const ScimUserSchema = Type.Object(
  {
    schemas: Type.Array(Type.String()),
    id: Type.String(),
    externalId: Type.Optional(Type.String()),
    userName: Type.String(),
    displayName: Type.Optional(Type.String()),
    name: Type.Optional(ScimNameSchema),
    emails: Type.Array(Type.Object({ value: Type.String(), type: Type.String(), primary: Type.Boolean() })),
    active: Type.Boolean(),
    meta: Type.Object({ resourceType: Type.String(), created: Type.String(), lastModified: Type.String(), location: Type.String() }),
  },
  { title: 'ScimUser' },
);

const ScimListSchema = Type.Object(
  {
    schemas: Type.Array(Type.String()),
    totalResults: Type.Integer(),
    startIndex: Type.Integer(),
    itemsPerPage: Type.Integer(),
    Resources: Type.Array(ScimUserSchema),
  },
  { title: 'ScimList' },
);

/** Discovery documents: fixed shapes, served as built below. */
const DiscoveryDocument = Type.Object({ schemas: Type.Array(Type.String()) }, { additionalProperties: true });
const DiscoveryList = Type.Object(
  {
    schemas: Type.Array(Type.String()),
    totalResults: Type.Integer(),
    startIndex: Type.Integer(),
    itemsPerPage: Type.Integer(),
    Resources: Type.Array(Type.Object({}, { additionalProperties: true })),
  },
  { additionalProperties: true },
);

/** A SCIM user body: every attribute optional to the validator; checked by hand to answer SCIM errors. */
const ScimUserBody = Type.Object(
  {
    schemas: Type.Optional(Type.Array(Type.String())),
    userName: Type.Optional(Type.Unknown({ description: 'Required (string): unique in the organization, case-insensitively.' })),
    externalId: Type.Optional(Type.Unknown()),
    displayName: Type.Optional(Type.Unknown()),
    name: Type.Optional(Type.Unknown()),
    emails: Type.Optional(Type.Unknown()),
    active: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: true, description: 'A SCIM User (RFC 7643 §4.1). Unknown attributes are ignored.' },
);
const PatchBody = Type.Object(
  {
    schemas: Type.Optional(Type.Array(Type.String())),
    Operations: Type.Optional(Type.Array(Type.Unknown())),
  },
  { additionalProperties: true, description: 'A SCIM PatchOp (RFC 7644 §3.5.2): only replace of active (false) and displayName.' },
);

const ScimIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const ListQuery = Type.Object({
  // The filter parser bounds it (FILTER_LENGTH_MAX, 1,000 characters) and answers scimType invalidFilter, as
  // RFC 7644 wants for a filter it refuses; this outer bound only keeps the request small.
  filter: Type.Optional(Type.String({ maxLength: 8192 })),
  startIndex: Type.Optional(Type.Integer({ description: '1-based; values below 1 are treated as 1.' })),
  count: Type.Optional(Type.Integer({ description: `Default ${SCIM_COUNT_DEFAULT}, at most ${SCIM_COUNT_MAX}; 0 (or less) returns only totalResults.` })),
});

const OrgParams = Type.Object({ org_id: Type.String({ minLength: 1, maxLength: 128 }) });
const TokenParams = Type.Object({ org_id: Type.String({ minLength: 1, maxLength: 128 }), token_id: Type.String({ minLength: 1, maxLength: 64 }) });
const CreateTokenBody = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A label, e.g. "Okta". Default "SCIM token".' })),
  expires_in_days: Type.Optional(
    Type.Union([Type.Integer({ minimum: 1, maximum: SCIM_TOKEN_TTL_MAX_DAYS }), Type.Null()], {
      description: `Lifetime in days, 1 to ${SCIM_TOKEN_TTL_MAX_DAYS}; absent or null: ${SCIM_TOKEN_TTL_DEFAULT_DAYS}. Every token expires.`,
    }),
  ),
});
const ScimTokenSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    org_id: Type.String(),
    created_by: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'null only on a token issued before tokens expired (refused at use).' }),
    minted_with: Type.Union([Type.Literal('session'), Type.Literal('api_key'), Type.Null()], {
      description: 'The credential that issued it; the token works only while that session or API key does. null: issued before this was recorded (refused at use).',
    }),
  },
  { title: 'ScimToken' },
);
const ScimTokenCreatedSchema = Type.Object(
  { ...ScimTokenSchema.properties, token: Type.String({ description: 'The bearer for /scim/v2: shown only in this reply.' }) },
  { title: 'ScimTokenCreated' },
);

// ---------------------------------------------------------------------------
// Views and helpers
// ---------------------------------------------------------------------------

/** PUBLIC_BASE_URL when set, else the node's own URL (http/public-base.ts), never the Host header. */
function baseUrl(request: FastifyRequest, _configured: string): string {
  return publicBase(request);
}

function scimUserView(user: ScimUserRecord, base: string) {
  const view: Record<string, unknown> = {
    schemas: [USER_SCHEMA],
    id: user.id,
    userName: user.userName,
    emails: user.emails,
    active: user.active,
    meta: {
      resourceType: 'User',
      created: isoTime(user.created_at_ms)!,
      lastModified: isoTime(user.updated_at_ms)!,
      location: `${base}/scim/v2/Users/${encodeURIComponent(user.id)}`,
    },
  };
  if (user.externalId !== null) view.externalId = user.externalId;
  if (user.displayName !== null) view.displayName = user.displayName;
  if (user.name !== null) view.name = user.name;
  return view;
}

function tokenOut(org_id: string, token: ScimTokenView) {
  return {
    id: token.id,
    name: token.name,
    org_id,
    created_by: token.created_by,
    created_at: isoTime(token.created_at_ms)!,
    expires_at: isoTime(token.expires_at_ms),
    minted_with: token.minted_with,
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Attribute names are case-insensitive (RFC 7643 §2.1): the body's keys, lower-cased. */
function lowerKeys(body: Record<string, unknown>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [key, value] of Object.entries(body)) if (!out.has(key.toLowerCase())) out.set(key.toLowerCase(), value);
  return out;
}

function optionalString(value: unknown, attribute: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > STRING_MAX) throw scimError('scim_invalid_value', `${attribute} must be a string of at most ${STRING_MAX} characters.`);
  return value.trim() === '' ? null : value;
}

const EMAIL_PATTERN = /^[^\s@]{1,64}@[^\s@]{1,189}$/;
const NAME_PARTS: (keyof ScimName)[] = ['formatted', 'familyName', 'givenName', 'middleName', 'honorificPrefix', 'honorificSuffix'];

/** The stored attributes of a SCIM user body (create and PUT); unknown attributes are ignored. */
export function scimAttributes(body: unknown): ScimAttributes & { active: boolean } {
  if (!isObject(body)) throw scimError('scim_invalid_syntax', 'The body must be a JSON object.');
  const fields = lowerKeys(body);
  const userName = fields.get('username');
  if (typeof userName !== 'string' || userName.trim() === '' || userName.length > STRING_MAX) {
    throw scimError('scim_invalid_value', `userName is required: a non-empty string of at most ${STRING_MAX} characters.`);
  }
  let name: ScimName | null = null;
  const rawName = fields.get('name');
  if (rawName !== undefined && rawName !== null) {
    if (!isObject(rawName)) throw scimError('scim_invalid_value', 'name must be an object.');
    const parts = lowerKeys(rawName);
    const parsed: ScimName = {};
    for (const part of NAME_PARTS) {
      const value = optionalString(parts.get(part.toLowerCase()), `name.${part}`);
      if (value !== null) parsed[part] = value;
    }
    name = Object.keys(parsed).length > 0 ? parsed : null;
  }
  const emails: ScimEmail[] = [];
  const rawEmails = fields.get('emails');
  if (rawEmails !== undefined && rawEmails !== null) {
    if (!Array.isArray(rawEmails) || rawEmails.length > EMAILS_MAX) throw scimError('scim_invalid_value', `emails must be an array of at most ${EMAILS_MAX} items.`);
    for (const item of rawEmails) {
      if (!isObject(item)) throw scimError('scim_invalid_value', 'Each emails item must be an object with a value.');
      const parts = lowerKeys(item);
      const value = parts.get('value');
      if (typeof value !== 'string' || !EMAIL_PATTERN.test(value.trim())) throw scimError('scim_invalid_value', 'Each emails item needs a value that is an e-mail address.');
      const type = optionalString(parts.get('type'), 'emails.type') ?? 'work';
      const primary = parts.get('primary') === undefined ? false : scimBoolean(parts.get('primary'), 'emails.primary');
      emails.push({ value: value.trim(), type: type.slice(0, 32), primary });
    }
  }
  const rawDisplayName = fields.get('displayname');
  return {
    userName: userName.trim(),
    externalId: optionalString(fields.get('externalid'), 'externalId'),
    displayName: rawDisplayName === undefined || rawDisplayName === null ? null : scimDisplayName(rawDisplayName),
    name,
    emails,
    active: fields.get('active') === undefined || fields.get('active') === null ? true : scimBoolean(fields.get('active'), 'active'),
  };
}

/** The platform account's e-mail: the primary e-mail, else the first, else an e-mail-shaped userName. */
function platformEmail(attributes: ScimAttributes): string {
  const email = attributes.emails.find((e) => e.primary)?.value ?? attributes.emails[0]?.value ?? (EMAIL_PATTERN.test(attributes.userName) ? attributes.userName : null);
  if (!email) throw scimError('scim_invalid_value', 'An e-mail address is required: send emails, or a userName that is an e-mail address.');
  return email;
}

/** A platform username derived from the userName (its local part), made unique with a random suffix. */
function platformUsername(userName: string): string {
  const local = userName.split('@')[0].replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 20);
  return `${local.length >= 2 ? local : `scim${local}`}-${randomBytes(4).toString('hex')}`;
}

function platformDisplayName(attributes: ScimAttributes): string {
  const fromName = attributes.name?.formatted ?? [attributes.name?.givenName, attributes.name?.familyName].filter(Boolean).join(' ');
  return (attributes.displayName ?? (fromName || attributes.userName)).slice(0, 100);
}

interface ScimCaller {
  org_id: string;
  token_id: string;
}

const callers = new WeakMap<FastifyRequest, ScimCaller>();

function callerOf(request: FastifyRequest): ScimCaller {
  const caller = callers.get(request);
  if (!caller) throw new ServiceError('unauthorized', 'A SCIM token is required.');
  return caller;
}

const scimErrorResponses = (...statuses: number[]): Record<number, TSchema> => {
  const responses: Record<number, TSchema> = {};
  for (const status of statuses) responses[status] = ScimError;
  return responses;
};

// ---------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------

export function scimRoutes(app: FastifyInstance, services: AppServices): void {
  const { actors, config } = services;
  const askDirectory = <T>(org_id: string, message: ScimDirectoryMessage) => actors.ask<T>(SCIM_DIRECTORY_KIND, org_id, message);
  /** A read: safe to repeat (cluster failover), changes nothing. */
  const readDirectory = <T>(org_id: string, message: ScimDirectoryMessage) => actors.ask<T>(SCIM_DIRECTORY_KIND, org_id, message, { readOnly: true });
  /** A flow of the directory: one ask, answered when the flow ends. */
  const userFlow = (org_id: string, message: ScimDirectoryMessage) => actors.ask<ScimFlowReply>(SCIM_DIRECTORY_KIND, org_id, message);

  // --- Provisioning tokens (B, org owner/admin or platform admin) ----------
  const authenticate = bearerAuthentication(services);
  /** The caller, for the organization actor to check: owner or admin (404 for a stranger and an unknown org, 403 for a plain member). */
  const manager = (request: FastifyRequest): ScimTokenManager => {
    const principal = requirePrincipal(request);
    return { user_id: principal.user_id, platform_admin: principal.role === 'admin' };
  };

  app.post<{ Params: Static<typeof OrgParams>; Body: Static<typeof CreateTokenBody> }>('/api/v1/orgs/:org_id/scim-tokens', {
    onRequest: authenticate,
    schema: {
      tags: ['scim'],
      summary: 'Issue a SCIM provisioning token for the organization (owner/admin): the full token is shown only in this reply.',
      security: bearerSecurity,
      params: OrgParams,
      body: CreateTokenBody,
      response: { 201: ScimTokenCreatedSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request, reply) => {
    const principal = refuseImpersonation(request);
    const { org_id } = request.params;
    // The token lives only while this credential does (checked on every SCIM request).
    const minted_by = mintingCredential(principal);
    if (minted_by === null) throw new ServiceError('forbidden', "SCIM tokens are issued with a user's own session or API key.");
    const fresh = newScimToken(org_id);
    const days = request.body.expires_in_days ?? SCIM_TOKEN_TTL_DEFAULT_DAYS;
    const view = await askDirectory<ScimTokenView>(org_id, {
      op: 'token-manage',
      by: manager(request),
      create: {
        token_id: fresh.token_id,
        name: request.body.name?.trim() || 'SCIM token',
        secret_hash: fresh.secret_hash,
        expires_at_ms: services.clock.now() + days * 86_400_000,
        minted_by,
      },
    });
    reply.code(201);
    return { ...tokenOut(org_id, view), token: fresh.token };
  });

  app.get<{ Params: Static<typeof OrgParams> }>('/api/v1/orgs/:org_id/scim-tokens', {
    onRequest: authenticate,
    schema: {
      tags: ['scim'],
      summary: "The organization's SCIM tokens, oldest first, without their secrets.",
      security: bearerSecurity,
      params: OrgParams,
      response: { 200: Type.Object({ tokens: Type.Array(ScimTokenSchema) }), ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    const { org_id } = request.params;
    const by = manager(request);
    // Reads only (nothing here changes state): the organization and the caller's role, then the list.
    await actors.ask(ORGANIZATION_KIND, org_id, { op: 'get' }, { readOnly: true }); // not_found -> 404
    if (!by.platform_admin) {
      let role: string;
      try {
        role = (await actors.ask<{ role: string }>(ORGANIZATION_KIND, org_id, { op: 'get_member', user_id: by.user_id }, { readOnly: true })).role;
      } catch (error) {
        if (isServiceError(error) && error.code === 'not_found') throw new ServiceError('not_found', 'No such organization.');
        throw error;
      }
      if (role !== 'owner' && role !== 'admin') throw new ServiceError('forbidden', 'Only an owner or admin of the organization manages its SCIM tokens.');
    }
    const tokens = await readDirectory<ScimTokenView[]>(org_id, { op: 'token-list' });
    return { tokens: tokens.map((t) => tokenOut(org_id, t)) };
  });

  app.delete<{ Params: Static<typeof TokenParams> }>('/api/v1/orgs/:org_id/scim-tokens/:token_id', {
    onRequest: authenticate,
    schema: {
      tags: ['scim'],
      summary: 'Revoke a SCIM token: it stops working at once.',
      security: bearerSecurity,
      params: TokenParams,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    refuseImpersonation(request);
    const { org_id, token_id } = request.params;
    await askDirectory(org_id, { op: 'token-manage', by: manager(request), revoke: { token_id } });
    return { message: 'SCIM token revoked.' };
  });

  // --- /scim/v2 ---------------------------------------------------------------
  app.register(async (scim) => {
    // SCIM's media type, parsed like application/json (UTF-8, depth, surrogates); errors in SCIM's format.
    addJsonMediaType(scim, 'application/scim+json');
    useErrorFormat(scim, 'scim');

    // Unknown paths under /scim/v2: the plain-text 404 of spec §7 (no SCIM body).
    scim.setNotFoundHandler((_request, reply) => {
      reply.code(404).type('text/plain; charset=utf-8').send('Not Found');
    });

    async function scimAuthenticate(request: FastifyRequest): Promise<void> {
      const header = request.headers.authorization;
      const unauthorized = new ServiceError('unauthorized', 'A valid SCIM token is required: Authorization: Bearer scim_...');
      if (typeof header !== 'string' || !/^Bearer\s+\S/i.test(header)) throw unauthorized;
      const parsed = parseScimToken(header.slice(header.indexOf(' ') + 1).trim());
      if (!parsed) throw unauthorized;
      let token: ScimVerifiedToken;
      try {
        token = await readDirectory<ScimVerifiedToken>(parsed.org_id, { op: 'token-verify', token_id: parsed.token_id, secret_hash: parsed.secret_hash });
        await actors.ask(ORGANIZATION_KIND, parsed.org_id, { op: 'get' }, { readOnly: true });
      } catch (error) {
        if (isServiceError(error) && (error.code === 'unauthorized' || error.code === 'not_found')) throw unauthorized;
        throw error;
      }
      // Tokens issued before the minting credential was recorded (and without expiry) are refused: issue a new one.
      if (token.minted_by === null) {
        throw new ServiceError('unauthorized', 'This SCIM token was issued before tokens were bound to the credential that issued them; an organization owner or admin must issue a new one.');
      }
      await requireLiveMintingCredential(services, token.created_by, token.minted_by);
      callers.set(request, { org_id: parsed.org_id, token_id: parsed.token_id });
    }

    const scimSend = (reply: FastifyReply, status: number, body: unknown) => reply.code(status).type(SCIM_CONTENT_TYPE).send(body);

    // Discovery (no bearer, as the spec marks them): only what is built.
    const serviceProviderConfig = (base: string) => ({
      schemas: [SPC_SCHEMA],
      documentationUri: `${base}/openapi.json`,
      patch: { supported: true },
      bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
      filter: { supported: true, maxResults: SCIM_COUNT_MAX },
      changePassword: { supported: false },
      sort: { supported: false },
      etag: { supported: false },
      authenticationSchemes: [
        {
          type: 'oauthbearertoken',
          name: 'OAuth Bearer Token',
          description: 'A SCIM provisioning token issued by POST /api/v1/orgs/{org_id}/scim-tokens, sent as Authorization: Bearer <token>.',
          primary: true,
        },
      ],
      meta: { resourceType: 'ServiceProviderConfig', location: `${base}/scim/v2/ServiceProviderConfig` },
    });
    const userResourceType = (base: string) => ({
      schemas: [RESOURCE_TYPE_SCHEMA],
      id: 'User',
      name: 'User',
      endpoint: '/Users',
      description: 'A user of the organization, provisioned as a platform account and org member.',
      schema: USER_SCHEMA,
      schemaExtensions: [],
      meta: { resourceType: 'ResourceType', location: `${base}/scim/v2/ResourceTypes/User` },
    });
    const attr = (name: string, type: string, extra: Record<string, unknown> = {}) => ({
      name,
      type,
      multiValued: false,
      required: false,
      caseExact: false,
      mutability: 'readWrite',
      returned: 'default',
      uniqueness: 'none',
      ...extra,
    });
    const userSchema = (base: string) => ({
      schemas: [SCHEMA_SCHEMA],
      id: USER_SCHEMA,
      name: 'User',
      description: 'User Account: only the attributes this server stores or acts on.',
      attributes: [
        attr('userName', 'string', { required: true, uniqueness: 'server', mutability: 'immutable', description: 'Unique in the organization (case-insensitive). Fixed after creation.' }),
        attr('externalId', 'string', { caseExact: true, mutability: 'immutable', description: "The identity provider's id; stored at creation." }),
        attr('displayName', 'string', { description: 'Changeable by PATCH and PUT; also the platform display name.' }),
        attr('name', 'complex', {
          mutability: 'immutable',
          description: 'Stored at creation.',
          subAttributes: NAME_PARTS.map((part) => attr(part, 'string', { mutability: 'immutable' })),
        }),
        attr('emails', 'complex', {
          multiValued: true,
          mutability: 'immutable',
          description: 'Stored at creation; the primary (or first) value is the platform account e-mail.',
          subAttributes: [attr('value', 'string', { mutability: 'immutable' }), attr('type', 'string', { mutability: 'immutable' }), attr('primary', 'boolean', { mutability: 'immutable' })],
        }),
        attr('active', 'boolean', { description: 'false deactivates the user (the platform account is banned at once); reactivation is not supported.' }),
      ],
      meta: { resourceType: 'Schema', location: `${base}/scim/v2/Schemas/${USER_SCHEMA}` },
    });
    const discoveryList = (resources: unknown[]) => ({ schemas: [LIST_SCHEMA], totalResults: resources.length, startIndex: 1, itemsPerPage: resources.length, Resources: resources });

    scim.get('/ServiceProviderConfig', {
      schema: { tags: ['scim'], summary: 'SCIM service provider configuration: the capabilities that are built.', response: { 200: DiscoveryDocument } },
    }, async (request, reply) => scimSend(reply, 200, serviceProviderConfig(baseUrl(request, config.publicBaseUrl))));

    scim.get('/ResourceTypes', {
      schema: { tags: ['scim'], summary: 'SCIM resource types: User only.', response: { 200: DiscoveryList } },
    }, async (request, reply) => scimSend(reply, 200, discoveryList([userResourceType(baseUrl(request, config.publicBaseUrl))])));

    scim.get<{ Params: { id: string } }>('/ResourceTypes/:id', {
      schema: { tags: ['scim'], summary: 'One SCIM resource type.', params: ScimIdParams, response: { 200: DiscoveryDocument, ...scimErrorResponses(404) } },
    }, async (request, reply) => {
      if (request.params.id !== 'User') return sendScimError(reply, 404, `Resource type ${request.params.id} not found.`);
      return scimSend(reply, 200, userResourceType(baseUrl(request, config.publicBaseUrl)));
    });

    scim.get('/Schemas', {
      schema: { tags: ['scim'], summary: 'SCIM schemas: the core User schema, listing only stored attributes.', response: { 200: DiscoveryList } },
    }, async (request, reply) => scimSend(reply, 200, discoveryList([userSchema(baseUrl(request, config.publicBaseUrl))])));

    scim.get<{ Params: { id: string } }>('/Schemas/:id', {
      schema: { tags: ['scim'], summary: 'One SCIM schema.', params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }), response: { 200: DiscoveryDocument, ...scimErrorResponses(404) } },
    }, async (request, reply) => {
      if (request.params.id !== USER_SCHEMA) return sendScimError(reply, 404, `Schema ${request.params.id} not found.`);
      return scimSend(reply, 200, userSchema(baseUrl(request, config.publicBaseUrl)));
    });

    // Users (SCIM token).
    const userRoute = { onRequest: scimAuthenticate };

    scim.get<{ Querystring: Static<typeof ListQuery> }>('/Users', {
      ...userRoute,
      schema: {
        tags: ['scim'],
        summary: "The organization's users, in creation order, filtered and paged (startIndex/count).",
        security: bearerSecurity,
        querystring: ListQuery,
        response: { 200: ScimListSchema, ...scimErrorResponses(400, 401, 429, 503) },
      },
    }, async (request, reply) => {
      const { org_id } = callerOf(request);
      const filter = request.query.filter === undefined || request.query.filter.trim() === '' ? null : parseFilter(request.query.filter);
      const startIndex = Math.max(1, request.query.startIndex ?? 1);
      const count = Math.min(SCIM_COUNT_MAX, Math.max(0, request.query.count ?? SCIM_COUNT_DEFAULT));
      const page = await readDirectory<ScimUserPage>(org_id, { op: 'user-list', filter, start_index: startIndex, count });
      const base = baseUrl(request, config.publicBaseUrl);
      return scimSend(reply, 200, {
        schemas: [LIST_SCHEMA],
        totalResults: page.total,
        startIndex,
        itemsPerPage: page.users.length,
        Resources: page.users.map((u) => scimUserView(u, base)),
      });
    });

    scim.post<{ Body: Static<typeof ScimUserBody> }>('/Users', {
      ...userRoute,
      schema: {
        tags: ['scim'],
        summary: 'Provision a user: a platform account (no usable password) that joins the organization as a member.',
        security: bearerSecurity,
        body: ScimUserBody,
        response: { 201: ScimUserSchema, ...scimErrorResponses(400, 401, 403, 409, 413, 415, 429, 503) },
      },
    }, async (request, reply) => {
      const { org_id } = callerOf(request);
      const { active, ...attributes } = scimAttributes(request.body);
      // The flow (actors/scim/flows.ts) reserves the userName, creates the platform account and the membership, bans if inactive.
      const provisioned = await userFlow(org_id, {
        op: 'user-provision',
        scim_id: randomId('scim_'),
        user_id: randomId('usr_'),
        attributes,
        active,
        platform: {
          email: platformEmail(attributes),
          username: platformUsername(attributes.userName),
          display_name: platformDisplayName(attributes),
          // No password matches it (no KDF run here): the user signs in through SSO or a password reset.
          password_hash: UNUSABLE_PASSWORD_HASH,
        },
        // The flow asks the organization whether the e-mail's domain is verified (docs/api/scim.md).
        verified_domains_only: config.scimVerifiedDomainsOnly,
      });
      const view = scimUserView(provisioned.user, baseUrl(request, config.publicBaseUrl));
      reply.header('location', (view.meta as { location: string }).location);
      return scimSend(reply, 201, view);
    });

    scim.get<{ Params: Static<typeof ScimIdParams> }>('/Users/:id', {
      ...userRoute,
      schema: { tags: ['scim'], summary: 'One user of the organization.', security: bearerSecurity, params: ScimIdParams, response: { 200: ScimUserSchema, ...scimErrorResponses(401, 404, 429, 503) } },
    }, async (request, reply) => {
      const { org_id } = callerOf(request);
      const user = await readDirectory<ScimUserRecord>(org_id, { op: 'user-get', scim_id: request.params.id });
      return scimSend(reply, 200, scimUserView(user, baseUrl(request, config.publicBaseUrl)));
    });

    scim.patch<{ Params: Static<typeof ScimIdParams>; Body: Static<typeof PatchBody> }>('/Users/:id', {
      ...userRoute,
      schema: {
        tags: ['scim'],
        summary: 'Deactivate (active false) and/or change displayName; any other operation is refused and nothing is applied.',
        security: bearerSecurity,
        params: ScimIdParams,
        body: PatchBody,
        response: { 200: ScimUserSchema, ...scimErrorResponses(400, 401, 404, 413, 415, 429, 503) },
      },
    }, async (request, reply) => {
      const { org_id } = callerOf(request);
      const change = parsePatch(request.body);
      const changed = await userFlow(org_id, { op: 'user-change', scim_id: request.params.id, change });
      return scimSend(reply, 200, scimUserView(changed.user, baseUrl(request, config.publicBaseUrl)));
    });

    scim.put<{ Params: Static<typeof ScimIdParams>; Body: Static<typeof ScimUserBody> }>('/Users/:id', {
      ...userRoute,
      schema: {
        tags: ['scim'],
        summary: 'Replace: active false deactivates, displayName is applied; userName cannot change; other attributes are ignored.',
        security: bearerSecurity,
        params: ScimIdParams,
        body: ScimUserBody,
        response: { 200: ScimUserSchema, ...scimErrorResponses(400, 401, 404, 413, 415, 429, 503) },
      },
    }, async (request, reply) => {
      const { org_id } = callerOf(request);
      const attributes = scimAttributes(request.body);
      const fields = lowerKeys(request.body as Record<string, unknown>);
      const change: ScimChange = {};
      // An absent active leaves the user as it is; true keeps an active user active.
      if (fields.get('active') !== undefined && fields.get('active') !== null) change.active = attributes.active;
      if (attributes.displayName !== null) change.displayName = attributes.displayName;
      // The directory refuses a userName change (mutability) in the same turn.
      const changed = await userFlow(org_id, { op: 'user-change', scim_id: request.params.id, change, userName: attributes.userName });
      return scimSend(reply, 200, scimUserView(changed.user, baseUrl(request, config.publicBaseUrl)));
    });

    scim.delete<{ Params: Static<typeof ScimIdParams> }>('/Users/:id', {
      ...userRoute,
      schema: {
        tags: ['scim'],
        summary: 'Deprovision: the user leaves the organization, the platform account is deleted, the SCIM record removed.',
        security: bearerSecurity,
        params: ScimIdParams,
        response: { 204: Type.Null(), ...scimErrorResponses(401, 404, 429, 503) },
      },
    }, async (request, reply) => {
      const { org_id } = callerOf(request);
      // Each step of the flow is idempotent: a retried DELETE after a failure finishes the job.
      await userFlow(org_id, { op: 'user-deprovision', scim_id: request.params.id });
      return reply.code(204).send();
    });
  }, { prefix: '/scim/v2' });
}
