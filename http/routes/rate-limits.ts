import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import {
  NO_SUPPORT_TIER,
  RATE_LIMIT_RULES_KEY,
  RATE_LIMIT_RULES_KIND,
  rateLimitPolicy as policy,
  type Changed,
  type Limit,
  type ListOperator,
  type ListQuery as ActorListQuery,
  type ListView,
  type OverviewView,
  type RulesMessage,
  type SupportTierView,
  type TierType,
  type TierView,
  type UserRateLimitView,
} from '../../actors/rate-limits/messages.js';
import { parseListFilters } from '../list-filters.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Rate-limit administration (spec doc 1 §4.12; docs/api/rate-limits.md). Enforcement is http/plugins/rate-limit.ts. */

const MAX_REQUESTS = Type.Integer({ minimum: 1, maximum: policy.max_requests_max });
const WINDOW_SECONDS = Type.Integer({ minimum: 1, maximum: policy.window_seconds_max });
const LimitBody = Type.Object({ max_requests: MAX_REQUESTS, window_seconds: WINDOW_SECONDS });
const ENDPOINT_PATH = Type.String({ minLength: 1, maxLength: policy.endpoint_path_length_max, description: 'A route path template such as /api/v1/jobs/{job_id}.' });
const MODULE = Type.String({ minLength: 1, maxLength: policy.module_length_max, pattern: '^[A-Za-z0-9_.-]+$' });
const TIER_NAME = Type.String({ minLength: 1, maxLength: policy.name_length_max, pattern: '^[A-Za-z0-9_.-]+$' });
const USER_ID = Type.String({ minLength: 1, maxLength: policy.user_id_length_max, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });
const DESCRIPTION = Type.String({ maxLength: policy.description_length_max });
const CustomLimits = Type.Record(Type.String({ maxLength: policy.endpoint_path_length_max }), LimitBody, {
  maxProperties: policy.custom_limits_per_user_max,
  description: 'Endpoint path template -> {max_requests, window_seconds}.',
});
const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);

const Tier = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    tier_type: Type.String({ description: 'default, endpoint or module.' }),
    max_requests: Type.Integer(),
    window_seconds: Type.Integer(),
    created_at: NullableTime,
    updated_at: NullableTime,
  },
  { title: 'Tier' },
);
const SupportTier = Type.Object(
  { name: Type.String(), description: Type.String(), max_requests: Type.Integer(), window_seconds: Type.Integer(), created_at: Time, updated_at: Time },
  { title: 'SupportTier' },
);
const UserRateLimit = Type.Object(
  {
    user_id: Type.String(),
    tier: Type.String(),
    bypass: Type.Boolean(),
    custom_limits: Type.Record(Type.String(), Type.Object({ max_requests: Type.Integer(), window_seconds: Type.Integer() })),
    created_at: Time,
    updated_at: Time,
  },
  { title: 'UserRateLimit' },
);

const SORT_ORDER = Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')]));
const PAGE = Type.Optional(Type.Integer({ minimum: 0 }));
const FILTER = Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 20, description: 'field:operator:value (eq, ne, lt, lte, gt, gte, contains, in).' }));
const sortBy = (...fields: string[]) => Type.Optional(Type.Union(fields.map((field) => Type.Literal(field))));
const TiersQuery = Type.Object({
  tier_type: Type.Optional(Type.Union([Type.Literal('default'), Type.Literal('endpoint'), Type.Literal('module')], { description: 'List tiers of this type only; default adds the default tier to the list.' })),
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of the name (the path template or module).' })),
  page: PAGE,
  page_size: PAGE,
  sort_by: sortBy('name', 'max_requests', 'window_seconds', 'created_at', 'updated_at'),
  sort_order: SORT_ORDER,
  filter: FILTER,
});
const SupportQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of the name or description.' })),
  page: PAGE,
  page_size: PAGE,
  sort_by: sortBy('name', 'max_requests', 'window_seconds', 'created_at', 'updated_at'),
  sort_order: SORT_ORDER,
  filter: FILTER,
});
const UsersQuery = Type.Object({
  tier: Type.Optional(Type.String({ maxLength: policy.name_length_max })),
  bypass: Type.Optional(Type.Boolean()),
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of the user id or tier.' })),
  page: PAGE,
  page_size: PAGE,
  sort_by: sortBy('user_id', 'tier', 'created_at', 'updated_at'),
  sort_order: SORT_ORDER,
  filter: FILTER,
});

const CreateEndpointBody = Type.Object({ endpoint_path: ENDPOINT_PATH, max_requests: MAX_REQUESTS, window_seconds: WINDOW_SECONDS });
const CreateModuleBody = Type.Object({ module: MODULE, max_requests: MAX_REQUESTS, window_seconds: WINDOW_SECONDS });
const CreateSupportBody = Type.Object({ name: TIER_NAME, max_requests: MAX_REQUESTS, window_seconds: WINDOW_SECONDS, description: Type.Optional(DESCRIPTION) });
const PutSupportBody = Type.Object({ max_requests: MAX_REQUESTS, window_seconds: WINDOW_SECONDS, description: Type.Optional(DESCRIPTION) });
const UserSettingsFields = {
  tier: Type.String({ minLength: 1, maxLength: policy.name_length_max, description: `A support tier's name, or ${NO_SUPPORT_TIER} (none).` }),
  bypass: Type.Optional(Type.Boolean({ description: 'Exempt from every limit. Default false.' })),
  custom_limits: Type.Optional(CustomLimits),
};
const CreateUserBody = Type.Object({ user_id: USER_ID, ...UserSettingsFields });
const PutUserBody = Type.Object(UserSettingsFields);

const EndpointParams = Type.Object({ endpoint_path: Type.String({ minLength: 1, maxLength: 1024, description: 'The path template, URL-encoded (/ as %2F).' }) });
const ModuleParams = Type.Object({ module: Type.String({ minLength: 1, maxLength: 1024 }) });
const SupportParams = Type.Object({ tier_name: Type.String({ minLength: 1, maxLength: 1024 }) });
const UserParams = Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 1024 }) });

const FILTER_OPERATORS: readonly ListOperator[] = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'in'];

function tierOut(tier: TierView) {
  return {
    id: tier.id,
    name: tier.name,
    tier_type: tier.tier_type,
    max_requests: tier.max_requests,
    window_seconds: tier.window_seconds,
    created_at: isoTime(tier.created_at_ms),
    updated_at: isoTime(tier.updated_at_ms),
  };
}
function supportOut(tier: SupportTierView) {
  return { name: tier.name, description: tier.description, max_requests: tier.max_requests, window_seconds: tier.window_seconds, created_at: isoTime(tier.created_at_ms)!, updated_at: isoTime(tier.updated_at_ms)! };
}
function userOut(user: UserRateLimitView) {
  return { user_id: user.user_id, tier: user.tier, bypass: user.bypass, custom_limits: user.custom_limits, created_at: isoTime(user.created_at_ms)!, updated_at: isoTime(user.updated_at_ms)! };
}

function requireAdmin(request: FastifyRequest): void {
  const principal = requirePrincipal(request);
  if (principal.role !== 'admin') throw new ServiceError('forbidden', 'Rate-limit administration needs the admin role.');
}

function listQueryOf(query: { q?: string; page?: number; page_size?: number; sort_by?: string; sort_order?: 'asc' | 'desc'; filter?: string[] }, fields: readonly string[]): ActorListQuery {
  return {
    q: query.q,
    sort_by: query.sort_by,
    sort_order: query.sort_order,
    filters: parseListFilters(query.filter, fields, FILTER_OPERATORS),
    page: Math.max(1, query.page ?? 1),
    page_size: Math.min(100, query.page_size || 20),
  };
}

function paged<T, U>(view: ListView<T>, query: ActorListQuery, shape: (item: T) => U) {
  return { pagination: { page: query.page, page_size: query.page_size, total: view.total, has_more: query.page * query.page_size < view.total }, items: view.items.map(shape) };
}

const TIER_FILTER_FIELDS = ['id', 'name', 'tier_type', 'max_requests', 'window_seconds', 'created_at', 'updated_at'] as const;
const SUPPORT_FILTER_FIELDS = ['name', 'description', 'max_requests', 'window_seconds', 'created_at', 'updated_at'] as const;
const USER_FILTER_FIELDS = ['user_id', 'tier', 'bypass', 'created_at', 'updated_at'] as const;

export function rateLimitRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const config = services.config;
  const read = <T>(message: RulesMessage) => services.actors.ask<T>(RATE_LIMIT_RULES_KIND, RATE_LIMIT_RULES_KEY, message, { readOnly: true });
  /** A change: one ask; then this node's limiter reads the rule set again at once (other nodes within their cache time). */
  const change = async <T>(message: RulesMessage): Promise<T> => {
    const answer = await services.actors.ask<Changed<T>>(RATE_LIMIT_RULES_KIND, RATE_LIMIT_RULES_KEY, message);
    app.rateLimiter?.rulesChanged();
    return answer.value;
  };
  const schema = (summary: string, parts: Record<string, TSchema>, responses: Record<number, TSchema>, errors: number[] = []) => ({
    tags: ['rate-limits'],
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, 403, ...errors) },
  });
  /** The default tier as stored, or the node's configured one (times null) until an admin sets it. */
  const defaultTierOut = (tier: TierView | null) =>
    tierOut(
      tier ?? {
        id: 'default',
        name: 'default',
        tier_type: 'default',
        max_requests: config.rateLimitDefaultMaxRequests,
        window_seconds: config.rateLimitDefaultWindowSeconds,
        created_at_ms: null,
        updated_at_ms: null,
      },
    );

  app.get('/admin/rate-limits', {
    onRequest: authenticate,
    schema: schema('The rate-limit configuration at a glance: the default tier, endpoint tiers, support tiers and the number of users with settings.', {}, {
      200: Type.Object({ default_tier: Tier, endpoint_tiers: Type.Array(Tier), module_tiers: Type.Array(Tier), support_tiers: Type.Array(SupportTier), user_count: Type.Integer() }),
    }),
  }, async (request) => {
    requireAdmin(request);
    const view = await read<OverviewView>({ op: 'overview' });
    return {
      default_tier: defaultTierOut(view.default_tier),
      endpoint_tiers: view.endpoint_tiers.map(tierOut),
      module_tiers: view.module_tiers.map(tierOut),
      support_tiers: view.support_tiers.map(supportOut),
      user_count: view.user_count,
    };
  });

  app.post('/admin/rate-limits/cache/clear', {
    onRequest: authenticate,
    schema: schema('Every node drops its cached rule set, its leases (unspent tokens given back) and its remembered refusals; counts are kept.', {}, { 204: Type.Null() }),
  }, async (request, reply) => {
    requireAdmin(request);
    await change<null>({ op: 'clear_cache' });
    app.rateLimiter?.clear();
    return reply.code(204).send();
  });

  // --- default tier -------------------------------------------------------
  app.get('/admin/rate-limits/tiers/default', {
    onRequest: authenticate,
    schema: schema('The default tier (until an admin sets it: the node\'s configured default, created_at and updated_at null).', {}, { 200: Tier }),
  }, async (request) => {
    requireAdmin(request);
    return defaultTierOut(await read<TierView | null>({ op: 'get_default' }));
  });

  app.put<{ Body: Static<typeof LimitBody> }>('/admin/rate-limits/tiers/default', {
    onRequest: authenticate,
    schema: schema('Set the default tier.', { body: LimitBody }, { 200: Tier }),
  }, async (request) => {
    requireAdmin(request);
    return tierOut(await change<TierView>({ op: 'put_default', limit: request.body }));
  });

  // --- endpoint and module tiers -----------------------------------------
  const tierRoutes = (tier_type: 'endpoint' | 'module', collection: string, param: 'endpoint_path' | 'module') => {
    const base = `/admin/rate-limits/tiers/${collection}`;
    const one = `${base}/:${param}`;
    const Params = tier_type === 'endpoint' ? EndpointParams : ModuleParams;
    const CreateBody = tier_type === 'endpoint' ? CreateEndpointBody : CreateModuleBody;
    type OneParams = { endpoint_path?: string; module?: string };
    const nameOf = (params: OneParams) => (tier_type === 'endpoint' ? params.endpoint_path! : params.module!);

    app.get<{ Querystring: Static<typeof TiersQuery> }>(base, {
      onRequest: authenticate,
      schema: schema(`List ${tier_type} tiers. tier_type=default lists the default tier instead; filter on ${TIER_FILTER_FIELDS.join(', ')}.`, { querystring: TiersQuery }, {
        200: Type.Object({ pagination: Pagination, tiers: Type.Array(Tier) }),
      }),
    }, async (request) => {
      requireAdmin(request);
      const query = listQueryOf(request.query, TIER_FILTER_FIELDS);
      const wanted = request.query.tier_type;
      const include: TierType[] = wanted === undefined ? [tier_type] : [wanted];
      const view = await read<ListView<TierView>>({ op: 'list_tiers', tier_type, include, query });
      const { pagination, items } = paged(view, query, tierOut);
      return { pagination, tiers: items };
    });

    app.post<{ Body: { endpoint_path?: string; module?: string; max_requests: number; window_seconds: number } }>(base, {
      onRequest: authenticate,
      schema: schema(`Create a ${tier_type} tier. 201; one already exists for it: 409 rate_limit_tier_exists.`, { body: CreateBody }, { 201: Tier }, [409]),
    }, async (request, reply) => {
      requireAdmin(request);
      const { max_requests, window_seconds } = request.body;
      const tier = await change<TierView>({ op: 'create_tier', tier_type, name: nameOf(request.body), limit: { max_requests, window_seconds } });
      return reply.code(201).send(tierOut(tier));
    });

    app.get<{ Params: OneParams }>(one, {
      onRequest: authenticate,
      schema: schema(`One ${tier_type} tier.`, { params: Params }, { 200: Tier }, [404]),
    }, async (request) => {
      requireAdmin(request);
      return tierOut(await read<TierView>({ op: 'get_tier', tier_type, name: nameOf(request.params) }));
    });

    app.put<{ Params: OneParams; Body: Static<typeof LimitBody> }>(one, {
      onRequest: authenticate,
      schema: schema(`Change a ${tier_type} tier's limit.`, { params: Params, body: LimitBody }, { 200: Tier }, [404]),
    }, async (request) => {
      requireAdmin(request);
      return tierOut(await change<TierView>({ op: 'put_tier', tier_type, name: nameOf(request.params), limit: request.body }));
    });

    app.delete<{ Params: OneParams }>(one, {
      onRequest: authenticate,
      schema: schema(`Delete a ${tier_type} tier: its requests fall back to the next rule.`, { params: Params }, { 204: Type.Null() }, [404]),
    }, async (request, reply) => {
      requireAdmin(request);
      await change<null>({ op: 'delete_tier', tier_type, name: nameOf(request.params) });
      return reply.code(204).send();
    });
  };
  tierRoutes('endpoint', 'endpoints', 'endpoint_path');
  tierRoutes('module', 'modules', 'module');

  // --- support tiers -------------------------------------------------------
  app.get<{ Querystring: Static<typeof SupportQuery> }>('/admin/rate-limits/support-tiers', {
    onRequest: authenticate,
    schema: schema(`List support tiers; filter on ${SUPPORT_FILTER_FIELDS.join(', ')}.`, { querystring: SupportQuery }, {
      200: Type.Object({ pagination: Pagination, tiers: Type.Array(SupportTier) }),
    }),
  }, async (request) => {
    requireAdmin(request);
    const query = listQueryOf(request.query, SUPPORT_FILTER_FIELDS);
    const view = await read<ListView<SupportTierView>>({ op: 'list_support_tiers', query });
    const { pagination, items } = paged(view, query, supportOut);
    return { pagination, tiers: items };
  });

  app.post<{ Body: Static<typeof CreateSupportBody> }>('/admin/rate-limits/support-tiers', {
    onRequest: authenticate,
    schema: schema(`Create a support tier (a named limit users are put in). 201; the name taken: 409 rate_limit_tier_exists; the name ${NO_SUPPORT_TIER} is reserved (400).`, { body: CreateSupportBody }, { 201: SupportTier }, [409]),
  }, async (request, reply) => {
    requireAdmin(request);
    const { name, description, max_requests, window_seconds } = request.body;
    const tier = await change<SupportTierView>({ op: 'create_support_tier', name, description: description ?? '', limit: { max_requests, window_seconds } });
    return reply.code(201).send(supportOut(tier));
  });

  app.get<{ Params: Static<typeof SupportParams> }>('/admin/rate-limits/support-tiers/:tier_name', {
    onRequest: authenticate,
    schema: schema('One support tier.', { params: SupportParams }, { 200: SupportTier }, [404]),
  }, async (request) => {
    requireAdmin(request);
    return supportOut(await read<SupportTierView>({ op: 'get_support_tier', name: request.params.tier_name }));
  });

  app.put<{ Params: Static<typeof SupportParams>; Body: Static<typeof PutSupportBody> }>('/admin/rate-limits/support-tiers/:tier_name', {
    onRequest: authenticate,
    schema: schema("Change a support tier's limit (and description).", { params: SupportParams, body: PutSupportBody }, { 200: SupportTier }, [404]),
  }, async (request) => {
    requireAdmin(request);
    const { description, max_requests, window_seconds } = request.body;
    return supportOut(await change<SupportTierView>({ op: 'put_support_tier', name: request.params.tier_name, description, limit: { max_requests, window_seconds } }));
  });

  app.delete<{ Params: Static<typeof SupportParams> }>('/admin/rate-limits/support-tiers/:tier_name', {
    onRequest: authenticate,
    schema: schema('Delete a support tier. Users still in it: 409 rate_limit_tier_in_use.', { params: SupportParams }, { 204: Type.Null() }, [404, 409]),
  }, async (request, reply) => {
    requireAdmin(request);
    await change<null>({ op: 'delete_support_tier', name: request.params.tier_name });
    return reply.code(204).send();
  });

  // --- per-user settings ---------------------------------------------------
  app.get<{ Querystring: Static<typeof UsersQuery> }>('/admin/rate-limits/users', {
    onRequest: authenticate,
    schema: schema(`List users with settings; tier and bypass narrow it; filter on ${USER_FILTER_FIELDS.join(', ')}.`, { querystring: UsersQuery }, {
      200: Type.Object({ pagination: Pagination, users: Type.Array(UserRateLimit) }),
    }),
  }, async (request) => {
    requireAdmin(request);
    const query = listQueryOf(request.query, USER_FILTER_FIELDS);
    const view = await read<ListView<UserRateLimitView>>({ op: 'list_users', tier: request.query.tier, bypass: request.query.bypass, query });
    const { pagination, items } = paged(view, query, userOut);
    return { pagination, users: items };
  });

  app.post<{ Body: Static<typeof CreateUserBody> }>('/admin/rate-limits/users', {
    onRequest: authenticate,
    schema: schema('Give a user settings: a tier, bypass, custom limits per endpoint. 201; settings exist: 409 rate_limit_user_exists; an unknown tier: 400.', { body: CreateUserBody }, { 201: UserRateLimit }, [409]),
  }, async (request, reply) => {
    requireAdmin(request);
    const { user_id, tier, bypass, custom_limits } = request.body;
    const { user } = await change<{ user: UserRateLimitView }>({ op: 'create_user', user_id, tier, bypass: bypass ?? false, custom_limits: (custom_limits ?? {}) as Record<string, Limit> });
    return reply.code(201).send(userOut(user));
  });

  app.get<{ Params: Static<typeof UserParams> }>('/admin/rate-limits/users/:user_id', {
    onRequest: authenticate,
    schema: schema("A user's settings (404 when the user has none: the tiers apply as to anyone).", { params: UserParams }, { 200: UserRateLimit }, [404]),
  }, async (request) => {
    requireAdmin(request);
    return userOut(await read<UserRateLimitView>({ op: 'get_user', user_id: request.params.user_id }));
  });

  app.put<{ Params: Static<typeof UserParams>; Body: Static<typeof PutUserBody> }>('/admin/rate-limits/users/:user_id', {
    onRequest: authenticate,
    schema: schema("Replace a user's settings, or create them (201). bypass defaults to false and custom_limits to none.", { params: UserParams, body: PutUserBody }, { 200: UserRateLimit, 201: UserRateLimit }),
  }, async (request, reply) => {
    requireAdmin(request);
    const { tier, bypass, custom_limits } = request.body;
    const { user, created } = await change<{ user: UserRateLimitView; created: boolean }>({
      op: 'put_user',
      user_id: request.params.user_id,
      tier,
      bypass: bypass ?? false,
      custom_limits: (custom_limits ?? {}) as Record<string, Limit>,
    });
    return reply.code(created ? 201 : 200).send(userOut(user));
  });

  app.delete<{ Params: Static<typeof UserParams> }>('/admin/rate-limits/users/:user_id', {
    onRequest: authenticate,
    schema: schema("Remove a user's settings: the tiers apply to them as to anyone.", { params: UserParams }, { 204: Type.Null() }, [404]),
  }, async (request, reply) => {
    requireAdmin(request);
    await change<null>({ op: 'delete_user', user_id: request.params.user_id });
    return reply.code(204).send();
  });
}
