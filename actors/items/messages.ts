import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The items area's public surface (spec doc 2 §2 Items, §4.9): the kinds and
 * keys, the bounds, the stored shapes and views, and the messages each kind
 * takes. Other layers import this file only.
 *
 * Four kinds, every key starting with the tenant and the domain:
 * - `item-catalog` (tenant, domain): definitions, blueprints, collections and
 *   the container registry (config and nesting); it resolves the plans of
 *   grants and crafts (plans.ts).
 * - `item-container` (tenant, domain, container_id): the items in one
 *   container and the reservations of crafts in progress; it coordinates the
 *   grants into it and the crafts from it (flows.ts).
 * - `item-first` (tenant, domain, subject): who was first to craft a
 *   blueprint output (or reach a collection tier), claimed in its turn.
 * - `item-progress` (tenant, domain, user_id): the user's collection progress.
 */
export const ITEM_CATALOG_KIND = 'item-catalog';
export const ITEM_CONTAINER_KIND = 'item-container';
export const ITEM_FIRST_KIND = 'item-first';
export const ITEM_PROGRESS_KIND = 'item-progress';

export function itemCatalogKey(tenant: string, domain: string): string {
  return JSON.stringify([tenant, domain]);
}
export function itemContainerKey(tenant: string, domain: string, container_id: string): string {
  return JSON.stringify([tenant, domain, container_id]);
}
export function itemFirstKey(tenant: string, domain: string, subject: FirstSubject): string {
  return JSON.stringify([tenant, domain, ...subject]);
}
export function itemProgressKey(tenant: string, domain: string, user_id: string): string {
  return JSON.stringify([tenant, domain, user_id]);
}

/** What a first claim is about: a blueprint's output definition, or a collection tier. */
export type FirstSubject = ['output', blueprint_id: string, definition_id: string] | ['tier', collection_id: string, required: number];

/** Runtime event published when a user's collection progress reaches a tier (data: TierReachedEvent). */
export const TIER_REACHED_EVENT = 'items.collection.tier_reached';
/** Runtime event published for each duplicate of a collection with duplicate_policy `convert` (data: DuplicateConvertedEvent). */
export const DUPLICATE_CONVERTED_EVENT = 'items.collection.duplicate_converted';

/** Every bound of the area. docs/api/items.md documents each; change both together. */
export const itemsPolicy = {
  definitions_per_domain_max: 10_000,
  blueprints_per_domain_max: 5_000,
  collections_per_domain_max: 500,
  containers_per_domain_max: 100_000,
  /** POST /definitions/batch. */
  definitions_per_batch_max: 100,
  max_stack_max: 1_000_000,
  /** Per grant; a grant of non-stacking items needs one slot per unit, so the slot count bounds it further. */
  grant_quantity_max: 1_000_000,
  slots_max: 1_000,
  slots_default: 20,
  /** Weights and volumes are kept in thousandths (3 decimal places), as integers. */
  measure_scale: 1_000,
  measure_max: 1_000_000_000,
  durability_max: 1_000_000_000,
  tags_max: 32,
  salvage_outputs_max: 16,
  blueprint_inputs_max: 16,
  blueprint_outputs_max: 16,
  collection_members_max: 500,
  collection_tiers_max: 20,
  /** Depth of nesting below a root container (a root is depth 0). */
  nesting_depth_max: 16,
  /** Units salvaged by one request. */
  salvage_units_max: 1_000,
  /** GET /containers/{id}?expand=contents: containers expanded at most. */
  expand_containers_max: 100,
  /** Grants and crafts a container coordinates at once; past it 503 actor_overloaded. */
  flows_per_container_max: 1_000,
  /** Released and transferred locks and rooms a container remembers (the newest), so a repeated call answers as the first did. */
  custody_closed_kept_max: 10_000,
  /** Container ids with this prefix are made by the service for auction deliveries (containerEnsure); a client cannot create one. */
  delivery_container_prefix: 'auction:',
} as const;

export interface SalvageOutput {
  definition_id: string;
  quantity: number;
  chance: number;
}

/** A definition as stored (weight and volume in thousandths). */
export interface Definition {
  definition_id: string;
  name: string;
  stackable: boolean;
  max_stack: number;
  weight_m: number;
  volume_m: number;
  equip_slot: string | null;
  rarity: string;
  tags: string[];
  /** Maximum durability of a new item; null: the item has none. Items with durability never stack. */
  default_durability: number | null;
  salvage_outputs: SalvageOutput[];
  created_at_ms: number;
  updated_at_ms: number;
}

/** What a create or PUT carries (the edge has validated types and ranges). */
export interface DefinitionInput {
  definition_id?: string;
  name: string;
  stackable?: boolean;
  max_stack: number;
  weight_m: number;
  volume_m: number;
  equip_slot: string | null;
  rarity: string;
  tags: string[];
  default_durability: number | null;
  salvage_outputs: SalvageOutput[];
}

export interface BlueprintInput {
  match: 'definition_id';
  value: string;
  quantity: number;
}
export interface BlueprintOutput {
  definition_id: string;
  quantity: number;
  chance: number;
  initial_durability_pct: number;
}
export interface Blueprint {
  blueprint_id: string;
  name: string;
  type: 'static';
  inputs: BlueprintInput[];
  outputs: BlueprintOutput[];
  context_requirements: unknown;
  version: number;
  created_at_ms: number;
  updated_at_ms: number;
}
export type BlueprintBody = Pick<Blueprint, 'name' | 'inputs' | 'outputs' | 'context_requirements'>;

export type DuplicatePolicy = 'ignore' | 'convert';
export interface CollectionTier {
  required: number;
  bonus_event: string;
}
export interface Collection {
  collection_id: string;
  name: string;
  members: string[];
  tiers: CollectionTier[];
  duplicate_policy: DuplicatePolicy;
  convert_event: string | null;
  created_at_ms: number;
  updated_at_ms: number;
}
export type CollectionBody = Pick<Collection, 'name' | 'members' | 'tiers' | 'duplicate_policy' | 'convert_event'>;

/** A container's registry entry in the catalog (limits in thousandths; null: no limit). */
export interface ContainerConfig {
  container_id: string;
  kind: 'slotted';
  owner_id: string | null;
  parent_container_id: string | null;
  slots: number;
  max_weight_m: number | null;
  max_volume_m: number | null;
  created_at_ms: number;
}
export type ContainerInput = Omit<ContainerConfig, 'container_id' | 'created_at_ms' | 'kind'> & { container_id?: string };

export interface Durability {
  current: number;
  max: number;
}

/** One stack or item in a container. The unit measures and max_stack are the definition's when it was placed. */
export interface StoredItem {
  item_id: string;
  definition_id: string;
  quantity: number;
  slot: number;
  durability: Durability | null;
  unit_weight_m: number;
  unit_volume_m: number;
  max_stack: number;
  collection_tags: string[];
  created_at_ms: number;
  updated_at_ms: number;
}

/** What a placement needs to know about a definition. */
export interface PlacementUnit {
  definition_id: string;
  stackable: boolean;
  max_stack: number;
  weight_m: number;
  volume_m: number;
  /** Durability of each new item (current, max); null: none. */
  durability: Durability | null;
  collection_tags: string[];
}
export interface Placement {
  unit: PlacementUnit;
  quantity: number;
}

export interface ContainerUsage {
  slots_used: number;
  weight_m: number;
  volume_m: number;
}

export interface ContentsView {
  /** The config as of the last placement (null: nothing was ever placed). */
  config: ContainerConfig | null;
  items: StoredItem[];
  usage: ContainerUsage;
  /** The held locks on these items (the item view shows them as locked_by). */
  locks: ItemLock[];
}

export interface QuantityOf {
  definition_id: string;
  quantity: number;
}

/** Who holds a lock or a room: the area and its flow (an auction, a handshake settlement). */
export interface CustodyHolder {
  area: string;
  ref: string;
}

export const CUSTODY_STATUSES = ['held', 'released', 'transferred'] as const;
export type CustodyStatus = (typeof CUSTODY_STATUSES)[number];

/**
 * Units of one item locked for a flow (locks.ts): they stay in the item (and
 * in the container's usage) but no one else can move, consume, craft, merge
 * or salvage them; a transfer moves exactly them to another container.
 */
export interface ItemLock {
  lock_id: string;
  item_id: string;
  quantity: number;
  holder: CustodyHolder | null;
  status: CustodyStatus;
  /** The item as it was when locked (its definition and measures), for the receiver's room. */
  item: StoredItem | null;
  /** transferred: the container the units went to. */
  to_container_id: string | null;
  created_at_ms: number;
  closed_at_ms: number | null;
}

/**
 * Room held in a container for items a flow will transfer into it (a trade's
 * receiving side): slots, weight and volume counted as used until the
 * transfer lands (status transferred) or the room is released.
 */
export interface ItemRoom {
  room_id: string;
  slots: number[];
  weight_m: number;
  volume_m: number;
  holder: CustodyHolder | null;
  status: CustodyStatus;
  created_at_ms: number;
  closed_at_ms: number | null;
}

/** What a room must hold: one entry per item that will arrive. */
export interface RoomUnit {
  weight_m: number;
  volume_m: number;
}

/** Where a transfer goes: the container (its config, from the catalog) and the room held there (null: a container made for it). */
export interface TransferTarget {
  container_id: string;
  config: ContainerConfig;
  room_id: string | null;
}

/**
 * The calls other areas send as flow-calls (actors/flow-call.ts) to an
 * `item-container`, each idempotent by its lock or room id:
 * - lock: `quantity` units of `item_id`, in a container whose owner_id is
 *   `owner_id`; 404 items_item_not_found (no such item of that owner), 409
 *   items_item_locked (the units are locked by another flow),
 *   items_insufficient_inputs (fewer units), items_lock_closed (this lock id
 *   was released or transferred: a release that arrived first wins).
 * - unlock: the units are free again; an unknown id is remembered as
 *   released, so a lock arriving after it is refused.
 * - reserve_room / release_room: room for arriving items in a container the
 *   `owner_id` owns (items_capacity_exceeded when it lacks it).
 * - transfer: the locked units leave this container, the lock is consumed,
 *   and in the same commit a `receive` flow-call carries them to the target,
 *   which answers the original caller (its reply_to) when they are placed.
 */
export type CustodyCall =
  | { op: 'lock'; lock_id: string; item_id: string; quantity: number; owner_id: string; holder: CustodyHolder }
  | { op: 'unlock'; lock_id: string }
  | { op: 'reserve_room'; room_id: string; config: ContainerConfig; owner_id: string; units: RoomUnit[]; holder: CustodyHolder }
  | { op: 'release_room'; room_id: string }
  | { op: 'transfer'; lock_id: string; to: TransferTarget };

export interface LockReply {
  lock: ItemLock;
  idempotent: boolean;
}
export interface RoomReply {
  room: ItemRoom;
  idempotent: boolean;
}
/** The target's answer to a transfer (through its receive): the items as placed there. */
export interface ReceiveReply {
  transfer_id: string;
  container_id: string;
  items: StoredItem[];
  /** The items had arrived before (a repeat): nothing changed. */
  idempotent: boolean;
}

export type ContainerMessage =
  | CustodyCall
  /** A transfer's arrival (sent by the source's transfer as a flow-call answering the transfer's caller). */
  | { op: 'receive'; transfer_id: string; room_id: string | null; config: ContainerConfig; items: StoredItem[] }
  /** Place all or nothing; refused with items_capacity_exceeded. */
  | { op: 'place'; config: ContainerConfig; placements: Placement[] }
  /** Take the inputs of a craft out of use (all or nothing; items_insufficient_inputs). */
  | { op: 'reserve'; flow_id: string; inputs: QuantityOf[] }
  /** The craft is done: the reserved inputs are consumed. */
  | { op: 'commit'; flow_id: string }
  /**
   * A craft whose source is its target: consume the inputs and place the
   * outputs in one turn, all or nothing, counting the room the inputs free
   * (items_insufficient_inputs, items_capacity_exceeded; nothing changed).
   */
  | { op: 'craft_in_place'; inputs: QuantityOf[]; config: ContainerConfig; placements: Placement[] }
  /** The craft is refused: the reserved inputs come back. */
  | { op: 'release'; flow_id: string }
  | { op: 'contents' }
  | { op: 'merge'; source_item_id: string; target_item_id: string; quantity: number | null }
  /** Salvage units of one item into the outputs its plan rolled, in this container, all or nothing. */
  | { op: 'salvage'; item_id: string; plan: SalvagePlan }
  /** A grant into this container (flows.ts: the container coordinates it). */
  | { op: 'grant'; plan: GrantPlan }
  /** A craft from this container, the source (flows.ts: the source coordinates it). */
  | { op: 'craft'; plan: CraftPlan }
  | FlowCall<ContainerMessage>
  | FlowAnswer;

/**
 * What the catalog resolves for a grant (a read of its state): the
 * container's config, the placement, the rules of the collections the
 * definition belongs to, and which first-claim subjects are known taken.
 */
export interface GrantPlan {
  container: ContainerConfig;
  placement: Placement;
  quantity: QuantityOf;
  rules: CollectionRule[];
  claimed: string[];
}

/** What the catalog resolves for a craft: the blueprint's version, the seed's rolls, both configs, what is consumed and placed. */
export interface CraftPlan {
  blueprint_id: string;
  blueprint_version: number;
  seed: number;
  source: ContainerConfig;
  target: ContainerConfig;
  consumed: QuantityOf[];
  placements: Placement[];
  rules: CollectionRule[];
  claimed: string[];
}

/** What the catalog resolves for a salvage: the container's config and the outputs rolled from the seed, per unit. */
export interface SalvagePlan {
  container: ContainerConfig;
  definition_id: string;
  quantity: number;
  seed: number;
  outputs: Placement[];
}

export interface SalvageReply {
  consumed: QuantityOf & { item_id: string };
  /** The item after the salvage; null when it was used up. */
  remaining: StoredItem | null;
  produced: StoredItem[];
  /** Those of `produced` with units locked (an output may top up a locked stack). */
  locked_item_ids: string[];
  config: ContainerConfig;
}

/** The key of a first-claim subject in `claimed` lists. */
export function firstSubjectKey(subject: FirstSubject): string {
  return JSON.stringify(subject);
}

export interface PlaceReply {
  /** Every item the placement created or added to, after it. */
  items: StoredItem[];
  owner_id: string | null;
  /** Those of `items` with units locked by a trade or an auction when placed (a grant may top up a locked stack). */
  locked_item_ids: string[];
}
export interface MergeReply {
  moved: number;
  source: StoredItem | null;
  target: StoredItem;
  config: ContainerConfig | null;
}

export type FirstMessage = { op: 'claim'; claimant: string } | { op: 'get' } | FlowCall<FirstMessage>;
export interface FirstReply {
  first: boolean;
  claimed_by: string | null;
  claimed_at_ms: number | null;
}

/** What the progress actor needs of a collection to count an acquisition. */
export type CollectionRule = Pick<Collection, 'collection_id' | 'members' | 'tiers' | 'duplicate_policy' | 'convert_event'>;

export interface CollectionProgress {
  collection_id: string;
  owned: string[];
  duplicate_counts: Record<string, number>;
  tiers_reached: number[];
  updated_at_ms: number;
}

export type ProgressMessage =
  | { op: 'acquire'; tenant: string; domain: string; user_id: string; acquired: QuantityOf[]; collections: CollectionRule[] }
  | { op: 'get'; collection_id: string }
  | FlowCall<ProgressMessage>;

export interface TierReached {
  collection_id: string;
  required: number;
  bonus_event: string;
}

export interface TierReachedEvent extends TierReached {
  tenant: string;
  domain: string;
  user_id: string;
  reached_at_ms: number;
}
export interface DuplicateConvertedEvent {
  tenant: string;
  domain: string;
  user_id: string;
  collection_id: string;
  definition_id: string;
  quantity: number;
  convert_event: string;
}

export interface TierEvent extends TierReached {
  global_first: boolean;
}

export interface ListQuery {
  q?: string;
  sort_by?: 'created_at' | 'updated_at' | 'name';
  sort_order?: 'asc' | 'desc';
  page: number;
  page_size: number;
}

export type CatalogMessage =
  | { op: 'definitions_create'; definitions: DefinitionInput[] }
  | { op: 'definition_get'; definition_id: string }
  | { op: 'definition_put'; definition_id: string; definition: DefinitionInput }
  | { op: 'definition_delete'; definition_id: string }
  | { op: 'definitions_list'; query: ListQuery }
  | { op: 'blueprint_create'; blueprint: BlueprintBody }
  | { op: 'blueprint_get'; blueprint_id: string }
  | { op: 'blueprint_put'; blueprint_id: string; blueprint: BlueprintBody }
  | { op: 'blueprint_delete'; blueprint_id: string }
  | { op: 'blueprints_list'; query: ListQuery }
  | { op: 'collection_create'; collection: CollectionBody }
  | { op: 'collection_get'; collection_id: string }
  | { op: 'collection_put'; collection_id: string; collection: CollectionBody }
  | { op: 'collection_delete'; collection_id: string }
  | { op: 'collections_list'; query: ListQuery }
  | { op: 'container_create'; container: ContainerInput }
  /** The container and, with `expand`, its subtree (breadth first, at most expand_containers_max). */
  | { op: 'container_get'; container_id: string; expand: boolean }
  | { op: 'container_move'; container_id: string; parent_container_id: string | null }
  /** Read-only: what a grant needs (the route passes it to the container). */
  | { op: 'grant_plan'; container_id: string; definition_id: string; quantity: number }
  /** Read-only: what salvaging `quantity` units of a definition gives, every unit's chances rolled from `seed`. */
  | { op: 'salvage_plan'; container_id: string; definition_id: string; quantity: number; seed: number }
  /** Read-only: what a craft needs, the outputs' chances rolled from `seed`. */
  | { op: 'craft_plan'; blueprint_id: string; source_container_id: string; target_container_id: string; seed: number }
  /** From a first-claim actor, once: its subject is taken for good (cached in memory). */
  | { op: 'claimed'; subject_key: string }
  /**
   * For another area's flow (an auction's delivery): the root container
   * `container_id` owned by `owner_id`, created with `slots` and no limits
   * when missing; one that exists with another owner is 409 items_container_exists.
   */
  | { op: 'container_ensure'; container_id: string; owner_id: string; slots: number }
  | FlowCall<CatalogMessage>;

export interface ListView<T> {
  total: number;
  entries: T[];
}

export interface ContainerTreeView {
  container: ContainerConfig;
  /** Direct children (expand false), or the whole subtree breadth first (expand true). */
  descendants: ContainerConfig[];
  /** The subtree had more containers than expand_containers_max. */
  truncated: boolean;
}

export interface GrantResult {
  container: ContainerConfig;
  items: StoredItem[];
  /** Those of `items` with units locked by a trade or an auction when placed: shown `state: "locked"`. */
  locked_item_ids: string[];
  tier_events: TierEvent[];
}

export interface CraftResult {
  craft_id: string;
  blueprint_id: string;
  blueprint_version: number;
  seed: string;
  source_container_id: string;
  target_container_id: string;
  consumed: QuantityOf[];
  produced: StoredItem[];
  /** Those of `produced` with units locked when placed: shown `state: "locked"`. */
  locked_item_ids: string[];
  target: ContainerConfig;
  global_first: boolean;
  global_first_outputs: string[];
  tier_events: TierEvent[];
}
