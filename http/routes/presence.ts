import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { isServiceError, randomId, ServiceError } from '../../runtime/index.js';
import {
  activities,
  cognitiveStates,
  geoPrecisions,
  overflowPolicies,
  PRESENCE_CONTEXT_KIND,
  PRESENCE_DIRECTORY_KIND,
  presenceDirectoryKey,
  PRESENCE_MULTIPLEX_KIND,
  PRESENCE_SUBJECT_KIND,
  presenceContextKey,
  presenceLimits,
  presenceMultiplexKey,
  presenceSubjectKey,
  RADIUS_METERS_MAX,
  subjectKinds,
  type ContextView,
  type CountReply,
  type HeartbeatInput,
  type HeartbeatReply,
  type LeaveReply,
  type ListReply,
  type MultiplexItem,
  type MultiplexMessage,
  type MultiplexReply,
  type NearbyReply,
  type PresenceContextConfig,
  type PresenceMessage,
  type SessionView,
  type StateReply,
  type SubjectIndexState,
  type SubjectMessage,
  type SubjectPresenceReply,
  type SweepReply,
  type PresenceDirectoryView,
} from '../../actors/presence/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bodyPartCheck } from '../plugins/validation.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { requireAdmin } from './admin.js';

/** Presence (spec doc 1 §2 Presence, §3 Presence session, §4.9; docs/api/presence.md). */

const enumOf = <T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });

/** Context ids appear in paths; these first segments are taken by other presence routes. */
const RESERVED_CONTEXT_IDS = new Set(['contexts', 'subjects', 'multiplex']);
const CONTEXT_ID_PATTERN = '^[A-Za-z0-9._:@~-]+$';
const CONTEXT_ID = Type.String({ minLength: 1, maxLength: 128, pattern: CONTEXT_ID_PATTERN });
const TEXT = Type.String({ minLength: 1, maxLength: 256 });
const SECONDS = Type.Integer({ minimum: 1, maximum: 86_400 });
const MULTIPLEX_ITEMS_MAX = presenceLimits.multiplex_items_max;

const CognitiveState = enumOf(cognitiveStates);
const ActivityValue = enumOf(activities);
const SubjectKind = enumOf(subjectKinds);
const Subject = Type.Object({ id: TEXT, kind: SubjectKind });
const GeoInput = Type.Object({ lat: Type.Number({ minimum: -90, maximum: 90 }), lon: Type.Number({ minimum: -180, maximum: 180 }) });

const ContextParams = Type.Object({ context_id: CONTEXT_ID });
const SubjectParams = Type.Object({ subject_id: TEXT });

const HeartbeatSettingsInput = Type.Object({
  ttl_seconds: Type.Optional(SECONDS),
  idle_after_seconds: Type.Optional(SECONDS),
  stale_after_seconds: Type.Optional(SECONDS),
});
const CapacityInput = Type.Object({
  max_active: Type.Optional(Type.Integer({ minimum: 1, maximum: presenceLimits.sessions_per_context_max })),
  soft_limit: Type.Optional(Type.Integer({ minimum: 1, maximum: presenceLimits.sessions_per_context_max })),
  overflow_policy: Type.Optional(enumOf(overflowPolicies)),
});
const GeoSettingsInput = Type.Object({
  enabled: Type.Optional(Type.Boolean()),
  precision: Type.Optional(enumOf(Object.keys(geoPrecisions) as (keyof typeof geoPrecisions)[])),
});
const MetadataSchemaInput = Type.Object({
  allowed_keys: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: presenceLimits.allowed_keys_max })),
});
const ContextSettingsFields = {
  resource_id: Type.Optional(TEXT),
  heartbeat: Type.Optional(HeartbeatSettingsInput),
  capacity: Type.Optional(CapacityInput),
  geo: Type.Optional(GeoSettingsInput),
  metadata_schema: Type.Optional(MetadataSchemaInput),
};
const CreateContextBody = Type.Object({ id: CONTEXT_ID, kind: Type.String({ minLength: 1, maxLength: 64 }), ...ContextSettingsFields });
const UpdateContextBody = Type.Object({ kind: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })), ...ContextSettingsFields });

const HeartbeatBody = Type.Object({
  subject: Type.Optional(Subject),
  session_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  device_id: Type.Optional(TEXT),
  connection_id: Type.Optional(TEXT),
  state: Type.Optional(CognitiveState),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Keys limited to the context\'s metadata_schema.allowed_keys (when not empty); at most 4 KiB.' })),
  geo: Type.Optional(GeoInput),
  observer: Type.Optional(Type.Boolean()),
});
/** Multiplex items are validated one by one (strict types, as route bodies are), so one bad item fails alone. */
const checkHeartbeat = bodyPartCheck(HeartbeatBody);
const checkContextId = bodyPartCheck(CONTEXT_ID);

const StateBody = Type.Object({ session_id: Type.String({ minLength: 1, maxLength: 64 }), state: CognitiveState });
const LeaveBody = Type.Object({
  session_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  subject_id: Type.Optional(TEXT),
});
const MultiplexBody = Type.Object({
  items: Type.Array(Type.Object({ context_id: Type.String(), heartbeat: Type.Unknown() }), { minItems: 1, maxItems: MULTIPLEX_ITEMS_MAX }),
});

const ListQuery = Type.Object({
  state: Type.Optional(CognitiveState),
  activity: Type.Optional(ActivityValue),
  kind: Type.Optional(SubjectKind),
  aggregate_by_subject: Type.Optional(Type.Boolean()),
  limit: Type.Optional(Type.Integer({ minimum: 0, description: `0 or absent: ${presenceLimits.list_limit_default}; capped at ${presenceLimits.list_limit_max}.` })),
  offset: Type.Optional(Type.Integer({ minimum: 0 })),
});
const NearbyQuery = Type.Object({
  lat: Type.Number({ minimum: -90, maximum: 90 }),
  lon: Type.Number({ minimum: -180, maximum: 180 }),
  radius_meters: Type.Number({ minimum: 0, maximum: Math.floor(RADIUS_METERS_MAX) }),
  limit: Type.Optional(Type.Integer({ minimum: 0, description: `0 or absent: ${presenceLimits.nearby_limit_default}; capped at ${presenceLimits.nearby_limit_max}.` })),
});

// ---- replies ----

const Timestamp = Type.String({ format: 'date-time' });
const PresenceContext = Type.Object({
  id: Type.String(),
  kind: Type.String(),
  resource_id: Type.String(),
  heartbeat: Type.Object({ ttl_seconds: Type.Integer(), idle_after_seconds: Type.Integer(), stale_after_seconds: Type.Integer() }),
  capacity: Type.Object({ max_active: Type.Integer(), soft_limit: Type.Integer(), overflow_policy: Type.String() }),
  geo: Type.Object({ enabled: Type.Boolean(), precision: Type.String() }),
  metadata_schema: Type.Object({ allowed_keys: Type.Array(Type.String()) }),
  created_at: Timestamp,
  updated_at: Timestamp,
  version: Type.Integer(),
}, { title: 'PresenceContext' });
const Occupancy = Type.Object({
  active: Type.Integer(),
  idle: Type.Integer(),
  stale: Type.Integer(),
  observers: Type.Integer(),
  total: Type.Integer(),
  available_agents: Type.Integer(),
  capacity_remaining: Type.Integer(),
  occupancy_state: Type.String({ description: 'open, busy (at or over soft_limit) or full (at max_active).' }),
  max_active: Type.Integer(),
  soft_limit: Type.Integer(),
}, { title: 'Occupancy' });
const ContextWithOccupancy = Type.Object({ context: PresenceContext, occupancy: Occupancy });
const SubjectOut = Type.Object({ id: Type.String(), kind: Type.String() });
const GeoOut = Type.Object({ lat: Type.Number(), lon: Type.Number() });
const PresenceSession = Type.Object({
  session_id: Type.String(),
  context_id: Type.String(),
  subject: SubjectOut,
  device_id: Type.Union([Type.String(), Type.Null()]),
  connection_id: Type.Union([Type.String(), Type.Null()]),
  state: Type.String(),
  activity: Type.String(),
  observer: Type.Boolean(),
  metadata: Type.Unknown({ description: 'map<str, opaque>' }),
  geo: Type.Union([GeoOut, Type.Null()]),
  opened_at: Timestamp,
  last_heartbeat_at: Timestamp,
  expires_at: Timestamp,
  session_count: Type.Optional(Type.Integer({ description: 'aggregate_by_subject only: the subject\'s matching sessions.' })),
}, { title: 'PresenceSession' });
const HeartbeatResult = Type.Object({
  session_id: Type.String(),
  context_id: Type.String(),
  opened: Type.Boolean({ description: 'True when this heartbeat opened the session.' }),
  admission: Type.String({ description: 'admitted, or downgraded (overflow_policy observe turned it into an observer).' }),
  activity: Type.String(),
  state: Type.String(),
  observer: Type.Boolean(),
  last_heartbeat_at: Timestamp,
  expires_at: Timestamp,
  occupancy: Occupancy,
}, { title: 'HeartbeatResult' });

function contextShape(config: PresenceContextConfig) {
  return {
    id: config.id,
    kind: config.kind,
    resource_id: config.resource_id,
    heartbeat: config.heartbeat,
    capacity: config.capacity,
    geo: config.geo,
    metadata_schema: config.metadata_schema,
    created_at: isoTime(config.created_ms)!,
    updated_at: isoTime(config.updated_ms)!,
    version: config.version,
  };
}

function sessionShape(context_id: string, view: SessionView) {
  return {
    session_id: view.session_id,
    context_id,
    subject: view.subject,
    device_id: view.device_id,
    connection_id: view.connection_id,
    state: view.state,
    activity: view.activity,
    observer: view.observer,
    metadata: view.metadata,
    geo: view.geo,
    opened_at: isoTime(view.opened_ms)!,
    last_heartbeat_at: isoTime(view.last_heartbeat_ms)!,
    expires_at: isoTime(view.expires_ms)!,
    ...(view.session_count !== undefined ? { session_count: view.session_count } : {}),
  };
}

function heartbeatShape(context_id: string, reply: HeartbeatReply) {
  return {
    session_id: reply.session_id,
    context_id,
    opened: reply.opened,
    admission: reply.admission,
    activity: reply.activity,
    state: reply.state,
    observer: reply.observer,
    last_heartbeat_at: isoTime(reply.last_heartbeat_ms)!,
    expires_at: isoTime(reply.expires_ms)!,
    occupancy: reply.occupancy,
  };
}

function heartbeatInput(body: Static<typeof HeartbeatBody>): HeartbeatInput {
  return {
    subject: body.subject,
    session_id: body.session_id,
    device_id: body.device_id,
    connection_id: body.connection_id,
    state: body.state,
    metadata: body.metadata,
    geo: body.geo,
    observer: body.observer,
  };
}

type ContextParamsT = Static<typeof ContextParams>;

/** The administrators' list (GET /admin/presence/contexts): a tenant is a user id or an organization id. */
const AdminContextsQuery = Type.Object({
  tenant: Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f\\u007f]+$', description: 'The tenant: a user id, or an organization id.' }),
  page: Type.Optional(Type.Integer({ minimum: 0, description: '1-based; 0 reads as 1.' })),
  page_size: Type.Optional(Type.Integer({ minimum: 0, description: 'Default 20, capped at 100.' })),
});

export function presenceRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const askContext = <Reply>(tenant: string, context_id: string, message: PresenceMessage) =>
    services.actors.ask<Reply>(PRESENCE_CONTEXT_KIND, presenceContextKey(tenant, context_id), message);
  const route = (summary: string, schema: Record<string, TSchema>, responses: Record<number, TSchema>) => ({
    onRequest: authenticate,
    schema: { tags: ['presence'], summary, security: bearerSecurity, ...schema, response: responses },
  });

  app.post<{ Body: Static<typeof CreateContextBody> }>('/api/v1/presence/contexts', route(
    'Create a presence context. An existing id: 409 presence_context_exists.',
    { body: CreateContextBody },
    { 201: PresenceContext, ...errorResponses(...bearerErrors, 409) },
  ), async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    if (RESERVED_CONTEXT_IDS.has(body.id)) {
      throw new ServiceError('BAD_REQUEST', `body.id "${body.id}" is reserved`, { details: [{ field: 'body.id', message: `must not be one of ${[...RESERVED_CONTEXT_IDS].join(', ')}` }] });
    }
    const view = await askContext<ContextView>(principal.tenant, body.id, {
      op: 'create',
      context: {
        id: body.id,
        kind: body.kind,
        resource_id: body.resource_id,
        heartbeat: body.heartbeat,
        capacity: body.capacity,
        geo: body.geo,
        metadata_schema: body.metadata_schema,
      },
    });
    return reply.code(201).send(contextShape(view.context));
  });

  app.get<{ Querystring: Static<typeof AdminContextsQuery> }>('/admin/presence/contexts', {
    ...route("Admin: a tenant's contexts in id order, each with its occupancy now.", { querystring: AdminContextsQuery }, {
      200: Type.Object({ pagination: Pagination, contexts: Type.Array(ContextWithOccupancy) }),
      ...errorResponses(...bearerErrors, 403),
    }),
  }, async (request) => {
    requireAdmin(request);
    const { tenant } = request.query;
    const page = Math.max(1, request.query.page ?? 1);
    const page_size = Math.min(100, request.query.page_size || 20);
    const offset = (page - 1) * page_size;
    const listed = await services.actors.ask<PresenceDirectoryView>(PRESENCE_DIRECTORY_KIND, presenceDirectoryKey(tenant), { op: 'list', offset, limit: page_size }, { readOnly: true });
    // A scatter-gather of reads: each context on the page answers its settings and occupancy.
    const views = await Promise.all(
      listed.context_ids.map((context_id) =>
        services.actors.ask<ContextView>(PRESENCE_CONTEXT_KIND, presenceContextKey(tenant, context_id), { op: 'get' }, { readOnly: true }).catch((error: unknown) => {
          if (isServiceError(error) && error.code === 'not_found') return null;
          throw error;
        }),
      ),
    );
    return {
      pagination: { page, page_size, total: listed.total, has_more: offset + page_size < listed.total },
      contexts: views.filter((view) => view !== null).map((view) => ({ context: contextShape(view.context), occupancy: view.occupancy })),
    };
  });

  app.get<{ Params: ContextParamsT }>('/api/v1/presence/contexts/:context_id', route(
    'A context and its occupancy now.',
    { params: ContextParams },
    { 200: ContextWithOccupancy, ...errorResponses(...bearerErrors, 404) },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const view = await askContext<ContextView>(principal.tenant, request.params.context_id, { op: 'get' });
    return { context: contextShape(view.context), occupancy: view.occupancy };
  });

  app.patch<{ Params: ContextParamsT; Body: Static<typeof UpdateContextBody> }>('/api/v1/presence/contexts/:context_id', route(
    'Change a context\'s settings (nested objects merge). version increases when anything changes.',
    { params: ContextParams, body: UpdateContextBody },
    { 200: ContextWithOccupancy, ...errorResponses(...bearerErrors, 404) },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const view = await askContext<ContextView>(principal.tenant, request.params.context_id, {
      op: 'update',
      changes: {
        kind: body.kind,
        resource_id: body.resource_id,
        heartbeat: body.heartbeat,
        capacity: body.capacity,
        geo: body.geo,
        metadata_schema: body.metadata_schema,
      },
    });
    return { context: contextShape(view.context), occupancy: view.occupancy };
  });

  const MultiplexResult = Type.Object({
    context_id: Type.String(),
    success: Type.Boolean(),
    heartbeat: Type.Union([HeartbeatResult, Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()], { description: 'The error code of a failed item.' }),
    message: Type.Union([Type.String(), Type.Null()]),
    status: Type.Integer({ description: 'The HTTP status the item would have had on its own.' }),
  });
  app.post<{ Body: Static<typeof MultiplexBody> }>('/api/v1/presence/multiplex', route(
    `Heartbeats to many contexts at once (at most ${MULTIPLEX_ITEMS_MAX}); each item runs in its own context, in parallel, and fails alone.`,
    { body: MultiplexBody },
    { 200: Type.Object({ results: Type.Array(MultiplexResult), succeeded: Type.Integer(), failed: Type.Integer() }), ...errorResponses(...bearerErrors) },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const failed = (context_id: string, error: ServiceError): MultiplexItem => ({
      context_id,
      result: { success: false, error: error.code, message: error.message, status: error.statusCode },
    });
    // Invalid items fail here; the flow applies the others, each in its own context, and answers when all have.
    const items = request.body.items.map((item, index): MultiplexItem => {
      const context_id = item.context_id;
      if (checkContextId(context_id, `body.items.${index}.context_id`)) {
        return failed(context_id, new ServiceError('BAD_REQUEST', `body.items.${index}.context_id is not a valid context id`, {
          details: [{ field: `body.items.${index}.context_id`, message: 'must be 1-128 characters of A-Z a-z 0-9 . _ : @ ~ -' }],
        }));
      }
      const invalid = checkHeartbeat(item.heartbeat, `body.items.${index}.heartbeat`);
      if (invalid) return failed(context_id, invalid);
      return { context_id, heartbeat: heartbeatInput(item.heartbeat as Static<typeof HeartbeatBody>) };
    });
    const start = { op: 'start', items } satisfies MultiplexMessage;
    const reply = await services.actors.ask<MultiplexReply>(PRESENCE_MULTIPLEX_KIND, presenceMultiplexKey(principal.tenant, randomId('mx_')), start);
    const results = reply.results.map((result, index) => {
      const context_id = items[index].context_id;
      return result.success
        ? { context_id, success: true, heartbeat: heartbeatShape(context_id, result.heartbeat), error: null, message: null, status: 200 }
        : { context_id, success: false, heartbeat: null, error: result.error, message: result.message, status: result.status };
    });
    const succeeded = results.filter((result) => result.success).length;
    return { results, succeeded, failed: results.length - succeeded };
  });

  const LastSeenContext = Type.Object({
    context_id: Type.String(),
    context_kind: Type.String(),
    last_seen_at: Timestamp,
    last_state: Type.String(),
    online: Type.Boolean({ description: 'The subject has a live session in the context now.' }),
  });
  app.get<{ Params: Static<typeof SubjectParams> }>('/api/v1/presence/subjects/:subject_id/last-seen', route(
    'When a subject was last seen, overall and per context (most recent first). Never seen: 404.',
    { params: SubjectParams },
    {
      200: Type.Object({
        subject_id: Type.String(),
        subject_kind: Type.Union([Type.String(), Type.Null()]),
        last_seen_at: Timestamp,
        online: Type.Boolean(),
        contexts: Type.Array(LastSeenContext),
      }),
      ...errorResponses(...bearerErrors, 404),
    },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const subject_id = request.params.subject_id;
    // A read only (a scatter-gather): the subject index, then the contexts where
    // the subject is online, since the index lags a live session by up to 30 s.
    const get = { op: 'get' } satisfies SubjectMessage;
    const index = await services.actors.ask<SubjectIndexState>(PRESENCE_SUBJECT_KIND, presenceSubjectKey(principal.tenant, subject_id), get, { readOnly: true });
    const entries = Object.entries(index.contexts);
    if (entries.length === 0) throw new ServiceError('not_found', 'This subject has never been seen in a presence context.');
    const contexts = await Promise.all(entries.map(async ([context_id, entry]) => {
      let { last_seen_ms, last_state, online } = entry;
      if (online) {
        const presence = { op: 'subject_presence', subject_id } satisfies PresenceMessage;
        const live = await services.actors.ask<SubjectPresenceReply>(PRESENCE_CONTEXT_KIND, presenceContextKey(principal.tenant, context_id), presence, { readOnly: true });
        online = live.online;
        if (live.last_seen_ms !== null && live.last_seen_ms >= last_seen_ms) {
          last_seen_ms = live.last_seen_ms;
          last_state = live.last_state!;
        }
      }
      return { context_id, context_kind: entry.context_kind, last_seen_ms, last_state, online };
    }));
    contexts.sort((a, b) => b.last_seen_ms - a.last_seen_ms || (a.context_id < b.context_id ? -1 : 1));
    return {
      subject_id,
      subject_kind: index.subject_kind,
      last_seen_at: isoTime(contexts[0].last_seen_ms)!,
      online: contexts.some((c) => c.online),
      contexts: contexts.map((c) => ({ context_id: c.context_id, context_kind: c.context_kind, last_seen_at: isoTime(c.last_seen_ms)!, last_state: c.last_state, online: c.online })),
    };
  });

  app.get<{ Params: ContextParamsT }>('/api/v1/presence/:context_id/count', route(
    'Occupancy and participants by cognitive state.',
    { params: ContextParams },
    {
      200: Type.Object({
        context_id: Type.String(),
        by_state: Type.Object({ available: Type.Integer(), thinking: Type.Integer(), busy: Type.Integer(), offline: Type.Integer() }),
        occupancy: Occupancy,
      }),
      ...errorResponses(...bearerErrors, 404),
    },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const view = await askContext<CountReply>(principal.tenant, context_id, { op: 'count' });
    return { context_id, by_state: view.by_state, occupancy: view.occupancy };
  });

  app.post<{ Params: ContextParamsT; Body: Static<typeof HeartbeatBody> }>('/api/v1/presence/:context_id/heartbeat', route(
    'Open (no session_id; subject required) or refresh a session.',
    { params: ContextParams, body: HeartbeatBody },
    { 200: HeartbeatResult, ...errorResponses(...bearerErrors, 404, 409) },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const reply = await askContext<HeartbeatReply>(principal.tenant, context_id, { op: 'heartbeat', heartbeat: heartbeatInput(request.body) });
    return heartbeatShape(context_id, reply);
  });

  app.post<{ Params: ContextParamsT; Body: Static<typeof LeaveBody> }>('/api/v1/presence/:context_id/leave', route(
    'End one session (session_id) or every session of a subject (subject_id). Exactly one of the two.',
    { params: ContextParams, body: LeaveBody },
    { 200: Type.Object({ context_id: Type.String(), message: Type.String(), removed_sessions: Type.Integer() }), ...errorResponses(...bearerErrors, 404) },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const { session_id, subject_id } = request.body;
    if ((session_id === undefined) === (subject_id === undefined)) {
      throw new ServiceError('BAD_REQUEST', 'body must have exactly one of session_id and subject_id', {
        details: [{ field: 'body', message: 'must have exactly one of session_id and subject_id' }],
      });
    }
    const reply = await askContext<LeaveReply>(principal.tenant, context_id, { op: 'leave', session_id, subject_id });
    const n = reply.removed_sessions;
    return { context_id, removed_sessions: n, message: `${n} session${n === 1 ? '' : 's'} removed` };
  });

  app.get<{ Params: ContextParamsT; Querystring: Static<typeof ListQuery> }>('/api/v1/presence/:context_id/list', route(
    'Live sessions in opening order, filtered; count is the number returned, total the number matched.',
    { params: ContextParams, querystring: ListQuery },
    {
      200: Type.Object({ context_id: Type.String(), count: Type.Integer(), total: Type.Integer(), sessions: Type.Array(PresenceSession) }),
      ...errorResponses(...bearerErrors, 404),
    },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const reply = await askContext<ListReply>(principal.tenant, context_id, { op: 'list', filters: request.query });
    return { context_id, count: reply.sessions.length, total: reply.total, sessions: reply.sessions.map((s) => sessionShape(context_id, s)) };
  });

  app.get<{ Params: ContextParamsT; Querystring: Static<typeof NearbyQuery> }>('/api/v1/presence/:context_id/nearby', route(
    'Live sessions within radius_meters (great-circle distance), nearest first. Needs geo enabled.',
    { params: ContextParams, querystring: NearbyQuery },
    {
      200: Type.Object({
        context_id: Type.String(),
        count: Type.Integer(),
        total: Type.Integer(),
        sessions: Type.Array(Type.Object({
          session_id: Type.String(),
          subject: SubjectOut,
          geo: GeoOut,
          distance_meters: Type.Number(),
          observer: Type.Boolean(),
          activity: Type.String(),
          state: Type.String(),
        })),
      }),
      ...errorResponses(...bearerErrors, 404),
    },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const { lat, lon, radius_meters, limit } = request.query;
    const reply = await askContext<NearbyReply>(principal.tenant, context_id, { op: 'nearby', lat, lon, radius_meters, limit });
    return { context_id, count: reply.sessions.length, total: reply.total, sessions: reply.sessions };
  });

  app.post<{ Params: ContextParamsT; Body: Static<typeof StateBody> }>('/api/v1/presence/:context_id/state', route(
    'Set a session\'s cognitive state (also refreshes it like a heartbeat).',
    { params: ContextParams, body: StateBody },
    {
      200: Type.Object({ context_id: Type.String(), session_id: Type.String(), state: Type.String(), previous_state: Type.String() }),
      ...errorResponses(...bearerErrors, 404),
    },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const reply = await askContext<StateReply>(principal.tenant, context_id, { op: 'state', session_id: request.body.session_id, state: request.body.state });
    return { context_id, session_id: reply.session_id, state: reply.state, previous_state: reply.previous_state };
  });

  app.post<{ Params: ContextParamsT }>('/api/v1/presence/:context_id/sweep', route(
    'Apply every activity transition due now (the durable alarm does the same on its own) and report them.',
    { params: ContextParams },
    {
      200: Type.Object({
        context_id: Type.String(),
        reconciled: Type.Integer(),
        transitions: Type.Record(Type.String(), Type.String(), { description: 'session_id -> new activity (idle or stale).' }),
        expired: Type.Array(Type.String(), { description: 'Sessions removed because their ttl passed.' }),
        remaining: Type.Boolean({ description: 'More transitions were due than one sweep applies; the alarm continues.' }),
      }),
      ...errorResponses(...bearerErrors, 404),
    },
  ), async (request) => {
    const principal = requirePrincipal(request);
    const { context_id } = request.params;
    const reply = await askContext<SweepReply>(principal.tenant, context_id, { op: 'sweep' });
    return { context_id, reconciled: reply.reconciled, transitions: reply.transitions, expired: reply.expired, remaining: reply.remaining };
  });
}
