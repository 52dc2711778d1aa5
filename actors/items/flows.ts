import { ServiceError, type ActorSend, type AlarmMessage, type DeferredReply, type RecordWrite, type TurnContext } from '../../runtime/index.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { rollChances } from './chance.js';
import { collectionRules, collectionsOf, requireBlueprint, requireContainer, requireDefinition, stepCatalog, type CatalogResult, type CatalogState } from './catalog-state.js';
import {
  ITEM_CATALOG_KIND,
  ITEM_CONTAINER_KIND,
  ITEM_FIRST_KIND,
  ITEM_PROGRESS_KIND,
  itemContainerKey,
  itemFirstKey,
  itemProgressKey,
  itemsPolicy as policy,
  type CatalogMessage,
  type ContainerConfig,
  type ContainerMessage,
  type CraftResult,
  type Definition,
  type FirstMessage,
  type FirstReply,
  type FirstSubject,
  type GrantResult,
  type PlaceReply,
  type Placement,
  type ProgressMessage,
  type QuantityOf,
  type StoredItem,
  type TierEvent,
  type TierReached,
} from './messages.js';

/**
 * The items area's flows, coordinated by the domain's catalog actor (its
 * step is `stepCatalogFlows`). A flow's state is the catalog record
 * `f:<flow_id>`, written in every turn that starts or advances it; its calls
 * to the containers, the first-claim actors and the progress actor go through
 * the outbox as flow-calls (actors/flow-call.ts) and their answers come back
 * the same way, so a crash between steps loses nothing and applies nothing
 * twice: after a restart the outbox delivers the step in flight and the flow
 * goes on to its end (only the waiting HTTP request is lost: 503
 * flow_interrupted). Each call is named by its step (`place`, `reserve`,
 * `release`, `commit`, `progress`, `first:<definition_id>`,
 * `tier:<collection_id>:<required>`); an answer whose flow or step is not
 * pending (late, repeated) is ignored.
 *
 * - grant: the definition and the container are checked in the catalog's
 *   turn -> `place` in the container (all or nothing; refused:
 *   items_capacity_exceeded, nothing placed) -> `progress` of the container's
 *   owner for the definition's collections -> a `tier:` claim per tier
 *   reached (its global_first) -> the reply.
 * - craft: the blueprint and both containers are checked and the outputs'
 *   chances rolled from the seed in the catalog's turn -> `reserve` the
 *   inputs in the source (refused: items_insufficient_inputs, nothing
 *   taken) -> `place` the outputs in the target (refused: compensation
 *   `release` gives the inputs back, then the refusal is answered) ->
 *   `commit` in the source (the inputs are consumed) with, at once, a
 *   `first:` claim per produced output definition and the target owner's
 *   `progress` (then `tier:` claims) -> the reply. Inputs and outputs are
 *   therefore both applied or neither, also across kill -9.
 */
interface FlowBase {
  flow_id: string;
  request_id: string | null;
  /** Steps whose answers the flow waits for. */
  pending: string[];
  tier_events: TierEvent[];
}

export type ItemFlow =
  | (FlowBase & { kind: 'grant'; container: ContainerConfig; definition_id: string; quantity: number; items: StoredItem[] })
  | (FlowBase & {
      kind: 'craft';
      blueprint_id: string;
      blueprint_version: number;
      seed: number;
      source: ContainerConfig;
      target: ContainerConfig;
      consumed: QuantityOf[];
      placements: Placement[];
      produced: StoredItem[];
      first_outputs: string[];
      /** The target's refusal, answered once the compensation (`release`) is done. */
      refusal: FlowError | null;
    });

type Answer = Extract<FlowAnswer, { op: 'flow-answer' }>;

function firstClaimKey(subject: FirstSubject): string {
  return JSON.stringify(subject);
}

interface Effects {
  writes: RecordWrite[];
  sends: ActorSend[];
  replies: DeferredReply[];
}

/** Tenant and domain, from the catalog's key. */
function scopeOf(context: TurnContext): { tenant: string; domain: string } {
  const [tenant, domain] = JSON.parse(context.key) as [string, string];
  return { tenant, domain };
}

export function stepCatalogFlows(state: CatalogState, message: CatalogMessage | AlarmMessage, context: TurnContext): CatalogResult {
  switch (message.op) {
    case '$alarm':
      return { state };
    case 'grant':
      return startGrant(state, message, context);
    case 'craft':
      return startCraft(state, message, context);
    case 'flow-answer':
      return advance(state, message, context);
    default:
      return stepCatalog(state, message, context);
  }
}

function putFlow(state: CatalogState, effects: Effects, flow: ItemFlow): void {
  state.flows.set(flow.flow_id, flow);
  effects.writes.push({ subkey: `f:${flow.flow_id}`, value: flow });
}

function call(context: TurnContext, effects: Effects, flow: ItemFlow, step: string, kind: string, key: string, message: unknown): void {
  flow.pending.push(step);
  effects.sends.push(flowCall(kind, key, message, { kind: ITEM_CATALOG_KIND, key: context.key, flow_id: flow.flow_id, step }));
}

function requireRoom(state: CatalogState): void {
  if (state.flows.size >= policy.flows_in_progress_max) {
    throw new ServiceError('actor_overloaded', 'Too many grants and crafts in progress in this domain; retry shortly.', { retryAfterSeconds: 1 });
  }
}

function placementOf(state: CatalogState, definition: Definition, quantity: number, durability_pct: number): Placement {
  const max = definition.default_durability;
  return {
    unit: {
      definition_id: definition.definition_id,
      stackable: definition.stackable,
      max_stack: definition.max_stack,
      weight_m: definition.weight_m,
      volume_m: definition.volume_m,
      durability: max === null ? null : { current: Math.floor((max * durability_pct) / 100), max },
      collection_tags: collectionsOf(state, definition.definition_id),
    },
    quantity,
  };
}

function startGrant(state: CatalogState, message: Extract<CatalogMessage, { op: 'grant' }>, context: TurnContext): CatalogResult {
  const definition = requireDefinition(state, message.definition_id, 'body.definition_id');
  const container = requireContainer(state, message.container_id, 'body.container_id');
  requireRoom(state);
  const effects: Effects = { writes: [], sends: [], replies: [] };
  const flow: ItemFlow = {
    kind: 'grant',
    flow_id: context.newId('grt_'),
    request_id: context.request_id,
    pending: [],
    tier_events: [],
    container,
    definition_id: definition.definition_id,
    quantity: message.quantity,
    items: [],
  };
  const placement = placementOf(state, definition, message.quantity, 100);
  call(context, effects, flow, 'place', ITEM_CONTAINER_KIND, containerKeyOf(context, container.container_id), {
    op: 'place',
    config: container,
    placements: [placement],
  } satisfies ContainerMessage);
  putFlow(state, effects, flow);
  return { state, defer: true, writes: effects.writes, sends: effects.sends };
}

function containerKeyOf(context: TurnContext, container_id: string): string {
  const { tenant, domain } = scopeOf(context);
  return itemContainerKey(tenant, domain, container_id);
}

function startCraft(state: CatalogState, message: Extract<CatalogMessage, { op: 'craft' }>, context: TurnContext): CatalogResult {
  const blueprint = requireBlueprint(state, message.blueprint_id);
  const source = requireContainer(state, message.source_container_id, 'body.source_container_id');
  const target = requireContainer(state, message.target_container_id, 'body.target_container_id');
  requireRoom(state);
  const consumed = new Map<string, number>();
  for (const input of blueprint.inputs) consumed.set(input.value, (consumed.get(input.value) ?? 0) + input.quantity);
  const rolls = rollChances(message.seed, blueprint.outputs.map((output) => output.chance));
  const placements: Placement[] = [];
  blueprint.outputs.forEach((output, index) => {
    if (!rolls[index]) return;
    // Outputs name existing definitions: a definition a blueprint names cannot be deleted.
    const definition = requireDefinition(state, output.definition_id);
    placements.push(placementOf(state, definition, output.quantity, output.initial_durability_pct));
  });
  const effects: Effects = { writes: [], sends: [], replies: [] };
  const flow: ItemFlow = {
    kind: 'craft',
    flow_id: context.newId('crf_'),
    request_id: context.request_id,
    pending: [],
    tier_events: [],
    blueprint_id: blueprint.blueprint_id,
    blueprint_version: blueprint.version,
    seed: message.seed,
    source,
    target,
    consumed: [...consumed].map(([definition_id, quantity]) => ({ definition_id, quantity })),
    placements,
    produced: [],
    first_outputs: [],
    refusal: null,
  };
  call(context, effects, flow, 'reserve', ITEM_CONTAINER_KIND, containerKeyOf(context, source.container_id), {
    op: 'reserve',
    flow_id: flow.flow_id,
    inputs: flow.consumed,
  } satisfies ContainerMessage);
  putFlow(state, effects, flow);
  return { state, defer: true, writes: effects.writes, sends: effects.sends };
}

function advance(state: CatalogState, answer: Answer, context: TurnContext): CatalogResult {
  const stored = state.flows.get(answer.flow_id);
  if (!stored || !stored.pending.includes(answer.step)) return { state };
  // A copy with its own arrays: the stored flow stays as it was if this turn fails.
  const flow: ItemFlow =
    stored.kind === 'craft'
      ? { ...stored, first_outputs: [...stored.first_outputs], tier_events: stored.tier_events.map((tier) => ({ ...tier })) }
      : { ...stored, tier_events: stored.tier_events.map((tier) => ({ ...tier })) };
  flow.pending = stored.pending.filter((step) => step !== answer.step);
  const effects: Effects = { writes: [], sends: [], replies: [] };
  const { tenant, domain } = scopeOf(context);

  if (answer.step === 'place' && flow.kind === 'grant') {
    if (!answer.ok) return end(state, effects, flow, { error: answer.error });
    const placed = answer.reply as PlaceReply;
    flow.items = placed.items;
    acquired(state, context, effects, flow, placed.owner_id, [{ definition_id: flow.definition_id, quantity: flow.quantity }]);
  } else if (flow.kind === 'craft' && answer.step === 'reserve') {
    if (!answer.ok) return end(state, effects, flow, { error: answer.error });
    if (flow.placements.length === 0) settleCraft(state, context, effects, flow, { items: [], owner_id: flow.target.owner_id });
    else {
      call(context, effects, flow, 'place', ITEM_CONTAINER_KIND, itemContainerKey(tenant, domain, flow.target.container_id), {
        op: 'place',
        config: flow.target,
        placements: flow.placements,
      } satisfies ContainerMessage);
    }
  } else if (flow.kind === 'craft' && answer.step === 'place') {
    if (answer.ok) settleCraft(state, context, effects, flow, answer.reply as PlaceReply);
    else {
      // Compensation: the inputs go back to the source before the refusal is answered.
      flow.refusal = answer.error;
      call(context, effects, flow, 'release', ITEM_CONTAINER_KIND, itemContainerKey(tenant, domain, flow.source.container_id), {
        op: 'release',
        flow_id: flow.flow_id,
      } satisfies ContainerMessage);
    }
  } else if (flow.kind === 'craft' && answer.step === 'release') {
    return end(state, effects, flow, { error: flow.refusal! });
  } else if (answer.step.startsWith('first:') && flow.kind === 'craft') {
    const definition_id = answer.step.slice('first:'.length);
    if (answer.ok) state.claimed.add(firstClaimKey(['output', flow.blueprint_id, definition_id]));
    if (answer.ok && (answer.reply as FirstReply).first) flow.first_outputs.push(definition_id);
  } else if (answer.step === 'progress') {
    const reached = answer.ok ? (answer.reply as { tiers_reached: TierReached[] }).tiers_reached : [];
    for (const tier of reached) {
      flow.tier_events.push({ ...tier, global_first: false });
      const subject: FirstSubject = ['tier', tier.collection_id, tier.required];
      if (state.claimed.has(firstClaimKey(subject))) continue;
      call(context, effects, flow, `tier:${tier.collection_id}:${tier.required}`, ITEM_FIRST_KIND, itemFirstKey(tenant, domain, subject), {
        op: 'claim',
        claimant: flow.flow_id,
      } satisfies FirstMessage);
    }
  } else if (answer.step.startsWith('tier:')) {
    const event = flow.tier_events.find((tier) => `tier:${tier.collection_id}:${tier.required}` === answer.step);
    if (answer.ok && event) state.claimed.add(firstClaimKey(['tier', event.collection_id, event.required]));
    if (answer.ok && (answer.reply as FirstReply).first) {
      if (event) event.global_first = true;
    }
  }
  if (flow.pending.length === 0) return end(state, effects, flow, { reply: resultOf(flow) });
  putFlow(state, effects, flow);
  return { state, writes: effects.writes, sends: effects.sends };
}

/** Outputs are in the target: consume the inputs, claim the firsts, count the owner's progress. */
function settleCraft(state: CatalogState, context: TurnContext, effects: Effects, flow: Extract<ItemFlow, { kind: 'craft' }>, placed: PlaceReply): void {
  const { tenant, domain } = scopeOf(context);
  flow.produced = placed.items;
  // The commit is not awaited: it is in the outbox (applied once, even after a
  // crash), and the reserved inputs are already out of sight in the source.
  effects.sends.push({
    kind: ITEM_CONTAINER_KIND,
    key: itemContainerKey(tenant, domain, flow.source.container_id),
    message: { op: 'commit', flow_id: flow.flow_id } satisfies ContainerMessage,
  });
  const outputs = [...new Set(flow.placements.map((placement) => placement.unit.definition_id))];
  for (const definition_id of outputs) {
    const subject: FirstSubject = ['output', flow.blueprint_id, definition_id];
    // Once any claim answered, the output is taken for good: no need to ask again.
    if (state.claimed.has(firstClaimKey(subject))) continue;
    call(context, effects, flow, `first:${definition_id}`, ITEM_FIRST_KIND, itemFirstKey(tenant, domain, subject), { op: 'claim', claimant: flow.flow_id } satisfies FirstMessage);
  }
  acquired(
    state,
    context,
    effects,
    flow,
    placed.owner_id,
    flow.placements.map((placement) => ({ definition_id: placement.unit.definition_id, quantity: placement.quantity })),
  );
}

/** Tells the owner's progress actor what they acquired, when it touches a collection. */
function acquired(state: CatalogState, context: TurnContext, effects: Effects, flow: ItemFlow, owner_id: string | null, items: QuantityOf[]): void {
  if (owner_id === null) return;
  const collections = collectionRules(state, items.map((item) => item.definition_id));
  if (collections.length === 0) return;
  const { tenant, domain } = scopeOf(context);
  call(context, effects, flow, 'progress', ITEM_PROGRESS_KIND, itemProgressKey(tenant, domain, owner_id), {
    op: 'acquire',
    tenant,
    domain,
    user_id: owner_id,
    acquired: items,
    collections,
  } satisfies ProgressMessage);
}

function resultOf(flow: ItemFlow): GrantResult | CraftResult {
  if (flow.kind === 'grant') return { container: flow.container, items: flow.items, tier_events: flow.tier_events };
  return {
    craft_id: flow.flow_id,
    blueprint_id: flow.blueprint_id,
    blueprint_version: flow.blueprint_version,
    seed: String(flow.seed),
    source_container_id: flow.source.container_id,
    target_container_id: flow.target.container_id,
    consumed: flow.consumed,
    produced: flow.produced,
    target: flow.target,
    global_first: flow.first_outputs.length > 0,
    global_first_outputs: [...flow.first_outputs].sort(),
    tier_events: flow.tier_events,
  };
}

function end(state: CatalogState, effects: Effects, flow: ItemFlow, outcome: { reply: unknown } | { error: FlowError }): CatalogResult {
  state.flows.delete(flow.flow_id);
  effects.writes.push({ subkey: `f:${flow.flow_id}`, value: undefined });
  if (flow.request_id !== null) effects.replies.push({ request_id: flow.request_id, ...outcome });
  return { state, writes: effects.writes, sends: effects.sends, replies: effects.replies };
}
