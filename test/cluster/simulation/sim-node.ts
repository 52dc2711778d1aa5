import { Registry } from 'prom-client';
import { partitionOf, type ActorDefinition, type RuntimeLogger } from '../../../runtime/index.js';
import { ClusterNode } from '../../../cluster/cluster-node.js';
import { clusterKeys } from '../../../cluster/etcd-keys.js';
import type { Checker } from './checker.js';
import { SimStore, type Disk } from './durable-store.js';
import { FakeEtcdClient, type FakeEtcd } from './fake-etcd.js';
import type { SimConfig } from './messages.js';
import type { Network } from './network.js';
import type { Rng } from './prng.js';
import { SimProcess } from './process.js';
import type { Scheduler } from './scheduler.js';
import { SimTransport, type TransportWorld } from './sim-transport.js';

/**
 * One simulated node: the production ClusterNode (membership, leadership,
 * replicator, router, the actor runtime, reconcile and handoff) on simulated
 * ports: the process's clock, a FakeEtcdClient, a SimTransport and a
 * SimStore on the node's Disk. A crash throws the ClusterNode away (its
 * memory) and keeps the Disk; a restart builds a new one.
 */
export interface World extends TransportWorld {
  sched: Scheduler;
  rng: Rng;
  etcd: FakeEtcd;
  net: Network;
  config: SimConfig;
  checker: Checker;
  node(id: string): SimNode | undefined;
  nodeIds(): string[];
  storeFailRate(): number;
  onStoreFailure(): void;
  /** How long the next commit stalls (0: it takes its usual 1-3 ms). */
  storeStallMs(): number;
  /** The node crashed (by a fault). */
  onCrash(id: string): void;
  /** The node's start failed and its process exited (its supervisor starts it again). */
  onStartFailed(id: string): void;
}

export const SIM_PREFIX = '/sim/';
export const keys = clusterKeys(SIM_PREFIX);
export const COUNTER_KIND = 'counter';

export interface CounterMessage {
  op: 'inc' | 'get';
  /** When the client issued it (a read must reflect every value observed before). */
  issuedAt: number;
}

/** Actor keys of the counter actor: for each partition and counter name, a key that hashes to that partition. */
export class CounterKeys {
  private readonly byKey = new Map<string, { p: number; counter: string }>();
  private readonly byName = new Map<string, string>();

  constructor(partitions: number, counters: readonly string[]) {
    for (const counter of counters) {
      let found = 0;
      for (let i = 0; found < partitions; i++) {
        const key = `${counter}.${i}`;
        const p = partitionOf(COUNTER_KIND, key, partitions);
        if (this.byName.has(`${p}/${counter}`)) continue;
        this.byName.set(`${p}/${counter}`, key);
        this.byKey.set(key, { p, counter });
        found++;
      }
    }
  }

  key(p: number, counter: string): string {
    return this.byName.get(`${p}/${counter}`)!;
  }

  of(key: string): { p: number; counter: string } {
    return this.byKey.get(key)!;
  }
}

export class SimNode {
  readonly process: SimProcess;
  /** The running ClusterNode (undefined while down). */
  cluster?: ClusterNode;
  /** begin() of the current incarnation resolved. */
  private begun = false;
  private transport?: SimTransport;
  private etcdClient?: FakeEtcdClient;
  private store?: SimStore;

  constructor(
    readonly id: string,
    private readonly world: World,
    readonly disk: Disk,
    private readonly counterKeys: CounterKeys,
    clockStopsWhilePaused: boolean,
  ) {
    this.process = new SimProcess(id, world.sched, world.rng, clockStopsWhilePaused);
  }

  get status(): SimProcess['status'] {
    return this.process.status;
  }

  /** One line of diagnostics for failure messages. */
  describe(): string {
    const node = this.cluster;
    if (!node) return `${this.id} ${this.status}`;
    const status = node.status();
    const held: string[] = [];
    for (let p = 0; p < this.world.config.partitions; p++) {
      const epoch = node.heldEpoch(p);
      if (epoch !== undefined) held.push(`p${p}@${epoch}${node.serving(p) ? '' : '(not serving)'}`);
    }
    return `${this.id} ${this.status} members [${status.members.map((m) => m.node_id).join(' ')}] held [${held.join(' ')}]`;
  }

  start(): void {
    if (this.status !== 'down') return;
    const inc = this.process.start();
    const { world } = this;
    this.transport = new SimTransport(this.id, this.process, world);
    this.etcdClient = new FakeEtcdClient(world.etcd, this.process, world.config.etcdLostAnswers === true);
    this.store = new SimStore(this.disk, this.process, () => world.storeFailRate(), () => world.onStoreFailure(), () => world.storeStallMs(), world.config.groupCommits === true);
    const logger = this.logger();
    const node = ClusterNode.create(
      {
        cluster: {
          etcdEndpoints: [],
          nodeId: this.id,
          grpcPort: 0,
          advertiseHost: this.id,
          replicationFactor: world.config.replicationFactor,
          minInSyncReplicas: world.config.minInSyncReplicas ?? 1,
          leaseTtlSeconds: world.config.leaseTtlSeconds,
          prefix: SIM_PREFIX,
          replicationTimeoutMs: world.config.replicationTimeoutMs,
          commitDelayMs: world.config.commitDelayMs ?? 0,
          forwardDeadlineMs: world.config.forwardDeadlineMs,
        },
        partitions: world.config.partitions,
        dataDir: '',
        durability: 'sync',
        httpUrl: `http://${this.id}`,
        bindHost: this.id,
        clock: this.process.clock,
        logger,
        registry: new Registry(),
        actors: [this.counterActor()],
      },
      { clock: this.process.clock, coordination: this.etcdClient, transport: this.transport, store: this.store },
    );
    this.hookChecks(node);
    this.cluster = node;
    world.sched.trace(`${this.id}: started`);
    this.begun = false;
    node.begin().then(
      () => {
        if (this.process.incarnation === inc) this.begun = true;
      },
      (error: unknown) => {
        if (this.process.incarnation !== inc) return;
        // In production a start that fails ends the process (http/server.ts exits 1) and its supervisor starts it again.
        world.sched.trace(`${this.id}: start failed, the process exits: ${String(error)}`);
        this.crash(false);
        world.onStartFailed(this.id);
      },
    );
  }

  /**
   * The node's connection to etcd drops for `ms` (watches break, requests
   * fail). Only once it has started: a start that fails ends the process in
   * production (not modelled here).
   */
  etcdDisconnect(ms: number): void {
    if (this.status === 'down' || !this.begun) return;
    this.etcdClient?.disconnect(ms);
  }

  /** The process dies (`byFault`: a crash the run injected; otherwise it exited after a failed start). */
  crash(byFault = true): void {
    if (this.status === 'down') return;
    if (byFault) this.world.sched.trace(`${this.id}: CRASH`);
    this.store?.crash();
    this.etcdClient?.crashed();
    this.process.crash();
    this.cluster = undefined;
    this.transport = undefined;
    this.resetPeers();
    if (byFault) this.world.onCrash(this.id);
  }

  /** Peers with an open stream to this node see it reset (the machine is up, the process is gone). */
  private resetPeers(): void {
    for (const peer of this.world.nodeIds()) {
      const node = this.world.node(peer);
      if (!node || node === this || !this.world.net.isUp(this.id, peer)) continue;
      const peerInc = node.process.incarnation;
      this.world.sched.after(this.world.rng.int(1, 5), () => node.process.post(peerInc, () => node.streamBroken(this.id)));
    }
  }

  /** Graceful stop (SIGTERM after a drain): the ClusterNode stops, then the process exits (the disk keeps everything). */
  async stop(): Promise<void> {
    const node = this.cluster;
    if (!node || this.status !== 'up') return;
    await node.stop();
    this.world.sched.trace(`${this.id}: stopped`);
    this.process.crash();
    this.cluster = undefined;
    this.transport = undefined;
    this.resetPeers();
  }

  pause(): void {
    if (this.status !== 'up') return;
    this.process.pause();
    this.world.sched.trace(`${this.id}: PAUSE`);
  }

  resume(): void {
    if (this.status !== 'paused') return;
    this.world.sched.trace(`${this.id}: RESUME`);
    this.process.resume();
  }

  /** This process's streams to `peer` broke. */
  streamBroken(peer: string): void {
    this.transport?.broken(peer);
  }

  handlers(): SimTransport['handlers'] {
    return this.transport?.handlers;
  }

  /** A client's request arrives at this node's edge: the production router takes it. */
  request(p: number, counter: string, message: CounterMessage): Promise<number> {
    const node = this.cluster;
    if (!node) return Promise.reject(new Error('node down'));
    return node.router.ask<number>(COUNTER_KIND, this.counterKeys.key(p, counter), message, { readOnly: message.op === 'get' });
  }

  /** The committed value of a counter on this node's disk. */
  committedValue(p: number, counter: string): number {
    return this.disk.counters(p).get(this.counterKeys.key(p, counter)) ?? 0;
  }

  private counterActor(): ActorDefinition<number, CounterMessage, number> {
    const { checker } = this.world;
    return {
      kind: COUNTER_KIND,
      storage: 'snapshot',
      initial: () => 0,
      step: (state, message, context) => {
        const { p, counter } = this.counterKeys.of(context.key);
        const m = message as CounterMessage;
        checker.onServe(p, this.id, this.cluster?.heldEpoch(p) ?? -1, m.op === 'get' ? 'read' : 'write');
        checker.onState(p, counter, state, this.id);
        return m.op === 'inc' ? { state: state + 1, reply: state + 1 } : { state, reply: state };
      },
    };
  }

  /** The checker sees what leaves the runtime (a reply is an observation once its turn committed) and each new leader's starting state. */
  private hookChecks(node: ClusterNode): void {
    const { checker } = this.world;
    const runtime = node.runtime;
    // askWith is where every ask goes: ask (the edge's, and the router's for a partition this node serves) through it,
    // and the forward path of a peer's messages directly.
    const askWith = runtime.askWith.bind(runtime);
    runtime.askWith = (kind, key, message, resolve, reject) =>
      askWith(
        kind,
        key,
        message,
        (value) => {
          const { p, counter } = this.counterKeys.of(key);
          const m = message as CounterMessage;
          if (m.op === 'inc') checker.onAck(p, counter, value as number, this.id);
          else checker.onRead(p, counter, value as number, m.issuedAt, this.id);
          resolve(value);
        },
        (error: unknown) => {
          if ((error as { code?: string }).code === 'not_enough_replicas') checker.refusedWrites++;
          reject(error);
        },
      );
    const open = runtime.openPartition.bind(runtime);
    runtime.openPartition = (p: number) => {
      if (!runtime.ownsPartition(p)) {
        const counters = new Map<string, number>();
        for (const [key, value] of this.disk.counters(p)) counters.set(this.counterKeys.of(key).counter, value);
        checker.onBecomeLeader(p, this.id, node.heldEpoch(p) ?? -1, counters);
      }
      open(p);
    };
  }

  private logger(): RuntimeLogger {
    const { sched } = this.world;
    const line = (level: string) => (object: object, message?: string) => {
      const fields = Object.entries(object)
        .filter(([k]) => k !== 'err')
        .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
        .join(' ');
      const err = (object as { err?: unknown }).err;
      sched.trace(`${this.id}: ${level} ${message ?? ''} ${fields}${err ? ` (${String(err)})` : ''}`);
    };
    return { debug() {}, info: line('info'), warn: line('warn'), error: line('error') };
  }
}
