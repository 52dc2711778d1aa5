import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { randomId } from '../../runtime/index.js';
import {
  ATTEMPT_STATUSES,
  checkDefinition,
  DEFINITION_FILTER_FIELDS,
  filterValueProblem,
  DEFINITION_FILTER_OPERATORS,
  DEFINITION_SORT_FIELDS,
  RITUAL_ATTEMPT_KIND,
  RITUAL_DEFINITIONS_KIND,
  RITUAL_MODES,
  RITUAL_RECORD_KIND,
  ritualAttemptKey,
  ritualDefinitionsKey,
  ritualPolicy as policy,
  ritualRecordKey,
  type AnalyticsView,
  type AttemptMessage,
  type AttemptStatus,
  type AttemptView,
  type CheckinReply,
  type CountdownReply,
  type DefinitionListView,
  type DefinitionsMessage,
  type HistoryView,
  type PerformReply,
  type RecordMessage,
  type RitualCaller,
  type RitualDefinition,
} from '../../actors/rituals/messages.js';
import { ServiceError } from '../../runtime/index.js';
import type { Principal } from '../auth/principal.js';
import { parseListFilters } from '../list-filters.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, NOT_PROTOTYPE_MEMBER, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Rituals (spec doc 2 §4.10; docs/api/rituals.md). */
const tags = ['rituals'];
const base = '/api/v1/rituals';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));
const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' });
// Part ids key the analytics' lateness record: not a name of Object.prototype (`__proto__` would write its prototype).
const PartId = Type.String({ minLength: 1, maxLength: policy.part_id_length_max, pattern: `^${NOT_PROTOTYPE_MEMBER}[A-Za-z0-9_.:-]+$` });
const Channel = Type.String({ minLength: 1, maxLength: policy.channel_length_max, pattern: '^[A-Za-z0-9_-]+$', description: 'The name of a message-queue topic of the tenant (letters, digits, - and _).' });
const WebhookIds = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: policy.webhook_ids_max, description: 'Webhooks of the tenant; each gets its own signed delivery.' });
const DefIdParams = Type.Object({ def_id: Id });
const AttemptParams = Type.Object({ attempt_id: Id });
const Status = literals(ATTEMPT_STATUSES);

const PartSchema = Type.Object({
  part_id: PartId,
  assigned_to: Type.String({ minLength: 1, maxLength: policy.assigned_to_length_max, description: 'The user_id of the part\'s assignee (a member of the tenant).' }),
  actor_type: Type.Optional(Type.Literal('user')),
});
const TargetsSchema = Type.Object({ webhook_ids: Type.Optional(WebhookIds), pubsub_channel: Type.Optional(Channel) });
const StepSchema = Type.Object({
  action: Type.Optional(Type.Literal('notify')),
  after_missed_seconds: Type.Integer({ minimum: 0, maximum: policy.after_missed_seconds_max }),
  webhook_ids: Type.Optional(WebhookIds),
  pubsub_channel: Type.Optional(Channel),
});
const DefinitionBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: policy.name_length_max }),
  description: Type.Optional(Type.String({ maxLength: policy.description_length_max })),
  parts: Type.Array(PartSchema, { minItems: 1, maxItems: policy.parts_max }),
  ordering: Type.Optional(Type.Array(PartId, { maxItems: policy.parts_max, description: 'Every part_id once; default: the order of parts.' })),
  mode: Type.Optional(literals(RITUAL_MODES)),
  window_ms: Type.Integer({ minimum: 1, maximum: policy.window_ms_max }),
  quorum: Type.Optional(Type.Object({ required: Type.Integer({ minimum: 1, maximum: policy.parts_max }), of: Type.Integer({ minimum: 1, maximum: policy.parts_max }) })),
  checkin_interval_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.checkin_interval_seconds_max })),
  arm_ttl_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.arm_ttl_seconds_max })),
  escalation: Type.Optional(Type.Array(StepSchema, { maxItems: policy.escalation_steps_max })),
  on_complete: Type.Optional(Type.Union([TargetsSchema, Type.Null()])),
  on_dispute: Type.Optional(Type.Literal('none')),
  announce_channel: Type.Optional(Type.Union([Channel, Type.Null()])),
});

const TargetsView = Type.Object({ webhook_ids: Type.Array(Type.String()), pubsub_channel: Type.Union([Type.String(), Type.Null()]) });
const DefinitionView = Type.Object(
  {
    ritual_def_id: Type.String(),
    name: Type.String(),
    description: Type.String(),
    parts: Type.Array(Type.Object({ part_id: Type.String(), assigned_to: Type.String(), actor_type: Type.Literal('user') })),
    ordering: Type.Array(Type.String()),
    mode: literals(RITUAL_MODES),
    window_ms: Type.Integer(),
    quorum: Type.Object({ required: Type.Integer(), of: Type.Integer() }),
    checkin_interval_seconds: Type.Integer(),
    arm_ttl_seconds: Type.Integer(),
    escalation: Type.Array(Type.Object({ action: Type.Literal('notify'), after_missed_seconds: Type.Integer(), webhook_ids: Type.Array(Type.String()), pubsub_channel: Type.Union([Type.String(), Type.Null()]) })),
    on_complete: Type.Union([TargetsView, Type.Null()]),
    on_dispute: Type.Literal('none'),
    announce_channel: Type.Union([Type.String(), Type.Null()]),
    created_by: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    version: Type.Integer(),
  },
  { title: 'RitualDefinition' },
);
const PerformanceView = Type.Object({ part_id: Type.String(), performed_by: Type.String(), server_ts_ms: Type.Integer() });
const AttemptSchema = Type.Object(
  {
    attempt_id: Type.String(),
    ritual_def_id: Type.String(),
    version: Type.Integer(),
    armed_by: Type.String(),
    armed_at_ms: Type.Integer(),
    deadline_ms: Type.Integer(),
    rehearsal: Type.Boolean(),
    status: Status,
    countdown: Type.Union([Type.Object({ channel: Type.String(), seconds: Type.Integer(), announced_at_ms: Type.Integer() }), Type.Null()]),
    window_open_ms: Type.Union([Type.Integer(), Type.Null()]),
    window_close_ms: Type.Union([Type.Integer(), Type.Null()]),
    performances: Type.Array(PerformanceView),
    late_performances: Type.Array(Type.Object({ part_id: Type.String(), performed_by: Type.String(), server_ts_ms: Type.Integer(), late_by_ms: Type.Integer(), near_miss: Type.Boolean() })),
    checkins: Type.Array(Type.Object({ part_id: Type.String(), last_checkin_ms: Type.Union([Type.Integer(), Type.Null()]), checkins: Type.Integer(), steps_fired: Type.Integer() })),
    escalations: Type.Array(
      Type.Object({
        part_id: Type.String(),
        assigned_to: Type.String(),
        step: Type.Integer(),
        missed_at_ms: Type.Integer(),
        fired_at_ms: Type.Integer(),
        webhook_ids: Type.Array(Type.String()),
        pubsub_channel: Type.Union([Type.String(), Type.Null()]),
        event_id: Type.String(),
      }),
    ),
    report: Type.Unknown({ description: 'null until the attempt ends; then the AttemptReport of docs/api/rituals.md.' }),
    ended_at_ms: Type.Union([Type.Integer(), Type.Null()]),
    seq: Type.Integer(),
  },
  { title: 'RitualAttempt' },
);

const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 200 })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(literals(DEFINITION_SORT_FIELDS)),
  sort_order: Type.Optional(literals(['asc', 'desc'] as const)),
  filter: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 20 })),
});

function callerOf(principal: Principal): RitualCaller {
  return { user_id: principal.user_id, admin: principal.role === 'admin' };
}

function definitionShape(definition: RitualDefinition) {
  const { created_at_ms, updated_at_ms, ...rest } = definition;
  return { ...rest, created_at: isoTime(created_at_ms)!, updated_at: isoTime(updated_at_ms)! };
}

function pageOf(query: { page?: number; page_size?: number }) {
  const page = Math.max(1, query.page ?? 1);
  const page_size = Math.min(policy.page_size_max, query.page_size || policy.page_size_default);
  return { page, page_size };
}

/** Body may be absent on the endpoints whose fields are all optional. */
const emptyBody = async (request: { body: unknown }) => {
  if (request.body === undefined || request.body === null) request.body = {};
};

export function ritualRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const definitions = <Reply>(tenant: string, message: DefinitionsMessage) => services.actors.ask<Reply>(RITUAL_DEFINITIONS_KIND, ritualDefinitionsKey(tenant), message);
  const readDefinition = (tenant: string, ritual_def_id: string, version?: number) =>
    services.actors.ask<RitualDefinition>(RITUAL_DEFINITIONS_KIND, ritualDefinitionsKey(tenant), { op: 'get', ritual_def_id, version } satisfies DefinitionsMessage, { readOnly: true });
  const attempt = <Reply>(tenant: string, attempt_id: string, message: AttemptMessage) => services.actors.ask<Reply>(RITUAL_ATTEMPT_KIND, ritualAttemptKey(tenant, attempt_id), message);
  const readRecord = <Reply>(tenant: string, ritual_def_id: string, message: RecordMessage) =>
    services.actors.ask<Reply>(RITUAL_RECORD_KIND, ritualRecordKey(tenant, ritual_def_id), message, { readOnly: true });

  app.get<{ Querystring: Static<typeof ListQuery> }>(`${base}/definitions`, {
    onRequest: authenticate,
    schema: schema(
      "The tenant's ritual definitions (current versions). q on name and description; sort_by created_at (default, newest first), name, version; filter on name, created_by, mode, version, created_at (epoch-ms or RFC 3339).",
      { querystring: ListQuery },
      { 200: Type.Object({ definitions: Type.Array(DefinitionView), pagination: Pagination }) },
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const filters = parseListFilters(query.filter, DEFINITION_FILTER_FIELDS, DEFINITION_FILTER_OPERATORS);
    for (const filter of filters) {
      const problem = filterValueProblem(filter);
      if (problem) throw new ServiceError('BAD_REQUEST', `filter ${JSON.stringify(`${filter.field}:${filter.operator}:${filter.value}`)}: ${problem}`, { details: [{ field: 'querystring.filter', message: problem }] });
    }
    const { page, page_size } = pageOf(query);
    const sort_by = query.sort_by ?? 'created_at';
    const sort_order = query.sort_order ?? (sort_by === 'created_at' ? 'desc' : 'asc');
    const view = await services.actors.ask<DefinitionListView>(
      RITUAL_DEFINITIONS_KIND,
      ritualDefinitionsKey(principal.tenant),
      { op: 'list', query: { q: query.q, sort_by, sort_order, filters, page, page_size } } satisfies DefinitionsMessage,
      { readOnly: true },
    );
    return { definitions: view.definitions.map(definitionShape), pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total } };
  });

  app.post<{ Body: Static<typeof DefinitionBody> }>(`${base}/definitions`, {
    onRequest: authenticate,
    schema: schema(
      'Define a ritual: parts assigned to users, ordering and mode, the window, the quorum, check-ins and escalation, on_complete notifications. Version 1.',
      { body: DefinitionBody },
      { 201: Type.Object({ created_at: Type.String({ format: 'date-time' }), name: Type.String(), ritual_def_id: Type.String(), version: Type.Integer() }) },
      [409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const input = checkDefinition(request.body);
    const created = await definitions<RitualDefinition>(principal.tenant, { op: 'create', caller: callerOf(principal), input });
    return reply.code(201).send({ created_at: isoTime(created.created_at_ms)!, name: created.name, ritual_def_id: created.ritual_def_id, version: created.version });
  });

  app.get<{ Params: Static<typeof DefIdParams>; Querystring: { version?: number } }>(`${base}/definitions/:def_id`, {
    onRequest: authenticate,
    schema: schema(
      'A ritual definition: the current version, or a kept earlier one with ?version=.',
      { params: DefIdParams, querystring: Type.Object({ version: Type.Optional(Type.Integer({ minimum: 1 })) }) },
      { 200: DefinitionView },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return definitionShape(await readDefinition(principal.tenant, request.params.def_id, request.query.version));
  });

  app.put<{ Params: Static<typeof DefIdParams>; Body: Static<typeof DefinitionBody> }>(`${base}/definitions/:def_id`, {
    onRequest: authenticate,
    schema: schema(
      "Replace a ritual definition (its creator or a platform admin): a new version (version + 1). Attempts armed before keep the version they armed.",
      { params: DefIdParams, body: DefinitionBody },
      { 200: DefinitionView },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const input = checkDefinition(request.body);
    const updated = await definitions<RitualDefinition>(principal.tenant, { op: 'update', caller: callerOf(principal), ritual_def_id: request.params.def_id, input });
    return definitionShape(updated);
  });

  app.post<{ Params: Static<typeof DefIdParams>; Body: { rehearsal?: boolean; version?: number } }>(`${base}/:def_id/arm`, {
    onRequest: authenticate,
    preValidation: emptyBody,
    schema: schema(
      "Arm an attempt (the ritual's creator, an assignee, or a platform admin): deadline_ms = armed_at_ms + arm_ttl_seconds. A rehearsal is kept in the history but not in the analytics.",
      {
        params: DefIdParams,
        body: Type.Object({
          rehearsal: Type.Optional(Type.Boolean({ description: 'Default false.' })),
          version: Type.Optional(Type.Integer({ minimum: 1, description: 'A kept version to arm; default the current one.' })),
        }),
      },
      {
        201: Type.Object({
          armed_at_ms: Type.Integer(),
          attempt_id: Type.String(),
          deadline_ms: Type.Integer(),
          rehearsal: Type.Boolean(),
          ritual_def_id: Type.String(),
          status: Status,
          version: Type.Integer(),
        }),
      },
      [403, 404],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const definition = await readDefinition(principal.tenant, request.params.def_id, request.body.version);
    const caller = callerOf(principal);
    if (!caller.admin && definition.created_by !== caller.user_id && !definition.parts.some((part) => part.assigned_to === caller.user_id)) {
      throw new ServiceError('forbidden', "Only the ritual's creator, an assignee of one of its parts or a platform admin may arm it.");
    }
    const attempt_id = randomId('ratt_');
    const view = await attempt<AttemptView>(principal.tenant, attempt_id, { op: 'arm', tenant: principal.tenant, caller, definition, rehearsal: request.body.rehearsal ?? false });
    return reply.code(201).send({
      armed_at_ms: view.armed_at_ms,
      attempt_id: view.attempt_id,
      deadline_ms: view.deadline_ms,
      rehearsal: view.rehearsal,
      ritual_def_id: view.ritual_def_id,
      status: view.status,
      version: view.version,
    });
  });

  app.get<{ Params: Static<typeof DefIdParams>; Querystring: { page?: number; page_size?: number; status?: AttemptStatus } }>(`${base}/:def_id/history`, {
    onRequest: authenticate,
    schema: schema(
      "The ritual's attempts, newest armed first (rehearsals included, marked); status filters.",
      { params: DefIdParams, querystring: Type.Object({ page: Type.Optional(Type.Integer({ minimum: 0 })), page_size: Type.Optional(Type.Integer({ minimum: 0 })), status: Type.Optional(Status) }) },
      { 200: Type.Object({ attempts: Type.Array(AttemptSchema), pagination: Pagination }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await readDefinition(principal.tenant, request.params.def_id);
    const { page, page_size } = pageOf(request.query);
    const view = await readRecord<HistoryView>(principal.tenant, request.params.def_id, { op: 'history', status: request.query.status, page, page_size });
    return { attempts: view.attempts, pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total } };
  });

  app.get<{ Params: Static<typeof DefIdParams>; Querystring: { sample?: number } }>(`${base}/:def_id/analytics`, {
    onRequest: authenticate,
    schema: schema(
      `Success rate, median spread and lateness leaders over non-rehearsal terminal attempts: all of them, or the most recent \`sample\` (at most ${policy.recent_outcomes_kept} are kept for sampling and for the median).`,
      { params: DefIdParams, querystring: Type.Object({ sample: Type.Optional(Type.Integer({ minimum: 0, description: `The most recent terminal attempts to sample (0..; more than ${policy.recent_outcomes_kept} means all kept).` })) }) },
      {
        200: Type.Object({
          ritual_def_id: Type.String(),
          total_attempts: Type.Integer(),
          completed: Type.Integer(),
          failed: Type.Integer(),
          success_rate: Type.Number(),
          median_spread_ms: Type.Integer(),
          lateness_leaders: Type.Array(Type.Object({ part_id: Type.String(), late_count: Type.Integer(), near_miss_count: Type.Integer(), total_late_ms: Type.Integer() })),
          sampled: Type.Integer(),
        }),
      },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await readDefinition(principal.tenant, request.params.def_id);
    const sample = request.query.sample === undefined ? undefined : Math.min(request.query.sample, policy.recent_outcomes_kept);
    const view = await readRecord<AnalyticsView>(principal.tenant, request.params.def_id, { op: 'analytics', sample });
    return { ritual_def_id: request.params.def_id, ...view };
  });

  app.get<{ Params: Static<typeof AttemptParams> }>(`${base}/attempts/:attempt_id`, {
    onRequest: authenticate,
    schema: schema('An attempt, as of now (a due window close, deadline or escalation shows as the alarm will leave it).', { params: AttemptParams }, { 200: AttemptSchema }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return services.actors.ask<AttemptView>(RITUAL_ATTEMPT_KIND, ritualAttemptKey(principal.tenant, request.params.attempt_id), { op: 'get' } satisfies AttemptMessage, { readOnly: true });
  });

  const PartBody = Type.Object({ part_id: PartId });

  app.post<{ Params: Static<typeof AttemptParams>; Body: Static<typeof PartBody> }>(`${base}/attempts/:attempt_id/checkin`, {
    onRequest: authenticate,
    schema: schema(
      "Check in for a part (its assignee only): next_deadline_ms is when the next check-in is due (the attempt's deadline if the ritual has no check-in interval). A check-in resets the part's escalation.",
      { params: AttemptParams, body: PartBody },
      { 200: Type.Object({ attempt_id: Type.String(), next_deadline_ms: Type.Integer(), part_id: Type.String(), status: Status }) },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return attempt<CheckinReply>(principal.tenant, request.params.attempt_id, { op: 'checkin', caller: callerOf(principal), part_id: request.body.part_id });
  });

  app.post<{ Params: Static<typeof AttemptParams>; Body: { seconds?: number; channel?: string } }>(`${base}/attempts/:attempt_id/countdown`, {
    onRequest: authenticate,
    preValidation: emptyBody,
    schema: schema(
      "Announce the start: publishes ritual.countdown on the channel (a message-queue topic of the tenant; default the ritual's announce_channel) and opens the window at window_open_ms = now + seconds. From armed only.",
      {
        params: AttemptParams,
        body: Type.Object({
          seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.countdown_seconds_max, description: `Default ${policy.countdown_seconds_default}.` })),
          channel: Type.Optional(Channel),
        }),
      },
      {
        200: Type.Object({ attempt_id: Type.String(), channel: Type.String(), seconds: Type.Integer(), window_open_ms: Type.Integer(), window_close_ms: Type.Integer(), status: Status }),
      },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return attempt<CountdownReply>(principal.tenant, request.params.attempt_id, {
      op: 'countdown',
      caller: callerOf(principal),
      seconds: request.body.seconds ?? policy.countdown_seconds_default,
      channel: request.body.channel ?? null,
    });
  });

  app.post<{ Params: Static<typeof AttemptParams>; Body: Static<typeof PartBody> }>(`${base}/attempts/:attempt_id/perform`, {
    onRequest: authenticate,
    schema: schema(
      "Perform a part (its assignee only; anyone else: 403 ritual_not_assignee, nothing changed). The server's timestamp counts. The attempt completes when the quorum has performed within the window in order; report is set once it ends.",
      { params: AttemptParams, body: PartBody },
      {
        200: Type.Object({
          attempt_id: Type.String(),
          part_id: Type.String(),
          server_ts_ms: Type.Integer(),
          performed: Type.Integer(),
          required: Type.Integer(),
          late_by_ms: Type.Union([Type.Integer(), Type.Null()]),
          report: Type.Unknown(),
          status: Status,
        }),
      },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return attempt<PerformReply>(principal.tenant, request.params.attempt_id, { op: 'perform', caller: callerOf(principal), part_id: request.body.part_id });
  });
}
