import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, serialisedBytes } from '../../runtime/index.js';
import {
  TALENT_ANALYTICS_KIND,
  TALENT_CURVE_KIND,
  TALENT_TREE_INDEX_KIND,
  TALENT_TREE_KIND,
  TALENT_USER_KIND,
  talentAnalyticsKey,
  talentCurveKey,
  talentLimits,
  talentTreeIndexKey,
  talentTreeKey,
  talentUserKey,
  type AnalyticsView,
  type Curve,
  type TalentUserMessage,
  type TreeInput,
  type TreeListReply,
  type TreeMessage,
  type TreeStateView,
  type TreeVersion,
  type TreeView,
  type ValidateReply,
  type WalletView,
  type XpResult,
} from '../../actors/talent/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, NOT_PROTOTYPE_MEMBER, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/**
 * Talent trees (spec doc 2 §2 Talent, §4.4; docs/api/talent.md): XP curves,
 * versioned tree definitions, a wallet per user fed by XP events, allocation
 * and respec checked in the user's actor, analytics kept from allocation
 * deltas. Every handler makes one ask; the user actor runs the small flows
 * (curve and tree answers) itself.
 */
/**
 * Ids key the talent state's records (curves, trees, nodes, currencies): the names of Object.prototype's members
 * are not ids, so none reads an inherited function for an entry (`__proto__` and the like start with `_`).
 */
const ID = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: `^${NOT_PROTOTYPE_MEMBER}[A-Za-z0-9][A-Za-z0-9_.-]*$`,
  description: 'Letters, digits, `_`, `.`, `-`; starts with a letter or digit; not a name of Object.prototype (`constructor`, `toString`, ...).',
});
const AMOUNT = Type.Integer({ minimum: 0, maximum: talentLimits.amount_max });
const Cost = Type.Object({ amount: AMOUNT, currency: ID }, { title: 'Cost' });
const Costs = Type.Array(Cost, { maxItems: talentLimits.costs_per_list_max });
/** Path segments after /api/v1/talent/ that are routes, not tree ids. */
const RESERVED_TREE_IDS = new Set(['curves', 'definitions', 'me', 'xp']);
const GRANTS_BYTES_MAX = 4096;

// --- curves -------------------------------------------------------------------
const CurveKindSchema = Type.Union([Type.Literal('linear'), Type.Literal('exponential'), Type.Literal('table')]);
const CurveParams = Type.Object({
  base: Type.Optional(Type.Number({ minimum: 0, maximum: talentLimits.amount_max, description: 'linear: XP from level 1 to 2 (integer); exponential: the first step.' })),
  per_level: Type.Optional(Type.Integer({ minimum: 0, maximum: talentLimits.amount_max, description: 'linear: added to each next step.' })),
  exponent: Type.Optional(Type.Number({ minimum: 1, maximum: 10, description: 'exponential: each step is the previous times exponent.' })),
  table: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: talentLimits.amount_max }), { maxItems: talentLimits.curve_max_level_max, description: 'table: XP from level k to k + 1 at index k - 1.' })),
});
const BonusLevel = Type.Object({ level: Type.Integer({ minimum: 2, maximum: talentLimits.curve_max_level_max }), extra: Costs });
const CurveBody = Type.Object({
  curve_id: ID,
  kind: CurveKindSchema,
  max_level: Type.Integer({ minimum: 1, maximum: talentLimits.curve_max_level_max }),
  points_per_level: Costs,
  params: Type.Optional(CurveParams),
  bonus_levels: Type.Optional(Type.Array(BonusLevel, { maxItems: talentLimits.curve_max_level_max })),
});
const CurveResponse = Type.Object(
  {
    curve_id: Type.String(),
    kind: Type.String(),
    max_level: Type.Integer(),
    points_per_level: Type.Array(Cost),
    params: CurveParams,
    bonus_levels: Type.Array(Type.Object({ level: Type.Integer(), extra: Type.Array(Cost) })),
    created_at: Type.String({ format: 'date-time' }),
    created_by: Type.String(),
  },
  { title: 'Curve' },
);
const curveShape = (curve: Curve) => ({
  curve_id: curve.curve_id,
  kind: curve.kind,
  max_level: curve.max_level,
  points_per_level: curve.points_per_level,
  params: curve.params,
  bonus_levels: curve.bonus_levels,
  created_at: isoTime(curve.created_at_ms)!,
  created_by: curve.created_by,
});

// --- tree definitions ------------------------------------------------------------
const Prerequisite = Type.Union([ID, Type.Object({ node_id: ID, rank: Type.Optional(Type.Integer({ minimum: 1, maximum: talentLimits.node_max_rank_max })) })]);
const NodeBody = Type.Object({
  id: ID,
  name: Type.String({ minLength: 1, maxLength: 200 }),
  tier: Type.Integer({ minimum: 0, maximum: 1000 }),
  max_rank: Type.Optional(Type.Integer({ minimum: 1, maximum: talentLimits.node_max_rank_max, description: 'Default 1.' })),
  cost_per_rank: Type.Optional(Costs),
  prerequisites: Type.Optional(Type.Array(Prerequisite, { maxItems: talentLimits.prerequisites_per_node_max, description: 'Node ids (rank 1 needed) or {node_id, rank}.' })),
  exclusive_group: Type.Optional(Type.Union([ID, Type.Null()])),
  grants: Type.Optional(Type.Unknown({ description: `Any JSON value (up to ${GRANTS_BYTES_MAX} bytes), stored and returned as is.` })),
});
const Gate = Type.Object({
  points_spent: Type.Optional(Type.Integer({ minimum: 0, maximum: talentLimits.amount_max, description: 'Points spent in lower tiers that unlock the tier. Default 0.' })),
  currency: Type.Optional(Type.Union([ID, Type.Null()], { description: 'Count this point currency only; null or absent: every currency.' })),
});
const TierBody = Type.Object({ tier: Type.Integer({ minimum: 0, maximum: 1000 }), gate: Type.Optional(Type.Union([Gate, Type.Null()])) });
const GroupBody = Type.Object({ id: ID, label: Type.Optional(Type.String({ maxLength: 200 })), max_selected: Type.Optional(Type.Integer({ minimum: 1, maximum: talentLimits.tree_nodes_max })) });
const RespecBody = Type.Object({
  full: Type.Optional(Type.Union([Type.Object({ enabled: Type.Optional(Type.Boolean()), cost: Type.Optional(Costs) }), Type.Null()])),
  partial: Type.Optional(Type.Union([Type.Object({ enabled: Type.Optional(Type.Boolean()), cost_per_rank: Type.Optional(Costs) }), Type.Null()])),
});
const treeFields = {
  tree_id: ID,
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
  point_currencies: Type.Array(ID, { minItems: 1, maxItems: talentLimits.point_currencies_max }),
  tiers: Type.Array(TierBody, { maxItems: talentLimits.tree_tiers_max }),
  nodes: Type.Array(NodeBody, { maxItems: talentLimits.tree_nodes_max }),
  exclusive_groups: Type.Optional(Type.Array(GroupBody, { maxItems: talentLimits.tree_groups_max })),
  respec: Type.Optional(RespecBody),
};
const Migration = Type.Object({ from_version: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) });
const TreeBody = Type.Object(treeFields);
const PutBody = Type.Object({ ...treeFields, migration: Type.Optional(Type.Union([Migration, Type.Null()])) });
const ValidateBody = PutBody;

const NodeResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  tier: Type.Integer(),
  max_rank: Type.Integer(),
  cost_per_rank: Type.Array(Cost),
  prerequisites: Type.Array(Type.Object({ node_id: Type.String(), rank: Type.Integer() })),
  exclusive_group: Type.Union([Type.String(), Type.Null()]),
  grants: Type.Unknown(),
});
const TalentTree = Type.Object(
  {
    active: Type.Boolean({ description: 'True for the latest version.' }),
    created_at: Type.String({ format: 'date-time' }),
    created_by: Type.String(),
    definition_id: Type.String({ description: '`<tree_id>:v<version>`' }),
    description: Type.String(),
    exclusive_groups: Type.Array(Type.Object({ id: Type.String(), label: Type.String(), max_selected: Type.Integer() })),
    migration: Type.Union([Migration, Type.Null()]),
    name: Type.String(),
    nodes: Type.Array(NodeResponse),
    point_currencies: Type.Array(Type.String()),
    respec: Type.Object({
      full: Type.Object({ enabled: Type.Boolean(), cost: Type.Array(Cost) }),
      partial: Type.Object({ enabled: Type.Boolean(), cost_per_rank: Type.Array(Cost) }),
    }),
    tiers: Type.Array(Type.Object({ tier: Type.Integer(), gate: Type.Object({ points_spent: Type.Integer(), currency: Type.Union([Type.String(), Type.Null()]) }) })),
    tree_id: Type.String(),
    updated_at: Type.String({ format: 'date-time' }),
    version: Type.Integer(),
  },
  { title: 'TalentTree' },
);
function treeShape(view: TreeView) {
  const tree: TreeVersion = view.tree;
  return {
    active: tree.version === view.latest_version,
    created_at: isoTime(tree.created_at_ms)!,
    created_by: tree.created_by,
    definition_id: `${tree.tree_id}:v${tree.version}`,
    description: tree.description,
    exclusive_groups: tree.exclusive_groups,
    migration: tree.migration,
    name: tree.name,
    nodes: tree.nodes,
    point_currencies: tree.point_currencies,
    respec: tree.respec,
    tiers: tree.tiers,
    tree_id: tree.tree_id,
    updated_at: isoTime(view.updated_at_ms)!,
    version: tree.version,
  };
}
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of the name or description (case-insensitive).' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('version'), Type.Literal('name')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  active_only: Type.Optional(Type.Boolean({ description: 'Latest version of each tree only.' })),
});
const TreeParams = Type.Object({ tree_id: ID });
const VersionQuery = Type.Object({ version: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'A stored version; default the latest.' })) });
const VersionParams = Type.Object({ tree_id: ID, version: Type.Integer({ minimum: 0, maximum: 2_147_483_647 }) });

// --- wallet, XP, allocation ----------------------------------------------------------
const Wallet = Type.Object(
  {
    user_id: Type.String(),
    balances: Type.Record(Type.String(), Type.Integer()),
    xp: Type.Array(Type.Object({ curve_id: Type.String(), current_level: Type.Integer(), total_xp: Type.Integer() })),
  },
  { title: 'Wallet' },
);
const XpBody = Type.Object({
  amount: Type.Integer({ minimum: 1, maximum: talentLimits.amount_max }),
  curve_id: ID,
  event_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$', description: 'Makes the event idempotent, like an Idempotency-Key header (which it overrides).' })),
});
const XpResultSchema = Type.Object(
  {
    granted: Type.Record(Type.String(), Type.Integer()),
    idempotent: Type.Boolean(),
    new_level: Type.Integer(),
    old_level: Type.Integer(),
    curve_id: Type.String(),
    total_xp: Type.Integer(),
    event_id: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'XpResult' },
);
const AllocateBody = Type.Object({ node_id: ID });
const RespecRequest = Type.Object({
  node_ids: Type.Optional(Type.Array(ID, { minItems: 1, maxItems: talentLimits.tree_nodes_max, description: 'Partial respec of these nodes (every rank); absent: full respec.' })),
});
const AllocationState = Type.Object(
  {
    exclusive_selections: Type.Record(Type.String(), Type.String(), { description: 'group -> selected node id (several: sorted, joined with `,`).' }),
    highest_tier_unlocked: Type.Integer(),
    points_spent: Type.Record(Type.String(), Type.Integer()),
    ranks: Type.Record(Type.String(), Type.Integer()),
    tree_id: Type.String(),
    tree_version: Type.Integer(),
    user_id: Type.String(),
  },
  { title: 'AllocationState' },
);
const NodeStatus = Type.Object(
  {
    node_id: Type.String(),
    current_rank: Type.Integer(),
    max_rank: Type.Integer(),
    affordable: Type.Boolean(),
    prerequisites_met: Type.Boolean(),
    tier_locked: Type.Boolean(),
    excluded_by: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'NodeStatus' },
);
const StateResponse = Type.Object({ nodes: Type.Array(NodeStatus), state: AllocationState, tree_id: Type.String(), tree_version: Type.Integer() });
const TenantQuery = Type.Object({ tenant: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: "Platform admins only: the tenant (organization id or user id) whose tree and user to read; default the caller's." })) });
const UserStateParams = Type.Object({ tree_id: ID, user_id: Type.String({ minLength: 1, maxLength: 128 }) });

// --- analytics -------------------------------------------------------------------------
const Selection = Type.Object({ group: Type.String(), node_id: Type.String() });
const ArchetypesResponse = Type.Object({
  archetypes: Type.Array(Type.Object({ population: Type.Integer(), selections: Type.Array(Selection), share: Type.Number(), signature: Type.String() })),
  total_population: Type.Integer(),
  tree_id: Type.String(),
  tree_version: Type.Integer(),
});
const PathsResponse = Type.Object({
  nodes: Type.Array(Type.Object({ name: Type.String(), node_id: Type.String(), tier: Type.Integer(), total_ranks_allocated: Type.Integer() })),
  tree_id: Type.String(),
  tree_version: Type.Integer(),
});

const ok = (schema: TSchema, ...errors: number[]) => ({ 200: schema, ...errorResponses(...bearerErrors, ...errors) });

function checkTreeBody(body: Static<typeof TreeBody>): TreeInput {
  if (RESERVED_TREE_IDS.has(body.tree_id)) {
    throw new ServiceError('BAD_REQUEST', `tree_id ${body.tree_id} is reserved (a route under /api/v1/talent/).`, { details: [{ field: 'body.tree_id', message: 'is reserved' }] });
  }
  body.nodes.forEach((node, index) => {
    if (node.grants !== undefined && serialisedBytes(node.grants) > GRANTS_BYTES_MAX) {
      throw new ServiceError('BAD_REQUEST', `body.nodes.${index}.grants must serialise to at most ${GRANTS_BYTES_MAX} bytes.`, { details: [{ field: `body.nodes.${index}.grants`, message: 'is too large' }] });
    }
  });
  return body as TreeInput;
}

/** The event id of an XP event: the body's event_id, else the Idempotency-Key header. */
function xpEventId(request: FastifyRequest, body: Static<typeof XpBody>): string | null {
  const header = request.headers['idempotency-key'];
  if (header !== undefined && (typeof header !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(header))) {
    throw new ServiceError('BAD_REQUEST', 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
  }
  return body.event_id ?? header ?? null;
}

export function talentRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const base = '/api/v1/talent';
  const user = (request: FastifyRequest, message: TalentUserMessage) => {
    const principal = requirePrincipal(request);
    return services.actors.ask<unknown>(TALENT_USER_KIND, talentUserKey(principal.tenant, principal.user_id), message);
  };
  const tree = (tenant: string, tree_id: string, message: TreeMessage) => services.actors.ask<unknown>(TALENT_TREE_KIND, talentTreeKey(tenant, tree_id), message);
  const readTree = (tenant: string, tree_id: string, version: number | null) =>
    services.actors.ask<TreeView>(TALENT_TREE_KIND, talentTreeKey(tenant, tree_id), { op: 'get', version }, { readOnly: true });
  const readAnalytics = (tenant: string, tree_id: string, version: number) =>
    services.actors.ask<AnalyticsView>(TALENT_ANALYTICS_KIND, talentAnalyticsKey(tenant, tree_id), { op: 'read', version }, { readOnly: true });

  app.post<{ Body: Static<typeof CurveBody> }>(`${base}/curves`, {
    onRequest: authenticate,
    schema: { tags: ['talent'], summary: 'Create an XP curve (immutable). Existing curve_id: 409 talent_curve_exists.', security: bearerSecurity, body: CurveBody, response: { 201: CurveResponse, ...errorResponses(...bearerErrors, 409) } },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const curve = await services.actors.ask<Curve>(TALENT_CURVE_KIND, talentCurveKey(principal.tenant, request.body.curve_id), { op: 'create', curve: request.body, by: principal.user_id });
    return reply.code(201).send(curveShape(curve));
  });

  app.get<{ Params: { curve_id: string } }>(`${base}/curves/:curve_id`, {
    onRequest: authenticate,
    schema: { tags: ['talent'], summary: 'An XP curve.', security: bearerSecurity, params: Type.Object({ curve_id: ID }), response: ok(CurveResponse, 404) },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const curve = await services.actors.ask<Curve>(TALENT_CURVE_KIND, talentCurveKey(principal.tenant, request.params.curve_id), { op: 'get' }, { readOnly: true });
    return curveShape(curve);
  });

  app.get<{ Querystring: Static<typeof ListQuery> }>(`${base}/definitions`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: 'List tree versions of the tenant (every stored version, or the latest of each with active_only).',
      security: bearerSecurity,
      querystring: ListQuery,
      response: ok(Type.Object({ pagination: Pagination, trees: Type.Array(TalentTree) })),
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(100, query.page_size || 20);
    const listed = await services.actors.ask<TreeListReply>(
      TALENT_TREE_INDEX_KIND,
      talentTreeIndexKey(principal.tenant),
      { op: 'list', query: { q: query.q ?? null, sort_by: query.sort_by ?? 'created_at', sort_order: query.sort_order ?? 'desc', active_only: query.active_only ?? false, page, page_size } },
      { readOnly: true },
    );
    // The page's definitions, from their trees; a version deleted since the index answered is left out.
    const views = await Promise.all(
      listed.items.map((item) =>
        services.actors.ask<TreeView>(TALENT_TREE_KIND, talentTreeKey(principal.tenant, item.tree_id), { op: 'get', version: item.version }, { readOnly: true }).catch((error: unknown) => {
          if (error instanceof ServiceError && (error.code === 'talent_tree_not_found' || error.code === 'talent_version_not_found')) return null;
          throw error;
        }),
      ),
    );
    return {
      pagination: { page, page_size, total: listed.total, has_more: page * page_size < listed.total },
      trees: views.filter((view): view is TreeView => view !== null).map(treeShape),
    };
  });

  app.post<{ Body: Static<typeof TreeBody> }>(`${base}/definitions`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: 'Create a tree (version 1). A definition with issues: 400 talent_definition_invalid listing them; existing tree_id: 409 talent_tree_exists.',
      security: bearerSecurity,
      body: TreeBody,
      response: { 201: TalentTree, ...errorResponses(...bearerErrors, 409) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const input = checkTreeBody(request.body);
    const view = (await tree(principal.tenant, input.tree_id, { op: 'create', tree: input, by: principal.user_id })) as TreeView;
    return reply.code(201).send(treeShape(view));
  });

  app.post<{ Body: Static<typeof ValidateBody> }>(`${base}/definitions/validate`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: 'Every issue of a definition (cycles, unreachable nodes, unknown references, impossible gates), stored nowhere.',
      security: bearerSecurity,
      body: ValidateBody,
      response: ok(Type.Object({ issues: Type.Array(Type.String()), valid: Type.Boolean() })),
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const input = checkTreeBody(request.body);
    return services.actors.ask<ValidateReply>(
      TALENT_TREE_KIND,
      talentTreeKey(principal.tenant, input.tree_id),
      { op: 'validate', tree: input, migration: request.body.migration ?? null },
      { readOnly: true },
    );
  });

  app.get<{ Params: Static<typeof TreeParams>; Querystring: Static<typeof VersionQuery> }>(`${base}/definitions/:tree_id`, {
    onRequest: authenticate,
    schema: { tags: ['talent'], summary: 'A tree: its latest version, or ?version=.', security: bearerSecurity, params: TreeParams, querystring: VersionQuery, response: ok(TalentTree, 404) },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return treeShape(await readTree(principal.tenant, request.params.tree_id, request.query.version ?? null));
  });

  app.put<{ Params: Static<typeof TreeParams>; Body: Static<typeof PutBody> }>(`${base}/definitions/:tree_id`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: "A new version of the tree. migration.from_version carries that version's allocations over (lazily, as each user's state is next touched).",
      security: bearerSecurity,
      params: TreeParams,
      body: PutBody,
      response: ok(TalentTree, 404, 409),
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    if (request.body.tree_id !== request.params.tree_id) {
      throw new ServiceError('BAD_REQUEST', 'The body tree_id must be the tree_id of the path.', { details: [{ field: 'body.tree_id', message: 'differs from the path' }] });
    }
    const input = checkTreeBody(request.body);
    const view = (await tree(principal.tenant, input.tree_id, { op: 'put', tree: input, by: principal.user_id, migration: request.body.migration ?? null })) as TreeView;
    return treeShape(view);
  });

  app.delete<{ Params: Static<typeof VersionParams> }>(`${base}/definitions/:tree_id/versions/:version`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: 'Delete one version. Users in it move to the latest version when next touched (refunded unless the migration chain carries them).',
      security: bearerSecurity,
      params: VersionParams,
      response: ok(Type.Object({ message: Type.String(), tree_id: Type.String(), version: Type.Integer() }), 404),
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { tree_id, version } = request.params;
    await tree(principal.tenant, tree_id, { op: 'delete_version', version });
    return { message: `Version ${version} of ${tree_id} deleted.`, tree_id, version };
  });

  app.get(`${base}/me/wallet`, {
    onRequest: authenticate,
    schema: { tags: ['talent'], summary: "The caller's point balances and XP per curve.", security: bearerSecurity, response: ok(Wallet) },
  }, async (request) => (await user(request, { op: 'wallet' })) as WalletView);

  app.post<{ Body: Static<typeof XpBody> }>(`${base}/xp/events`, {
    onRequest: authenticate,
    // The wallet itself remembers event ids (answering idempotent: true), so the edge's Idempotency-Key store stays out.
    config: { idempotencyInHandler: true },
    schema: {
      tags: ['talent'],
      summary: 'Grant XP on a curve; level-ups credit points to the wallet. An event_id (or Idempotency-Key) seen before returns the first result with idempotent: true.',
      security: bearerSecurity,
      body: XpBody,
      response: ok(XpResultSchema, 404, 409),
    },
  }, async (request) => {
    const event_id = xpEventId(request, request.body);
    return (await user(request, { op: 'xp', curve_id: request.body.curve_id, amount: request.body.amount, event_id })) as XpResult;
  });

  app.post<{ Params: Static<typeof TreeParams>; Body: Static<typeof AllocateBody> }>(`${base}/:tree_id/allocate`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: 'Add one rank of a node. A broken rule answers 409 with its code and details.rule (max_rank, tier_gate, prerequisites, exclusive_group, affordable).',
      security: bearerSecurity,
      params: TreeParams,
      body: AllocateBody,
      response: ok(AllocationState, 404, 409),
    },
  }, async (request) => ((await user(request, { op: 'allocate', tree_id: request.params.tree_id, node_id: request.body.node_id })) as TreeStateView).state);

  app.post<{ Params: Static<typeof TreeParams>; Body: Static<typeof RespecRequest> }>(`${base}/:tree_id/respec`, {
    onRequest: authenticate,
    // The body is optional: no body reads as {} (a full respec).
    preValidation: async (request) => {
      if (request.body === undefined || request.body === null) request.body = {};
    },
    schema: {
      tags: ['talent'],
      summary: "Refund every rank (no body) or the listed nodes' ranks (node_ids), paying the tree's respec cost.",
      security: bearerSecurity,
      params: TreeParams,
      body: RespecRequest,
      response: ok(AllocationState, 404, 409),
    },
  }, async (request) => ((await user(request, { op: 'respec', tree_id: request.params.tree_id, node_ids: request.body.node_ids ?? null })) as TreeStateView).state);

  app.get<{ Params: Static<typeof TreeParams> }>(`${base}/:tree_id/state`, {
    onRequest: authenticate,
    schema: { tags: ['talent'], summary: "The caller's allocation in the tree's latest version, with each node's status.", security: bearerSecurity, params: TreeParams, response: ok(StateResponse, 404) },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return (await user(request, { op: 'state', tree_id: request.params.tree_id, viewer: { user_id: principal.user_id, admin: principal.role === 'admin' } })) as TreeStateView;
  });

  app.get<{ Params: Static<typeof UserStateParams>; Querystring: Static<typeof TenantQuery> }>(`${base}/:tree_id/users/:user_id/state`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: "A user's state in a tree of the caller's tenant: the user, the tree's owner and platform admins only (403 forbidden otherwise). Admins may name another tenant.",
      security: bearerSecurity,
      params: UserStateParams,
      querystring: TenantQuery,
      response: ok(StateResponse, 403, 404),
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { tree_id, user_id } = request.params;
    const tenant = request.query.tenant ?? principal.tenant;
    if (tenant !== principal.tenant && principal.role !== 'admin') throw new ServiceError('forbidden', 'Only platform admins can read another tenant.');
    return services.actors.ask<TreeStateView>(TALENT_USER_KIND, talentUserKey(tenant, user_id), {
      op: 'state',
      tree_id,
      viewer: { user_id: principal.user_id, admin: principal.role === 'admin' },
    });
  });

  app.get<{ Params: Static<typeof TreeParams>; Querystring: Static<typeof VersionQuery> }>(`${base}/:tree_id/analytics/paths`, {
    onRequest: authenticate,
    schema: { tags: ['talent'], summary: 'Ranks allocated per node, over every user in the version (default the latest).', security: bearerSecurity, params: TreeParams, querystring: VersionQuery, response: ok(PathsResponse, 404) },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await readTree(principal.tenant, request.params.tree_id, request.query.version ?? null);
    const stats = await readAnalytics(principal.tenant, request.params.tree_id, view.tree.version);
    return {
      nodes: view.tree.nodes.map((node) => ({ name: node.name, node_id: node.id, tier: node.tier, total_ranks_allocated: stats.ranks[node.id] ?? 0 })),
      tree_id: view.tree.tree_id,
      tree_version: view.tree.version,
    };
  });

  app.get<{ Params: Static<typeof TreeParams>; Querystring: Static<typeof VersionQuery> }>(`${base}/:tree_id/analytics/archetypes`, {
    onRequest: authenticate,
    schema: {
      tags: ['talent'],
      summary: 'Users grouped by their exclusive selections, with population and share of the users with any rank in the version.',
      security: bearerSecurity,
      params: TreeParams,
      querystring: VersionQuery,
      response: ok(ArchetypesResponse, 404),
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await readTree(principal.tenant, request.params.tree_id, request.query.version ?? null);
    const stats = await readAnalytics(principal.tenant, request.params.tree_id, view.tree.version);
    return {
      archetypes: stats.archetypes.map((archetype) => ({
        population: archetype.population,
        selections: archetype.selections,
        share: stats.population === 0 ? 0 : Math.round((archetype.population / stats.population) * 10_000) / 10_000,
        signature: archetype.signature,
      })),
      total_population: stats.population,
      tree_id: view.tree.tree_id,
      tree_version: view.tree.version,
    };
  });
}
