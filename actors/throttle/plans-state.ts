import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { throttlePolicy as policy, type PlanFields, type PlanListQuery, type PlanListView, type PlanReply, type PlanView, type PlansMessage } from './messages.js';

/**
 * A tenant's throttle plans: pure domain logic of the `throttle-plans` actor
 * (storage `records`, key = throttlePlansKey(tenant); one record
 * `p:<plan_id>` per plan and `seq`).
 *
 * `seq` counts every change of any plan of the tenant. A plan's `version` is
 * the seq of its last change and its `generation` the seq of its creation:
 * the edge caches plans by version, the subject actors keep the newest rule
 * by version, and subjects and totals are keyed by generation, so a plan
 * created again under a deleted plan's id starts afresh.
 */
export const PLAN_PREFIX = 'p:';
export const SEQ_SUBKEY = 'seq';

export interface PlansState {
  plans: Map<string, PlanView>;
  seq: number;
}

type Result = TurnResult<PlansState, PlanReply | PlanListView>;

/** The fields an update may set (PlanFields but limits, which are merged field by field). */
const CHANGEABLE: ReadonlySet<string> = new Set(['actions', 'default_enforcement', 'description', 'headers_mode', 'refund_window_seconds', 'subject_namespaces', 'tags'] satisfies (keyof PlanFields)[]);

export function loadPlans(_key: string, records: Iterable<[string, unknown]>): PlansState {
  const state: PlansState = { plans: new Map(), seq: 0 };
  for (const [subkey, value] of records) {
    if (subkey === SEQ_SUBKEY) state.seq = value as number;
    else if (subkey.startsWith(PLAN_PREFIX)) state.plans.set(subkey.slice(PLAN_PREFIX.length), value as PlanView);
  }
  return state;
}

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

/** Rules across fields (the edge's schema checks each field alone). */
function checkFields(fields: PlanFields): void {
  for (const [name, action] of Object.entries(fields.actions)) {
    if (action.cost > fields.limits.max_requests) {
      throw badRequest(`body.actions.${name}.cost`, `must be at most limits.max_requests (${fields.limits.max_requests}): a larger cost could never pass`);
    }
  }
}

function normalised(fields: PlanFields): PlanFields {
  return { ...fields, tags: [...new Set(fields.tags)], subject_namespaces: [...new Set(fields.subject_namespaces)] };
}

function saved(state: PlansState, plan: PlanView): RecordWrite[] {
  state.plans.set(plan.plan_id, plan);
  return [
    { subkey: PLAN_PREFIX + plan.plan_id, value: plan },
    { subkey: SEQ_SUBKEY, value: state.seq },
  ];
}

export function stepPlans(state: PlansState, message: PlansMessage | AlarmMessage, context: TurnContext): Result {
  const now = context.now;
  switch (message.op) {
    case 'get':
      return { state, reply: { plan: state.plans.get(message.plan_id) ?? null, seq: state.seq } };

    case 'list':
      return { state, reply: list(state, message.query) };

    case 'create': {
      if (state.plans.has(message.plan_id)) throw new ServiceError('throttle_plan_exists', `A plan with plan_id ${JSON.stringify(message.plan_id)} already exists.`);
      if (state.plans.size >= policy.plans_per_tenant_max) {
        throw new ServiceError('throttle_plan_limit_reached', `A tenant may have at most ${policy.plans_per_tenant_max} throttle plans; delete one first.`);
      }
      const fields = normalised(message.fields);
      checkFields(fields);
      state.seq += 1;
      const plan: PlanView = { ...fields, plan_id: message.plan_id, owner_id: message.owner_id, created_at_ms: now, updated_at_ms: now, generation: state.seq, version: state.seq };
      return { state, writes: saved(state, plan), reply: { plan, seq: state.seq } };
    }

    case 'update': {
      const current = state.plans.get(message.plan_id);
      if (!current) throw new ServiceError('not_found', 'No such throttle plan.');
      const { limits, ...rest } = message.changes;
      // Only a plan's own fields change: an id or owner in the message (a body's unknown field) must not rename or re-own it.
      const changes = Object.fromEntries(
        Object.entries(rest).filter(([name, value]) => value !== undefined && CHANGEABLE.has(name)),
      ) as Partial<PlanFields>;
      const fields = normalised({
        ...current,
        ...changes,
        limits: {
          max_requests: limits?.max_requests ?? current.limits.max_requests,
          window_seconds: limits?.window_seconds ?? current.limits.window_seconds,
        },
      });
      checkFields(fields);
      state.seq += 1;
      const plan: PlanView = { ...current, ...fields, updated_at_ms: now, version: state.seq };
      return { state, writes: saved(state, plan), reply: { plan, seq: state.seq } };
    }

    case 'delete': {
      const current = state.plans.get(message.plan_id);
      if (!current) throw new ServiceError('not_found', 'No such throttle plan.');
      state.plans.delete(message.plan_id);
      state.seq += 1;
      return {
        state,
        writes: [
          { subkey: PLAN_PREFIX + message.plan_id, value: undefined },
          { subkey: SEQ_SUBKEY, value: state.seq },
        ],
        reply: { plan: null, seq: state.seq },
      };
    }

    default:
      return { state };
  }
}

function list(state: PlansState, query: PlanListQuery): PlanListView {
  const q = query.q?.toLowerCase();
  const matched = [...state.plans.values()].filter(
    (plan) => (!q || plan.description.toLowerCase().includes(q)) && (query.tag === undefined || plan.tags.includes(query.tag)),
  );
  const field = query.sort_by === 'updated_at' ? 'updated_at_ms' : 'created_at_ms';
  const direction = query.sort_order === 'desc' ? -1 : 1;
  matched.sort((a, b) => {
    if (a[field] !== b[field]) return (a[field] - b[field]) * direction;
    // Same instant: creation order (generation), then id, so pages never overlap.
    if (a.generation !== b.generation) return (a.generation - b.generation) * direction;
    return (a.plan_id < b.plan_id ? -1 : 1) * direction;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, plans: matched.slice(start, start + query.page_size) };
}
