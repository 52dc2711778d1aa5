import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { isServiceError, randomId, ServiceError, serialisedBytes } from '../../runtime/index.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import {
  AGENT_DIRECTORY_KIND,
  AGENT_FILTER_FIELDS,
  AGENT_FILTER_OPERATORS,
  AGENT_KIND,
  AGENT_STATUSES,
  AGENT_VISIBILITIES,
  agentDirectoryKey,
  agentPolicy as policy,
  canRead,
  checkToml,
  TOML_FIELDS,
  type AgentCaller,
  type AgentChanges,
  type AgentFields,
  type AgentListView,
  type AgentLookupView,
  type AgentMessage,
  type AgentRevisionSummary,
  type AgentSummaryEntry,
  type AgentView,
} from '../../actors/agents/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { parseListFilters } from '../list-filters.js';

/** Agent definitions (spec doc 2 §4.7; docs/api/agents.md). */
const tags = ['agents'];
const base = '/api/v1/agents';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));
const Status = literals(AGENT_STATUSES);
const Visibility = literals(AGENT_VISIBILITIES);
const Key = Type.String({ pattern: policy.key_pattern, maxLength: policy.key_length_max, description: 'Unique in the tenant: lowercase letters, digits, ".", "_" and "-", starting with a letter or digit.' });
const Text = (description: string) => Type.String({ maxLength: policy.text_length_max, description });
const OrgId = Type.String({ minLength: 1, maxLength: 64, description: 'Act in this organization (the caller must be a member); default: the credential\'s tenant.' });

const summaryProperties = {
  agent_id: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  description: Type.String(),
  display_name: Type.String(),
  key: Type.String(),
  org_id: Type.Union([Type.String(), Type.Null()]),
  owner_id: Type.String(),
  profile_url: Type.String(),
  status: Status,
  updated_at: Type.String({ format: 'date-time' }),
  visibility: Visibility,
  version: Type.Integer({ description: '1 at creation, +1 on every update.' }),
};
const AgentSummary = Type.Object(summaryProperties, { title: 'AgentSummary' });
const AgentFull = Type.Object(
  {
    ...summaryProperties,
    // Present with view=full (the default); left out with view=summary.
    agent_toml: Type.Optional(Type.String()),
    compaction_toml: Type.Optional(Type.String()),
    intent_toml: Type.Optional(Type.String()),
    memory_toml: Type.Optional(Type.String()),
    procedures: Type.Optional(Type.Unknown()),
    prompt_text: Type.Optional(Type.String()),
    rag_toml: Type.Optional(Type.String()),
    shield_toml: Type.Optional(Type.String()),
  },
  { title: 'AgentFull' },
);
const AgentFullRequired = Type.Object(
  {
    ...summaryProperties,
    agent_toml: Type.String(),
    compaction_toml: Type.String(),
    intent_toml: Type.String(),
    memory_toml: Type.String(),
    procedures: Type.Unknown(),
    prompt_text: Type.String(),
    rag_toml: Type.String(),
    shield_toml: Type.String(),
  },
  { title: 'AgentDefinition' },
);

const optionalFields = {
  description: Type.Optional(Type.String({ maxLength: policy.description_length_max })),
  profile_url: Type.Optional(Type.String({ maxLength: policy.profile_url_length_max })),
  status: Type.Optional(Status),
  visibility: Type.Optional(Visibility),
  prompt_text: Type.Optional(Text('The agent\'s prompt.')),
  agent_toml: Type.Optional(Text('TOML document.')),
  compaction_toml: Type.Optional(Text('TOML document.')),
  intent_toml: Type.Optional(Text('TOML document.')),
  memory_toml: Type.Optional(Text('TOML document.')),
  rag_toml: Type.Optional(Text('TOML document.')),
  shield_toml: Type.Optional(Text('TOML document.')),
  procedures: Type.Optional(Type.Unknown({ description: `Any JSON value up to ${policy.procedures_bytes_max} bytes serialised.` })),
};
const CreateBody = Type.Object({
  key: Key,
  display_name: Type.String({ minLength: 1, maxLength: policy.display_name_length_max }),
  org_id: Type.Optional(OrgId),
  ...optionalFields,
});
const UpdateBody = Type.Object({
  key: Type.Optional(Key),
  display_name: Type.Optional(Type.String({ minLength: 1, maxLength: policy.display_name_length_max })),
  ...optionalFields,
});
const Created = Type.Object({ agent_id: Type.String(), created_at: Type.String({ format: 'date-time' }), display_name: Type.String(), key: Type.String() });
const IdParams = Type.Object({ agent_id: Type.String({ minLength: 1, maxLength: 64 }) });
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of display_name or description (case-insensitive).' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(literals(['created_at', 'display_name', 'key', 'updated_at'] as const)),
  sort_order: Type.Optional(literals(['asc', 'desc'] as const)),
  visibility: Type.Optional(Visibility),
  status: Type.Optional(Status),
  filter: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 20 })),
  org_id: Type.Optional(OrgId),
});

type Fields = Partial<AgentFields>;

function badRequest(field: string, message: string, extra: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message, ...extra }] });
}

/** Refuses an invalid TOML payload (naming the field, line and column) or an oversized `procedures`. */
function checkPayloads(fields: Fields): void {
  for (const field of TOML_FIELDS) {
    const text = fields[field];
    if (text === undefined) continue;
    const problem = checkToml(`body.${field}`, text);
    if (problem) {
      const where = problem.line === null ? '' : ` at line ${problem.line}, column ${problem.column}`;
      throw new ServiceError('invalid_toml', `${field} is not valid TOML${where}: ${problem.message}`, { details: [problem] });
    }
  }
  if (fields.procedures !== undefined && serialisedBytes(fields.procedures) > policy.procedures_bytes_max) {
    throw badRequest('body.procedures', `must serialise to at most ${policy.procedures_bytes_max} bytes`);
  }
  if (fields.profile_url) {
    let url: URL | null = null;
    try {
      url = new URL(fields.profile_url);
    } catch {
      // Refused below.
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw badRequest('body.profile_url', 'must be an http or https URL');
  }
}

function summaryShape(entry: AgentSummaryEntry) {
  return {
    agent_id: entry.agent_id,
    created_at: isoTime(entry.created_at_ms)!,
    description: entry.description,
    display_name: entry.display_name,
    key: entry.key,
    org_id: entry.org_id,
    owner_id: entry.owner_id,
    profile_url: entry.profile_url,
    status: entry.status,
    updated_at: isoTime(entry.updated_at_ms)!,
    visibility: entry.visibility,
    version: entry.version,
  };
}

function fullShape(view: AgentView) {
  return {
    ...summaryShape(view),
    agent_toml: view.agent_toml,
    compaction_toml: view.compaction_toml,
    intent_toml: view.intent_toml,
    memory_toml: view.memory_toml,
    procedures: view.procedures,
    prompt_text: view.prompt_text,
    rag_toml: view.rag_toml,
    shield_toml: view.shield_toml,
  };
}

export function agentRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const agent = <Reply>(agent_id: string, message: AgentMessage) => services.actors.ask<Reply>(AGENT_KIND, agent_id, message);
  const readAgent = <Reply>(agent_id: string, message: AgentMessage) => services.actors.ask<Reply>(AGENT_KIND, agent_id, message, { readOnly: true });

  /** Whether the caller is a member of the organization (a read: it guards reads only, and the create's tenant choice, as for API keys). */
  async function isMember(org_id: string, user_id: string): Promise<boolean> {
    try {
      await services.actors.ask(ORGANIZATION_KIND, org_id, { op: 'get_member', user_id }, { readOnly: true });
      return true;
    } catch (error) {
      if (isServiceError(error) && error.code === 'not_found') return false;
      throw error;
    }
  }

  /**
   * The tenant a request acts in: the credential's, or the organization named
   * by `org_id` when the caller is a member of it (a platform admin may name
   * any). An organization's API key acts for its organization only.
   */
  async function callerIn(principal: Principal, org_id: string | undefined): Promise<AgentCaller> {
    const admin = principal.role === 'admin';
    if (org_id === undefined || org_id === principal.tenant) return { user_id: principal.user_id, tenant: principal.tenant, admin };
    if (principal.org_id !== null) throw new ServiceError('forbidden', "This API key acts for its own organization only; leave org_id out or use the key's organization.");
    if (!admin && !(await isMember(org_id, principal.user_id))) throw new ServiceError('not_found', 'No such organization.');
    return { user_id: principal.user_id, tenant: org_id, admin };
  }

  /** The agent as the caller may see it, or 404 (an agent the caller may not read does not exist for them). */
  async function readable(agent_id: string, caller: AgentCaller): Promise<AgentView> {
    const view = await readAgent<AgentView>(agent_id, { op: 'get' });
    const access = canRead(view, caller);
    if (access.kind === 'allowed') return view;
    if (access.kind === 'needs_membership' && (await isMember(access.org_id, caller.user_id))) return view;
    throw new ServiceError('not_found', 'No such agent.');
  }

  /** Resolves keys in a tenant: active agents the caller may read, in the order asked; the rest are missing. */
  async function resolveKeys(keys: string[], caller: AgentCaller): Promise<{ resolved: AgentView[]; missing: string[] }> {
    const unique = [...new Set(keys)];
    const lookup = await services.actors.ask<AgentLookupView>(AGENT_DIRECTORY_KIND, agentDirectoryKey(caller.tenant), { op: 'lookup', keys: unique }, { readOnly: true });
    const byKey = new Map(lookup.found.map((entry) => [entry.key, entry]));
    const views = await Promise.all(
      unique.map(async (key) => {
        const entry = byKey.get(key);
        if (!entry || entry.status !== 'active') return null;
        try {
          const view = await readAgent<AgentView>(entry.agent_id, { op: 'get' });
          // The directory answered first: the agent may have been renamed, disabled or deleted since.
          if (view.key !== key || view.status !== 'active' || canRead(view, caller).kind !== 'allowed') return null;
          return view;
        } catch (error) {
          if (isServiceError(error) && error.code === 'not_found') return null;
          throw error;
        }
      }),
    );
    const resolved = views.filter((view): view is AgentView => view !== null);
    const found = new Set(resolved.map((view) => view.key));
    return { resolved, missing: unique.filter((key) => !found.has(key)) };
  }

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: schema(
      "The tenant's agents the caller may read (private ones: their owner's; a platform admin sees all). q on display_name and description; filter on key, display_name, status, visibility, owner_id, created_at, updated_at (epoch-s); org_id lists an organization's agents to its members.",
      { querystring: ListQuery },
      { 200: Type.Object({ agents: Type.Array(AgentSummary), pagination: Pagination }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(policy.page_size_max, query.page_size || 20);
    const filters = parseListFilters(query.filter, AGENT_FILTER_FIELDS, AGENT_FILTER_OPERATORS);
    const caller = await callerIn(principal, query.org_id);
    const view = await services.actors.ask<AgentListView>(
      AGENT_DIRECTORY_KIND,
      agentDirectoryKey(caller.tenant),
      {
        op: 'list',
        query: { viewer: { user_id: caller.user_id, admin: caller.admin }, q: query.q, sort_by: query.sort_by, sort_order: query.sort_order, visibility: query.visibility, status: query.status, filters, page, page_size },
      },
      { readOnly: true },
    );
    return { agents: view.agents.map(summaryShape), pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total } };
  });

  app.post<{ Body: Static<typeof CreateBody> }>(base, {
    onRequest: authenticate,
    schema: schema(
      'Create an agent. Every TOML payload must parse (400 invalid_toml names the field, line and column). key taken in the tenant: 409 agent_key_taken. With org_id the agent belongs to that organization (the caller must be a member).',
      { body: CreateBody },
      { 201: Created },
      [404, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const { org_id, ...body } = request.body;
    checkPayloads(body);
    const caller = await callerIn(principal, org_id);
    const fields: AgentFields = {
      key: body.key,
      display_name: body.display_name,
      description: body.description ?? '',
      profile_url: body.profile_url ?? '',
      status: body.status ?? 'active',
      visibility: body.visibility ?? 'private',
      prompt_text: body.prompt_text ?? '',
      agent_toml: body.agent_toml ?? '',
      compaction_toml: body.compaction_toml ?? '',
      intent_toml: body.intent_toml ?? '',
      memory_toml: body.memory_toml ?? '',
      rag_toml: body.rag_toml ?? '',
      shield_toml: body.shield_toml ?? '',
      procedures: body.procedures ?? null,
    };
    // The agent's organization: the tenant when the caller acts for one (an org API key or org_id).
    const agent_org = caller.tenant === principal.user_id ? null : caller.tenant;
    const view = await agent<AgentView>(randomId('agt_'), { op: 'create', tenant: caller.tenant, org_id: agent_org, caller, fields });
    return reply.code(201).send({ agent_id: view.agent_id, created_at: isoTime(view.created_at_ms)!, display_name: view.display_name, key: view.key });
  });

  app.post<{ Body: { keys: string[]; org_id?: string } }>(`${base}/resolve`, {
    onRequest: authenticate,
    schema: schema(
      `Resolve keys to full active definitions, in the order asked (at most ${policy.resolve_keys_max} keys). Keys with no active agent the caller may read are listed in missing.`,
      { body: Type.Object({ keys: Type.Array(Type.String({ minLength: 1, maxLength: policy.key_length_max }), { minItems: 1, maxItems: policy.resolve_keys_max }), org_id: Type.Optional(OrgId) }) },
      { 200: Type.Object({ missing: Type.Array(Type.String()), resolved: Type.Array(AgentFullRequired) }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const caller = await callerIn(principal, request.body.org_id);
    const { resolved, missing } = await resolveKeys(request.body.keys, caller);
    return { missing, resolved: resolved.map(fullShape) };
  });

  app.get<{ Params: { key: string }; Querystring: { org_id?: string } }>(`${base}/resolve/:key`, {
    onRequest: authenticate,
    schema: schema(
      'The active agent with this key in the tenant (or in org_id), full definition. No such active agent the caller may read: 404 not_found.',
      { params: Type.Object({ key: Type.String({ minLength: 1, maxLength: policy.key_length_max }) }), querystring: Type.Object({ org_id: Type.Optional(OrgId) }) },
      { 200: AgentFullRequired },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const caller = await callerIn(principal, request.query.org_id);
    const { resolved } = await resolveKeys([request.params.key], caller);
    if (resolved.length === 0) throw new ServiceError('not_found', `No active agent with the key ${JSON.stringify(request.params.key)}.`);
    return fullShape(resolved[0]);
  });

  app.get<{ Params: Static<typeof IdParams>; Querystring: { view?: 'full' | 'summary' } }>(`${base}/:agent_id`, {
    onRequest: authenticate,
    schema: schema(
      'One agent: view=full (default) with the prompt and TOML payloads, view=summary with metadata only.',
      { params: IdParams, querystring: Type.Object({ view: Type.Optional(literals(['full', 'summary'] as const)) }) },
      { 200: AgentFull },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await readable(request.params.agent_id, { user_id: principal.user_id, tenant: principal.tenant, admin: principal.role === 'admin' });
    return request.query.view === 'summary' ? summaryShape(view) : fullShape(view);
  });

  app.put<{ Params: Static<typeof IdParams>; Body: Static<typeof UpdateBody> }>(`${base}/:agent_id`, {
    onRequest: authenticate,
    preValidation: async (request) => {
      if (request.body === undefined || request.body === null) request.body = {};
    },
    schema: schema(
      'Change an agent (owner or platform admin): every field given replaces the current one; version +1 and updated_at move; the previous definition stays readable under /versions. A new key must be free in the tenant (409 agent_key_taken).',
      { params: IdParams, body: UpdateBody },
      { 200: AgentFullRequired },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    // A body's unknown fields (agent_id, tenant, owner_id) are Fastify's to keep and the step's to ignore (changeableOf).
    const changes: AgentChanges = { ...request.body };
    checkPayloads(changes);
    const caller: AgentCaller = { user_id: principal.user_id, tenant: principal.tenant, admin: principal.role === 'admin' };
    return fullShape(await agent<AgentView>(request.params.agent_id, { op: 'update', caller, changes }));
  });

  app.delete<{ Params: Static<typeof IdParams> }>(`${base}/:agent_id`, {
    onRequest: authenticate,
    schema: schema('Delete an agent with its kept versions (owner or platform admin); its key is free again.', { params: IdParams }, { 204: Type.Null() }, [403, 404, 409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const caller: AgentCaller = { user_id: principal.user_id, tenant: principal.tenant, admin: principal.role === 'admin' };
    await agent(request.params.agent_id, { op: 'delete', caller });
    return reply.code(204).send();
  });

  const Revision = Type.Object({ version: Type.Integer(), updated_at: Type.String({ format: 'date-time' }), updated_by: Type.String(), key: Type.String(), status: Status });
  app.get<{ Params: Static<typeof IdParams> }>(`${base}/:agent_id/versions`, {
    onRequest: authenticate,
    schema: schema(
      `The audit trail (owner or platform admin): the current version and the ${policy.revisions_kept_max} newest previous ones, newest first.`,
      { params: IdParams },
      { 200: Type.Object({ agent_id: Type.String(), current_version: Type.Integer(), versions: Type.Array(Revision) }) },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const caller: AgentCaller = { user_id: principal.user_id, tenant: principal.tenant, admin: principal.role === 'admin' };
    const view = await readAgent<{ revisions: AgentRevisionSummary[]; current_version: number }>(request.params.agent_id, { op: 'revisions', caller });
    return {
      agent_id: request.params.agent_id,
      current_version: view.current_version,
      versions: view.revisions.map((revision) => ({ version: revision.version, updated_at: isoTime(revision.updated_at_ms)!, updated_by: revision.updated_by, key: revision.key, status: revision.status })),
    };
  });

  app.get<{ Params: Static<typeof IdParams> & { version: number } }>(`${base}/:agent_id/versions/:version`, {
    onRequest: authenticate,
    schema: schema(
      'One version of the definition as it was (owner or platform admin). A version no longer kept: 404.',
      { params: Type.Object({ agent_id: Type.String({ minLength: 1, maxLength: 64 }), version: Type.Integer({ minimum: 1 }) }) },
      { 200: Type.Object({ ...AgentFullRequired.properties, updated_by: Type.String() }) },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const caller: AgentCaller = { user_id: principal.user_id, tenant: principal.tenant, admin: principal.role === 'admin' };
    const { revision } = await readAgent<{ revision: AgentView }>(request.params.agent_id, { op: 'revision', caller, version: request.params.version });
    return { ...fullShape(revision), updated_by: revision.updated_by };
  });
}
