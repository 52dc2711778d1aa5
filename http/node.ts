import { mkdirSync } from 'node:fs';
import pino, { type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { ActorRuntime, embeddedPartitionCount, LmdbStore, ServiceError, SystemClock, type ActorClient, type Clock } from '../runtime/index.js';
import { allActors, areas } from '../areas.js';
import { buildApp } from './app.js';
import { Accounts } from './auth/accounts.js';
import { TokenService } from './auth/tokens.js';
import { CLUSTER_PARTITIONS_DEFAULT, type NodeConfig, type ResolvedNodeConfig } from './config.js';
import { Metrics } from './plugins/metrics.js';
import type { AppServices } from './services.js';
import { LogMailTransport } from './auth/mail.js';
import { SystemDomainResolver } from './domain-resolver.js';
import type { ClusterNode } from '../cluster/cluster-node.js';
import { SessionCache } from './auth/session-cache.js';
import { RevocationAwareActorClient } from './auth/revocation-aware-client.js';
import { WebhookDeliveryWorker } from './webhook-delivery.js';
import { webhookSettings } from './webhook-settings.js';
import { JobDeliveryWorker, jobSettings, registerJobWorker } from './job-delivery.js';

/**
 * One node, embedded mode: LMDB store, actor runtime with every kind, the
 * Fastify edge. server.ts runs it from the environment; tests run it with a
 * temp directory, port 0 and, where time matters, a ManualClock.
 */
export interface RunningNode {
  app: FastifyInstance;
  runtime: ActorRuntime;
  services: AppServices;
  /** Performs the webhook attempts this node's actors emit (its `network` is replaceable in tests). */
  webhookDelivery: WebhookDeliveryWorker;
  /** Performs the job attempts this node's queues emit; GET /health/job_queue reports it. */
  jobDelivery: JobDeliveryWorker;
  /** http://host:port */
  url: string;
  /** Graceful stop: no new requests, in-flight ones finish, turns commit, LMDB closes. */
  close(): Promise<void>;
}

export interface StartNodeOptions {
  config: NodeConfig;
  clock?: Clock;
  logger?: Logger;
}

export async function startNode(options: StartNodeOptions): Promise<RunningNode> {
  // Only the node's user reads what a data directory it creates holds (LMDB's files are 0644 inside it).
  mkdirSync(options.config.dataDir, { recursive: true, mode: 0o700 });
  // Embedded: the store is opened first, as it knows its partition count. A cluster keeps its count in etcd.
  const embeddedStore = options.config.cluster ? undefined : new LmdbStore({ path: options.config.dataDir, sync: options.config.durability === 'sync', mapSizeGb: options.config.lmdbMapSizeGb });
  const config: ResolvedNodeConfig = {
    ...options.config,
    partitions: embeddedStore ? await partitionCountOrClose(embeddedStore, options.config.partitions) : (options.config.partitions ?? CLUSTER_PARTITIONS_DEFAULT),
  };
  const clock = options.clock ?? new SystemClock();
  const logger = options.logger ?? pino({ level: config.logLevel });

  let runtime: ActorRuntime | undefined;
  const metrics = new Metrics({
    activeActors: () => runtime?.activeActorCount() ?? 0,
    pendingAlarms: () => runtime?.pendingAlarmCount() ?? 0,
    queuedMessages: () => runtime?.queuedMessageCount() ?? 0,
    history: {
      intervalMs: config.metricsSampleIntervalMs,
      historySamples: Math.ceil((config.metricsHistorySeconds * 1000) / config.metricsSampleIntervalMs),
      routesPerSample: 50,
    },
  });
  let cluster: ClusterNode | undefined;
  let actors: ActorClient;
  const sessionCache = new SessionCache();
  if (config.cluster) {
    // Cluster mode: the runtime serves only the partitions this node leads; the edge routes through the cluster.
    if (config.port === 0) throw new Error('PORT must be a fixed port in cluster mode (it is published to the other nodes)');
    // Created here, joined below (begin) once the edge is compiled.
    const clusterOptions = {
      cluster: config.cluster,
      partitions: config.partitions,
      actorsInMemoryMax: config.actorsInMemoryMax,
      dataDir: config.dataDir,
      durability: config.durability,
      lmdbMapSizeGb: config.lmdbMapSizeGb,
      httpUrl: `http://${config.cluster.advertiseHost}:${config.port}`,
      bindHost: config.host,
      clock,
      logger: logger.child({ component: 'cluster' }),
      observer: metrics,
      registry: metrics.registry,
      actors: allActors,
    };
    // Imported only in cluster mode: etcd3 and gRPC cost an embedded node about 150 ms of its start (docs/performance.md, "Start-up").
    const { ClusterNode, productionPorts } = await import('../cluster/cluster-node.js');
    cluster = ClusterNode.create(clusterOptions, productionPorts(clusterOptions));
    runtime = cluster.runtime;
    actors = cluster.router;
    cluster.registerControl('drop-sessions', (user_id) => sessionCache.dropUser(user_id));
    cluster.registerControl('drop-api-key', (api_key_id) => sessionCache.dropApiKey(api_key_id));
  } else {
    runtime = new ActorRuntime({
      store: embeddedStore!,
      clock,
      partitionCount: config.partitions,
      limits: { activations_max: config.actorsInMemoryMax },
      logger: logger.child({ component: 'runtime' }),
      observer: metrics,
    });
    for (const definition of allActors) runtime.register(definition);
    actors = runtime;
  }

  const clusterNode = cluster;
  // Every ask of the edge goes through this wrapper: revoking operations drop the user's cached session checks
  // (and API key checks) everywhere, and a key's revocation, change or deletion that key's last check.
  actors = new RevocationAwareActorClient(
    actors,
    async (user_id) => {
      sessionCache.dropUser(user_id);
      await clusterNode?.broadcastControl('drop-sessions', user_id);
    },
    async (api_key_id) => {
      sessionCache.dropApiKey(api_key_id);
      await clusterNode?.broadcastControl('drop-api-key', api_key_id);
    },
  );

  // The delivery workers listen before the first await: attempts (webhook events, jobs) that fell due while
  // the node was down are emitted as soon as the runtime runs, and one emitted with no worker listening would
  // wait for its deadline. Webhook attempts are emitted by the actors this runtime leads; this node delivers them.
  const webhookDelivery = new WebhookDeliveryWorker({
    events: runtime.events,
    actors,
    settings: () => webhookSettings(config),
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    logger: logger.child({ component: 'webhook-delivery' }),
  });
  webhookDelivery.start();
  const jobDelivery = new JobDeliveryWorker({
    events: runtime.events,
    actors,
    clock,
    settings: () => jobSettings(config),
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    logger: logger.child({ component: 'job-delivery' }),
    probeKey: config.cluster?.nodeId ?? 'local',
    concurrency_max: config.jobDeliveryConcurrency,
  });
  jobDelivery.start();

  let ready = false;
  /** This node's own URL, known once it listens: the base of issued URLs when PUBLIC_BASE_URL is unset. */
  let selfUrl = '';
  const inCluster = cluster !== undefined;
  /** Loaded once the runtime runs (the signing key is an actor), before the node listens. */
  let tokens: TokenService | undefined;
  const services: AppServices = {
    actors,
    get tokens(): TokenService {
      if (!tokens) throw new Error('the token service is used before the signing key was loaded');
      return tokens;
    },
    clock,
    config,
    metrics,
    mail: new LogMailTransport(logger.child({ component: 'mail' })),
    domainResolver: new SystemDomainResolver(),
    isReady: () => ready && (clusterNode ? clusterNode.isReady() : true),
    publicBaseUrl: () => config.publicBaseUrl || selfUrl,
    cluster: clusterNode,
    sessionCache,
  };
  const app = await buildApp(services, logger, areas.map((area) => area.routes));
  registerJobWorker(services, jobDelivery);
  // Every route's schemas are compiled before the node joins its cluster: that takes seconds of
  // event-loop time on a loaded machine, and a node holding partition leases meanwhile loses them
  // (a restarted node in the fault tests won partitions, then lost them to its own start-up).
  await app.ready();
  if (cluster) await cluster.begin();
  else await runtime.start();
  tokens = await untilReachable(
    () => TokenService.create(actors, { issuer: config.issuer, accessTtlSeconds: config.accessTokenTtlSeconds, now: () => clock.now() }),
    'signing key',
    clock,
    logger,
    inCluster,
  );

  if (config.adminEmail && config.adminPassword) {
    const { adminEmail, adminPassword } = config;
    const outcome = await untilReachable(() => new Accounts(services).bootstrapAdmin(adminEmail, adminPassword), 'bootstrap administrator', clock, logger, inCluster);
    logger.info({ email: config.adminEmail, outcome }, 'bootstrap administrator');
  }

  await app.listen({ host: config.host, port: config.port });
  ready = true;
  metrics.history.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  // A wildcard listen address names no host a client can use: such a node says localhost (and warns below).
  const wildcard = config.host === '0.0.0.0' || config.host === '::';
  selfUrl = config.cluster ? `http://${config.cluster.advertiseHost}:${port}` : wildcard ? `http://localhost:${port}` : url;
  if (!config.publicBaseUrl) {
    logger.warn({ base_url: selfUrl }, 'PUBLIC_BASE_URL is unset: OAuth issuer, SCIM locations and mailed links use this node\'s own URL; set PUBLIC_BASE_URL to the URL clients reach');
  }

  let closing: Promise<void> | undefined;
  const activeRuntime = runtime;
  return {
    app,
    runtime: activeRuntime,
    services,
    webhookDelivery,
    jobDelivery,
    url,
    close() {
      closing ??= (async () => {
        metrics.history.stop();
        webhookDelivery.stop();
        jobDelivery.stop();
        if (clusterNode) {
          // Hand every partition over first; meanwhile this edge keeps serving by forwarding.
          await clusterNode.drain();
          ready = false;
          await app.close();
          await clusterNode.stop();
          return;
        }
        ready = false;
        await app.close();
        await activeRuntime.stop();
      })();
      return closing;
    },
  };
}

/**
 * Start-up work on actors (the signing key, the bootstrap administrator). In a
 * cluster their partition may have no leader yet (after a stop of the whole
 * cluster, only a node of its in-sync set may lead it) or too few in-sync
 * copies to take a write (MIN_IN_SYNC_REPLICAS), so this node waits, retrying
 * every 503, until the other nodes have started.
 */
async function untilReachable<T>(work: () => Promise<T>, what: string, clock: Clock, logger: Logger, inCluster: boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!inCluster || !(error instanceof ServiceError) || error.statusCode !== 503) throw error;
      logger.warn({ attempt, code: error.code }, `${what} not reachable yet (its partition has no leader or too few in-sync copies); waiting for the other nodes`);
      // partition_unavailable already waited FORWARD_DEADLINE_MS; the others answer at once.
      if (error.code !== 'partition_unavailable') await new Promise<void>((resolve) => clock.setTimer(250, resolve));
    }
  }
}

/** The embedded store's partition count (runtime/partition-count.ts); the store is closed if the node cannot start on it. */
async function partitionCountOrClose(store: LmdbStore, requested: number | undefined): Promise<number> {
  try {
    return await embeddedPartitionCount(store, requested);
  } catch (error) {
    await store.close();
    throw error;
  }
}
