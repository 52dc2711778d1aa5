import type { ActorSend, AlarmMessage, DeferredReply, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { stepContainer, type ContainerState } from './container-state.js';
import {
  firstSubjectKey,
  ITEM_CONTAINER_KIND,
  ITEM_FIRST_KIND,
  ITEM_PROGRESS_KIND,
  itemContainerKey,
  itemFirstKey,
  itemProgressKey,
  itemsPolicy as policy,
  type ContainerConfig,
  type ContainerMessage,
  type CraftPlan,
  type CraftResult,
  type FirstMessage,
  type FirstReply,
  type FirstSubject,
  type GrantPlan,
  type GrantResult,
  type PlaceReply,
  type ProgressMessage,
  type QuantityOf,
  type StoredItem,
  type TierEvent,
  type TierReached,
} from './messages.js';
import { ServiceError } from '../../runtime/index.js';

/**
 * The items area's flows, coordinated by a container actor (its step is
 * `stepContainerFlows`): the container granted into, or a craft's source.
 * The route reads the plan from the domain's catalog (plans.ts: the
 * definitions, configs, blueprint version and seeded rolls; a read changes
 * nothing) and asks the container once; the container checks its own rules
 * in its turn. A flow's state is the container's record `f:<flow_id>`,
 * written in every turn that starts or advances it; its calls (to the
 * target container, the first-claim actors, the progress actor) go through
 * the outbox as flow-calls (actors/flow-call.ts) and their answers come back
 * the same way, so a crash between steps loses nothing and applies nothing
 * twice: after a restart the outbox delivers the step in flight and the flow
 * goes on to its end (only the waiting HTTP request is lost: 503
 * flow_interrupted). Each call is named by its step (`place`, `progress`,
 * `first:<definition_id>`, `tier:<collection_id>:<required>`); an answer
 * whose flow or step is not pending (late, repeated) is ignored.
 *
 * - grant: the container places the items in its turn (all or nothing:
 *   items_capacity_exceeded, nothing placed) -> `progress` of the owner when
 *   the definition is in a collection -> a `tier:` claim per tier reached
 *   (its global_first) -> the reply. Without an owner or a collection, the
 *   reply leaves with the placement's commit.
 * - craft (the source coordinates): the source reserves the inputs in its
 *   turn (items_insufficient_inputs, nothing taken) -> `place` the outputs in
 *   the target (all or nothing) -> on success the source commits the
 *   reservation (the inputs are consumed) and sends a `first:` claim per
 *   produced output and the target owner's `progress` (then `tier:` claims)
 *   -> the reply; on refusal the source releases the reservation
 *   (compensation) in the same turn and answers the refusal. Inputs and
 *   outputs are therefore both applied or neither, also across kill -9.
 *   When the source is also the target, both happen in the source's first
 *   turn (`craft_in_place`: the inputs leave, then the outputs are placed
 *   counting the room they freed; refused with nothing changed), with no
 *   reservation and no `place` step; the claims and progress follow as above.
 *
 * A first claim, once made, is a fact for good; its actor tells the catalog,
 * whose plans then list the subject as `claimed` and the flow skips the
 * claim (global_first false).
 */
interface FlowBase {
  flow_id: string;
  request_id: string | null;
  /** Steps whose answers the flow waits for. */
  pending: string[];
  /** First-claim subjects known taken (from the plan): not asked again. */
  claimed: string[];
  tier_events: TierEvent[];
}

/** `locked_item_ids`: those of the items placed that had units locked then (absent in flows stored before it was kept: none). */
export type ContainerFlow =
  | (FlowBase & { kind: 'grant'; container: ContainerConfig; items: StoredItem[]; locked_item_ids?: string[] })
  | (FlowBase & { kind: 'craft'; plan: CraftPlan; produced: StoredItem[]; locked_item_ids?: string[]; first_outputs: string[] });

type Result = TurnResult<ContainerState, unknown>;
type Answer = Extract<FlowAnswer, { op: 'flow-answer' }>;

interface Effects {
  writes: RecordWrite[];
  sends: ActorSend[];
}

/** Tenant and domain, from the container's key. */
function scopeOf(context: TurnContext): { tenant: string; domain: string } {
  const [tenant, domain] = JSON.parse(context.key) as [string, string, string];
  return { tenant, domain };
}

export function stepContainerFlows(state: ContainerState, message: ContainerMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'grant':
      return startGrant(state, message.plan, context);
    case 'craft':
      return startCraft(state, message.plan, context);
    case 'flow-answer':
      return advance(state, message, context);
    default:
      return stepContainer(state, message, context);
  }
}

function requireRoom(state: ContainerState): void {
  if (state.flows.size >= policy.flows_per_container_max) {
    throw new ServiceError('actor_overloaded', 'Too many grants and crafts in progress on this container; retry shortly.', { retryAfterSeconds: 1 });
  }
}

function call(context: TurnContext, effects: Effects, flow: ContainerFlow, step: string, kind: string, key: string, message: unknown): void {
  flow.pending.push(step);
  effects.sends.push(flowCall(kind, key, message, { kind: ITEM_CONTAINER_KIND, key: context.key, flow_id: flow.flow_id, step }));
}

/** Runs one of the container's own single-turn steps inside a flow's turn, collecting its writes. */
function local(state: ContainerState, effects: Effects, message: ContainerMessage, context: TurnContext): unknown {
  const result = stepContainer(state, message, context);
  effects.writes.push(...(result.writes ?? []));
  return result.reply;
}

function startGrant(state: ContainerState, plan: GrantPlan, context: TurnContext): Result {
  requireRoom(state);
  const effects: Effects = { writes: [], sends: [] };
  // Refused (capacity) before anything changed: the ask gets the error.
  const placed = local(state, effects, { op: 'place', config: plan.container, placements: [plan.placement] }, context) as PlaceReply;
  const flow: ContainerFlow = {
    kind: 'grant',
    flow_id: context.newId('grt_'),
    request_id: context.request_id,
    pending: [],
    claimed: plan.claimed,
    tier_events: [],
    container: plan.container,
    items: placed.items,
    locked_item_ids: placed.locked_item_ids,
  };
  acquired(context, effects, flow, plan.container.owner_id, [plan.quantity], plan.rules);
  return proceed(state, context, effects, flow, true);
}

function startCraft(state: ContainerState, plan: CraftPlan, context: TurnContext): Result {
  requireRoom(state);
  const effects: Effects = { writes: [], sends: [] };
  const flow: ContainerFlow = {
    kind: 'craft',
    flow_id: context.newId('crf_'),
    request_id: context.request_id,
    pending: [],
    claimed: plan.claimed,
    tier_events: [],
    plan,
    produced: [],
    first_outputs: [],
  };
  if (plan.source.container_id === plan.target.container_id) {
    // One container: the inputs leave and the outputs land in this turn, so the room the inputs
    // free counts, and nothing is reserved (no compensation). Refused (missing inputs, no room)
    // before anything changed: the ask gets the error.
    const placed = local(state, effects, { op: 'craft_in_place', inputs: plan.consumed, config: plan.target, placements: plan.placements }, context) as PlaceReply;
    settleCraft(context, effects, flow, placed);
    return proceed(state, context, effects, flow, true);
  }
  // Refused (missing inputs) before anything changed: the ask gets the error.
  local(state, effects, { op: 'reserve', flow_id: flow.flow_id, inputs: plan.consumed }, context);
  if (plan.placements.length === 0) {
    local(state, effects, { op: 'commit', flow_id: flow.flow_id }, context);
    settleCraft(context, effects, flow, { items: [], owner_id: plan.target.owner_id, locked_item_ids: [] });
  } else {
    const { tenant, domain } = scopeOf(context);
    call(context, effects, flow, 'place', ITEM_CONTAINER_KIND, itemContainerKey(tenant, domain, plan.target.container_id), {
      op: 'place',
      config: plan.target,
      placements: plan.placements,
    } satisfies ContainerMessage);
  }
  return proceed(state, context, effects, flow, true);
}

function advance(state: ContainerState, answer: Answer, context: TurnContext): Result {
  const stored = state.flows.get(answer.flow_id);
  if (!stored || !stored.pending.includes(answer.step)) return { state };
  // A copy with its own arrays: the stored flow stays as it was if this turn fails.
  const flow: ContainerFlow =
    stored.kind === 'craft'
      ? { ...stored, first_outputs: [...stored.first_outputs], tier_events: stored.tier_events.map((tier) => ({ ...tier })) }
      : { ...stored, tier_events: stored.tier_events.map((tier) => ({ ...tier })) };
  flow.pending = stored.pending.filter((step) => step !== answer.step);
  const effects: Effects = { writes: [], sends: [] };
  const { tenant, domain } = scopeOf(context);

  if (answer.step === 'place' && flow.kind === 'craft') {
    if (!answer.ok) {
      // Compensation, in this turn: the reserved inputs come back.
      local(state, effects, { op: 'release', flow_id: flow.flow_id }, context);
      return end(state, effects, flow, { error: answer.error }, false);
    }
    // The outputs are in the target: the reserved inputs are consumed.
    local(state, effects, { op: 'commit', flow_id: flow.flow_id }, context);
    settleCraft(context, effects, flow, answer.reply as PlaceReply);
  } else if (answer.step.startsWith('first:') && flow.kind === 'craft') {
    if (answer.ok && (answer.reply as FirstReply).first) flow.first_outputs.push(answer.step.slice('first:'.length));
  } else if (answer.step === 'progress') {
    const reached = answer.ok ? (answer.reply as { tiers_reached: TierReached[] }).tiers_reached : [];
    for (const tier of reached) {
      flow.tier_events.push({ ...tier, global_first: false });
      const subject: FirstSubject = ['tier', tier.collection_id, tier.required];
      if (flow.claimed.includes(firstSubjectKey(subject))) continue;
      call(context, effects, flow, `tier:${tier.collection_id}:${tier.required}`, ITEM_FIRST_KIND, itemFirstKey(tenant, domain, subject), {
        op: 'claim',
        claimant: flow.flow_id,
      } satisfies FirstMessage);
    }
  } else if (answer.step.startsWith('tier:')) {
    const event = flow.tier_events.find((tier) => `tier:${tier.collection_id}:${tier.required}` === answer.step);
    if (answer.ok && event && (answer.reply as FirstReply).first) event.global_first = true;
  }
  return proceed(state, context, effects, flow, false);
}

/** The outputs are in the target and the inputs consumed: claim the firsts, count the owner's progress. */
function settleCraft(context: TurnContext, effects: Effects, flow: Extract<ContainerFlow, { kind: 'craft' }>, placed: PlaceReply): void {
  const { tenant, domain } = scopeOf(context);
  const { plan } = flow;
  flow.produced = placed.items;
  // Absent from a place answer of a target running the code from before it was kept.
  flow.locked_item_ids = placed.locked_item_ids ?? [];
  const outputs = [...new Set(plan.placements.map((placement) => placement.unit.definition_id))];
  for (const definition_id of outputs) {
    const subject: FirstSubject = ['output', plan.blueprint_id, definition_id];
    if (flow.claimed.includes(firstSubjectKey(subject))) continue;
    call(context, effects, flow, `first:${definition_id}`, ITEM_FIRST_KIND, itemFirstKey(tenant, domain, subject), { op: 'claim', claimant: flow.flow_id } satisfies FirstMessage);
  }
  const produced = plan.placements.map((placement) => ({ definition_id: placement.unit.definition_id, quantity: placement.quantity }));
  acquired(context, effects, flow, placed.owner_id, produced, plan.rules);
}

/** Tells the owner's progress actor what they acquired, when it touches a collection. */
function acquired(context: TurnContext, effects: Effects, flow: ContainerFlow, owner_id: string | null, items: QuantityOf[], rules: GrantPlan['rules']): void {
  if (owner_id === null || rules.length === 0) return;
  const { tenant, domain } = scopeOf(context);
  call(context, effects, flow, 'progress', ITEM_PROGRESS_KIND, itemProgressKey(tenant, domain, owner_id), {
    op: 'acquire',
    tenant,
    domain,
    user_id: owner_id,
    acquired: items,
    collections: rules,
  } satisfies ProgressMessage);
}

/** Waits for the pending steps (the flow stored, the ask deferred), or ends the flow now. */
function proceed(state: ContainerState, context: TurnContext, effects: Effects, flow: ContainerFlow, asking: boolean): Result {
  if (flow.pending.length === 0) return end(state, effects, flow, { reply: resultOf(flow) }, asking);
  state.flows.set(flow.flow_id, flow);
  effects.writes.push({ subkey: `f:${flow.flow_id}`, value: flow });
  return { state, writes: effects.writes, sends: effects.sends, defer: asking };
}

function resultOf(flow: ContainerFlow): GrantResult | CraftResult {
  if (flow.kind === 'grant') return { container: flow.container, items: flow.items, locked_item_ids: flow.locked_item_ids ?? [], tier_events: flow.tier_events };
  const { plan } = flow;
  return {
    craft_id: flow.flow_id,
    blueprint_id: plan.blueprint_id,
    blueprint_version: plan.blueprint_version,
    seed: String(plan.seed),
    source_container_id: plan.source.container_id,
    target_container_id: plan.target.container_id,
    consumed: plan.consumed,
    produced: flow.produced,
    locked_item_ids: flow.locked_item_ids ?? [],
    target: plan.target,
    global_first: flow.first_outputs.length > 0,
    global_first_outputs: [...flow.first_outputs].sort(),
    tier_events: flow.tier_events,
  };
}

/** Ends a flow: this turn's reply when this turn is the ask (`asking`), else a deferred reply. */
function end(state: ContainerState, effects: Effects, flow: ContainerFlow, outcome: { reply: unknown } | { error: FlowError }, asking: boolean): Result {
  if (state.flows.delete(flow.flow_id)) effects.writes.push({ subkey: `f:${flow.flow_id}`, value: undefined });
  if (asking) {
    // Only a success can end the flow in the turn that asked (a refusal there is thrown before anything changes).
    return { state, writes: effects.writes, sends: effects.sends, reply: (outcome as { reply: unknown }).reply };
  }
  const replies: DeferredReply[] = flow.request_id === null ? [] : [{ request_id: flow.request_id, ...outcome }];
  return { state, writes: effects.writes, sends: effects.sends, replies };
}
