import { mkdirSync } from 'node:fs';
import type { Registry } from 'prom-client';
import { ActorRuntime, LmdbStore, partitionOf, refuseOtherLayout, ServiceError, type ActorDefinition, type Clock, type RuntimeLogger, type RuntimeObserver } from '../runtime/index.js';
import type { ClusterConfig } from './config.js';
import { requestDrain, type DrainOutcome } from './drain-request.js';
import { clusterKeys, type ClusterConfigRecord, type ClusterKeys, type NodeStatus } from './etcd-keys.js';
import { Leadership } from './leadership.js';
import { Membership } from './membership.js';
import { ClusterMetrics } from './metrics.js';
import { replicaSet } from './placement.js';
import { ReplicatedStore } from './replication/replicated-store.js';
import { Replicator } from './replication/replicator.js';
import { ClusterRouter } from './router.js';
import { EtcdCoordination } from './etcd-coordination.js';
import { every, sleep, SystemClusterClock, type ClusterClock, type ClusterPorts, type Coordination, type CoordinationWatch, type TimerHandle, type Transport } from './ports.js';
import { GrpcTransport } from './transport/grpc-transport.js';

export interface ClusterNodeOptions {
  cluster: ClusterConfig;
  partitions: number;
  /** limits.activations_max of this node's runtime. */
  actorsInMemoryMax?: number;
  dataDir: string;
  durability: 'sync' | 'commit';
  /** LMDB_MAP_SIZE_GB (runtime/store-lmdb.ts); default 64. */
  lmdbMapSizeGb?: number;
  httpUrl: string;
  /** Interface the gRPC server binds (the HTTP HOST). */
  bindHost: string;
  clock: Clock;
  logger: RuntimeLogger;
  observer?: RuntimeObserver;
  registry: Registry;
  actors: ActorDefinition[];
}

/** What the edge and operators see of the cluster (GET /cluster/status). */
export interface ClusterStatusView {
  node_id: string;
  draining: boolean;
  /** This node's view of etcd follows it (read in full and watched since, no break); the revision of that read. */
  view: { fresh: boolean; revision: number };
  members: { node_id: string; http_url: string; grpc_address: string; draining: boolean; view_fresh: boolean }[];
  partitions: { partition: number; leader: string | null; epoch: number | null; isr: string[] }[];
}

const RECONCILE_INTERVAL_MS = 200;
/** Forwarded messages whose kind starts with this are node-level controls, not actor messages. */
const CONTROL_PREFIX = '$control:';
/** How long a broadcast control waits for each node's answer. */
const CONTROL_TIMEOUT_MS = 2_000;
const STATUS_INTERVAL_MS = 2000;

/**
 * One cluster node: LMDB behind the replicator, the actor runtime serving
 * the partitions this node leads, membership and leadership in etcd, the
 * gRPC server for peers, and the router the edge sends messages through.
 * The composition root of cluster mode (http/node.ts calls it when
 * ETCD_ENDPOINTS is set).
 */
export class ClusterNode {
  readonly runtime: ActorRuntime;
  readonly router: ClusterRouter;
  readonly nodeId: string;
  private readonly coordination: Coordination;
  private readonly transport: Transport;
  private readonly clusterClock: ClusterClock;
  private readonly keys: ClusterKeys;
  private readonly replicator: Replicator;
  private readonly membership: Membership;
  private readonly leadership: Leadership;
  private readonly metrics: ClusterMetrics;
  private readonly handingOff = new Set<number>();
  private readonly controls = new Map<string, (key: string) => void>();
  /** Each peer's life as last seen (start time and lease): a change means a new process behind the same id. */
  private readonly peerLives = new Map<string, string>();
  private reconcileTimer?: TimerHandle;
  private statusTimer?: TimerHandle;
  private watchers: CoordinationWatch[] = [];
  private forwardedTotal = 0;
  private drainPromise?: Promise<void>;
  private stopped = false;

  private constructor(
    private readonly options: ClusterNodeOptions,
    ports: ClusterPorts,
  ) {
    const { cluster, logger } = options;
    this.nodeId = cluster.nodeId;
    this.coordination = ports.coordination;
    this.transport = ports.transport;
    this.clusterClock = ports.clock;
    this.keys = clusterKeys(cluster.prefix);
    const local = ports.store;
    refuseOtherLayout(local, options.partitions);
    const grpcAddress = `${cluster.advertiseHost}:${cluster.grpcPort}`;
    this.membership = new Membership(
      this.coordination,
      this.clusterClock,
      this.keys,
      { node_id: this.nodeId, http_url: options.httpUrl, grpc_address: grpcAddress, started_at: new Date(options.clock.now()).toISOString(), draining: false },
      cluster.leaseTtlSeconds,
      logger,
    );
    this.leadership = new Leadership(this.coordination, this.clusterClock, this.keys, this.membership, options.partitions, { node_id: this.nodeId, grpc_address: grpcAddress }, logger);
    this.replicator = new Replicator({
      local,
      selfId: this.nodeId,
      heldEpoch: (p) => this.leadership.heldEpoch(p),
      streamTo: (node, onReply, onClose) => {
        const member = this.membership.members().get(node);
        if (!member) return undefined;
        return this.transport.peer(node, member.grpc_address).replicate(onReply, onClose);
      },
      recordInSync: (p, epoch, replicas) => this.leadership.updateIsr(p, epoch, replicas),
      deposed: (p, reason) => this.deposed(p, reason),
      logger,
      clock: this.clusterClock,
      replicationTimeoutMs: cluster.replicationTimeoutMs,
      commitDelayMs: cluster.commitDelayMs,
      minInSyncReplicas: cluster.minInSyncReplicas,
      observeAck: (ms) => this.metrics.replicationAck.observe(ms / 1000),
    });
    this.runtime = new ActorRuntime({
      store: new ReplicatedStore(local, this.replicator),
      clock: options.clock,
      partitionCount: options.partitions,
      limits: options.actorsInMemoryMax === undefined ? undefined : { activations_max: options.actorsInMemoryMax },
      logger,
      observer: options.observer,
      initialPartitions: 'none',
      partitionGate: (p) => this.replicator.isLeading(p) && this.leadership.heldEpoch(p) !== undefined,
      remoteDelivery: (kind, key, message, messageId) => this.router.deliver(kind, key, message, messageId),
    });
    for (const definition of options.actors) this.runtime.register(definition);
    this.router = new ClusterRouter({
      selfId: this.nodeId,
      runtime: this.runtime,
      leadership: this.leadership,
      transport: this.transport,
      clock: this.clusterClock,
      serving: (p) => this.serving(p),
      deadlineMs: cluster.forwardDeadlineMs,
      logger,
      onForward: () => {
        this.forwardedTotal++;
        this.metrics.forwarded.inc();
      },
    });
    this.metrics = new ClusterMetrics(options.registry, {
      partitionsLed: () => this.replicator.ledPartitions().length,
      maxLag: () => Math.max(0, ...this.replicator.ledPartitions().flatMap((p) => Object.values(this.replicator.lagOf(p)))),
      inSyncFollowers: () =>
        this.replicator.ledPartitions().reduce((sum, p) => sum + [...(this.replicator.followersOf(p)?.values() ?? [])].filter((f) => f.mode === 'in_sync').length, 0),
    });
  }

  /** Starts a node on `ports` (by default the real ones: etcd, gRPC, LMDB in dataDir, the system clock). */
  static async start(options: ClusterNodeOptions, ports: ClusterPorts = productionPorts(options)): Promise<ClusterNode> {
    const node = ClusterNode.create(options, ports);
    await node.begin();
    return node;
  }

  /** A node not started yet (the simulation hooks its checks in first); begin() starts it. */
  static create(options: ClusterNodeOptions, ports: ClusterPorts): ClusterNode {
    return new ClusterNode(options, ports);
  }

  /** A node-level control other nodes can trigger here with broadcastControl (e.g. dropping cached session checks). */
  registerControl(name: string, handler: (key: string) => void): void {
    this.controls.set(name, handler);
  }

  /**
   * Runs control `name` on every other live node and waits for their
   * answers (each bounded by CONTROL_TIMEOUT_MS; a node that does not answer
   * is logged, and the caller relies on its own bound, e.g. a cache TTL).
   */
  async broadcastControl(name: string, key: string): Promise<void> {
    const others = [...this.membership.members().values()].filter((m) => m.node_id !== this.nodeId);
    await Promise.all(
      others.map(async (member) => {
        const peer = this.transport.peer(member.node_id, member.grpc_address);
        let timer: TimerHandle | undefined;
        const timeout = new Promise<never>((_, reject) => {
          timer = this.clusterClock.setTimer(CONTROL_TIMEOUT_MS, () => reject(new Error('no answer in time')));
        });
        try {
          await Promise.race([peer.forward(CONTROL_PREFIX + name, key, null), timeout]);
        } catch (error) {
          this.options.logger.warn({ err: error, node: member.node_id, control: name }, 'control broadcast not confirmed by a node');
        } finally {
          timer?.cancel();
        }
      }),
    );
  }

  private runControl(name: string, key: string): Promise<unknown> {
    const handler = this.controls.get(name);
    if (!handler) return Promise.reject(new ServiceError('BAD_REQUEST', `unknown control ${name}`));
    handler(key);
    return Promise.resolve(null);
  }

  /** The epoch at which this node holds p's key, if it does and its lease is surely alive. */
  heldEpoch(p: number): number | undefined {
    return this.leadership.heldEpoch(p);
  }

  /** This node serves p now: it holds p's key, its lease is surely alive, its log and runtime are open. */
  serving(p: number): boolean {
    return this.replicator.isLeading(p) && this.leadership.heldEpoch(p) !== undefined && this.runtime.ownsPartition(p);
  }

  /** Joined, lease alive, its view of etcd fresh, and every partition has a leader this node knows of. */
  isReady(): boolean {
    return !this.stopped && this.membership.leaseValid() && this.viewFresh() && this.leadership.allLed();
  }

  /** Members and partition leaders both follow etcd: read in full and watched since, with no break. */
  viewFresh(): boolean {
    return this.membership.view.fresh && this.leadership.view.fresh;
  }

  /** The revision up to which both views are known complete (the older of their last full reads). */
  private viewRevision(): number {
    return Math.min(this.membership.view.revision, this.leadership.view.revision);
  }

  /** Publishes the view's freshness in this node's member record (others hand partitions only to fresh nodes). */
  private publishView(): void {
    if (this.stopped) return;
    void this.membership.setView(this.viewFresh(), this.viewRevision());
  }

  /** A peer whose record changed lease or start time is a new process: its old channel (and any reconnect backoff) goes. */
  private forgetRestartedPeers(): void {
    const members = this.membership.members();
    for (const [id, life] of this.peerLives) {
      const member = members.get(id);
      if (member && `${member.started_at}/${member.lease_id ?? ''}` === life) continue;
      this.peerLives.delete(id);
      this.transport.forget(id);
      this.options.logger.info({ peer: id, reason: member ? 'restarted' : 'left' }, 'peer channel dropped');
    }
    for (const [id, member] of members) {
      if (id !== this.nodeId && !this.peerLives.has(id)) this.peerLives.set(id, `${member.started_at}/${member.lease_id ?? ''}`);
    }
  }

  /** A member's HTTP base URL, or undefined if it is not in the cluster now (one map lookup, not the whole status view). */
  memberHttpUrl(node_id: string): string | undefined {
    return this.membership.members().get(node_id)?.http_url;
  }

  status(): ClusterStatusView {
    const partitions: ClusterStatusView['partitions'] = [];
    for (let p = 0; p < this.options.partitions; p++) {
      const leader = this.leadership.leaderOf(p);
      partitions.push({ partition: p, leader: leader?.node_id ?? null, epoch: leader?.epoch ?? null, isr: this.leadership.isrOf(p)?.replicas ?? [] });
    }
    return {
      node_id: this.nodeId,
      draining: this.membership.draining,
      view: { fresh: this.viewFresh(), revision: this.viewRevision() },
      members: [...this.membership.members().values()].map((m) => ({
        node_id: m.node_id,
        http_url: m.http_url,
        grpc_address: m.grpc_address,
        draining: m.draining,
        view_fresh: m.view_fresh !== false,
      })),
      partitions,
    };
  }

  /**
   * What every node last published about the partitions it leads (status/<node>
   * in etcd, refreshed every STATUS_INTERVAL_MS): replication lag and follower
   * modes, for operators (the console's cluster page). Unparsable records are skipped.
   */
  async publishedStatuses(): Promise<NodeStatus[]> {
    const { kvs } = await this.coordination.range(this.keys.statusPrefix);
    const statuses: NodeStatus[] = [];
    for (const kv of kvs) {
      try {
        statuses.push(JSON.parse(kv.value) as NodeStatus);
      } catch {
        // A record being rewritten by an older version: the next read has it.
      }
    }
    return statuses;
  }

  /**
   * An operator's drain of `nodeId` (this node or another), as `cluster
   * drain` does it: the request key in etcd, which that node watches. Checked
   * against the members this node sees.
   */
  requestDrain(nodeId: string): Promise<DrainOutcome> {
    const members = [...this.membership.members().values()];
    return requestDrain((key, value) => this.coordination.put(key, value), this.keys, members, nodeId, new Date(this.options.clock.now()));
  }

  /**
   * Hands every partition this node leads to the others (SIGTERM, `cluster
   * drain`): marks itself draining so placement skips it, lets the new
   * preferred replicas catch up, then moves each partition. Requests in
   * flight meanwhile wait and are served by the new leaders.
   */
  drain(timeoutMs = 30_000): Promise<void> {
    this.drainPromise ??= (async () => {
      this.leadership.setElectionsEnabled(false);
      await this.membership.setDraining();
      const deadline = this.clusterClock.monotonicNow() + timeoutMs;
      const othersCanTakeOver = () => [...this.membership.members().values()].some((m) => m.node_id !== this.nodeId && !m.draining);
      while (this.replicator.ledPartitions().length > 0 && this.clusterClock.monotonicNow() < deadline) {
        // The last node standing has nobody to hand over to: stop at once, its data stays on disk.
        if (!othersCanTakeOver()) break;
        this.reconcile();
        await sleep(this.clusterClock, 50);
      }
      const left = this.replicator.ledPartitions().length;
      if (left > 0 && !othersCanTakeOver()) this.options.logger.warn({ partitions: left }, 'no other node to hand partitions to; they stay on this node\'s disk');
      else if (left > 0) this.options.logger.warn({ partitions: left }, 'drain timed out; the remaining partitions fail over when this node leaves');
      else this.options.logger.info({}, 'drained: every partition handed over');
    })();
    return this.drainPromise;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.reconcileTimer?.cancel();
    this.statusTimer?.cancel();
    for (const watcher of this.watchers) await watcher.cancel().catch(() => undefined);
    await this.leadership.stop();
    this.replicator.stop();
    // An operator's drain request ends with this node's life.
    await this.coordination.delete(this.keys.drain(this.nodeId)).catch(() => undefined);
    await this.membership.leave();
    await this.transport.close();
    await this.runtime.stop();
    this.coordination.close();
  }

  // ---- internals ----

  /** Joins the cluster: etcd config check, runtime, transport, membership, leadership, timers, operator keys. */
  async begin(): Promise<void> {
    const { cluster } = this.options;
    await this.ensureClusterConfig();
    await this.runtime.start();
    await this.transport.listen(this.options.bindHost, cluster.grpcPort, {
      forward: (kind, key, message, messageId, resolve, reject) => {
        if (kind.startsWith(CONTROL_PREFIX)) {
          this.runControl(kind.slice(CONTROL_PREFIX.length), key).then(resolve, reject);
          return;
        }
        const p = partitionOf(kind, key, this.options.partitions);
        if (!this.serving(p)) reject(new ServiceError('not_leader'));
        else if (messageId === undefined) this.runtime.askWith(kind, key, message, resolve, reject);
        else this.runtime.deliverWith(kind, key, message, messageId, resolve, reject);
      },
      replicate: (_from, messages) => this.replicator.applyFrame(messages),
    });
    this.replicator.start();
    await this.membership.join();
    this.leadership.on('acquired', (p: number, epoch: number) => void this.onAcquired(p, epoch));
    this.leadership.on('lost', (p: number) => this.onLost(p));
    this.membership.on('change', () => {
      this.forgetRestartedPeers();
      this.reconcile();
    });
    // A new lease after a loss: whatever the watches say, read everything again.
    this.membership.on('granted', () => {
      this.membership.view.resync('lease re-granted');
      this.leadership.view.resync('lease re-granted');
    });
    for (const view of [this.membership.view, this.leadership.view]) {
      view.on('stale', () => this.publishView());
      view.on('fresh', () => this.publishView());
    }
    await this.leadership.start();
    this.forgetRestartedPeers();
    this.publishView();
    this.reconcileTimer = every(this.clusterClock, RECONCILE_INTERVAL_MS, () => this.reconcile());
    this.statusTimer = every(this.clusterClock, STATUS_INTERVAL_MS, () => void this.publishStatus());
    await this.watchOperatorKeys();
  }

  /** The partition count and replication factor are the cluster's, fixed when it was created. */
  private async ensureClusterConfig(): Promise<void> {
    const wanted: ClusterConfigRecord = {
      partitions: this.options.partitions,
      replication_factor: this.options.cluster.replicationFactor,
      created_at: new Date(this.options.clock.now()).toISOString(),
    };
    await this.coordination.txn([{ key: this.keys.config, target: 'create', equals: 0 }], [{ type: 'put', key: this.keys.config, value: JSON.stringify(wanted) }]);
    const stored = JSON.parse((await this.coordination.get(this.keys.config)) ?? '{}') as ClusterConfigRecord;
    if (stored.partitions !== this.options.partitions) {
      throw new Error(`PARTITIONS is ${this.options.partitions} but the cluster was created with ${stored.partitions}; it cannot change`);
    }
    if (stored.replication_factor !== this.options.cluster.replicationFactor) {
      throw new Error(
        `REPLICATION_FACTOR is ${this.options.cluster.replicationFactor} but the cluster was created with ${stored.replication_factor}; every node must use the same`,
      );
    }
  }

  private async onAcquired(p: number, epoch: number): Promise<void> {
    const ok = await this.replicator.becomeLeader(p, epoch).catch((error: unknown) => {
      this.options.logger.error({ err: error, partition: p }, 'could not take up partition leadership');
      return false;
    });
    if (!ok || this.leadership.heldEpoch(p) !== epoch) {
      // This leadership ended while it was being taken up; a later one may already run: leave it be.
      this.replicator.stopLeading(p, epoch);
      void this.leadership.releaseEpoch(p, epoch);
      return;
    }
    this.runtime.openPartition(p);
    this.metrics.leadershipChanges.inc({ change: 'acquired' });
    this.reconcile();
  }

  private onLost(p: number): void {
    this.replicator.stopLeading(p);
    void this.runtime.closePartition(p);
    this.metrics.leadershipChanges.inc({ change: 'lost' });
  }

  private deposed(p: number, reason: string): void {
    this.options.logger.warn({ partition: p, reason }, 'giving up partition leadership');
    this.replicator.stopLeading(p);
    void this.runtime.closePartition(p);
    void this.leadership.release(p);
  }

  /** Placement pass over the partitions this node leads: followers wanted, and handoff to the preferred node. */
  private reconcile(): void {
    if (this.stopped) return;
    const memberMap = this.membership.members();
    const members = [...memberMap.values()];
    // Hand a partition over only when both sides see etcd as it is: a target
    // whose watches are down would never see the key released, and take nothing.
    const handoffAllowed = (target: string) => this.viewFresh() && memberMap.get(target)?.view_fresh !== false;
    const live = new Set(members.map((m) => m.node_id));
    const candidates = members.filter((m) => !m.draining).map((m) => m.node_id);
    const rf = this.options.cluster.replicationFactor;
    for (const p of this.replicator.ledPartitions()) {
      if (this.handingOff.has(p)) continue;
      const desired = replicaSet(p, candidates.length > 0 ? candidates : [this.nodeId], rf);
      const wanted = desired.includes(this.nodeId) ? desired.filter((n) => n !== this.nodeId) : desired;
      this.replicator.setFollowers(p, wanted, live);
      const target = desired[0];
      if (target !== this.nodeId && handoffAllowed(target) && this.replicator.inSyncFollower(p, target)) void this.handoff(p, target);
    }
  }

  private async handoff(p: number, target: string): Promise<void> {
    this.handingOff.add(p);
    try {
      await this.runtime.closePartition(p);
      if (!this.replicator.isLeading(p)) return;
      if (!this.replicator.inSyncFollower(p, target)) {
        // The target fell out of sync meanwhile: keep serving.
        this.runtime.openPartition(p);
        return;
      }
      await this.replicator.releaseLeadership(p);
      await this.leadership.release(p);
      this.metrics.partitionMoves.inc();
      this.metrics.leadershipChanges.inc({ change: 'lost' });
      this.options.logger.info({ partition: p, to: target }, 'partition handed over');
    } catch (error) {
      this.options.logger.error({ err: error, partition: p }, 'handoff failed');
    } finally {
      this.handingOff.delete(p);
    }
  }

  private async publishStatus(): Promise<void> {
    if (this.stopped || !this.membership.leaseValid()) return;
    const lag: NodeStatus['lag'] = {};
    const followers: NodeStatus['followers'] = {};
    for (const p of this.replicator.ledPartitions()) {
      lag[p] = this.replicator.lagOf(p);
      followers[p] = Object.fromEntries([...(this.replicator.followersOf(p) ?? new Map())].map(([n, f]) => [n, f.mode]));
    }
    const status: NodeStatus = {
      node_id: this.nodeId,
      at: new Date(this.options.clock.now()).toISOString(),
      leading: this.replicator.ledPartitions(),
      lag,
      followers,
      forwarded_total: this.forwardedTotal,
    };
    await this.coordination
      .put(this.keys.status(this.nodeId), JSON.stringify(status), this.membership.leaseId)
      .catch((error: unknown) => this.options.logger.debug({ err: error }, 'status publish failed'));
  }

  private async watchOperatorKeys(): Promise<void> {
    // A drain request left by a previous life of this node (it crashed while drained) does not apply to this one.
    await this.coordination.delete(this.keys.drain(this.nodeId));
    const ignore = () => undefined;
    const warn = (error: unknown) => this.options.logger.warn({ err: error }, 'operator key watch error');
    const drainWatcher = await this.coordination.watch({ key: this.keys.drain(this.nodeId) }, undefined, {
      put: () => {
        this.options.logger.info({}, 'drain requested by an operator');
        void this.drain(120_000);
      },
      delete: ignore,
      error: warn,
    });
    const rebalanceWatcher = await this.coordination.watch({ key: this.keys.rebalance }, undefined, { put: () => this.reconcile(), delete: ignore, error: warn });
    this.watchers.push(drainWatcher, rebalanceWatcher);
  }
}

/** The real ports: etcd at ETCD_ENDPOINTS, gRPC peers, LMDB in dataDir, the system clock. */
export function productionPorts(options: ClusterNodeOptions): ClusterPorts {
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  return {
    clock: new SystemClusterClock(),
    coordination: EtcdCoordination.connect(options.cluster.etcdEndpoints),
    transport: new GrpcTransport(options.cluster.nodeId, options.logger, options.cluster.leaseTtlSeconds),
    store: new LmdbStore({ path: options.dataDir, sync: options.durability === 'sync', mapSizeGb: options.lmdbMapSizeGb }),
  };
}
