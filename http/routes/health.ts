import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { bearerAuthentication } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses } from '../schemas.js';
import type { AppServices } from '../services.js';
import { requireAdmin } from './admin.js';

const Quantile = (what: string) => Type.Union([Type.Number(), Type.Null()], { description: `${what} in ms, from the histogram buckets (null: nothing observed in the window).` });
const RecentSample = Type.Object({
  at: Type.String({ format: 'date-time', description: 'End of the window.' }),
  at_ms: Type.Integer({ description: 'End of the window, epoch ms (pass the last one as `since`).' }),
  window_s: Type.Number(),
  requests_per_s: Type.Number(),
  server_errors_per_s: Type.Number({ description: 'Answers with a 5xx.' }),
  client_errors_per_s: Type.Number({ description: 'Answers with a 4xx.' }),
  p50_ms: Quantile('Median request latency, every route'),
  p99_ms: Quantile('99th percentile request latency, every route'),
  commit_p50_ms: Quantile('Median storage commit latency (in a cluster: local commit plus the in-sync followers\' acknowledgements)'),
  commit_p99_ms: Quantile('99th percentile storage commit latency'),
  replication_p50_ms: Quantile('Median time from a log entry\'s append to a follower\'s acknowledgement of it (cluster mode; always null embedded)'),
  replication_p99_ms: Quantile('99th percentile of the same'),
  activations_per_s: Type.Number({ description: 'Actors loaded into memory per second.' }),
  actors_active: Type.Union([Type.Integer(), Type.Null()], { description: 'Actors in memory at the end of the window.' }),
  mailbox_messages: Type.Union([Type.Integer(), Type.Null()], { description: 'Messages waiting in actor mailboxes at the end of the window.' }),
  routes: Type.Array(
    Type.Object({
      route: Type.String({ description: 'Method and route template, e.g. `POST /api/v1/distributed-state/:namespace/:key/lock`.' }),
      requests_per_s: Type.Number(),
      server_errors_per_s: Type.Number(),
      client_errors_per_s: Type.Number(),
      p50_ms: Type.Union([Type.Number(), Type.Null()]),
      p99_ms: Type.Union([Type.Number(), Type.Null()]),
    }),
    { description: 'Routes that received requests in the window, busiest first (at most 50).' },
  ),
});
const RecentQuery = Type.Object({
  since: Type.Optional(Type.Integer({ minimum: 0, description: 'Epoch ms: only samples whose window ended after it (the last `at_ms` you have).' })),
});

/** Probes, the OpenAPI document and Prometheus metrics (no credential needed), and the node's recent metrics for administrators. */
export function healthRoutes(app: FastifyInstance, services: AppServices): void {
  app.get('/health', {
    schema: {
      tags: ['health'],
      summary: 'Liveness: 200 as soon as the node serves requests.',
      response: { 200: Type.Object({ status: Type.Literal('ok') }) },
    },
  }, async () => ({ status: 'ok' as const }));

  app.get('/health/ready', {
    schema: {
      tags: ['health'],
      summary: 'Readiness: 200 only while the node owns and serves its partitions.',
      response: {
        200: Type.Object({ status: Type.Literal('ready') }),
        503: Type.Object({ status: Type.Literal('not_ready') }),
      },
    },
  }, async (_request, reply) => {
    if (services.isReady()) return { status: 'ready' as const };
    return reply.code(503).send({ status: 'not_ready' as const });
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(services.metrics.registry.contentType);
    return services.metrics.registry.metrics();
  });

  app.get<{ Querystring: Static<typeof RecentQuery> }>('/admin/metrics/recent', {
    onRequest: bearerAuthentication(services),
    schema: {
      tags: ['admin'],
      summary: "This node's recent request rate, errors, latency per route, commit and replication latency, activations and mailbox depth.",
      description:
        'The node samples its own metrics (the counters /metrics serves) every METRICS_SAMPLE_INTERVAL_MS and keeps METRICS_HISTORY_SECONDS of samples in memory; each sample covers the window since the previous one. ' +
        'Poll with `since` set to the last `at_ms` received. Per node: in a cluster, ask each node (its own traffic only). A restarted node starts a new history.',
      security: bearerSecurity,
      querystring: RecentQuery,
      response: {
        200: Type.Object(
          {
            interval_ms: Type.Integer({ description: 'METRICS_SAMPLE_INTERVAL_MS.' }),
            history_seconds: Type.Integer({ description: 'METRICS_HISTORY_SECONDS.' }),
            samples: Type.Array(RecentSample, { description: 'Oldest first.' }),
          },
          { title: 'RecentMetrics' },
        ),
        ...errorResponses(...bearerErrors, 403),
      },
    },
  }, async (request) => {
    requireAdmin(request);
    return {
      interval_ms: services.config.metricsSampleIntervalMs,
      history_seconds: services.config.metricsHistorySeconds,
      samples: services.metrics.history.since(request.query.since ?? 0),
    };
  });
}
