import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  itemsPolicy as policy,
  type Blueprint,
  type BlueprintBody,
  type CatalogMessage,
  type Collection,
  type CollectionBody,
  type CollectionRule,
  type ContainerConfig,
  type ContainerInput,
  type ContainerTreeView,
  type Definition,
  type DefinitionInput,
  type ListQuery,
  type ListView,
} from './messages.js';
import { craftPlan, grantPlan, salvagePlan } from './plans.js';
import { answerFlowCall } from '../flow-call.js';

/**
 * A domain's catalog: pure domain logic of the `item-catalog` actor (storage
 * `records`, key = itemCatalogKey(tenant, domain)). Grants and crafts read
 * their plan here (plans.ts) and are carried out by the containers (flows.ts).
 *
 * Records: `d:<definition_id>`, `b:<blueprint_id>`, `k:<collection_id>`,
 * `c:<container_id>` (a container's config and place in the tree).
 *
 * References are kept whole in its turns: a blueprint, collection or salvage
 * output names only existing definitions, and a definition that any of them
 * names cannot be deleted (items_definition_in_use). The container tree has
 * no cycle (items_container_cycle) and is at most nesting_depth_max deep.
 */
export interface CatalogState {
  definitions: Map<string, Definition>;
  blueprints: Map<string, Blueprint>;
  collections: Map<string, Collection>;
  containers: Map<string, ContainerConfig>;
  /** Derived: container_id -> its children. */
  children: Map<string, Set<string>>;
  /** Derived: definition_id -> the collections it is a member of. */
  memberOf: Map<string, Set<string>>;
  /** Cache, in memory only: first-claim subjects known to be taken (told by the item-first actors). */
  claimed: Set<string>;
}

export type CatalogResult = TurnResult<CatalogState, unknown>;

export function initialCatalogState(): CatalogState {
  return { definitions: new Map(), blueprints: new Map(), collections: new Map(), containers: new Map(), children: new Map(), memberOf: new Map(), claimed: new Set() };
}

export function loadCatalog(_key: string, records: Iterable<[string, unknown]>): CatalogState {
  const state = initialCatalogState();
  for (const [subkey, value] of records) {
    const id = subkey.slice(2);
    switch (subkey.slice(0, 2)) {
      case 'd:':
        state.definitions.set(id, value as Definition);
        break;
      case 'b:':
        state.blueprints.set(id, value as Blueprint);
        break;
      case 'k:':
        indexCollection(state, value as Collection);
        state.collections.set(id, value as Collection);
        break;
      case 'c:':
        state.containers.set(id, value as ContainerConfig);
        link(state, value as ContainerConfig);
        break;
    }
  }
  return state;
}

function link(state: CatalogState, config: ContainerConfig): void {
  if (config.parent_container_id === null) return;
  let set = state.children.get(config.parent_container_id);
  if (!set) state.children.set(config.parent_container_id, (set = new Set()));
  set.add(config.container_id);
}

function unlink(state: CatalogState, config: ContainerConfig): void {
  if (config.parent_container_id !== null) state.children.get(config.parent_container_id)?.delete(config.container_id);
}

function indexCollection(state: CatalogState, collection: Collection): void {
  for (const member of collection.members) {
    let set = state.memberOf.get(member);
    if (!set) state.memberOf.set(member, (set = new Set()));
    set.add(collection.collection_id);
  }
}

function unindexCollection(state: CatalogState, collection: Collection): void {
  for (const member of collection.members) state.memberOf.get(member)?.delete(collection.collection_id);
}

/** The collections a definition is a member of, sorted. */
export function collectionsOf(state: CatalogState, definition_id: string): string[] {
  return [...(state.memberOf.get(definition_id) ?? [])].sort();
}

/** The rules of every collection one of these definitions belongs to. */
export function collectionRules(state: CatalogState, definition_ids: Iterable<string>): CollectionRule[] {
  const ids = new Set<string>();
  for (const definition_id of definition_ids) for (const id of state.memberOf.get(definition_id) ?? []) ids.add(id);
  return [...ids].sort().map((id) => {
    const { collection_id, members, tiers, duplicate_policy, convert_event } = state.collections.get(id)!;
    return { collection_id, members, tiers, duplicate_policy, convert_event };
  });
}

export function definitionNotFound(definition_id: string, field?: string): ServiceError {
  return new ServiceError('items_definition_not_found', `No item definition ${JSON.stringify(definition_id)} in this domain.`, {
    details: field ? [{ field, message: `names an unknown definition ${definition_id}` }] : undefined,
  });
}

export function containerNotFound(container_id: string, field?: string): ServiceError {
  return new ServiceError('items_container_not_found', `No container ${JSON.stringify(container_id)} in this domain.`, {
    details: field ? [{ field, message: `names an unknown container ${container_id}` }] : undefined,
  });
}

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function domainLimit(what: string, max: number): ServiceError {
  return new ServiceError('items_domain_limit', `A domain may hold at most ${max} ${what}.`);
}

export function stepCatalog(state: CatalogState, message: CatalogMessage | AlarmMessage, context: TurnContext): CatalogResult {
  switch (message.op) {
    case '$alarm':
      return { state };
    case 'grant_plan':
      return { state, reply: grantPlan(state, message.container_id, message.definition_id, message.quantity) };
    case 'craft_plan':
      return { state, reply: craftPlan(state, message.blueprint_id, message.source_container_id, message.target_container_id, message.seed) };
    case 'salvage_plan':
      return { state, reply: salvagePlan(state, message.container_id, message.definition_id, message.quantity, message.seed) };
    case 'claimed':
      // A cache in memory: nothing to write (after a restart the next claim is asked again).
      state.claimed.add(message.subject_key);
      return { state };
    case 'definitions_create':
      return createDefinitions(state, message.definitions, context);
    case 'definition_get':
      return { state, reply: requireDefinition(state, message.definition_id) };
    case 'definition_put':
      return putDefinition(state, message.definition_id, message.definition, context.now);
    case 'definition_delete':
      return deleteDefinition(state, message.definition_id);
    case 'definitions_list':
      return { state, reply: list([...state.definitions.values()], message.query, (d) => d.definition_id) };
    case 'blueprint_create': {
      if (state.blueprints.size >= policy.blueprints_per_domain_max) throw domainLimit('blueprints', policy.blueprints_per_domain_max);
      checkBlueprint(state, message.blueprint);
      const blueprint: Blueprint = { ...message.blueprint, blueprint_id: context.newId('bp_'), type: 'static', version: 1, created_at_ms: context.now, updated_at_ms: context.now };
      state.blueprints.set(blueprint.blueprint_id, blueprint);
      return { state, reply: blueprint, writes: [{ subkey: `b:${blueprint.blueprint_id}`, value: blueprint }] };
    }
    case 'blueprint_get':
      return { state, reply: requireBlueprint(state, message.blueprint_id) };
    case 'blueprint_put': {
      const before = requireBlueprint(state, message.blueprint_id);
      checkBlueprint(state, message.blueprint);
      const blueprint: Blueprint = { ...before, ...message.blueprint, version: before.version + 1, updated_at_ms: context.now };
      state.blueprints.set(blueprint.blueprint_id, blueprint);
      return { state, reply: blueprint, writes: [{ subkey: `b:${blueprint.blueprint_id}`, value: blueprint }] };
    }
    case 'blueprint_delete':
      requireBlueprint(state, message.blueprint_id);
      state.blueprints.delete(message.blueprint_id);
      return { state, reply: { deleted: true }, writes: [{ subkey: `b:${message.blueprint_id}`, value: undefined }] };
    case 'blueprints_list':
      return { state, reply: list([...state.blueprints.values()], message.query, (b) => b.blueprint_id) };
    case 'collection_create': {
      if (state.collections.size >= policy.collections_per_domain_max) throw domainLimit('collections', policy.collections_per_domain_max);
      checkCollection(state, message.collection);
      const collection: Collection = { ...message.collection, collection_id: context.newId('col_'), created_at_ms: context.now, updated_at_ms: context.now };
      return putCollection(state, collection);
    }
    case 'collection_get':
      return { state, reply: requireCollection(state, message.collection_id) };
    case 'collection_put': {
      const before = requireCollection(state, message.collection_id);
      checkCollection(state, message.collection);
      unindexCollection(state, before);
      return putCollection(state, { ...before, ...message.collection, updated_at_ms: context.now });
    }
    case 'collection_delete': {
      const before = requireCollection(state, message.collection_id);
      unindexCollection(state, before);
      state.collections.delete(message.collection_id);
      return { state, reply: { deleted: true }, writes: [{ subkey: `k:${message.collection_id}`, value: undefined }] };
    }
    case 'collections_list':
      return { state, reply: list([...state.collections.values()], message.query, (c) => c.collection_id) };
    case 'flow-call':
      return answerFlowCall(stepCatalog, state, message as never, context);
    case 'container_ensure': {
      const existing = state.containers.get(message.container_id);
      if (existing) {
        if (existing.owner_id !== message.owner_id) throw new ServiceError('items_container_exists', `A container ${JSON.stringify(message.container_id)} already exists with another owner.`);
        return { state, reply: existing };
      }
      return createContainer(state, { container_id: message.container_id, owner_id: message.owner_id, parent_container_id: null, slots: message.slots, max_weight_m: null, max_volume_m: null }, context, true);
    }
    case 'container_create':
      return createContainer(state, message.container, context);
    case 'container_get':
      return { state, reply: containerTree(state, message.container_id, message.expand) };
    case 'container_move':
      return moveContainer(state, message.container_id, message.parent_container_id);
  }
}

export function requireDefinition(state: CatalogState, definition_id: string, field?: string): Definition {
  const definition = state.definitions.get(definition_id);
  if (!definition) throw definitionNotFound(definition_id, field);
  return definition;
}

export function requireBlueprint(state: CatalogState, blueprint_id: string): Blueprint {
  const blueprint = state.blueprints.get(blueprint_id);
  if (!blueprint) throw new ServiceError('items_blueprint_not_found', `No blueprint ${JSON.stringify(blueprint_id)} in this domain.`);
  return blueprint;
}

function requireCollection(state: CatalogState, collection_id: string): Collection {
  const collection = state.collections.get(collection_id);
  if (!collection) throw new ServiceError('items_collection_not_found', `No collection ${JSON.stringify(collection_id)} in this domain.`);
  return collection;
}

export function requireContainer(state: CatalogState, container_id: string, field?: string): ContainerConfig {
  const config = state.containers.get(container_id);
  if (!config) throw containerNotFound(container_id, field);
  return config;
}

/** Checks one definition body; `known` answers whether a salvage output's definition exists. */
function checkDefinition(input: DefinitionInput, field: string, known: (definition_id: string) => boolean): void {
  const stackable = input.stackable ?? (input.max_stack > 1 && input.default_durability === null);
  if (!stackable && input.max_stack > 1) throw badRequest(`${field}.max_stack`, 'must be 1 when stackable is false');
  if (stackable && input.default_durability !== null) throw badRequest(`${field}.stackable`, 'must be false for a definition with default_durability (items with durability never stack)');
  input.salvage_outputs.forEach((output, index) => {
    if (!known(output.definition_id)) throw definitionNotFound(output.definition_id, `${field}.salvage_outputs.${index}.definition_id`);
  });
}

function definitionFrom(input: DefinitionInput, definition_id: string, created_at_ms: number, now: number): Definition {
  return {
    definition_id,
    name: input.name,
    stackable: input.stackable ?? (input.max_stack > 1 && input.default_durability === null),
    max_stack: input.max_stack,
    weight_m: input.weight_m,
    volume_m: input.volume_m,
    equip_slot: input.equip_slot,
    rarity: input.rarity,
    tags: input.tags,
    default_durability: input.default_durability,
    salvage_outputs: input.salvage_outputs,
    created_at_ms,
    updated_at_ms: now,
  };
}

/** All or nothing: the first invalid definition (in order) refuses the whole batch, its index in the error's field. */
function createDefinitions(state: CatalogState, inputs: DefinitionInput[], context: TurnContext): CatalogResult {
  if (state.definitions.size + inputs.length > policy.definitions_per_domain_max) throw domainLimit('definitions', policy.definitions_per_domain_max);
  const batch = new Map<string, Definition>();
  inputs.forEach((input, index) => {
    const field = inputs.length === 1 ? 'body' : `body.definitions.${index}`;
    const definition_id = input.definition_id ?? context.newId('def_');
    if (state.definitions.has(definition_id) || batch.has(definition_id)) {
      throw new ServiceError('items_definition_exists', `A definition ${JSON.stringify(definition_id)} already exists in this domain.`, {
        details: [{ field: `${field}.definition_id`, message: 'already exists' }],
      });
    }
    checkDefinition(input, field, (id) => state.definitions.has(id) || batch.has(id) || id === definition_id);
    batch.set(definition_id, definitionFrom(input, definition_id, context.now, context.now));
  });
  const writes: RecordWrite[] = [];
  for (const definition of batch.values()) {
    state.definitions.set(definition.definition_id, definition);
    writes.push({ subkey: `d:${definition.definition_id}`, value: definition });
  }
  return { state, reply: { definitions: [...batch.values()] }, writes };
}

function putDefinition(state: CatalogState, definition_id: string, input: DefinitionInput, now: number): CatalogResult {
  const before = requireDefinition(state, definition_id);
  checkDefinition(input, 'body', (id) => state.definitions.has(id));
  const definition = definitionFrom(input, definition_id, before.created_at_ms, now);
  state.definitions.set(definition_id, definition);
  return { state, reply: definition, writes: [{ subkey: `d:${definition_id}`, value: definition }] };
}

/** Who names a definition: blueprints, collections and other definitions' salvage outputs. */
function usersOf(state: CatalogState, definition_id: string): string[] {
  const users: string[] = [];
  for (const blueprint of state.blueprints.values()) {
    if (blueprint.inputs.some((input) => input.value === definition_id) || blueprint.outputs.some((output) => output.definition_id === definition_id)) {
      users.push(`blueprint ${blueprint.blueprint_id}`);
    }
  }
  for (const collection_id of state.memberOf.get(definition_id) ?? []) users.push(`collection ${collection_id}`);
  for (const definition of state.definitions.values()) {
    if (definition.definition_id !== definition_id && definition.salvage_outputs.some((output) => output.definition_id === definition_id)) {
      users.push(`definition ${definition.definition_id}`);
    }
  }
  return users;
}

function deleteDefinition(state: CatalogState, definition_id: string): CatalogResult {
  requireDefinition(state, definition_id);
  const users = usersOf(state, definition_id);
  if (users.length > 0) {
    throw new ServiceError('items_definition_in_use', `The definition is named by ${users.slice(0, 5).join(', ')}${users.length > 5 ? ', ...' : ''}; change or delete them first.`, {
      details: { used_by: users.slice(0, 50) },
    });
  }
  state.definitions.delete(definition_id);
  return { state, reply: { deleted: true }, writes: [{ subkey: `d:${definition_id}`, value: undefined }] };
}

function checkBlueprint(state: CatalogState, body: BlueprintBody): void {
  body.inputs.forEach((input, index) => requireDefinition(state, input.value, `body.inputs.${index}.value`));
  body.outputs.forEach((output, index) => requireDefinition(state, output.definition_id, `body.outputs.${index}.definition_id`));
}

function checkCollection(state: CatalogState, body: CollectionBody): void {
  if (new Set(body.members).size !== body.members.length) throw badRequest('body.members', 'must not repeat a definition');
  body.members.forEach((member, index) => requireDefinition(state, member, `body.members.${index}`));
  body.tiers.forEach((tier, index) => {
    if (tier.required > body.members.length) throw badRequest(`body.tiers.${index}.required`, `must be at most the number of members (${body.members.length})`);
  });
  if (new Set(body.tiers.map((tier) => tier.required)).size !== body.tiers.length) throw badRequest('body.tiers', 'must not repeat a required count');
  if (body.duplicate_policy === 'convert' && body.convert_event === null) throw badRequest('body.convert_event', 'is required with duplicate_policy convert');
}

function putCollection(state: CatalogState, collection: Collection): CatalogResult {
  const tiers = [...collection.tiers].sort((a, b) => a.required - b.required);
  const stored = { ...collection, tiers };
  state.collections.set(stored.collection_id, stored);
  indexCollection(state, stored);
  return { state, reply: stored, writes: [{ subkey: `k:${stored.collection_id}`, value: stored }] };
}

/** Depth of a container: 0 for a root. */
function depthOf(state: CatalogState, container_id: string): number {
  let depth = 0;
  let parent = state.containers.get(container_id)?.parent_container_id ?? null;
  while (parent !== null && depth <= policy.nesting_depth_max + 1) {
    depth++;
    parent = state.containers.get(parent)?.parent_container_id ?? null;
  }
  return depth;
}

/** Levels below a container (0 without children). */
function heightOf(state: CatalogState, container_id: string, bound = policy.nesting_depth_max + 1): number {
  if (bound === 0) return 0;
  let height = 0;
  for (const child of state.children.get(container_id) ?? []) height = Math.max(height, 1 + heightOf(state, child, bound - 1));
  return height;
}

function nestingLimit(): ServiceError {
  return new ServiceError('items_nesting_limit', `Containers nest at most ${policy.nesting_depth_max} levels deep.`);
}

function createContainer(state: CatalogState, input: ContainerInput, context: TurnContext, delivery = false): CatalogResult {
  if (!delivery && input.container_id?.startsWith(policy.delivery_container_prefix)) {
    throw badRequest('body.container_id', `may not start with ${JSON.stringify(policy.delivery_container_prefix)} (the service's auction deliveries)`);
  }
  if (state.containers.size >= policy.containers_per_domain_max) throw domainLimit('containers', policy.containers_per_domain_max);
  const container_id = input.container_id ?? context.newId('ctr_');
  if (state.containers.has(container_id)) throw new ServiceError('items_container_exists', `A container ${JSON.stringify(container_id)} already exists in this domain.`);
  if (input.parent_container_id === container_id) throw new ServiceError('items_container_cycle', 'A container cannot be inside itself.', { details: [{ field: 'body.parent_container_id', message: 'is the container itself' }] });
  if (input.parent_container_id !== null) {
    requireContainer(state, input.parent_container_id, 'body.parent_container_id');
    if (depthOf(state, input.parent_container_id) + 1 > policy.nesting_depth_max) throw nestingLimit();
  }
  const config: ContainerConfig = {
    container_id,
    kind: 'slotted',
    owner_id: input.owner_id,
    parent_container_id: input.parent_container_id,
    slots: input.slots,
    max_weight_m: input.max_weight_m,
    max_volume_m: input.max_volume_m,
    created_at_ms: context.now,
  };
  state.containers.set(container_id, config);
  link(state, config);
  return { state, reply: config, writes: [{ subkey: `c:${container_id}`, value: config }] };
}

/**
 * Moves a container under another (or to the root). Refused when the new
 * parent is the container or one of its descendants (a cycle), or when the
 * moved subtree would nest deeper than nesting_depth_max.
 */
function moveContainer(state: CatalogState, container_id: string, parent_container_id: string | null): CatalogResult {
  const config = requireContainer(state, container_id);
  if (parent_container_id !== null) {
    requireContainer(state, parent_container_id, 'body.parent_container_id');
    for (let at: string | null = parent_container_id; at !== null; at = state.containers.get(at)?.parent_container_id ?? null) {
      if (at === container_id) {
        throw new ServiceError('items_container_cycle', `Moving ${container_id} under ${parent_container_id} would put it inside itself.`, {
          details: [{ field: 'body.parent_container_id', message: parent_container_id === container_id ? 'is the container itself' : 'is inside the container' }],
        });
      }
    }
    if (depthOf(state, parent_container_id) + 1 + heightOf(state, container_id) > policy.nesting_depth_max) throw nestingLimit();
  }
  unlink(state, config);
  const moved = { ...config, parent_container_id };
  state.containers.set(container_id, moved);
  link(state, moved);
  return { state, reply: moved, writes: [{ subkey: `c:${container_id}`, value: moved }] };
}

/** The recursive expansion: the subtree breadth first, bounded by expand_containers_max. */
function containerTree(state: CatalogState, container_id: string, expand: boolean): ContainerTreeView {
  const container = requireContainer(state, container_id);
  const descendants: ContainerConfig[] = [];
  const queue = [container_id];
  let truncated = false;
  while (queue.length > 0) {
    const at = queue.shift()!;
    for (const child of [...(state.children.get(at) ?? [])].sort()) {
      if (descendants.length >= policy.expand_containers_max) {
        truncated = true;
        break;
      }
      descendants.push(state.containers.get(child)!);
      if (expand) queue.push(child);
    }
  }
  return { container, descendants, truncated };
}

interface Listable {
  name: string;
  created_at_ms: number;
  updated_at_ms: number;
}

/** q (substring of the name, case-insensitive), sort, page: the spec's list parameters. */
export function list<T extends Listable>(entries: T[], query: ListQuery, idOf: (entry: T) => string): ListView<T> {
  const q = query.q?.toLowerCase();
  const matched = q ? entries.filter((entry) => entry.name.toLowerCase().includes(q)) : entries;
  const sort_by = query.sort_by ?? 'created_at';
  const direction = query.sort_order === 'desc' ? -1 : 1;
  const keyOf = (entry: T) => (sort_by === 'name' ? entry.name : sort_by === 'updated_at' ? entry.updated_at_ms : entry.created_at_ms);
  matched.sort((a, b) => {
    const x = keyOf(a);
    const y = keyOf(b);
    if (x !== y) return (x < y ? -1 : 1) * direction;
    return (idOf(a) < idOf(b) ? -1 : 1) * direction;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, entries: matched.slice(start, start + query.page_size) };
}
