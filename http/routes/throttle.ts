import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ServiceError, ownEntry } from '../../runtime/index.js';
import {
  planRule,
  subjectProblem,
  THROTTLE_PLANS_KIND,
  THROTTLE_STATS_KIND,
  THROTTLE_SUBJECT_KIND,
  throttlePlansKey,
  throttlePolicy as policy,
  throttleStatsKey,
  throttleSubjectKey,
  type BucketView,
  type CheckView,
  type PlanChanges,
  type PlanFields,
  type PlanListView,
  type PlanReply,
  type PlansMessage,
  type PlanView,
  type RefundView,
  type StatsCounts,
  type SubjectMessage,
} from '../../actors/throttle/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { ThrottlePlanCache } from '../throttle-plan-cache.js';

/** Throttle plans: consumable request buckets with check, peek, refund, reset (spec doc 1 §4.14; docs/api/throttle.md). */
const tags = ['throttle'];
const base = '/api/v1/throttle/plans';

const PLAN_ID = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$', description: 'Letters, digits and . _ - (1 to 64, not starting with . _ -).' });
const NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$';
const Limits = Type.Object({
  max_requests: Type.Integer({ minimum: 1, maximum: policy.max_requests_max }),
  window_seconds: Type.Integer({ minimum: 1, maximum: policy.window_seconds_max }),
});
const Actions = Type.Record(Type.String(), Type.Object({ cost: Type.Integer({ minimum: 1, maximum: policy.max_requests_max }) }), {
  propertyNames: { pattern: NAME_PATTERN },
  maxProperties: policy.actions_max,
  description: `Named actions and their cost in units (at most ${policy.actions_max}; a cost may not exceed limits.max_requests).`,
});
const Enforcement = Type.Union([Type.Literal('soft'), Type.Literal('hard')]);
const HeadersMode = Type.Union([Type.Literal('none'), Type.Literal('standard')]);
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: policy.tag_length_max, pattern: '^[^\\u0000-\\u001f\\u007f]+$' }), { maxItems: policy.tags_max });
const Namespaces = Type.Array(Type.String({ pattern: '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$' }), {
  maxItems: policy.subject_namespaces_max,
  description: 'When not empty, a subject must be <namespace>:<id> with one of these namespaces.',
});
const Description = Type.String({ maxLength: policy.description_length_max });
const RefundWindow = Type.Integer({ minimum: 0, maximum: policy.refund_window_seconds_max });

const CreateBody = Type.Object({
  plan_id: PLAN_ID,
  limits: Limits,
  actions: Type.Optional(Actions),
  default_enforcement: Type.Optional(Enforcement),
  description: Type.Optional(Description),
  headers_mode: Type.Optional(HeadersMode),
  refund_window_seconds: Type.Optional(RefundWindow),
  subject_namespaces: Type.Optional(Namespaces),
  tags: Type.Optional(Tags),
});
const UpdateBody = Type.Object({
  limits: Type.Optional(Type.Partial(Limits)),
  actions: Type.Optional(Actions),
  default_enforcement: Type.Optional(Enforcement),
  description: Type.Optional(Description),
  headers_mode: Type.Optional(HeadersMode),
  refund_window_seconds: Type.Optional(RefundWindow),
  subject_namespaces: Type.Optional(Namespaces),
  tags: Type.Optional(Tags),
});
const SUBJECT = Type.String({ minLength: 1, maxLength: policy.subject_length_max, description: 'An internal id (never an e-mail address or phone number).' });
const CheckBody = Type.Object({
  subject: SUBJECT,
  action: Type.Optional(Type.String({ pattern: NAME_PATTERN, description: "One of the plan's actions: its cost is consumed." })),
  cost: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.max_requests_max, description: "Units to consume; wins over the action's cost. Default: the action's cost, else 1." })),
});
const CheckQuery = Type.Object({
  enforcement: Type.Optional(Type.Union([Type.Literal('soft'), Type.Literal('hard')], { description: "Overrides the plan's default_enforcement for this check: hard answers 429 on denial." })),
});
const SubjectBody = Type.Object({ subject: SUBJECT });
const RefundBody = Type.Object({ subject: SUBJECT, consume_token: Type.String({ minLength: 1, maxLength: 200 }) });
const Params = Type.Object({ plan_id: PLAN_ID });
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Case-insensitive substring of the description.' })),
  tag: Type.Optional(Type.String({ maxLength: policy.tag_length_max, description: 'Only plans carrying this tag.' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});

const ThrottlePlan = Type.Object(
  {
    plan_id: Type.String(),
    owner_id: Type.String(),
    description: Type.String(),
    limits: Limits,
    actions: Type.Record(Type.String(), Type.Object({ cost: Type.Integer() })),
    default_enforcement: Enforcement,
    headers_mode: HeadersMode,
    refund_window_seconds: Type.Integer(),
    subject_namespaces: Type.Array(Type.String()),
    tags: Type.Array(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    version: Type.Integer({ description: 'Increases with every change of the plan.' }),
  },
  { title: 'ThrottlePlan' },
);
const Bucket = {
  limit: Type.Integer(),
  remaining: Type.Integer(),
  reset_after_seconds: Type.Integer({ description: 'Seconds until the bucket is full again.' }),
  reset_at: Type.Integer({ description: 'epoch-s when the bucket is full again.' }),
};
const CheckResult = Type.Object(
  {
    allowed: Type.Boolean(),
    consume_token: Type.String(),
    cost: Type.Integer(),
    reason: Type.Union([Type.Literal('within_limit'), Type.Literal('limit_exceeded')]),
    retry_after_seconds: Type.Integer({ description: '0 when allowed; else seconds until this cost would pass.' }),
    ...Bucket,
  },
  { title: 'ThrottleCheck' },
);
const PeekResult = Type.Object(Bucket, { title: 'ThrottlePeek' });
const RefundResult = Type.Object({
  refunded: Type.Boolean(),
  cost_refunded: Type.Integer(),
  reason: Type.Union([Type.Literal('refunded'), Type.Literal('already_refunded'), Type.Literal('refund_window_passed'), Type.Literal('nothing_consumed'), Type.Literal('bucket_full')]),
});
const StatsResult = Type.Object({
  plan_id: Type.String(),
  total_allowed: Type.Integer(),
  total_checks: Type.Integer(),
  total_denied: Type.Integer(),
  total_refunded: Type.Integer(),
});

type PlanParams = Static<typeof Params>;

function planShape(plan: PlanView) {
  return {
    plan_id: plan.plan_id,
    owner_id: plan.owner_id,
    description: plan.description,
    limits: plan.limits,
    actions: plan.actions,
    default_enforcement: plan.default_enforcement,
    headers_mode: plan.headers_mode,
    refund_window_seconds: plan.refund_window_seconds,
    subject_namespaces: plan.subject_namespaces,
    tags: plan.tags,
    created_at: isoTime(plan.created_at_ms)!,
    updated_at: isoTime(plan.updated_at_ms)!,
    version: plan.version,
  };
}

function checkShape(view: CheckView) {
  const { window_seconds: _window, ...rest } = view;
  return rest;
}

function peekShape(view: BucketView) {
  return { limit: view.limit, remaining: view.remaining, reset_after_seconds: view.reset_after_seconds, reset_at: view.reset_at };
}

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers): the plan as the policy, the subject's bucket
 * as the state. Both fields are lists: the plan's item is added after the edge rate limit's own
 * (docs/api/rate-limits.md), so a client sees both policies.
 */
function setRateLimitHeaders(reply: FastifyReply, plan: PlanView, view: CheckView): void {
  appendListItem(reply, 'ratelimit-policy', `"${plan.plan_id}";q=${view.limit};w=${view.window_seconds}`);
  appendListItem(reply, 'ratelimit', `"${plan.plan_id}";r=${view.remaining};t=${view.reset_after_seconds}`);
}

function appendListItem(reply: FastifyReply, name: string, item: string): void {
  const current = reply.getHeader(name);
  reply.header(name, current === undefined || current === '' ? item : `${String(current)}, ${item}`);
}

function checkSubject(subject: string, plan: PlanView): void {
  const problem = subjectProblem(subject, plan.subject_namespaces);
  if (problem) throw new ServiceError('throttle_subject_invalid', `subject ${problem}.`, { details: [{ field: 'body.subject', message: problem }] });
}

function costOf(plan: PlanView, body: Static<typeof CheckBody>): number {
  if (body.cost !== undefined) return body.cost;
  if (body.action === undefined) return 1;
  // Own keys only: `toString` or `constructor` is no action, not Object.prototype's function.
  const action = ownEntry(plan.actions, body.action);
  if (!action) {
    const known = Object.keys(plan.actions);
    const message = `is not an action of this plan (${known.length > 0 ? known.join(', ') : 'it has none'})`;
    throw new ServiceError('BAD_REQUEST', `body.action ${message}`, { details: [{ field: 'body.action', message }] });
  }
  return action.cost;
}

export function throttleRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const cache = new ThrottlePlanCache(services.clock, services.config.throttlePlanCacheMs);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });

  /** A change of the tenant's plans (one turn of its directory); the answer goes into this node's cache before the reply leaves. */
  const changePlans = async (tenant: string, message: PlansMessage & { plan_id: string }): Promise<PlanReply> => {
    const reply = await services.actors.ask<PlanReply>(THROTTLE_PLANS_KIND, throttlePlansKey(tenant), message);
    cache.put(tenant, message.plan_id, reply);
    return reply;
  };

  /** The plan, from this node's cache or a read of the directory; 404 when there is none. */
  const planFor = async (tenant: string, plan_id: string): Promise<PlanView> => {
    let answer = cache.get(tenant, plan_id);
    if (!answer) {
      answer = await services.actors.ask<PlanReply>(THROTTLE_PLANS_KIND, throttlePlansKey(tenant), { op: 'get', plan_id } satisfies PlansMessage, { readOnly: true });
      cache.put(tenant, plan_id, answer);
    }
    if (!answer.plan) throw new ServiceError('not_found', 'No such throttle plan.');
    return answer.plan;
  };

  const askSubject = <Reply>(tenant: string, plan: PlanView, subject: string, message: SubjectMessage) =>
    services.actors.ask<Reply>(THROTTLE_SUBJECT_KIND, throttleSubjectKey(tenant, plan.plan_id, plan.generation, subject), message);

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: schema(
      "The tenant's plans. q: substring of the description; tag: plans with this tag; sort_by created_at (default) or updated_at; sort_order asc (default) or desc.",
      { querystring: ListQuery },
      { 200: Type.Object({ pagination: Pagination, plans: Type.Array(ThrottlePlan) }) },
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(100, query.page_size || 20);
    const view = await services.actors.ask<PlanListView>(
      THROTTLE_PLANS_KIND,
      throttlePlansKey(principal.tenant),
      { op: 'list', query: { q: query.q, tag: query.tag, sort_by: query.sort_by, sort_order: query.sort_order, page, page_size } } satisfies PlansMessage,
      { readOnly: true },
    );
    return { pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total }, plans: view.plans.map(planShape) };
  });

  app.post<{ Body: Static<typeof CreateBody> }>(base, {
    onRequest: authenticate,
    schema: schema('Create a plan. 201 with the plan; plan_id taken in the tenant: 409 throttle_plan_exists.', { body: CreateBody }, { 201: ThrottlePlan }, [409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const fields: PlanFields = {
      limits: body.limits,
      actions: body.actions ?? {},
      default_enforcement: body.default_enforcement ?? 'soft',
      description: body.description ?? '',
      headers_mode: body.headers_mode ?? 'none',
      refund_window_seconds: body.refund_window_seconds ?? policy.refund_window_seconds_default,
      subject_namespaces: body.subject_namespaces ?? [],
      tags: body.tags ?? [],
    };
    const answer = await changePlans(principal.tenant, { op: 'create', plan_id: body.plan_id, owner_id: principal.user_id, fields });
    return reply.code(201).send(planShape(answer.plan!));
  });

  app.get<{ Params: PlanParams }>(`${base}/:plan_id`, {
    onRequest: authenticate,
    schema: schema('One plan.', { params: Params }, { 200: ThrottlePlan }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    // Always the directory's current copy, not the cache: a read after a change elsewhere sees it.
    const answer = await services.actors.ask<PlanReply>(THROTTLE_PLANS_KIND, throttlePlansKey(principal.tenant), { op: 'get', plan_id: request.params.plan_id } satisfies PlansMessage, { readOnly: true });
    if (!answer.plan) throw new ServiceError('not_found', 'No such throttle plan.');
    return planShape(answer.plan);
  });

  app.patch<{ Params: PlanParams; Body: Static<typeof UpdateBody> }>(`${base}/:plan_id`, {
    onRequest: authenticate,
    preValidation: async (request) => {
      if (request.body === undefined || request.body === null) request.body = {};
    },
    schema: schema(
      'Change a plan: every field given replaces the current one (actions, tags and subject_namespaces as a whole; limits field by field). Subjects keep their buckets.',
      { params: Params, body: UpdateBody },
      { 200: ThrottlePlan },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    // A body's unknown fields (plan_id, owner_id) are Fastify's to keep and the step's to ignore (CHANGEABLE).
    const changes: PlanChanges = { ...request.body };
    const answer = await changePlans(principal.tenant, { op: 'update', plan_id: request.params.plan_id, changes });
    return planShape(answer.plan!);
  });

  app.delete<{ Params: PlanParams }>(`${base}/:plan_id`, {
    onRequest: authenticate,
    schema: schema('Delete a plan; its subjects\' buckets and totals go with it.', { params: Params }, { 200: Type.Object({ message: Type.String(), plan_id: Type.String() }) }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await changePlans(principal.tenant, { op: 'delete', plan_id: request.params.plan_id });
    return { message: 'Throttle plan deleted.', plan_id: request.params.plan_id };
  });

  app.post<{ Params: PlanParams; Body: Static<typeof CheckBody>; Querystring: Static<typeof CheckQuery> }>(`${base}/:plan_id/check`, {
    onRequest: authenticate,
    schema: schema(
      "Check and consume: the cost (body cost, else the action's, else 1) is taken atomically if it fits. Denied under soft enforcement: 200 with allowed false; under hard (the plan's default_enforcement, or query enforcement=hard): 429 throttle_limit_exceeded with Retry-After. headers_mode standard adds RateLimit-Policy and RateLimit headers.",
      { params: Params, body: CheckBody, querystring: CheckQuery },
      { 200: CheckResult },
      [404],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const plan = await planFor(principal.tenant, request.params.plan_id);
    checkSubject(request.body.subject, plan);
    const cost = costOf(plan, request.body);
    if (cost > plan.limits.max_requests) {
      throw new ServiceError('throttle_cost_exceeds_limit', `A cost of ${cost} can never fit in a bucket of ${plan.limits.max_requests}.`);
    }
    const view = await askSubject<CheckView>(principal.tenant, plan, request.body.subject, { op: 'check', rule: planRule(plan), cost });
    if (plan.headers_mode === 'standard') setRateLimitHeaders(reply, plan, view);
    const enforcement = request.query.enforcement ?? plan.default_enforcement;
    if (!view.allowed && enforcement === 'hard') {
      throw new ServiceError('throttle_limit_exceeded', `The plan's limit is reached for this subject; retry in ${view.retry_after_seconds} s.`, {
        details: checkShape(view),
        retryAfterSeconds: view.retry_after_seconds,
      });
    }
    return checkShape(view);
  });

  app.post<{ Params: PlanParams; Body: Static<typeof SubjectBody> }>(`${base}/:plan_id/peek`, {
    onRequest: authenticate,
    schema: schema('The subject\'s bucket, read-only: nothing is consumed.', { params: Params, body: SubjectBody }, { 200: PeekResult }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const plan = await planFor(principal.tenant, request.params.plan_id);
    checkSubject(request.body.subject, plan);
    const view = await services.actors.ask<BucketView>(
      THROTTLE_SUBJECT_KIND,
      throttleSubjectKey(principal.tenant, plan.plan_id, plan.generation, request.body.subject),
      { op: 'peek', rule: planRule(plan) } satisfies SubjectMessage,
      { readOnly: true },
    );
    return peekShape(view);
  });

  app.post<{ Params: PlanParams; Body: Static<typeof RefundBody> }>(`${base}/:plan_id/refund`, {
    onRequest: authenticate,
    schema: schema(
      "Give back what a check consumed, within the plan's refund_window_seconds after the check and once per consume_token; otherwise refunded false with the reason.",
      { params: Params, body: RefundBody },
      { 200: RefundResult },
      [404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const plan = await planFor(principal.tenant, request.params.plan_id);
    checkSubject(request.body.subject, plan);
    return askSubject<RefundView>(principal.tenant, plan, request.body.subject, { op: 'refund', rule: planRule(plan), consume_token: request.body.consume_token });
  });

  app.post<{ Params: PlanParams; Body: Static<typeof SubjectBody> }>(`${base}/:plan_id/reset`, {
    onRequest: authenticate,
    schema: schema('Fill the subject\'s bucket to capacity. Earlier consume tokens stay refundable (the bucket never exceeds capacity).', { params: Params, body: SubjectBody }, { 200: MessageBody }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const plan = await planFor(principal.tenant, request.params.plan_id);
    checkSubject(request.body.subject, plan);
    return askSubject<{ message: string }>(principal.tenant, plan, request.body.subject, { op: 'reset', rule: planRule(plan) });
  });

  app.get<{ Params: PlanParams }>(`${base}/:plan_id/stats`, {
    onRequest: authenticate,
    schema: schema(
      `The plan's totals since it was created: checks, allowed, denied, refunds. They lag the checks by about ${policy.stats_flush_ms} ms.`,
      { params: Params },
      { 200: StatsResult },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const plan = await planFor(principal.tenant, request.params.plan_id);
    const counts = await services.actors.ask<StatsCounts>(THROTTLE_STATS_KIND, throttleStatsKey(principal.tenant, plan.plan_id, plan.generation), { op: 'get' }, { readOnly: true });
    return { plan_id: plan.plan_id, ...counts };
  });
}
