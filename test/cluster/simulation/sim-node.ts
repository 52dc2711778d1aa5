import type { WriteOp } from '../../../runtime/index.js';
import { electionRank, isrAfterElection } from '../../../cluster/election.js';
import { clusterKeys, parsePartitionKey, type IsrRecord } from '../../../cluster/etcd-keys.js';
import { replicaSet } from '../../../cluster/placement.js';
import { LeaderLog } from '../../../cluster/replication/leader-log.js';
import { decideAppend, decideSnapshot, fenceAt, type LogEntry, type PartitionVersion } from '../../../cluster/replication/partition-log.js';
import type { Checker } from './checker.js';
import { CommitQueue, type DurableStore, type Mutation } from './durable-store.js';
import type { FakeEtcd, KeyValue, Watcher, WatchEvent } from './fake-etcd.js';
import type { ClientReply, ClientRequest, ReplicateMessage, ReplicateReply, SimConfig } from './messages.js';
import type { Network } from './network.js';
import type { Rng } from './prng.js';
import type { Scheduler } from './scheduler.js';

/**
 * One simulated node: membership (lease + local lease deadline), leadership
 * (elections by etcd transaction), and both sides of replication, mirroring
 * cluster/membership.ts, cluster/leadership.ts, cluster/replication/replicator.ts
 * and the reconcile/handoff part of cluster/cluster-node.ts, event by event,
 * with the same pure rules. Everything but the DurableStore is memory: a
 * crash loses it.
 */
export interface World {
  sched: Scheduler;
  rng: Rng;
  etcd: FakeEtcd;
  net: Network;
  config: SimConfig;
  checker: Checker;
  node(id: string): SimNode | undefined;
  nodeIds(): string[];
  storeFailRate(): number;
  /** The node crashed (by a fault or a failed commit). */
  onCrash(id: string, reason: string): void;
}

export const keys = clusterKeys('/sim/');

interface Session {
  stage: 'streaming' | 'snapshot';
  /** The leader learned this stream broke; the next send opens a new one. */
  closed: boolean;
}

interface Led {
  log: LeaderLog;
  epoch: number;
  recent: LogEntry[];
  waiters: Map<number, (ok: boolean) => void>;
  sessions: Map<string, Session>;
  isrBusy: boolean;
  /** The partition's actors (one per counter), as in runtime/actor-runtime.ts. */
  actors: Map<string, Actor>;
}

/**
 * A counter actor: its state is read from the local store on activation;
 * one batch of messages runs at a time, and its replies leave only after
 * the batch's commit (the runtime's output gate); a failed commit fails the
 * whole batch and reloads the state from the store. Messages accepted
 * before the partition closed still run to the end (closePartition).
 */
interface Actor {
  counter: string;
  state: number;
  running: boolean;
  mailbox: { request: ClientRequest; reply: (r: ClientReply) => void }[];
}

const BATCH_MAX = 16;

const RECENT_ENTRIES = 4096;

export class SimNode {
  status: 'down' | 'up' | 'paused' = 'down';
  incarnation = 0;
  private inbox: (() => void)[] = [];
  private watchers: Watcher[] = [];
  private lastToEtcd = 0;
  private lastFromEtcd = 0;

  // ---- memory (lost on crash) ----
  private commits!: CommitQueue;
  private joined = false;
  private readonly earlyEvents: WatchEvent[] = [];
  leaseId = 0;
  private validUntil = 0;
  private firedAt: number[] = [];
  private lastKeepalive = 0;
  private readonly members = new Set<string>();
  private readonly leaders = new Map<number, { node: string; epoch: number }>();
  private readonly isrs = new Map<number, { record: IsrRecord; modRevision: number }>();
  private readonly held = new Map<number, number>();
  private readonly noLeaderSince = new Map<number, number>();
  private readonly attempting = new Set<number>();
  readonly led = new Map<number, Led>();
  private readonly awaitingSnapshot = new Set<number>();
  private readonly applyQueue: { from: string; fromInc: number; message: ReplicateMessage }[] = [];
  private applying = false;
  private readonly applyIdleWaiters: (() => void)[] = [];
  private readonly handingOff = new Set<number>();
  private readonly closed = new Set<number>();
  private lastReconcile = 0;
  /** A fault armed to strike right after this node's next entry is shipped (mid-replication). */
  onNextAppend?: () => void;
  private lastLaggardCheck = 0;

  constructor(
    readonly id: string,
    private readonly world: World,
    readonly disk: DurableStore,
  ) {}

  /** One line of diagnostics for failure messages. */
  describe(): string {
    const led = [...this.led].map(
      ([p, l]) =>
        `p${p}@${l.epoch}{pending ${l.log.pendingCount}, followers ${[...l.log.followers].map(([n, f]) => `${n}:${f.mode}/${f.acked}`).join(' ')}, sessions ${[...l.sessions].map(([n, s]) => `${n}:${s.stage}${s.closed ? '/closed' : ''}`).join(' ')}${l.isrBusy ? ', isr busy' : ''}}`,
    );
    return `${this.id} ${this.status} lease ${this.leaseId} valid ${this.leaseValid()} held [${[...this.held].map(([p, e]) => `p${p}@${e}`).join(' ')}] led [${led.join(' ')}] closed [${[...this.closed].join(' ')}] awaiting snapshot [${[...this.awaitingSnapshot].join(' ')}] apply queue ${this.applyQueue.length}${this.applying ? ' (applying)' : ''}`;
  }

  // ---- process model ----

  /** Runs fn in this node's process: dropped if it crashed since `inc`, queued while paused. */
  post(inc: number, fn: () => void): void {
    if (inc !== this.incarnation || this.status === 'down') return;
    if (this.status === 'paused') this.inbox.push(fn);
    else fn();
  }

  private later(delay: number, fn: () => void): void {
    const inc = this.incarnation;
    this.world.sched.after(delay, () => this.post(inc, fn));
  }

  private trace(line: string): void {
    this.world.sched.trace(`${this.id}: ${line}`);
  }

  start(): void {
    if (this.status !== 'down') return;
    this.incarnation++;
    this.status = 'up';
    this.inbox = [];
    this.resetMemory();
    const inc = this.incarnation;
    this.commits = new CommitQueue(
      this.world.sched,
      this.world.rng,
      this.disk,
      () => this.world.storeFailRate(),
      () => this.crash('store commit failed'),
      (fn) => this.post(inc, fn),
    );
    this.trace('started');
    this.join();
  }

  crash(reason = 'crash'): void {
    if (this.status === 'down') return;
    this.trace(`CRASH (${reason})`);
    this.commits.crash();
    this.status = 'down';
    this.incarnation++;
    this.inbox = [];
    for (const w of this.watchers) this.world.etcd.cancel(w);
    this.watchers = [];
    this.resetMemory();
    // Peers with an open stream to this node see it reset (the machine is up, the process is gone).
    for (const peer of this.world.nodeIds()) {
      const node = this.world.node(peer);
      if (!node || node === this || !this.world.net.isUp(this.id, peer)) continue;
      const peerInc = node.incarnation;
      this.world.sched.after(this.world.rng.int(1, 5), () => node.post(peerInc, () => node.onStreamClosed(this.id)));
    }
    this.world.onCrash(this.id, reason);
  }

  pause(): void {
    if (this.status !== 'up') return;
    this.status = 'paused';
    this.trace('PAUSE');
  }

  resume(): void {
    if (this.status !== 'paused') return;
    this.status = 'up';
    this.trace('RESUME');
    const inc = this.incarnation;
    while (this.inbox.length > 0 && this.incarnation === inc && this.status === 'up') this.inbox.shift()!();
  }

  private resetMemory(): void {
    this.joined = false;
    this.earlyEvents.length = 0;
    this.leaseId = 0;
    this.validUntil = 0;
    this.firedAt = [];
    this.members.clear();
    this.leaders.clear();
    this.isrs.clear();
    this.held.clear();
    this.noLeaderSince.clear();
    this.attempting.clear();
    this.led.clear();
    this.awaitingSnapshot.clear();
    this.applyQueue.length = 0;
    this.applying = false;
    this.applyIdleWaiters.length = 0;
    this.handingOff.clear();
    this.closed.clear();
    this.onNextAppend = undefined;
  }

  /** A request to etcd and its answer, each after a network delay, in order. */
  private etcdCall<T>(op: (etcd: FakeEtcd) => T, onReply: (result: T) => void): void {
    const inc = this.incarnation;
    const { sched, rng } = this.world;
    this.lastToEtcd = Math.max(this.lastToEtcd, sched.now + rng.int(1, 4));
    sched.at(this.lastToEtcd, () => {
      const result = op(this.world.etcd);
      this.lastFromEtcd = Math.max(this.lastFromEtcd, sched.now + rng.int(1, 4));
      sched.at(this.lastFromEtcd, () => this.post(inc, () => onReply(result)));
    });
  }

  // ---- membership ----

  leaseValid(): boolean {
    return this.leaseId !== 0 && this.world.sched.now < this.validUntil;
  }

  private join(): void {
    const started = this.world.sched.now;
    const inc = this.incarnation;
    const ttl = this.world.config.leaseTtlMs;
    this.etcdCall(
      (etcd) => {
        const lease = etcd.grant(ttl);
        etcd.txn([], [{ put: keys.member(this.id), value: this.id, lease }]);
        const kvs = etcd.range(keys.base);
        // Events after the snapshot's revision; the real watch starts at revision + 1, so none is seen before the snapshot.
        const watcher = etcd.watch(keys.base, (event) =>
          this.post(inc, () => {
            if (this.joined) this.onWatch(event);
            else this.earlyEvents.push(event);
          }),
        );
        if (inc === this.incarnation) this.watchers.push(watcher);
        else etcd.cancel(watcher);
        return { lease, kvs };
      },
      ({ lease, kvs }) => {
        this.leaseId = lease;
        this.validUntil = started + ttl * 0.9;
        this.firedAt = [];
        this.lastKeepalive = this.world.sched.now;
        for (const kv of kvs) this.applyPut(kv);
        for (let p = 0; p < this.world.config.partitions; p++) if (!this.leaders.has(p)) this.noLeaderSince.set(p, this.world.sched.now);
        this.joined = true;
        for (const event of this.earlyEvents.splice(0)) this.onWatch(event);
        this.trace(`joined with lease ${lease}`);
        this.tick();
      },
    );
  }

  private rejoin(): void {
    const started = this.world.sched.now;
    const ttl = this.world.config.leaseTtlMs;
    this.etcdCall(
      (etcd) => {
        const lease = etcd.grant(ttl);
        etcd.txn([], [{ put: keys.member(this.id), value: this.id, lease }]);
        return lease;
      },
      (lease) => {
        this.leaseId = lease;
        this.validUntil = started + ttl * 0.9;
        this.firedAt = [];
        this.lastKeepalive = this.world.sched.now;
        this.trace(`re-joined with lease ${lease}`);
        this.reconcile();
      },
    );
  }

  private keepalive(): void {
    const lease = this.leaseId;
    this.lastKeepalive = this.world.sched.now;
    this.firedAt.push(this.world.sched.now);
    this.etcdCall(
      (etcd) => etcd.keepAlive(lease),
      (ok) => {
        if (lease !== this.leaseId) return;
        const sentAt = this.firedAt.shift();
        if (ok) {
          if (sentAt !== undefined) this.validUntil = Math.max(this.validUntil, sentAt + this.world.config.leaseTtlMs * 0.9);
          return;
        }
        this.trace(`lease ${lease} lost`);
        this.leaseId = 0;
        this.validUntil = 0;
        for (const p of [...this.held.keys()]) this.drop(p, 'lease lost');
        this.rejoin();
      },
    );
  }

  private onWatch(event: WatchEvent): void {
    const key = event.kv.key;
    if (key.startsWith(keys.membersPrefix)) {
      const id = key.slice(keys.membersPrefix.length);
      if (event.type === 'put') this.members.add(id);
      else this.members.delete(id);
      this.reconcile();
      return;
    }
    if (event.type === 'put') this.applyPut(event.kv);
    else this.applyDelete(event.kv);
  }

  // ---- leadership (cluster/leadership.ts) ----

  heldEpoch(p: number): number | undefined {
    if (!this.leaseValid() && this.world.config.bug !== 'serve_without_lease') return undefined;
    return this.held.get(p);
  }

  private applyPut(kv: KeyValue): void {
    if (kv.key.startsWith(keys.membersPrefix)) {
      this.members.add(kv.key.slice(keys.membersPrefix.length));
      return;
    }
    const parsed = parsePartitionKey(keys, kv.key);
    if (!parsed) return;
    const [p, what] = parsed;
    if (what === 'leader') {
      const epoch = kv.createRevision;
      const held = this.held.get(p);
      if (held !== undefined && held !== epoch) this.drop(p, 'another leader took the partition');
      this.leaders.set(p, { node: kv.value, epoch });
      this.noLeaderSince.delete(p);
    } else {
      const record = JSON.parse(kv.value) as IsrRecord;
      const known = this.isrs.get(p);
      if (!known || known.modRevision < kv.modRevision) this.isrs.set(p, { record, modRevision: kv.modRevision });
    }
  }

  private applyDelete(kv: KeyValue): void {
    const parsed = parsePartitionKey(keys, kv.key);
    if (!parsed) return;
    const [p, what] = parsed;
    if (what === 'leader') {
      this.leaders.delete(p);
      this.noLeaderSince.set(p, this.world.sched.now);
      this.drop(p, 'leadership key deleted');
    } else this.isrs.delete(p);
  }

  private tick(): void {
    const { config, sched } = this.world;
    if (this.leaseId !== 0 && sched.now - this.lastKeepalive >= config.keepaliveMs) this.keepalive();
    this.electionTick();
    if (sched.now - this.lastLaggardCheck >= Math.max(20, Math.floor(config.replicationTimeoutMs / 4))) {
      this.lastLaggardCheck = sched.now;
      this.checkLaggards();
    }
    if (sched.now - this.lastReconcile >= config.reconcileMs) this.reconcile();
    this.later(config.tickMs, () => this.tick());
  }

  private electionTick(): void {
    if (!this.leaseValid()) {
      for (const [p, epoch] of [...this.held]) {
        this.drop(p, 'lease may have expired');
        // FIX (proposed for cluster/leadership.ts tick()): the lease may well be alive (a pause shorter
        // than the TTL, a slow keep-alive answer): then the key stays under it for good, every node sees
        // a leader, and nobody serves the partition. Delete it if it is still ours.
        if (this.world.config.bug !== 'drop_without_release') this.deleteLeaderKey(p, epoch);
      }
      return;
    }
    const now = this.world.sched.now;
    const members = [...this.members].map((node_id) => ({ node_id, draining: false }));
    for (let p = 0; p < this.world.config.partitions; p++) {
      if (this.leaders.has(p) || this.attempting.has(p)) continue;
      const rank = electionRank(p, this.id, members, this.isrs.get(p)?.record);
      if (rank < 0) continue;
      const since = this.noLeaderSince.get(p) ?? now;
      if (now - since < rank * this.world.config.electionStepMs) continue;
      this.tryElection(p);
    }
  }

  private tryElection(p: number): void {
    this.attempting.add(p);
    const isr = this.isrs.get(p);
    const lease = this.leaseId;
    if (!lease) {
      this.attempting.delete(p);
      return;
    }
    this.etcdCall(
      (etcd) =>
        etcd.txn(
          [
            { key: keys.leader(p), target: 'create', equals: 0 },
            isr ? { key: keys.isr(p), target: 'mod', equals: isr.modRevision } : { key: keys.isr(p), target: 'create', equals: 0 },
          ],
          [{ put: keys.leader(p), value: this.id, lease }],
        ),
      (result) => {
        if (!result.succeeded) {
          this.attempting.delete(p);
          return;
        }
        const epoch = result.revision;
        this.leaders.set(p, { node: this.id, epoch });
        this.noLeaderSince.delete(p);
        this.held.set(p, epoch);
        this.updateIsr(p, epoch, isrAfterElection(epoch, this.id).replicas, (recorded) => {
          this.attempting.delete(p);
          if (!recorded) {
            this.drop(p, 'lost leadership while recording the in-sync set');
            return;
          }
          this.trace(`won p${p} at epoch ${epoch}`);
          this.onAcquired(p, epoch);
        });
      },
    );
  }

  private updateIsr(p: number, epoch: number, replicas: string[], done: (recorded: boolean) => void): void {
    const record: IsrRecord = { epoch, leader: this.id, replicas };
    this.etcdCall(
      (etcd) => etcd.txn([{ key: keys.leader(p), target: 'create', equals: epoch }], [{ put: keys.isr(p), value: JSON.stringify(record) }]),
      (result) => {
        if (result.succeeded) this.isrs.set(p, { record, modRevision: result.revision });
        done(result.succeeded);
      },
    );
  }

  private release(p: number): void {
    const epoch = this.held.get(p);
    if (epoch === undefined) return;
    this.held.delete(p);
    this.deleteLeaderKey(p, epoch);
  }

  private deleteLeaderKey(p: number, epoch: number): void {
    this.etcdCall(
      (etcd) => etcd.txn([{ key: keys.leader(p), target: 'create', equals: epoch }], [{ del: keys.leader(p) }]),
      () => undefined,
    );
  }

  private drop(p: number, reason: string): void {
    if (!this.held.has(p)) return;
    this.held.delete(p);
    this.trace(`lost p${p}: ${reason}`);
    this.stopLeading(p);
    this.closed.delete(p);
  }

  // ---- cluster-node.ts: acquire, deposed, reconcile, handoff ----

  private onAcquired(p: number, epoch: number): void {
    this.becomeLeader(p, epoch, (ok) => {
      if (!ok || this.heldEpoch(p) !== epoch) {
        this.stopLeading(p);
        if (this.heldEpoch(p) === epoch) this.release(p);
        return;
      }
      this.closed.delete(p);
      this.reconcile();
    });
  }

  private deposed(p: number, reason: string): void {
    this.trace(`deposed from p${p}: ${reason}`);
    this.stopLeading(p);
    this.closed.delete(p);
    this.release(p);
  }

  private reconcile(): void {
    if (!this.joined) return;
    this.lastReconcile = this.world.sched.now;
    const live = new Set(this.members);
    const candidates = [...this.members];
    const rf = this.world.config.replicationFactor;
    for (const p of [...this.led.keys()]) {
      if (this.handingOff.has(p)) continue;
      const desired = replicaSet(p, candidates.length > 0 ? candidates : [this.id], rf);
      const wanted = desired.includes(this.id) ? desired.filter((n) => n !== this.id) : desired;
      this.setFollowers(p, wanted, live);
      const target = desired[0];
      if (target !== this.id && this.inSyncFollower(p, target)) this.handoff(p, target);
    }
  }

  private handoff(p: number, target: string): void {
    this.handingOff.add(p);
    this.closed.add(p);
    const led = this.led.get(p);
    // runtime.closePartition: new requests are refused; wait for the turns in flight (their entries) to finish.
    const waitClosed = () => {
      const now = this.led.get(p);
      const busy = led !== undefined && (led.log.pendingCount > 0 || [...led.actors.values()].some((a) => a.running || a.mailbox.length > 0));
      if (now === led && busy) {
        this.later(10, waitClosed);
        return;
      }
      this.handingOff.delete(p);
      if (!this.led.has(p)) return;
      if (!this.inSyncFollower(p, target)) {
        this.closed.delete(p);
        return;
      }
      this.commits.whenIdle(() => {
        this.stopLeading(p);
        this.trace(`handing p${p} to ${target}`);
        this.release(p);
      });
    };
    waitClosed();
  }

  // ---- replicator, leader side ----

  private readVersion(p: number): PartitionVersion {
    return this.disk.read(p).version;
  }

  private becomeLeader(p: number, epoch: number, done: (ok: boolean) => void): void {
    this.whenApplyIdle(() =>
      this.commits.whenIdle(() => {
        const fenced = fenceAt(this.readVersion(p), epoch);
        this.commits.commit([{ p, version: fenced }], () => {
          if (this.heldEpoch(p) !== epoch) {
            done(false);
            return;
          }
          this.awaitingSnapshot.delete(p);
          // The runtime loads actor state from the local store once the partition opens.
          this.led.set(p, { log: new LeaderLog(p, epoch, fenced), epoch, recent: [], waiters: new Map(), sessions: new Map(), isrBusy: false, actors: new Map() });
          // What the new leader's actors will load: the local store.
          this.world.checker.onBecomeLeader(p, this.id, epoch, this.disk.read(p).data);
          done(true);
        });
      }),
    );
  }

  private stopLeading(p: number): void {
    const led = this.led.get(p);
    if (!led) return;
    this.led.delete(p);
    for (const seq of led.log.abandon()) led.waiters.get(seq)?.(false);
    led.waiters.clear();
  }

  serving(p: number): Led | undefined {
    const led = this.led.get(p);
    if (!led || this.heldEpoch(p) !== led.epoch || this.closed.has(p)) return undefined;
    return led;
  }

  /** A client request arrives: the router checked this node serves p; the actor's mailbox takes it. */
  handleClient(request: ClientRequest, reply: (r: ClientReply) => void): void {
    const p = request.partition;
    const led = this.serving(p);
    if (!led) {
      reply({ ok: false, error: 'not_leader' });
      return;
    }
    this.world.checker.onServe(p, this.id, led.epoch, request.op === 'get' ? 'read' : 'write');
    let actor = led.actors.get(request.counter);
    if (!actor) {
      actor = { counter: request.counter, state: this.disk.read(p).data.get(request.counter) ?? 0, running: false, mailbox: [] };
      led.actors.set(request.counter, actor);
    }
    actor.mailbox.push({ request, reply });
    if (!actor.running) this.runBatch(led, actor);
  }

  /** The value a counter has for the partition's actor now (for the final check). */
  counterValue(led: Led, p: number, counter: string): number {
    return led.actors.get(counter)?.state ?? this.disk.read(p).data.get(counter) ?? 0;
  }

  private runBatch(led: Led, actor: Actor): void {
    const p = led.log.partition;
    actor.running = true;
    const batch = actor.mailbox.splice(0, BATCH_MAX);
    // FIX (proposed for the runtime in cluster mode): a batch runs only while this node still leads p
    // (a closed partition in handoff still does). Otherwise a read queued behind a write that failed
    // when the leadership was lost is answered from the state reloaded from the local store, which
    // holds that write although it was never replicated: the reader sees a value the new leader lacks.
    if (this.world.config.bug !== 'serve_queued_after_loss' && (this.led.get(p) !== led || this.heldEpoch(p) !== led.epoch)) {
      for (const { reply } of batch) reply({ ok: false, error: 'not_leader' });
      actor.running = false;
      if (actor.mailbox.length > 0) this.runBatch(led, actor);
      return;
    }
    const outcomes: number[] = [];
    let wrote = false;
    for (const { request } of batch) {
      if (request.op === 'inc') {
        actor.state += 1;
        wrote = true;
      }
      outcomes.push(actor.state);
    }
    const finish = (ok: boolean) => {
      const { checker } = this.world;
      batch.forEach(({ request, reply }, i) => {
        if (!ok) {
          reply({ ok: false, error: 'not_leader' });
          return;
        }
        if (request.op === 'inc') checker.onAck(p, actor.counter, outcomes[i], this.id);
        else checker.onRead(p, actor.counter, outcomes[i], request.issuedAt, this.id);
        reply({ ok: true, value: outcomes[i] });
      });
      // A failed batch: the actor reloads from the store.
      if (!ok) actor.state = this.disk.read(p).data.get(actor.counter) ?? 0;
      actor.running = false;
      if (actor.mailbox.length > 0) this.runBatch(led, actor);
    };
    if (!wrote) {
      finish(true);
      return;
    }
    const live = this.led.get(p);
    if (live !== led || this.heldEpoch(p) !== led.epoch) {
      finish(false);
      return;
    }
    this.commit(led, [{ type: 'put', key: ['c', p, actor.counter], value: actor.state }], finish);
  }

  private commit(led: Led, ops: WriteOp[], done: (ok: boolean) => void): void {
    const p = led.log.partition;
    const entry = led.log.append(ops, this.world.sched.now);
    led.recent.push(entry);
    if (led.recent.length > RECENT_ENTRIES) led.recent.splice(0, led.recent.length - RECENT_ENTRIES);
    led.waiters.set(entry.seq, done);
    for (const [node, session] of led.sessions) {
      if (session.stage === 'streaming' && led.log.followers.has(node)) this.sendTo(led, node, { t: 'append', entry });
    }
    const mutation: Mutation = { p, ops, version: led.log.version };
    const fault = this.onNextAppend;
    this.onNextAppend = undefined;
    this.commits.commit([mutation], () => {
      this.settle(led, led.log.localCommitted(entry.seq));
      if (this.world.config.bug === 'ack_on_local_commit') this.settle(led, [entry.seq]);
    });
    fault?.();
  }

  private settle(led: Led, seqs: number[]): void {
    // FIX (proposed for Replicator.settle): acknowledge only while still serving the partition. An
    // acknowledgement processed late (after a pause, say) may come after a newer leader acknowledged
    // later writes: the client would get an older fence token than one already handed out. Its outcome
    // is then unknown to the client (not_leader), as for an abandoned entry.
    const serving = this.world.config.bug === 'ack_after_lease' || this.heldEpoch(led.log.partition) === led.epoch;
    for (const seq of seqs) {
      const waiter = led.waiters.get(seq);
      if (!waiter) continue;
      led.waiters.delete(seq);
      waiter(serving);
    }
  }

  private setFollowers(p: number, wanted: string[], live: Set<string>): void {
    const led = this.led.get(p);
    if (!led) return;
    for (const node of wanted) {
      if (node === this.id || led.log.followers.has(node)) continue;
      led.log.addCatchingUp(node);
      led.sessions.set(node, { stage: 'streaming', closed: false });
      this.probe(led, node);
    }
    const allWantedInSync = wanted.every((n) => n === this.id || led.log.followers.get(n)?.mode === 'in_sync');
    for (const [node, progress] of [...led.log.followers]) {
      if (wanted.includes(node)) continue;
      if (progress.mode === 'in_sync' && live.has(node) && !allWantedInSync) continue;
      if (progress.mode === 'in_sync') this.changeInSync(led, node, 'remove');
      else {
        led.log.removeFollower(node);
        led.sessions.delete(node);
      }
    }
    for (const [node, session] of led.sessions) {
      if (session.stage === 'streaming' && session.closed && led.log.followers.get(node)?.mode === 'catching_up') this.probe(led, node);
    }
  }

  inSyncFollower(p: number, node: string): boolean {
    return this.led.get(p)?.log.followers.get(node)?.mode === 'in_sync';
  }

  private sendTo(led: Led, node: string, message: ReplicateMessage): void {
    const session = led.sessions.get(node);
    if (!session) return;
    session.closed = false;
    const target = this.world.node(node);
    if (!target || target.status === 'down') return;
    const targetInc = target.incarnation;
    const fromInc = this.incarnation;
    this.world.net.send(this.id, node, () => target.post(targetInc, () => target.onReplicate(this.id, fromInc, message)));
  }

  private probe(led: Led, node: string): void {
    const session = led.sessions.get(node);
    if (!session) return;
    session.stage = 'streaming';
    const v = led.log.version;
    this.sendTo(led, node, { t: 'probe', partition: led.log.partition, epoch: led.epoch, at: { epoch: v.epoch, seq: v.seq } });
  }

  private onReply(node: string, reply: ReplicateReply): void {
    const led = this.led.get(reply.partition);
    if (!led || !led.log.followers.has(node)) return;
    if (reply.t === 'ack') {
      this.settle(led, led.log.acked(node, reply.seq));
      if (led.log.followers.get(node)?.mode === 'catching_up' && led.log.isCaughtUp(node)) this.changeInSync(led, node, 'add');
    } else if (reply.t === 'mismatch') {
      this.sendSnapshot(led, node);
    } else if (reply.fence > led.epoch) {
      this.deposed(led.log.partition, `follower ${node} knows a newer epoch`);
    }
  }

  onStreamClosed(peer: string): void {
    for (const led of this.led.values()) {
      const session = led.sessions.get(peer);
      if (session) session.closed = true;
      const progress = led.log.followers.get(peer);
      if (!progress) continue;
      if (progress.mode === 'in_sync') this.changeInSync(led, peer, 'demote');
    }
  }

  private checkLaggards(): void {
    const now = this.world.sched.now;
    for (const led of this.led.values()) {
      for (const node of led.log.laggards(now, this.world.config.replicationTimeoutMs)) this.changeInSync(led, node, 'demote');
    }
  }

  private changeInSync(led: Led, node: string, change: 'add' | 'demote' | 'remove'): void {
    if (led.isrBusy) return;
    const p = led.log.partition;
    if (change === 'add') led.log.markInSync(node);
    const others = led.log.inSyncFollowers().filter((n) => change === 'add' || n !== node);
    led.isrBusy = true;
    this.updateIsr(p, led.epoch, [this.id, ...others], (recorded) => {
      led.isrBusy = false;
      if (this.led.get(p) !== led) return;
      if (!recorded) {
        if (change === 'add') led.log.demoteFollower(node);
        return;
      }
      this.trace(`p${p} isr ${change} ${node} -> [${[this.id, ...others].join(',')}]`);
      if (change === 'remove') {
        this.settle(led, led.log.removeFollower(node));
        led.sessions.delete(node);
      } else if (change === 'demote') {
        this.settle(led, led.log.demoteFollower(node));
        this.probe(led, node);
      }
    });
  }

  private sendSnapshot(led: Led, node: string): void {
    const session = led.sessions.get(node);
    if (!session || session.stage === 'snapshot') return;
    session.stage = 'snapshot';
    const p = led.log.partition;
    const state = this.disk.read(p);
    const at = state.version;
    const oldest = led.recent[0];
    if (at.seq < led.log.lastSequence && (!oldest || oldest.seq > at.seq + 1)) {
      this.later(50, () => {
        if (this.led.get(p) === led && led.sessions.get(node) === session) {
          session.stage = 'streaming';
          this.sendSnapshot(led, node);
        }
      });
      return;
    }
    this.sendTo(led, node, { t: 'snapshot', partition: p, epoch: led.epoch, data: new Map(state.data), at: { epoch: at.epoch, seq: at.seq } });
    for (const entry of led.recent) if (entry.seq > at.seq) this.sendTo(led, node, { t: 'append', entry });
    session.stage = 'streaming';
    this.trace(`p${p} snapshot at ${at.epoch}/${at.seq} to ${node}`);
  }

  // ---- replicator, follower side ----

  /** A frame from `from` (its process `fromInc`: replies go back on that stream, lost if it died). */
  onReplicate(from: string, fromInc: number, message: ReplicateMessage): void {
    this.applyQueue.push({ from, fromInc, message });
    this.applyNext();
  }

  private whenApplyIdle(fn: () => void): void {
    if (!this.applying && this.applyQueue.length === 0) fn();
    else this.applyIdleWaiters.push(fn);
  }

  private reply(to: { node: string; inc: number }, reply: ReplicateReply): void {
    const target = this.world.node(to.node);
    if (!target || target.status === 'down' || target.incarnation !== to.inc) return;
    const targetInc = to.inc;
    this.world.net.send(this.id, to.node, () => target.post(targetInc, () => target.onReply(this.id, reply)));
  }

  private applyNext(): void {
    if (this.applying) return;
    const item = this.applyQueue.shift();
    if (!item) {
      for (const w of this.applyIdleWaiters.splice(0)) w();
      return;
    }
    this.applying = true;
    const inc = this.incarnation;
    this.applyOne({ node: item.from, inc: item.fromInc }, item.message, () => {
      if (inc !== this.incarnation) return;
      this.applying = false;
      this.applyNext();
    });
  }

  private applyOne(from: { node: string; inc: number }, message: ReplicateMessage, done: () => void): void {
    const p = message.t === 'append' ? message.entry.partition : message.partition;
    const epoch = message.t === 'append' ? message.entry.epoch : message.epoch;
    const led = this.led.get(p);
    if (led) {
      if (epoch <= led.epoch) {
        this.reply(from, { t: 'stale_leader', partition: p, fence: led.epoch });
        done();
        return;
      }
      this.deposed(p, 'a newer leader is replicating to this node');
      this.commits.whenIdle(() => this.applyMessage(from, message, p, epoch, done));
      return;
    }
    this.applyMessage(from, message, p, epoch, done);
  }

  private applyMessage(from: { node: string; inc: number }, message: ReplicateMessage, p: number, epoch: number, done: () => void): void {
    const version = this.readVersion(p);
    const commitThen = (mutation: Mutation, replyAfter?: ReplicateReply) => {
      this.commits.commit([mutation], () => {
        if (replyAfter) this.reply(from, replyAfter);
        done();
      });
    };
    switch (message.t) {
      case 'append': {
        if (this.awaitingSnapshot.has(p)) break;
        const decision = decideAppend(version, message.entry);
        if (decision.kind === 'apply') {
          commitThen({ p, ops: message.entry.ops, version: decision.version }, { t: 'ack', partition: p, seq: decision.version.seq });
          return;
        }
        if (decision.kind === 'stale_leader') this.reply(from, { t: 'stale_leader', partition: p, fence: decision.fence });
        else {
          this.awaitingSnapshot.add(p);
          this.reply(from, { t: 'mismatch', partition: p, seq: version.seq });
        }
        break;
      }
      case 'probe': {
        if (epoch < version.fence) this.reply(from, { t: 'stale_leader', partition: p, fence: version.fence });
        else if (version.epoch === message.at.epoch && version.seq === message.at.seq) {
          this.awaitingSnapshot.delete(p);
          commitThen({ p, version: fenceAt(version, epoch) }, { t: 'ack', partition: p, seq: version.seq });
          return;
        } else {
          this.awaitingSnapshot.add(p);
          this.reply(from, { t: 'mismatch', partition: p, seq: version.seq });
        }
        break;
      }
      case 'snapshot': {
        const decision = decideSnapshot(version, epoch, message.at);
        if (decision.kind === 'apply') {
          this.awaitingSnapshot.delete(p);
          commitThen({ p, replace: message.data, version: decision.version }, { t: 'ack', partition: p, seq: decision.version.seq });
          return;
        }
        this.reply(from, { t: 'stale_leader', partition: p, fence: decision.fence });
        break;
      }
    }
    done();
  }
}
