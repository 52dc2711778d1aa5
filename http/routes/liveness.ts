import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { isServiceError, ServiceError, serialisedBytes } from '../../runtime/index.js';
import {
  aggregations,
  LIVENESS_INDEX_KIND,
  LIVENESS_KIND,
  livenessActorKey,
  livenessIndexKey,
  livenessPolicy as policy,
  parseWindow,
  seriesNames,
  type Aggregation,
  type AggregationView,
  type AnomaliesView,
  type BriefView,
  type HeartbeatAck,
  type HistoryView,
  type IndexListView,
  type IndexQuery,
  type LatencyView,
  type LivenessMessage,
  type SeriesName,
  type StatusView,
  type UptimeView,
} from '../../actors/liveness/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses } from '../schemas.js';
import type { AppServices } from '../services.js';
import { requireAdmin } from './admin.js';

/** Liveness: heartbeats, status, series, uptime (spec doc 1 §4.8; docs/api/liveness.md). */

const DAY_S = 86_400;
const ENTITY_ID = Type.String({
  minLength: 1,
  maxLength: policy.entity_id_length_max,
  pattern: '^[^\\u0000-\\u001f\\u007f]+$',
  description: 'Any string without control characters, up to 256 characters.',
});
const Params = Type.Object({ entity_id: ENTITY_ID });
type EntityParams = Static<typeof Params>;

const stringEnum = <T extends string>(values: readonly T[], options: { default?: T; description?: string } = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });
const NullableInteger = Type.Union([Type.Integer(), Type.Null()]);
const NullableNumber = Type.Union([Type.Number(), Type.Null()]);
const Labels = Type.Record(Type.String(), Type.String({ maxLength: policy.label_value_length_max }), {
  maxProperties: policy.labels_max,
  propertyNames: { minLength: 1, maxLength: policy.label_key_length_max },
  description: 'Up to 64 string labels (key up to 128, value up to 256 characters).',
});
const Metadata = Type.Object({}, { additionalProperties: true, description: 'Any JSON object, up to 16 KiB serialised.' });

const HeartbeatBody = Type.Object({
  entity_id: ENTITY_ID,
  client_timestamp_ms: Type.Optional(Type.Integer({ minimum: 0, description: 'The client clock when it sent the heartbeat, epoch-ms.' })),
  metadata: Type.Optional(Metadata),
  labels: Type.Optional(Labels),
});

const HeartbeatAckSchema = Type.Object({
  alive: Type.Boolean(),
  entity_id: Type.String(),
  client_timestamp_ms: NullableInteger,
  network_delay_ms: Type.Union([Type.Integer(), Type.Null()], { description: 'server_timestamp_ms - client_timestamp_ms (null without a client timestamp).' }),
  server_timestamp_ms: Type.Integer(),
});

const UptimeFiguresSchema = Type.Object({
  percentage: Type.Number(),
  outages: Type.Integer(),
  downtime_seconds: Type.Integer(),
});

const StatusSchema = Type.Object({
  alive: Type.Boolean(),
  entity_id: Type.String(),
  labels: Type.Record(Type.String(), Type.String()),
  metadata: Metadata,
  last_seen_server_ms: Type.Integer(),
  last_seen_client_ms: NullableInteger,
  latency_ms: NullableInteger,
  network_delay_ms: NullableInteger,
  summary: Type.Object(
    {
      status: stringEnum(['alive', 'dead'] as const),
      status_since_ms: Type.Integer(),
      first_seen_ms: Type.Integer(),
      grace_ms: Type.Integer(),
      dead_after_ms: Type.Integer(),
      heartbeat_count: Type.Integer(),
      interval_avg_ms: NullableNumber,
      uptime_24h: UptimeFiguresSchema,
      latency_recent: Type.Object({
        samples: Type.Integer(),
        avg_ms: NullableNumber,
        min_ms: NullableNumber,
        max_ms: NullableNumber,
        std_dev_ms: NullableNumber,
      }),
    },
    { description: 'Rolling summary; see docs/api/liveness.md.' },
  ),
});

const ListQuery = Type.Object({
  uptime_below: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: 'Only entities whose uptime over range is below this percentage.' })),
  range: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.uptime_window_ms_max / 1000, default: DAY_S, description: 'Uptime window in seconds.' })),
  alive: Type.Optional(Type.Boolean()),
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.list_limit_max, default: policy.list_limit_default })),
});
const ListReply = Type.Object({
  entities: Type.Array(
    Type.Object({ alive: Type.Boolean(), entity_id: Type.String(), last_seen_ms: Type.Integer(), uptime: Type.Number() }),
  ),
  total_matched: Type.Integer(),
});

/** The administrators' list (GET /admin/liveness): each entity on it is also asked for its anomalies. */
const ADMIN_LIST_LIMIT_MAX = 100;
const AdminListQuery = Type.Object({
  tenant: Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f\\u007f]+$', description: 'The tenant: a user id, or an organization id.' }),
  uptime_below: ListQuery.properties.uptime_below,
  range: ListQuery.properties.range,
  alive: ListQuery.properties.alive,
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: ADMIN_LIST_LIMIT_MAX, default: 50 })),
});
const AnomalySchema = Type.Object({
  timestamp_ms: Type.Integer(),
  latency_ms: Type.Number(),
  mean_ms: Type.Number(),
  std_dev_ms: Type.Number(),
  z_score: Type.Number(),
  direction: Type.Union([Type.Literal('high'), Type.Literal('low')]),
  window_samples: Type.Integer(),
});
const AdminListReply = Type.Object({
  entities: Type.Array(
    Type.Object({
      entity_id: Type.String(),
      alive: Type.Boolean(),
      last_seen_ms: Type.Integer(),
      uptime: Type.Number(),
      labels: Type.Record(Type.String(), Type.String()),
      anomaly_count: Type.Integer({ description: 'Latency anomalies since the entity was first seen.' }),
      anomalies: Type.Array(AnomalySchema, { description: 'The newest 20, newest first.' }),
    }),
  ),
  total_matched: Type.Integer(),
});

const SERIES_RANGE_S_MAX = policy.series_range_ms_max / 1000;
const RANGE = Type.Integer({ minimum: 0, maximum: SERIES_RANGE_S_MAX, default: DAY_S, description: 'Seconds back from now.' });
const BUCKET = Type.Integer({ minimum: 1, maximum: SERIES_RANGE_S_MAX, default: 3600, description: 'Bucket width in seconds.' });

const AggregationsQuery = Type.Object({
  range: Type.Optional(RANGE),
  bucket: Type.Optional(BUCKET),
  aggregation: Type.Optional(stringEnum(aggregations, { default: 'avg' })),
  series: Type.Optional(stringEnum(seriesNames, { default: 'latency' })),
});
const AggregationsReply = Type.Object({
  aggregation: Type.String(),
  bucket_ms: Type.Integer(),
  data: Type.Array(Type.Object({ timestamp_ms: Type.Integer(), value: Type.Number() })),
  entity_id: Type.String(),
  series: Type.String(),
});

const HistoryQuery = Type.Object({
  from: Type.Optional(Type.Number({ minimum: 0, description: 'Epoch seconds (fractions allowed); default to - 1 hour.' })),
  to: Type.Optional(Type.Number({ minimum: 0, description: 'Epoch seconds (fractions allowed), inclusive; default now.' })),
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.history_limit_max, default: policy.history_limit_default })),
});
const HistoryReply = Type.Object({
  entity_id: Type.String(),
  has_more: Type.Boolean(),
  samples: Type.Array(Type.Object({ latency_ms: NullableInteger, timestamp_ms: Type.Integer() })),
  total_in_range: Type.Integer(),
});

const LatencyQuery = Type.Object({ range: Type.Optional(RANGE), bucket: Type.Optional(BUCKET) });
const LatencyReply = Type.Object({
  current_ms: NullableInteger,
  entity_id: Type.String(),
  bucket_ms: Type.Integer(),
  stats: Type.Object({ avg: NullableNumber, max: NullableNumber, min: NullableNumber, std_dev: NullableNumber }),
  trend: Type.Array(Type.Object({ avg: Type.Number(), timestamp_ms: Type.Integer() })),
});

const UptimeQuery = Type.Object({
  windows: Type.Optional(Type.String({ maxLength: 200, default: '1h,24h,7d', description: 'Comma-separated windows: <n>s|m|h|d|w, up to 30d.' })),
});
const UptimeReply = Type.Object({
  entity_id: Type.String(),
  uptime: Type.Record(Type.String(), UptimeFiguresSchema),
});

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

export function livenessRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const grace_ms = services.config.livenessGraceSeconds * 1000;
  const ask = <Reply>(tenant: string, entity_id: string, message: LivenessMessage) =>
    services.actors.ask<Reply>(LIVENESS_KIND, livenessActorKey(tenant, entity_id), message);
  const schema = (summary: string, parts: { params?: TSchema; querystring?: TSchema; body?: TSchema }, response: Record<number, TSchema>, errors: number[] = []) => ({
    tags: ['liveness'],
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...response, ...errorResponses(...bearerErrors, ...errors) },
  });
  const base = '/api/v1/liveness';

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: schema('Entities of the caller\'s tenant, by entity_id, filtered by alive and uptime over range.', { querystring: ListQuery }, { 200: ListReply }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { range = DAY_S, alive, uptime_below, limit = policy.list_limit_default } = request.query;
    const query: IndexQuery = { op: 'list', range_ms: range * 1000, alive, uptime_below, limit };
    // A read only: the index filters (alive and uptime are exact there); the
    // latest heartbeat of an alive entity comes from the entity itself (at most
    // `limit` read-only asks, a scatter-gather). The index is not told of every
    // heartbeat on purpose: its traffic follows status changes.
    const view = await services.actors.ask<IndexListView>(LIVENESS_INDEX_KIND, livenessIndexKey(principal.tenant), query, { readOnly: true });
    await Promise.all(
      view.entities.map(async (brief) => {
        if (!brief.alive) return;
        try {
          const message = { op: 'brief' } satisfies LivenessMessage;
          const own = await services.actors.ask<BriefView>(LIVENESS_KIND, livenessActorKey(principal.tenant, brief.entity_id), message, { readOnly: true });
          brief.last_seen_ms = Math.max(brief.last_seen_ms, own.last_seen_ms);
        } catch {
          // Deleted meanwhile or overloaded: keep what the index holds.
        }
      }),
    );
    return view;
  });

  app.get<{ Querystring: Static<typeof AdminListQuery> }>('/admin/liveness', {
    onRequest: authenticate,
    schema: {
      ...schema("Admin: a tenant's entities, by entity_id, filtered like the tenant's list, each with its latest latency anomalies.", { querystring: AdminListQuery }, { 200: AdminListReply }, [403]),
      tags: ['liveness', 'admin'],
    },
  }, async (request) => {
    requireAdmin(request);
    const { tenant, range = DAY_S, alive, uptime_below, limit = 50 } = request.query;
    const query: IndexQuery = { op: 'list', range_ms: range * 1000, alive, uptime_below, limit };
    const view = await services.actors.ask<IndexListView>(LIVENESS_INDEX_KIND, livenessIndexKey(tenant), query, { readOnly: true });
    // A scatter-gather of reads: each entity on the page answers its labels, exact last
    // heartbeat and anomalies. One deleted meanwhile is left out.
    const entities = await Promise.all(
      view.entities.map((brief) =>
        services.actors
          .ask<AnomaliesView>(LIVENESS_KIND, livenessActorKey(tenant, brief.entity_id), { op: 'anomalies' }, { readOnly: true })
          .then(
            (own) => ({ ...own, alive: brief.alive, last_seen_ms: Math.max(brief.last_seen_ms, own.last_seen_ms), uptime: brief.uptime }),
            (error: unknown) => {
              if (isServiceError(error) && error.code === 'not_found') return null;
              throw error;
            },
          ),
      ),
    );
    return { entities: entities.filter((entity) => entity !== null), total_matched: view.total_matched };
  });

  app.post<{ Body: Static<typeof HeartbeatBody> }>(base, {
    onRequest: authenticate,
    schema: schema('Record a heartbeat (and a latency sample with client_timestamp_ms). Creates the entity on its first heartbeat.', { body: HeartbeatBody }, { 200: HeartbeatAckSchema }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { entity_id, client_timestamp_ms, metadata, labels } = request.body;
    if (metadata !== undefined && serialisedBytes(metadata) > policy.metadata_bytes_max) {
      throw badRequest('body.metadata', `must serialise to at most ${policy.metadata_bytes_max} bytes`);
    }
    return ask<HeartbeatAck>(principal.tenant, entity_id, {
      op: 'heartbeat',
      client_timestamp_ms,
      metadata: metadata as Record<string, unknown> | undefined,
      labels,
      grace_ms,
    });
  });

  app.get<{ Params: EntityParams }>(`${base}/:entity_id`, {
    onRequest: authenticate,
    schema: schema('Status: alive within the grace window, last-seen times, latest latency, labels, rolling summary.', { params: Params }, { 200: StatusSchema }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return ask<StatusView>(principal.tenant, request.params.entity_id, { op: 'status' });
  });

  app.delete<{ Params: EntityParams }>(`${base}/:entity_id`, {
    onRequest: authenticate,
    schema: schema('Delete the entity, its samples and outages.', { params: Params }, { 204: Type.Null() }, [404]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await ask(principal.tenant, request.params.entity_id, { op: 'delete' });
    return reply.code(204).send();
  });

  app.get<{ Params: EntityParams; Querystring: Static<typeof AggregationsQuery> }>(`${base}/:entity_id/aggregations`, {
    onRequest: authenticate,
    schema: schema('Aggregation of the latency or heartbeat series per bucket over range.', { params: Params, querystring: AggregationsQuery }, { 200: AggregationsReply }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { range = DAY_S, bucket = 3600, aggregation = 'avg', series = 'latency' } = request.query;
    return ask<AggregationView>(principal.tenant, request.params.entity_id, {
      op: 'aggregate',
      range_ms: range * 1000,
      bucket_ms: bucket * 1000,
      aggregation: aggregation as Aggregation,
      series: series as SeriesName,
    });
  });

  app.get<{ Params: EntityParams; Querystring: Static<typeof HistoryQuery> }>(`${base}/:entity_id/history`, {
    onRequest: authenticate,
    schema: schema('Raw samples in [from, to]: the latest `limit`, oldest first.', { params: Params, querystring: HistoryQuery }, { 200: HistoryReply }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { from, to, limit = policy.history_limit_default } = request.query;
    const from_ms = from === undefined ? null : Math.round(from * 1000);
    const to_ms = to === undefined ? null : Math.round(to * 1000);
    if (from_ms !== null && to_ms !== null && from_ms > to_ms) throw badRequest('querystring.from', 'must not be after to');
    if (!Number.isSafeInteger(from_ms ?? 0) || !Number.isSafeInteger(to_ms ?? 0)) throw badRequest('querystring', 'from and to must be epoch seconds');
    return ask<HistoryView>(principal.tenant, request.params.entity_id, { op: 'history', from_ms, to_ms, limit });
  });

  app.get<{ Params: EntityParams; Querystring: Static<typeof LatencyQuery> }>(`${base}/:entity_id/latency`, {
    onRequest: authenticate,
    schema: schema('Latency statistics over range and the average per bucket.', { params: Params, querystring: LatencyQuery }, { 200: LatencyReply }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { range = DAY_S, bucket = 3600 } = request.query;
    return ask<LatencyView>(principal.tenant, request.params.entity_id, { op: 'latency', range_ms: range * 1000, bucket_ms: bucket * 1000 });
  });

  app.get<{ Params: EntityParams; Querystring: Static<typeof UptimeQuery> }>(`${base}/:entity_id/uptime`, {
    onRequest: authenticate,
    schema: schema('Uptime percentage, outages and downtime per window, from heartbeat gaps.', { params: Params, querystring: UptimeQuery }, { 200: UptimeReply }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const names = (request.query.windows ?? '1h,24h,7d').split(',').map((name) => name.trim());
    if (names.length > policy.uptime_windows_max) throw badRequest('querystring.windows', `must list at most ${policy.uptime_windows_max} windows`);
    const windows: { name: string; ms: number }[] = [];
    for (const name of names) {
      const parsed = parseWindow(name);
      if ('error' in parsed) throw badRequest('querystring.windows', `"${name}" ${parsed.error}`);
      windows.push({ name, ms: parsed.ms });
    }
    return ask<UptimeView>(principal.tenant, request.params.entity_id, { op: 'uptime', windows });
  });
}
