import { randomInt } from 'node:crypto';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ServiceError, serialisedBytes } from '../../runtime/index.js';
import {
  ITEM_CATALOG_KIND,
  ITEM_CONTAINER_KIND,
  ITEM_PROGRESS_KIND,
  itemCatalogKey,
  itemContainerKey,
  itemProgressKey,
  itemsPolicy as policy,
  type Blueprint,
  type BlueprintBody,
  type CatalogMessage,
  type Collection,
  type CollectionBody,
  type CollectionProgress,
  type ContainerConfig,
  type ContainerMessage,
  type ContainerTreeView,
  type ContentsView,
  type ItemLock,
  type CraftPlan,
  type CraftResult,
  type Definition,
  type DefinitionInput,
  type GrantPlan,
  type GrantResult,
  type ListView,
  type MergeReply,
  type SalvagePlan,
  type SalvageReply,
  type StoredItem,
  type TierEvent,
} from '../../actors/items/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Items per domain: definitions, blueprints, collections, containers, grants, crafting, merge (spec doc 2 §4.9; docs/api/items.md). */
const tags = ['items'];
const base = '/api/v1/items/:domain';
const scale = policy.measure_scale;

const DOMAIN = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', description: 'A game or title namespace chosen by the caller.' });
const ID = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.:-]+$' });
const NAME = Type.String({ minLength: 1, maxLength: 200 });
const LABEL = Type.String({ minLength: 1, maxLength: 128 });
const QUANTITY = Type.Integer({ minimum: 1, maximum: policy.max_stack_max });
const MEASURE = Type.Number({ minimum: 0, maximum: policy.measure_max, description: 'Kept to 3 decimal places (rounded).' });
const CHANCE = Type.Number({ minimum: 0, maximum: 1 });
const Ts = Type.String({ format: 'date-time' });
const NullableString = Type.Union([Type.String(), Type.Null()]);

const DomainParams = Type.Object({ domain: DOMAIN });
const IdParams = Type.Object({ domain: DOMAIN, id: ID });
const ContainerParams = Type.Object({ domain: DOMAIN, container_id: ID });
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 200, description: 'Substring of the name (case-insensitive).' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('name')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});
type ListQueryType = Static<typeof ListQuery>;

const SalvageOutput = Type.Object({ definition_id: ID, quantity: QUANTITY, chance: Type.Optional(CHANCE) });
const DefinitionBody = Type.Object({
  definition_id: Type.Optional(ID),
  name: NAME,
  max_stack: QUANTITY,
  stackable: Type.Optional(Type.Boolean({ description: 'Default: max_stack > 1 and no default_durability.' })),
  weight: Type.Optional(MEASURE),
  volume: Type.Optional(MEASURE),
  equip_slot: Type.Optional(Type.Union([LABEL, Type.Null()])),
  rarity: Type.Optional(LABEL),
  tags: Type.Optional(Type.Array(LABEL, { maxItems: policy.tags_max })),
  default_durability: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: policy.durability_max }), Type.Null()])),
  salvage_outputs: Type.Optional(Type.Array(SalvageOutput, { maxItems: policy.salvage_outputs_max })),
});
const DefinitionPutBody = Type.Omit(DefinitionBody, ['definition_id']);
const BatchBody = Type.Object({ definitions: Type.Array(DefinitionBody, { minItems: 1, maxItems: policy.definitions_per_batch_max }) });
const Definition = Type.Object(
  {
    definition_id: Type.String(),
    domain: Type.String(),
    name: Type.String(),
    stackable: Type.Boolean(),
    max_stack: Type.Integer(),
    weight: Type.Number(),
    volume: Type.Number(),
    equip_slot: NullableString,
    rarity: Type.String(),
    tags: Type.Array(Type.String()),
    default_durability: Type.Union([Type.Integer(), Type.Null()]),
    salvage_outputs: Type.Array(Type.Object({ definition_id: Type.String(), quantity: Type.Integer(), chance: Type.Number() })),
    created_at: Ts,
    updated_at: Ts,
  },
  { title: 'ItemDefinition' },
);

const BlueprintBodySchema = Type.Object({
  name: NAME,
  inputs: Type.Array(
    Type.Object({ match: Type.Optional(Type.Literal('definition_id')), value: ID, quantity: QUANTITY }),
    { minItems: 1, maxItems: policy.blueprint_inputs_max },
  ),
  outputs: Type.Array(
    Type.Object({
      definition_id: ID,
      quantity: QUANTITY,
      chance: Type.Optional(CHANCE),
      initial_durability_pct: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
    }),
    { minItems: 1, maxItems: policy.blueprint_outputs_max },
  ),
  context_requirements: Type.Optional(Type.Unknown({ description: 'Any JSON value up to 16 KiB, stored and returned (not evaluated).' })),
});
const Blueprint = Type.Object(
  {
    blueprint_id: Type.String(),
    domain: Type.String(),
    name: Type.String(),
    type: Type.String(),
    version: Type.Integer(),
    inputs: Type.Array(Type.Object({ match: Type.String(), value: Type.String(), quantity: Type.Integer() })),
    outputs: Type.Array(Type.Object({ definition_id: Type.String(), quantity: Type.Integer(), chance: Type.Number(), initial_durability_pct: Type.Number() })),
    context_requirements: Type.Unknown(),
    created_at: Ts,
    updated_at: Ts,
  },
  { title: 'Blueprint' },
);

const CollectionBodySchema = Type.Object({
  name: NAME,
  members: Type.Array(ID, { minItems: 1, maxItems: policy.collection_members_max }),
  tiers: Type.Optional(Type.Array(Type.Object({ required: Type.Integer({ minimum: 1 }), bonus_event: LABEL }), { maxItems: policy.collection_tiers_max })),
  duplicate_policy: Type.Optional(Type.Union([Type.Literal('ignore'), Type.Literal('convert')])),
  convert_event: Type.Optional(Type.Union([LABEL, Type.Null()])),
});
const Collection = Type.Object(
  {
    collection_id: Type.String(),
    domain: Type.String(),
    name: Type.String(),
    members: Type.Array(Type.String()),
    tiers: Type.Array(Type.Object({ required: Type.Integer(), bonus_event: Type.String() })),
    duplicate_policy: Type.String(),
    convert_event: NullableString,
    created_at: Ts,
    updated_at: Ts,
  },
  { title: 'Collection' },
);
const Progress = Type.Object(
  {
    collection_id: Type.String(),
    user_id: Type.String(),
    owned: Type.Array(Type.String()),
    owned_count: Type.Integer(),
    total_members: Type.Integer(),
    duplicate_counts: Type.Record(Type.String(), Type.Integer()),
    tiers_reached: Type.Array(Type.Integer()),
    completed: Type.Boolean(),
  },
  { title: 'CollectionProgress' },
);

const Item = Type.Object(
  {
    item_id: Type.String(),
    container_id: Type.String(),
    definition_id: Type.String(),
    domain: Type.String(),
    owner_id: NullableString,
    quantity: Type.Integer(),
    slot: Type.Integer(),
    max_stack: Type.Integer(),
    weight: Type.Number({ description: 'Per unit, as placed.' }),
    volume: Type.Number({ description: 'Per unit, as placed.' }),
    durability: Type.Union([Type.Object({ current: Type.Integer(), max: Type.Integer() }), Type.Null()]),
    collection_tags: Type.Array(Type.String()),
    state: Type.String({ description: '`normal`, or `locked` while a trade or an auction holds some of its units (in every answer that carries the item).' }),
    locked_quantity: Type.Optional(Type.Integer({ description: "In a container's contents: units locked by trades or auctions (they cannot be merged, salvaged, crafted or locked again)." })),
    locked_by: Type.Optional(
      Type.Array(
        Type.Object({ lock_id: Type.String(), quantity: Type.Integer(), holder: Type.Union([Type.Object({ area: Type.String(), ref: Type.String() }), Type.Null()]), locked_at: Ts }),
        { description: "In a container's contents: the locks on the item." },
      ),
    ),
    created_at: Ts,
    updated_at: Ts,
  },
  { title: 'Item' },
);
const Limits = Type.Object({ max_weight: Type.Union([Type.Number(), Type.Null()]), max_volume: Type.Union([Type.Number(), Type.Null()]) });
const ContainerFields = {
  container_id: Type.String(),
  domain: Type.String(),
  kind: Type.String(),
  owner_id: NullableString,
  parent_container_id: NullableString,
  slots: Type.Integer(),
  limits: Limits,
  created_at: Ts,
};
const ContainerSummary = Type.Object(ContainerFields, { title: 'ContainerSummary' });
const Container = Type.Object(
  {
    ...ContainerFields,
    usage: Type.Object({ slots_used: Type.Integer(), weight: Type.Number(), volume: Type.Number() }),
    contents: Type.Array(Item),
    children: Type.Array(Type.Unknown(), { description: 'Without expand: the direct children (ContainerSummary). With expand=contents: every descendant as a Container, recursively.' }),
    truncated: Type.Boolean({ description: `expand=contents stopped at ${policy.expand_containers_max} containers.` }),
  },
  { title: 'Container' },
);
const ContainerBody = Type.Object({
  container_id: Type.Optional(ID),
  kind: Type.Optional(Type.Literal('slotted')),
  owner_id: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 256 }), Type.Null()])),
  parent_container_id: Type.Optional(Type.Union([ID, Type.Null()])),
  slots: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.slots_max })),
  limits: Type.Optional(
    Type.Object({ max_weight: Type.Optional(Type.Union([MEASURE, Type.Null()])), max_volume: Type.Optional(Type.Union([MEASURE, Type.Null()])) }),
  ),
});
const MoveBody = Type.Object({ parent_container_id: Type.Union([ID, Type.Null()]) });
const ContainerQuery = Type.Object({
  expand: Type.Optional(Type.Literal('contents', { description: 'Expand every nested container with its contents, recursively.' })),
});

const TierEventSchema = Type.Object({ collection_id: Type.String(), required: Type.Integer(), bonus_event: Type.String(), global_first: Type.Boolean() });
const GrantBody = Type.Object({ container_id: ID, definition_id: ID, quantity: Type.Integer({ minimum: 1, maximum: policy.grant_quantity_max }) });
const GrantResponse = Type.Object({ container_id: Type.String(), items: Type.Array(Item), tier_events: Type.Array(TierEventSchema) }, { title: 'GrantResult' });
const CraftBody = Type.Object({
  blueprint_id: ID,
  source_container_id: ID,
  target_container_id: ID,
  seed: Type.Optional(Type.String({ pattern: '^[0-9]{1,10}$', description: 'Decimal 0..4294967295; default: drawn by the server. The craft result records it.' })),
});
const CraftResponse = Type.Object(
  {
    craft_id: Type.String(),
    blueprint_id: Type.String(),
    blueprint_version: Type.Integer(),
    seed: Type.String(),
    source_container_id: Type.String(),
    target_container_id: Type.String(),
    consumed: Type.Array(Type.Object({ definition_id: Type.String(), quantity: Type.Integer() })),
    produced: Type.Array(Item),
    global_first: Type.Boolean(),
    global_first_outputs: Type.Array(Type.String()),
    tier_events: Type.Array(TierEventSchema),
  },
  { title: 'CraftResult' },
);
const MergeBody = Type.Object({
  container_id: ID,
  source_item_id: ID,
  target_item_id: ID,
  quantity: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.max_stack_max, description: 'Default: the whole source stack (as much as fits).' })),
});
const MergeResponse = Type.Object(
  { container_id: Type.String(), moved: Type.Integer(), source: Type.Union([Item, Type.Null()]), target: Item },
  { title: 'MergeResult' },
);
const SalvageBody = Type.Object({
  container_id: ID,
  item_id: ID,
  quantity: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.salvage_units_max, description: `Units of the item to salvage; default 1, at most ${policy.salvage_units_max}.` })),
  seed: Type.Optional(Type.String({ pattern: '^[0-9]{1,10}$', description: 'Decimal 0..4294967295; default: drawn by the server. The result records it.' })),
});
const SalvageResponse = Type.Object(
  {
    container_id: Type.String(),
    seed: Type.String(),
    consumed: Type.Object({ item_id: Type.String(), definition_id: Type.String(), quantity: Type.Integer() }),
    remaining: Type.Union([Item, Type.Null()]),
    produced: Type.Array(Item),
  },
  { title: 'SalvageResult' },
);
const Deleted = Type.Object({ id: Type.String(), message: Type.String() });
const listOf = (field: string, entry: TSchema) => Type.Object({ [field]: Type.Array(entry), pagination: Pagination });

const CONTEXT_BYTES_MAX = 16 * 1024;

const measure = (value: number | undefined | null): number | null => (value === undefined || value === null ? null : Math.round(value * scale));
const shown = (value_m: number) => value_m / scale;

function definitionInput(body: Static<typeof DefinitionPutBody> & { definition_id?: string }): DefinitionInput {
  return {
    definition_id: body.definition_id,
    name: body.name,
    stackable: body.stackable,
    max_stack: body.max_stack,
    weight_m: measure(body.weight) ?? 0,
    volume_m: measure(body.volume) ?? 0,
    equip_slot: body.equip_slot ?? null,
    rarity: body.rarity ?? 'common',
    tags: body.tags ?? [],
    default_durability: body.default_durability ?? null,
    salvage_outputs: (body.salvage_outputs ?? []).map((output) => ({ definition_id: output.definition_id, quantity: output.quantity, chance: output.chance ?? 1 })),
  };
}

function blueprintBody(body: Static<typeof BlueprintBodySchema>): BlueprintBody {
  const context_requirements = body.context_requirements ?? null;
  if (serialisedBytes(context_requirements) > CONTEXT_BYTES_MAX) {
    throw new ServiceError('BAD_REQUEST', `context_requirements must serialise to at most ${CONTEXT_BYTES_MAX} bytes.`, {
      details: [{ field: 'body.context_requirements', message: 'is too large' }],
    });
  }
  return {
    name: body.name,
    inputs: body.inputs.map((input) => ({ match: 'definition_id', value: input.value, quantity: input.quantity })),
    outputs: body.outputs.map((output) => ({
      definition_id: output.definition_id,
      quantity: output.quantity,
      chance: output.chance ?? 1,
      initial_durability_pct: output.initial_durability_pct ?? 100,
    })),
    context_requirements,
  };
}

function collectionBody(body: Static<typeof CollectionBodySchema>): CollectionBody {
  return {
    name: body.name,
    members: body.members,
    tiers: body.tiers ?? [],
    duplicate_policy: body.duplicate_policy ?? 'ignore',
    convert_event: body.convert_event ?? null,
  };
}

function definitionView(domain: string, d: Definition) {
  return {
    definition_id: d.definition_id,
    domain,
    name: d.name,
    stackable: d.stackable,
    max_stack: d.max_stack,
    weight: shown(d.weight_m),
    volume: shown(d.volume_m),
    equip_slot: d.equip_slot,
    rarity: d.rarity,
    tags: d.tags,
    default_durability: d.default_durability,
    salvage_outputs: d.salvage_outputs,
    created_at: isoTime(d.created_at_ms)!,
    updated_at: isoTime(d.updated_at_ms)!,
  };
}

function blueprintView(domain: string, b: Blueprint) {
  return { ...b, domain, created_at: isoTime(b.created_at_ms)!, updated_at: isoTime(b.updated_at_ms)! };
}

function collectionView(domain: string, c: Collection) {
  return { ...c, domain, created_at: isoTime(c.created_at_ms)!, updated_at: isoTime(c.updated_at_ms)! };
}

/**
 * An item as clients see it. `state` is `locked` while units of it are locked:
 * a container's contents pass its held `locks` (the item then also shows
 * locked_quantity and locked_by); other answers pass `locked_item_ids`, the
 * ids the container found locked in the same turn (state only). An answer
 * that passes neither (a merge) concerns items that cannot be locked.
 */
function itemView(domain: string, container_id: string, owner_id: string | null, item: StoredItem, custodyOf: { locks: ItemLock[] } | { locked_item_ids: readonly string[] } | null = null) {
  const locks = custodyOf !== null && 'locks' in custodyOf ? custodyOf.locks : undefined;
  const mine = locks?.filter((lock) => lock.item_id === item.item_id) ?? [];
  const locked = mine.length > 0 || (custodyOf !== null && 'locked_item_ids' in custodyOf && custodyOf.locked_item_ids.includes(item.item_id));
  const custody =
    locks === undefined
      ? {}
      : {
          locked_quantity: mine.reduce((sum, lock) => sum + lock.quantity, 0),
          locked_by: mine.map((lock) => ({ lock_id: lock.lock_id, quantity: lock.quantity, holder: lock.holder, locked_at: isoTime(lock.created_at_ms)! })),
        };
  return {
    ...custody,
    item_id: item.item_id,
    container_id,
    definition_id: item.definition_id,
    domain,
    owner_id,
    quantity: item.quantity,
    slot: item.slot,
    max_stack: item.max_stack,
    weight: shown(item.unit_weight_m),
    volume: shown(item.unit_volume_m),
    durability: item.durability,
    collection_tags: item.collection_tags,
    state: locked ? 'locked' : 'normal',
    created_at: isoTime(item.created_at_ms)!,
    updated_at: isoTime(item.updated_at_ms)!,
  };
}

function containerSummary(domain: string, config: ContainerConfig) {
  return {
    container_id: config.container_id,
    domain,
    kind: config.kind,
    owner_id: config.owner_id,
    parent_container_id: config.parent_container_id,
    slots: config.slots,
    limits: { max_weight: config.max_weight_m === null ? null : shown(config.max_weight_m), max_volume: config.max_volume_m === null ? null : shown(config.max_volume_m) },
    created_at: isoTime(config.created_at_ms)!,
  };
}

function containerView(domain: string, config: ContainerConfig, contents: ContentsView, children: unknown[], truncated: boolean) {
  return {
    ...containerSummary(domain, config),
    usage: { slots_used: contents.usage.slots_used, weight: shown(contents.usage.weight_m), volume: shown(contents.usage.volume_m) },
    contents: contents.items.map((item) => itemView(domain, config.container_id, config.owner_id, item, { locks: contents.locks })),
    children,
    truncated,
  };
}

function tierEvents(events: TierEvent[]) {
  return events.map(({ collection_id, required, bonus_event, global_first }) => ({ collection_id, required, bonus_event, global_first }));
}

/** The body's seed, or one drawn here (actors draw no randomness of their own). */
function seedOf(raw: string | undefined): number {
  const seed = raw === undefined ? randomInt(0, 2 ** 32 - 1) : Number(raw);
  if (seed > 0xffff_ffff) throw new ServiceError('BAD_REQUEST', 'seed must be at most 4294967295.', { details: [{ field: 'body.seed', message: 'is too large' }] });
  return seed;
}

function page(query: ListQueryType) {
  const pageNumber = Math.max(1, query.page ?? 1);
  const page_size = Math.min(100, query.page_size || 20);
  return { q: query.q, sort_by: query.sort_by, sort_order: query.sort_order, page: pageNumber, page_size };
}

function pagination(query: { page: number; page_size: number }, total: number) {
  return { page: query.page, page_size: query.page_size, total, has_more: query.page * query.page_size < total };
}

export function itemRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const tenantOf = (request: Parameters<typeof requirePrincipal>[0]) => requirePrincipal(request).tenant;
  /** A change in the domain's catalog (one turn, or a flow it coordinates). */
  const change = <Reply>(tenant: string, domain: string, message: CatalogMessage) => services.actors.ask<Reply>(ITEM_CATALOG_KIND, itemCatalogKey(tenant, domain), message);
  /** A read of the catalog: safe to send again (changes nothing). */
  const read = <Reply>(tenant: string, domain: string, message: CatalogMessage) =>
    services.actors.ask<Reply>(ITEM_CATALOG_KIND, itemCatalogKey(tenant, domain), message, { readOnly: true });

  const route = (summary: string, schema: Record<string, unknown>, errors: number[] = []) => ({
    onRequest: authenticate,
    schema: { tags, summary, security: bearerSecurity, ...schema, response: { ...(schema.response as object), ...errorResponses(...bearerErrors, ...errors) } },
  });

  // Definitions
  app.get<{ Params: Static<typeof DomainParams>; Querystring: ListQueryType }>(
    `${base}/definitions`,
    route('List item definitions.', { params: DomainParams, querystring: ListQuery, response: { 200: listOf('definitions', Definition) } }),
    async (request) => {
      const query = page(request.query);
      const view = await read<ListView<Definition>>(tenantOf(request), request.params.domain, { op: 'definitions_list', query });
      return { definitions: view.entries.map((d) => definitionView(request.params.domain, d)), pagination: pagination(query, view.total) };
    },
  );

  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof DefinitionBody> }>(
    `${base}/definitions`,
    route('Create an item definition.', { params: DomainParams, body: DefinitionBody, response: { 201: Definition } }, [404, 409]),
    async (request, reply) => {
      const { domain } = request.params;
      const view = await change<{ definitions: Definition[] }>(tenantOf(request), domain, { op: 'definitions_create', definitions: [definitionInput(request.body)] });
      return reply.code(201).send(definitionView(domain, view.definitions[0]!));
    },
  );

  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof BatchBody> }>(
    `${base}/definitions/batch`,
    route(`Create up to ${policy.definitions_per_batch_max} definitions, all or nothing: the first invalid one (in order) refuses the batch.`, {
      params: DomainParams,
      body: BatchBody,
      response: { 201: Type.Object({ count: Type.Integer(), definitions: Type.Array(Definition) }) },
    }, [404, 409]),
    async (request, reply) => {
      const { domain } = request.params;
      const view = await change<{ definitions: Definition[] }>(tenantOf(request), domain, { op: 'definitions_create', definitions: request.body.definitions.map(definitionInput) });
      return reply.code(201).send({ count: view.definitions.length, definitions: view.definitions.map((d) => definitionView(domain, d)) });
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    `${base}/definitions/:id`,
    route('Get an item definition.', { params: IdParams, response: { 200: Definition } }, [404]),
    async (request) => definitionView(request.params.domain, await read<Definition>(tenantOf(request), request.params.domain, { op: 'definition_get', definition_id: request.params.id })),
  );

  app.put<{ Params: Static<typeof IdParams>; Body: Static<typeof DefinitionPutBody> }>(
    `${base}/definitions/:id`,
    route('Replace an item definition. Items already placed keep the max_stack, weight and volume they were placed with.', {
      params: IdParams,
      body: DefinitionPutBody,
      response: { 200: Definition },
    }, [404]),
    async (request) => {
      const { domain, id } = request.params;
      const definition = await change<Definition>(tenantOf(request), domain, { op: 'definition_put', definition_id: id, definition: definitionInput(request.body) });
      return definitionView(domain, definition);
    },
  );

  app.delete<{ Params: Static<typeof IdParams> }>(
    `${base}/definitions/:id`,
    route('Delete an item definition (409 items_definition_in_use while a blueprint, collection or salvage output names it).', { params: IdParams, response: { 200: Deleted } }, [404, 409]),
    async (request) => {
      await change(tenantOf(request), request.params.domain, { op: 'definition_delete', definition_id: request.params.id });
      return { id: request.params.id, message: 'Definition deleted.' };
    },
  );

  // Blueprints
  app.get<{ Params: Static<typeof DomainParams>; Querystring: ListQueryType }>(
    `${base}/blueprints`,
    route('List blueprints.', { params: DomainParams, querystring: ListQuery, response: { 200: listOf('blueprints', Blueprint) } }),
    async (request) => {
      const query = page(request.query);
      const view = await read<ListView<Blueprint>>(tenantOf(request), request.params.domain, { op: 'blueprints_list', query });
      return { blueprints: view.entries.map((b) => blueprintView(request.params.domain, b)), pagination: pagination(query, view.total) };
    },
  );

  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof BlueprintBodySchema> }>(
    `${base}/blueprints`,
    route('Create a blueprint (inputs and outputs name existing definitions).', { params: DomainParams, body: BlueprintBodySchema, response: { 201: Blueprint } }, [404, 409]),
    async (request, reply) => {
      const { domain } = request.params;
      const blueprint = await change<Blueprint>(tenantOf(request), domain, { op: 'blueprint_create', blueprint: blueprintBody(request.body) });
      return reply.code(201).send(blueprintView(domain, blueprint));
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    `${base}/blueprints/:id`,
    route('Get a blueprint.', { params: IdParams, response: { 200: Blueprint } }, [404]),
    async (request) => blueprintView(request.params.domain, await read<Blueprint>(tenantOf(request), request.params.domain, { op: 'blueprint_get', blueprint_id: request.params.id })),
  );

  app.put<{ Params: Static<typeof IdParams>; Body: Static<typeof BlueprintBodySchema> }>(
    `${base}/blueprints/:id`,
    route('Replace a blueprint; its version goes up by one.', { params: IdParams, body: BlueprintBodySchema, response: { 200: Blueprint } }, [404]),
    async (request) => {
      const { domain, id } = request.params;
      return blueprintView(domain, await change<Blueprint>(tenantOf(request), domain, { op: 'blueprint_put', blueprint_id: id, blueprint: blueprintBody(request.body) }));
    },
  );

  app.delete<{ Params: Static<typeof IdParams> }>(
    `${base}/blueprints/:id`,
    route('Delete a blueprint.', { params: IdParams, response: { 200: Deleted } }, [404]),
    async (request) => {
      await change(tenantOf(request), request.params.domain, { op: 'blueprint_delete', blueprint_id: request.params.id });
      return { id: request.params.id, message: 'Blueprint deleted.' };
    },
  );

  // Collections
  app.get<{ Params: Static<typeof DomainParams>; Querystring: ListQueryType }>(
    `${base}/collections`,
    route('List collections.', { params: DomainParams, querystring: ListQuery, response: { 200: listOf('collections', Collection) } }),
    async (request) => {
      const query = page(request.query);
      const view = await read<ListView<Collection>>(tenantOf(request), request.params.domain, { op: 'collections_list', query });
      return { collections: view.entries.map((c) => collectionView(request.params.domain, c)), pagination: pagination(query, view.total) };
    },
  );

  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof CollectionBodySchema> }>(
    `${base}/collections`,
    route('Create a collection.', { params: DomainParams, body: CollectionBodySchema, response: { 201: Collection } }, [404, 409]),
    async (request, reply) => {
      const { domain } = request.params;
      const collection = await change<Collection>(tenantOf(request), domain, { op: 'collection_create', collection: collectionBody(request.body) });
      return reply.code(201).send(collectionView(domain, collection));
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    `${base}/collections/:id`,
    route('Get a collection.', { params: IdParams, response: { 200: Collection } }, [404]),
    async (request) => collectionView(request.params.domain, await read<Collection>(tenantOf(request), request.params.domain, { op: 'collection_get', collection_id: request.params.id })),
  );

  app.put<{ Params: Static<typeof IdParams>; Body: Static<typeof CollectionBodySchema> }>(
    `${base}/collections/:id`,
    route('Replace a collection (progress already recorded stays).', { params: IdParams, body: CollectionBodySchema, response: { 200: Collection } }, [404]),
    async (request) => {
      const { domain, id } = request.params;
      return collectionView(domain, await change<Collection>(tenantOf(request), domain, { op: 'collection_put', collection_id: id, collection: collectionBody(request.body) }));
    },
  );

  app.delete<{ Params: Static<typeof IdParams> }>(
    `${base}/collections/:id`,
    route('Delete a collection.', { params: IdParams, response: { 200: Deleted } }, [404]),
    async (request) => {
      await change(tenantOf(request), request.params.domain, { op: 'collection_delete', collection_id: request.params.id });
      return { id: request.params.id, message: 'Collection deleted.' };
    },
  );

  app.get<{ Params: Static<typeof IdParams>; Querystring: { user_id: string } }>(
    `${base}/collections/:id/progress`,
    route("A user's progress in a collection.", {
      params: IdParams,
      querystring: Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 256 }) }),
      response: { 200: Progress },
    }, [404]),
    async (request) => {
      const tenant = tenantOf(request);
      const { domain, id } = request.params;
      const collection = await read<Collection>(tenant, domain, { op: 'collection_get', collection_id: id });
      const progress = await services.actors.ask<CollectionProgress>(ITEM_PROGRESS_KIND, itemProgressKey(tenant, domain, request.query.user_id), { op: 'get', collection_id: id }, { readOnly: true });
      const owned = progress.owned.filter((member) => collection.members.includes(member));
      return {
        collection_id: id,
        user_id: request.query.user_id,
        owned,
        owned_count: owned.length,
        total_members: collection.members.length,
        duplicate_counts: progress.duplicate_counts,
        tiers_reached: progress.tiers_reached,
        completed: owned.length === collection.members.length,
      };
    },
  );

  // Containers
  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof ContainerBody> }>(
    `${base}/containers`,
    route('Create a container.', { params: DomainParams, body: ContainerBody, response: { 201: Container } }, [404, 409]),
    async (request, reply) => {
      const { domain } = request.params;
      const body = request.body;
      const config = await change<ContainerConfig>(tenantOf(request), domain, {
        op: 'container_create',
        container: {
          container_id: body.container_id,
          owner_id: body.owner_id ?? null,
          parent_container_id: body.parent_container_id ?? null,
          slots: body.slots ?? policy.slots_default,
          max_weight_m: measure(body.limits?.max_weight),
          max_volume_m: measure(body.limits?.max_volume),
        },
      });
      return reply.code(201).send(containerView(domain, config, { config, items: [], usage: { slots_used: 0, weight_m: 0, volume_m: 0 }, locks: [] }, [], false));
    },
  );

  app.get<{ Params: Static<typeof ContainerParams>; Querystring: Static<typeof ContainerQuery> }>(
    `${base}/containers/:container_id`,
    route('A container with its contents; expand=contents adds every nested container with its contents, recursively.', {
      params: ContainerParams,
      querystring: ContainerQuery,
      response: { 200: Container },
    }, [404]),
    async (request) => {
      const tenant = tenantOf(request);
      const { domain, container_id } = request.params;
      const expand = request.query.expand === 'contents';
      const tree = await read<ContainerTreeView>(tenant, domain, { op: 'container_get', container_id, expand });
      const configs = [tree.container, ...(expand ? tree.descendants : [])];
      const contents = await Promise.all(configs.map((config) => services.actors.ask<ContentsView>(ITEM_CONTAINER_KIND, itemContainerKey(tenant, domain, config.container_id), { op: 'contents' } satisfies ContainerMessage, { readOnly: true })));
      if (!expand) return containerView(domain, tree.container, contents[0]!, tree.descendants.map((child) => containerSummary(domain, child)), false);
      const byId = new Map(configs.map((config, index) => [config.container_id, { config, contents: contents[index]! }]));
      const build = (config: ContainerConfig): unknown => {
        const children = tree.descendants.filter((child) => child.parent_container_id === config.container_id).map(build);
        return containerView(domain, config, byId.get(config.container_id)!.contents, children, false);
      };
      return { ...(build(tree.container) as object), truncated: tree.truncated };
    },
  );

  app.patch<{ Params: Static<typeof ContainerParams>; Body: Static<typeof MoveBody> }>(
    `${base}/containers/:container_id`,
    route('Move a container under another (or to the root with null). A cycle is refused: 409 items_container_cycle.', {
      params: ContainerParams,
      body: MoveBody,
      response: { 200: ContainerSummary },
    }, [404, 409]),
    async (request) => {
      const { domain, container_id } = request.params;
      const config = await change<ContainerConfig>(tenantOf(request), domain, { op: 'container_move', container_id, parent_container_id: request.body.parent_container_id });
      return containerSummary(domain, config);
    },
  );

  // Grants, crafting, merge
  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof GrantBody> }>(
    `${base}/grant`,
    route('Grant items into a container: into existing stacks up to max_stack, then new slots; all or nothing.', {
      params: DomainParams,
      body: GrantBody,
      response: { 200: GrantResponse },
    }, [404, 409]),
    async (request) => {
      const { domain } = request.params;
      const { container_id, definition_id, quantity } = request.body;
      const tenant = tenantOf(request);
      // The plan is a read of the catalog (definition, config, collections); the container checks capacity in its own turn.
      const plan = await read<GrantPlan>(tenant, domain, { op: 'grant_plan', container_id, definition_id, quantity });
      const result = await services.actors.ask<GrantResult>(ITEM_CONTAINER_KIND, itemContainerKey(tenant, domain, container_id), { op: 'grant', plan } satisfies ContainerMessage);
      return {
        container_id,
        items: result.items.map((item) => itemView(domain, container_id, result.container.owner_id, item, { locked_item_ids: result.locked_item_ids })),
        tier_events: tierEvents(result.tier_events),
      };
    },
  );

  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof CraftBody> }>(
    `${base}/craft`,
    route("Craft a blueprint: its inputs are consumed from the source container and its outputs produced into the target, atomically; refused with nothing changed.", {
      params: DomainParams,
      body: CraftBody,
      response: { 200: CraftResponse },
    }, [404, 409]),
    async (request) => {
      const { domain } = request.params;
      const { blueprint_id, source_container_id, target_container_id } = request.body;
      const seed = seedOf(request.body.seed);
      const tenant = tenantOf(request);
      // The plan is a read of the catalog (blueprint version, rolls, configs); the source coordinates the craft.
      const plan = await read<CraftPlan>(tenant, domain, { op: 'craft_plan', blueprint_id, source_container_id, target_container_id, seed });
      const result = await services.actors.ask<CraftResult>(ITEM_CONTAINER_KIND, itemContainerKey(tenant, domain, source_container_id), { op: 'craft', plan } satisfies ContainerMessage);
      return {
        ...result,
        produced: result.produced.map((item) => itemView(domain, target_container_id, result.target.owner_id, item, { locked_item_ids: result.locked_item_ids })),
        tier_events: tierEvents(result.tier_events),
      };
    },
  );

  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof MergeBody> }>(
    `${base}/merge`,
    route('Merge one stack into another of the same definition in the same container, as much as fits.', {
      params: DomainParams,
      body: MergeBody,
      response: { 200: MergeResponse },
    }, [404, 409]),
    async (request) => {
      const { domain } = request.params;
      const { container_id, source_item_id, target_item_id, quantity } = request.body;
      const result = await services.actors.ask<MergeReply>(ITEM_CONTAINER_KIND, itemContainerKey(tenantOf(request), domain, container_id), {
        op: 'merge',
        source_item_id,
        target_item_id,
        quantity: quantity ?? null,
      } satisfies ContainerMessage);
      const owner = result.config?.owner_id ?? null;
      return {
        container_id,
        moved: result.moved,
        source: result.source ? itemView(domain, container_id, owner, result.source) : null,
        target: itemView(domain, container_id, owner, result.target),
      };
    },
  );
  app.post<{ Params: Static<typeof DomainParams>; Body: Static<typeof SalvageBody> }>(
    `${base}/salvage`,
    route("Salvage units of an item into its definition's salvage outputs (chances rolled from a recorded seed), in the same container, all or nothing.", {
      params: DomainParams,
      body: SalvageBody,
      response: { 200: SalvageResponse },
    }, [404, 409]),
    async (request) => {
      const tenant = tenantOf(request);
      const { domain } = request.params;
      const { container_id, item_id } = request.body;
      const quantity = request.body.quantity ?? 1;
      const seed = seedOf(request.body.seed);
      const key = itemContainerKey(tenant, domain, container_id);
      // Reads: which definition the item is (the container checks it again in its turn), then the plan from the catalog.
      const contents = await services.actors.ask<ContentsView>(ITEM_CONTAINER_KIND, key, { op: 'contents' } satisfies ContainerMessage, { readOnly: true });
      const item = contents.items.find((entry) => entry.item_id === item_id);
      if (!item) throw new ServiceError('items_item_not_found', `No item ${item_id} in this container.`);
      const plan = await read<SalvagePlan>(tenant, domain, { op: 'salvage_plan', container_id, definition_id: item.definition_id, quantity, seed });
      const result = await services.actors.ask<SalvageReply>(ITEM_CONTAINER_KIND, key, { op: 'salvage', item_id, plan } satisfies ContainerMessage);
      const owner = result.config.owner_id;
      return {
        container_id,
        seed: String(seed),
        consumed: result.consumed,
        // A salvaged item is never locked (refused: items_item_locked); an output may top up a locked stack.
        remaining: result.remaining ? itemView(domain, container_id, owner, result.remaining) : null,
        // A node of the version before answers without locked_item_ids (a rolling upgrade).
        produced: result.produced.map((entry) => itemView(domain, container_id, owner, entry, { locked_item_ids: result.locked_item_ids ?? [] })),
      };
    },
  );
}
