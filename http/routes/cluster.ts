import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { NodeStatus } from '../../cluster/etcd-keys.js';
import { ServiceError } from '../../runtime/index.js';
import { clusterView, EMBEDDED_NODE_ID, embeddedView, type ClusterView } from '../cluster-view.js';
import { bearerAuthentication } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses } from '../schemas.js';
import type { AppServices } from '../services.js';
import { requireAdmin } from './admin.js';

const Member = Type.Object({
  node_id: Type.String(),
  http_url: Type.String(),
  grpc_address: Type.String(),
  draining: Type.Boolean(),
  /** That node's view of etcd is fresh (its member record says so): it may be handed partitions. */
  view_fresh: Type.Optional(Type.Boolean()),
});
const PartitionRow = Type.Object({
  partition: Type.Integer(),
  leader: Type.Union([Type.String(), Type.Null()]),
  epoch: Type.Union([Type.Integer(), Type.Null()]),
  isr: Type.Array(Type.String()),
});

/**
 * GET /cluster/status: the cluster as this node sees it (members, and each
 * partition's leader, epoch and in-sync replicas). An operator probe like
 * /metrics: no credential, keep it on the internal network (docs/cluster.md).
 */
export function clusterRoutes(app: FastifyInstance, services: AppServices): void {
  adminClusterRoutes(app, services);
  app.get('/cluster/status', {
    schema: {
      tags: ['health'],
      summary: 'Cluster membership and partition leadership as this node sees them.',
      response: {
        200: Type.Object({
          mode: Type.Union([Type.Literal('cluster'), Type.Literal('embedded')]),
          node_id: Type.String(),
          draining: Type.Boolean(),
          /** This node's view of etcd: fresh (read in full and watched since, no break) and the revision of that read. Cluster mode only. */
          view: Type.Optional(Type.Object({ fresh: Type.Boolean(), revision: Type.Integer() })),
          members: Type.Array(Member),
          partitions: Type.Array(PartitionRow),
        }),
      },
    },
  }, async () => {
    if (services.cluster) return { mode: 'cluster' as const, ...services.cluster.status() };
    // One node: it leads every partition, alone.
    return {
      mode: 'embedded' as const,
      node_id: 'embedded',
      draining: false,
      members: [],
      partitions: Array.from({ length: services.config.partitions }, (_, partition) => ({ partition, leader: 'embedded', epoch: null, isr: ['embedded'] })),
    };
  });
}

const ClusterViewSchema = Type.Object(
  {
    mode: Type.Union([Type.Literal('cluster'), Type.Literal('embedded')]),
    node_id: Type.String({ description: 'The node that answered (`embedded` for a node without etcd).' }),
    members: Type.Array(
      Type.Object({
        node_id: Type.String(),
        http_url: Type.String(),
        draining: Type.Boolean(),
        view_fresh: Type.Boolean({ description: "The member's view of etcd is fresh: it may be handed partitions." }),
        leads: Type.Integer({ description: 'Partitions it leads.' }),
        follows: Type.Integer({ description: 'Partitions it follows in sync.' }),
      }),
    ),
    partitions: Type.Array(
      Type.Object({
        partition: Type.Integer(),
        leader: Type.Union([Type.String(), Type.Null()]),
        epoch: Type.Union([Type.Integer(), Type.Null()], { description: "Create revision of the leader's key in etcd; null on an embedded node." }),
        isr: Type.Array(Type.String(), { description: 'In-sync replicas, the leader included.' }),
        followers: Type.Array(
          Type.Object({
            node_id: Type.String(),
            mode: Type.String({ description: '`in_sync` or `catching_up`.' }),
            lag: Type.Union([Type.Integer(), Type.Null()], { description: 'Entries not yet acknowledged, as the leader last published it (every 2 s); null before it did.' }),
          }),
        ),
      }),
    ),
  },
  { title: 'ClusterView' },
);

const DrainParams = Type.Object({ node_id: Type.String({ minLength: 1, maxLength: 64 }) });
const DrainRequestSchema = Type.Object(
  {
    node_id: Type.String(),
    requested_at: Type.String({ format: 'date-time' }),
  },
  { title: 'DrainRequest' },
);

/** The stream checks for a change this often... */
const STREAM_TICK_MS = 1_000;
/** ...and sends the view at least this often, changed or not. */
const STREAM_HEARTBEAT_MS = 5_000;
/**
 * A stream ends after this long and the client reconnects with its current
 * token: an expired, revoked or demoted administrator's stream stops within it.
 */
const STREAM_MAX_MS = 60_000;
/** Published lag records are re-read from etcd at most this often, however many streams are open. */
const PUBLISHED_CACHE_MS = 1_000;

/**
 * Admin cluster operations (docs/cluster.md, "From the console or the API"):
 * the cluster view, the same view as a server-sent event stream, and the
 * drain request `npm run cluster -- drain` writes.
 */
function adminClusterRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const adminErrors = (...extra: number[]) => errorResponses(...bearerErrors, 403, ...extra);

  let published: { at: number; records: Promise<NodeStatus[]> } | undefined;
  async function currentView(): Promise<ClusterView> {
    const cluster = services.cluster;
    if (!cluster) return embeddedView(services.config.partitions, services.publicBaseUrl());
    const now = Date.now();
    if (!published || now - published.at > PUBLISHED_CACHE_MS) {
      published = { at: now, records: cluster.publishedStatuses() };
      // A failed read is not kept: the next view reads again.
      const failed = published;
      failed.records.catch(() => {
        if (published === failed) published = undefined;
      });
    }
    return clusterView(cluster.status(), await published.records);
  }

  app.get('/admin/cluster/status', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'The cluster as this node sees it: members, and each partition with its leader, epoch, in-sync replicas and followers\' lag.',
      description: 'An embedded node (no etcd) answers with one member, `embedded`, leading every partition. Lag comes from what each leader publishes in etcd every 2 s.',
      security: bearerSecurity,
      response: { 200: ClusterViewSchema, ...adminErrors() },
    },
  }, async (request) => {
    requireAdmin(request);
    return currentView();
  });

  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
  });

  app.get('/admin/cluster/stream', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'The cluster view (as GET /admin/cluster/status) as server-sent events: `status` when it changes, at least every 5 s.',
      description:
        'A `text/event-stream` response. Each event is `event: status` with the ClusterView as JSON in `data`; `event: error` (`{code, message}`) when a view could not be read (etcd unreachable), the stream going on. ' +
        'The stream ends after 60 s: reconnect with a current token (an expired or revoked token stops receiving within that time). Send the token in the Authorization header (read the stream with fetch, not EventSource).',
      security: bearerSecurity,
      response: {
        200: { description: 'Server-sent events.', content: { 'text/event-stream': { schema: Type.String() } } },
        ...adminErrors(),
      },
    },
  }, async (request, reply) => {
    requireAdmin(request);
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    let lastSent = '';
    let lastSentAt = 0;
    let busy = false;
    const send = (event: string, data: string) => raw.write(`event: ${event}\ndata: ${data}\n\n`);
    const tick = async () => {
      if (busy) return;
      busy = true;
      try {
        const json = JSON.stringify(await currentView());
        if (json !== lastSent || Date.now() - lastSentAt >= STREAM_HEARTBEAT_MS) {
          send('status', json);
          lastSent = json;
          lastSentAt = Date.now();
        }
      } catch (error) {
        send('error', JSON.stringify({ code: 'partition_unavailable', message: `The cluster view could not be read: ${(error as Error).message}` }));
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(() => void tick(), STREAM_TICK_MS);
    const ending = setTimeout(() => end(), STREAM_MAX_MS);
    const end = () => {
      clearInterval(timer);
      clearTimeout(ending);
      open.delete(end);
      if (!raw.writableEnded) raw.end();
    };
    open.add(end);
    request.raw.on('close', end);
    await tick();
  });

  app.post<{ Params: Static<typeof DrainParams> }>('/admin/cluster/nodes/:node_id/drain', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Asks a node to hand every partition over and stay up, empty (as `npm run cluster -- drain`).',
      description:
        'Writes the drain request in etcd; the node watches it and hands its partitions over (watch GET /admin/cluster/status). 202 once the request is written, not once the drain is done. ' +
        '404 `not_found` for a node that is not a live member; 409 `no_drain_target` on an embedded node, or when no other serving member could take the partitions over.',
      security: bearerSecurity,
      params: DrainParams,
      response: { 202: DrainRequestSchema, ...adminErrors(404, 409) },
    },
  }, async (request, reply) => {
    requireAdmin(request);
    const { node_id } = request.params;
    if (!services.cluster) {
      if (node_id !== EMBEDDED_NODE_ID) throw new ServiceError('not_found', `${node_id} is not a node of this cluster: this node runs embedded, alone, as ${EMBEDDED_NODE_ID}.`);
      throw new ServiceError('no_drain_target', 'This node runs embedded (no etcd): there is no other node to hand its partitions to.');
    }
    const outcome = await services.cluster.requestDrain(node_id);
    if (!outcome.ok) {
      if (outcome.reason === 'not_member') throw new ServiceError('not_found', `${node_id} is not a member of the cluster.`);
      throw new ServiceError('no_drain_target', `${node_id} is the only serving member: no other node could take its partitions over.`);
    }
    return reply.code(202).send(outcome.request);
  });
}
