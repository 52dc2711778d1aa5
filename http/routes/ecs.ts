import { randomUUID } from 'node:crypto';
import websocket from '@fastify/websocket';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import client from 'prom-client';
import { ServiceError } from '../../runtime/index.js';
import {
  COMPONENTS_BYTES_MAX,
  ECS_INDEX_KIND,
  ecsIndexKey,
  MUTATIONS_PER_BATCH_MAX,
  TICK_RATE_MS_MAX,
  TICK_RATE_MS_MIN,
  type CoordinatorView,
  type EcsMessage,
  type MutationsReply,
} from '../../actors/ecs/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime } from '../schemas.js';
import type { AppServices } from '../services.js';
import { EcsStreams } from '../ecs-stream.js';

/** ECS coordinator (spec doc 2 §2 Coordinator, §4.8; doc 1 §5.3 for the WebSocket token). See docs/api/ecs.md. */
const tags = ['ecs'];
const INDEX = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.:-]+$', description: 'The index name: letters, digits, _ . : -' });
const Params = Type.Object({ index: INDEX });
const ENTITY_ID = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });

const StartBody = Type.Object({
  tick_rate_ms: Type.Optional(Type.Integer({ minimum: TICK_RATE_MS_MIN, maximum: TICK_RATE_MS_MAX, description: `Tick period, ${TICK_RATE_MS_MIN} to ${TICK_RATE_MS_MAX} ms (default 50, or the index's last rate).` })),
});
const Mutation = Type.Object({
  entity_id: ENTITY_ID,
  op: Type.Optional(Type.Union([Type.Literal('create'), Type.Literal('update'), Type.Literal('delete')], { description: 'Default update.' })),
  expected_version: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Required for update and delete: the version you read. 0 (or absent) for create.' })),
  components: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Type.Unknown(), {
    description: `Create: the components. Update: merged into the entity's (null removes a component). At most ${COMPONENTS_BYTES_MAX} bytes of JSON after the merge.`,
  })),
});
const MutationsBody = Type.Object({ mutations: Type.Array(Mutation, { minItems: 1, maxItems: MUTATIONS_PER_BATCH_MAX }) });
const WsQuery = Type.Object({
  token: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'A bearer token (JWT), instead of the Authorization header.' })),
  resume: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'The last tick you applied: hello names it and the stream replays every tick after it (or a snapshot), with no live tick before them.',
    }),
  ),
});

const Coordinator = Type.Object({
  index: Type.String(),
  running: Type.Boolean(),
  tick: Type.Integer(),
  tick_rate_ms: Type.Integer(),
  last_tick_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  connected_systems: Type.Integer({ description: 'Live WebSocket connections to this index, summed over the nodes that reported within the last 30 s.' }),
  entities: Type.Integer(),
  oldest_tick: Type.Integer({ description: 'The oldest tick a client can resume after without a snapshot.' }),
});
const MutationsReplySchema = Type.Object({
  succeeded: Type.Integer(),
  failed: Type.Integer(),
  tick: Type.Integer({ description: 'The tick that will carry the successful changes to subscribers.' }),
  results: Type.Array(Type.Object({
    entity_id: Type.String(),
    success: Type.Boolean(),
    new_version: Type.Union([Type.Integer(), Type.Null()]),
    current_version: Type.Integer({ description: 'The version the mutation found (0: no such entity).' }),
    error: Type.Union([Type.String(), Type.Null()]),
  })),
});

type IndexParams = Static<typeof Params>;

function coordinatorShape(index: string, view: CoordinatorView) {
  return {
    index,
    running: view.running,
    tick: view.tick,
    tick_rate_ms: view.tick_rate_ms,
    last_tick_at: isoTime(view.last_tick_at_ms),
    connected_systems: view.connected_systems,
    entities: view.entities,
    oldest_tick: view.oldest_tick,
  };
}

async function emptyBodyIsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

/** Update and delete need the version read: refused as a whole before anything runs. */
function checkVersions(body: Static<typeof MutationsBody>): void {
  const details = body.mutations.flatMap((mutation, position) =>
    (mutation.op ?? 'update') !== 'create' && mutation.expected_version === undefined
      ? [{ field: `body.mutations.${position}.expected_version`, message: `is required for ${mutation.op ?? 'update'}` }]
      : [],
  );
  if (details.length > 0) throw new ServiceError('BAD_REQUEST', 'expected_version is required for update and delete.', { details });
}

export function ecsRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const base = '/api/v1/ecs/:index/coordinator';
  const ask = <Reply>(tenant: string, index: string, message: EcsMessage, readOnly = false) =>
    services.actors.ask<Reply>(ECS_INDEX_KIND, ecsIndexKey(tenant, index), message, { readOnly });

  app.get<{ Params: IndexParams }>(base, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'The coordinator of an index. An index never started answers running false at tick 0.',
      security: bearerSecurity,
      params: Params,
      response: { 200: Coordinator, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return coordinatorShape(request.params.index, await ask<CoordinatorView>(principal.tenant, request.params.index, { op: 'status' }, true));
  });

  app.post<{ Params: IndexParams; Body: Static<typeof StartBody> }>(`${base}/start`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: {
      tags,
      summary: 'Start (or re-time) the tick loop. Idempotent.',
      security: bearerSecurity,
      params: Params,
      body: StartBody,
      response: { 200: Coordinator, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await ask<CoordinatorView>(principal.tenant, request.params.index, { op: 'start', tick_rate_ms: request.body.tick_rate_ms });
    return coordinatorShape(request.params.index, view);
  });

  app.post<{ Params: IndexParams }>(`${base}/stop`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Stop the tick loop. Idempotent; pending changes go out with the first tick after the next start.',
      security: bearerSecurity,
      params: Params,
      response: { 200: Coordinator, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return coordinatorShape(request.params.index, await ask<CoordinatorView>(principal.tenant, request.params.index, { op: 'stop' }));
  });

  app.post<{ Params: IndexParams; Body: Static<typeof MutationsBody> }>(`${base}/mutations`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Apply per-entity mutations with optimistic concurrency; each entity succeeds or fails on its own.',
      security: bearerSecurity,
      params: Params,
      body: MutationsBody,
      response: { 200: MutationsReplySchema, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    checkVersions(request.body);
    const mutations = request.body.mutations.map((mutation) => ({ ...mutation, op: mutation.op ?? 'update' }));
    const reply = await ask<MutationsReply>(principal.tenant, request.params.index, { op: 'mutations', mutations });
    return {
      succeeded: reply.succeeded,
      failed: reply.failed,
      tick: reply.tick,
      results: reply.results.map(({ entity_id, success, new_version, current_version, error }) => ({ entity_id, success, new_version, current_version, error })),
    };
  });

  const nodeId = services.config.cluster?.nodeId ?? `node-${randomUUID()}`;
  const streams = new EcsStreams({ actors: services.actors, nodeId, bufferMaxBytes: services.config.ecsWsBufferMaxBytes, logger: app.log });
  const connectionsGauge = new client.Gauge({
    name: 'ecs_websocket_connections',
    help: 'Live ECS coordinator WebSocket connections on this node.',
    registers: [services.metrics.registry],
    collect() {
      this.set(streams.connections);
    },
  });
  void connectionsGauge;

  /** doc 1 §5.3: the WebSocket may carry its token in the query instead of the header. */
  async function authenticateSocket(request: FastifyRequest<{ Querystring: Static<typeof WsQuery> }>, reply: FastifyReply): Promise<void> {
    const token = (request.query as { token?: unknown } | undefined)?.token;
    if (request.headers.authorization === undefined && typeof token === 'string' && token.length > 0) request.headers.authorization = `Bearer ${token}`;
    await authenticate(request, reply);
  }

  // The WebSocket plugin in a scope of its own: its hooks touch only this route.
  app.register(async (scope) => {
    scope.addHook('preClose', async () => streams.close());
    await scope.register(websocket, { options: { maxPayload: 64 * 1024 } });
    scope.route<{ Params: IndexParams; Querystring: Static<typeof WsQuery> }>({
      method: 'GET',
      url: `${base}/ws`,
      onRequest: authenticateSocket,
      config: { secretQuery: true },
      schema: {
        tags,
        summary: 'WebSocket stream of the committed ticks (docs/api/ecs.md). A request that is not an upgrade gets 426.',
        security: bearerSecurity,
        params: Params,
        querystring: WsQuery,
        response: { ...errorResponses(...bearerErrors, 426) },
      },
      handler: async () => {
        throw new ServiceError('upgrade_required', 'This endpoint is a WebSocket: connect with an Upgrade: websocket request.');
      },
      wsHandler: (socket, request) => {
        const principal = requirePrincipal(request);
        void streams.attach(ecsIndexKey(principal.tenant, request.params.index), request.params.index, socket, request.query.resume);
      },
    });
  });
}
