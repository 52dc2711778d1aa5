import { ServiceError, storageKeys, type RuntimeLogger, type Store, type StoreKey, type WriteOp } from '../../runtime/index.js';
import type { ReplicateMessage, ReplicateReply } from '../transport/frames.js';
import { every, type ClusterClock, type ReplicateStream, type TimerHandle } from '../ports.js';
import { CommitLane, type LaneWrite } from './commit-lane.js';
import { LeaderLog, type Settled } from './leader-log.js';
import { decideAppend, decideSnapshot, EMPTY_VERSION, fenceAt, type LogEntry, type PartitionVersion } from './partition-log.js';

/**
 * Replication of committed turns, both sides.
 *
 * Leader side: `commit()` is the runtime's Store.commit in cluster mode. It
 * turns each partition's writes into a log entry, commits it locally and
 * ships it to the partition's followers, and resolves only when LeaderLog
 * says the entry is acknowledged (durable here and on every in-sync
 * follower). Followers out of sync catch up by probe (their log already
 * ends where the leader's does) or by snapshot plus the tail of recent
 * entries. In-sync set changes go through etcd first (see LeaderLog).
 *
 * Follower side: `applyFrame()` applies what leaders send, one frame at a
 * time, by the rules of partition-log.ts, and acknowledges after the LMDB
 * commit.
 */
export interface ReplicatorPorts {
  /** The node's own LMDB. */
  local: Store;
  selfId: string;
  /** The partition's epoch if this node holds its leadership key and its lease is surely alive. */
  heldEpoch(p: number): number | undefined;
  /** The replication stream to a peer (opened on demand). */
  streamTo(node: string, onReply: (reply: ReplicateReply) => void, onClose: () => void): ReplicateStream | undefined;
  /** Records the in-sync set in etcd; false if this node no longer leads p at that epoch. */
  recordInSync(p: number, epoch: number, replicas: string[]): Promise<boolean>;
  /** This node learned it no longer leads p (a follower knows a newer epoch, or a commit failed). */
  deposed(p: number, reason: string): void;
  logger: RuntimeLogger;
  clock: ClusterClock;
  replicationTimeoutMs: number;
  /**
   * After a local commit with more waiting behind it (leader entries or
   * follower frames), wait this long before the next (ClusterConfig.commitDelayMs;
   * 0 or absent: at once). See commit-lane.ts.
   */
  commitDelayMs?: number;
  /** Copies (leader included) a write needs in the in-sync set (MIN_IN_SYNC_REPLICAS; 1 when absent). */
  minInSyncReplicas?: number;
  /** A follower acknowledged an entry this long (ms) after its append (the replication latency metric). */
  observeAck?(ms: number): void;
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
  /** When the entry was appended (monotonic ms): the start of its replication latency. */
  appended_ms: number;
}

type SessionStage = 'streaming' | 'snapshot';

interface FollowerSession {
  stage: SessionStage;
  stream?: ReplicateStream;
}

interface LedPartition {
  log: LeaderLog;
  epoch: number;
  /**
   * The entries a snapshot may need as its tail: those not yet durable here
   * (a snapshot is read from this node's disk), and a few before them.
   */
  recent: LogEntry[];
  waiters: Map<number, Waiter>;
  sessions: Map<string, FollowerSession>;
  /** In-sync set changes in flight, so that two are never sent at once. */
  isrBusy: boolean;
  /**
   * In-sync followers whose addition to the in-sync set etcd has not
   * confirmed: in flight, or failed (etcd may or may not list them: a write
   * whose answer is lost may have been applied). Entries wait for them as for
   * any in-sync follower; they are not handoff targets (etcd may not let them
   * win); a failed addition is retried until etcd confirms a set naming them,
   * or they leave the set through etcd.
   */
  unrecorded: Set<string>;
  /** A local commit of this leadership failed: its later entries are not written here (they would follow a hole). */
  localFailed: boolean;
}

/** Leader entries waiting for the local commit in flight, written together in the next one. */
interface LocalBatch {
  localOnly: WriteOp[];
  /** `version`: the partition's version once the entry is applied (only the last of a partition is written). */
  entries: { led: LedPartition; entry: LogEntry; ops: WriteOp[]; version: PartitionVersion }[];
  done: Promise<void>;
  resolve: () => void;
}

/** At most this many entries per partition in `recent` (local commits stalled: the tail is sent once they land). */
const RECENT_ENTRIES = 4096;
/**
 * Entries kept in `recent` behind the last one durable here. A snapshot needs
 * only the entries after the version it reads from disk; these few spare it a
 * retry if that read comes before the commit that carried them is visible.
 * Until 2026-11-29 every partition kept its last 4,096 entries whatever their
 * state: in a 3-node RF 2 cluster of 32 partitions, up to some 45,000 entries
 * per node, each with its writes, alive for about 20 s under load, so V8
 * promoted them to its old generation (docs/performance.md).
 */
const RECENT_DURABLE_MARGIN = 64;
const SNAPSHOT_CHUNK_RECORDS = 2000;

function newLocalBatch(): LocalBatch {
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  return { localOnly: [], entries: [], done, resolve };
}

/** The write that records p's version (its log position), in the same commit as the data it covers. */
function versionWrite(p: number, version: PartitionVersion): WriteOp {
  return { type: 'put', key: storageKeys.version(p), value: version };
}

/** Drops the entries up to `seq` from the front of `recent` (in sequence order). */
function dropDurable(recent: LogEntry[], seq: number): void {
  let count = 0;
  while (count < recent.length && recent[count].seq <= seq) count++;
  if (count > 0) recent.splice(0, count);
}

function notEnoughReplicas(p: number, copies: number, needed: number): ServiceError {
  return new ServiceError('not_enough_replicas', `The partition has ${copies} in-sync ${copies === 1 ? 'copy' : 'copies'}, fewer than the ${needed} required; nothing was written.`, {
    retryAfterSeconds: 1,
    details: { partition: p, in_sync_replicas: copies, min_in_sync_replicas: needed },
  });
}

/** The entry is durable here (and applied), but on fewer copies than required: the client cannot be told it succeeded. */
function shortOfReplicas(): ServiceError {
  return new ServiceError('partition_unavailable', 'The partition lost in-sync replicas while this change was being replicated; its outcome is unknown.', {
    retryAfterSeconds: 1,
  });
}

function notLeader(): ServiceError {
  return new ServiceError('not_leader', 'This node does not lead that partition now.', { retryAfterSeconds: 1 });
}

export class Replicator {
  private readonly led = new Map<number, LedPartition>();
  /** Local commits not yet durable, per partition (a new role waits for them). */
  private readonly inflight = new Map<number, Set<Promise<unknown>>>();
  /** Partitions this node is taking over (election won, log not started yet) -> the new epoch. */
  private readonly taking = new Map<number, number>();
  /** Follower side: partitions waiting for a snapshot after a mismatch; their appends are dropped meanwhile. */
  private readonly awaitingSnapshot = new Set<number>();
  /** Follower side: frames waiting to be applied, from whichever leader; applied together, one commit per round. */
  private readonly frameQueue: { messages: ReplicateMessage[]; resolve: (replies: ReplicateReply[]) => void; reject: (error: unknown) => void }[] = [];
  private applying?: Promise<void>;
  /** Follower side: the round of frames being applied now (one commit), settled or not. */
  private applyingRound?: Promise<unknown>;
  /** This node's local commits of leader entries and follower frames, one at a time (commit-lane.ts). */
  private readonly lane: CommitLane;
  /** Leader side: the entries waiting in the lane for its next commit. */
  private nextLocal?: LocalBatch;
  private timer?: TimerHandle;

  constructor(private readonly ports: ReplicatorPorts) {
    this.lane = new CommitLane(ports.local, ports.clock, ports.commitDelayMs ?? 0, ports.logger);
  }

  start(): void {
    this.timer = every(this.ports.clock, Math.max(20, Math.floor(this.ports.replicationTimeoutMs / 4)), () => this.checkLaggards());
  }

  stop(): void {
    this.timer?.cancel();
  }

  isLeading(p: number): boolean {
    return this.led.has(p);
  }

  ledPartitions(): number[] {
    return [...this.led.keys()];
  }

  followersOf(p: number): Map<string, { mode: string; acked: number }> | undefined {
    return this.led.get(p)?.log.followers;
  }

  lagOf(p: number): Record<string, number> {
    return this.led.get(p)?.log.lag() ?? {};
  }

  lastSequence(p: number): number {
    return this.led.get(p)?.log.lastSequence ?? this.readVersion(p).seq;
  }

  readVersion(p: number): PartitionVersion {
    return (this.ports.local.get(storageKeys.version(p)) as PartitionVersion | undefined) ?? EMPTY_VERSION;
  }

  // ---- roles ----

  /** Called after this node won p at `epoch`: waits for its follower work on p, raises the fence, starts a log. */
  async becomeLeader(p: number, epoch: number): Promise<boolean> {
    // From now on, frames from an older leader of p are refused here, even
    // before the raised fence is on disk: one applied meanwhile would put a
    // write in this node's copy that its own followers never get.
    this.taking.set(p, epoch);
    try {
      // Only the round being applied now may hold frames of p accepted before `taking`
      // was set; later rounds refuse them. Waiting for the whole drain instead starved
      // this under steady replication from other leaders (a CI run: the leadership was
      // lost meanwhile, and the late end of this call stopped the next one's log).
      await this.applyingRound?.catch(() => undefined);
      await this.localIdle(p);
      if (this.ports.heldEpoch(p) !== epoch) return false;
      const fenced = fenceAt(this.readVersion(p), epoch);
      await this.trackLocal(p, this.ports.local.commit([versionWrite(p, fenced)]));
      if (this.ports.heldEpoch(p) !== epoch) return false;
      this.startLog(p, epoch, fenced);
      return true;
    } finally {
      if (this.taking.get(p) === epoch) this.taking.delete(p);
    }
  }

  private startLog(p: number, epoch: number, fenced: PartitionVersion): void {
    this.awaitingSnapshot.delete(p);
    this.led.set(p, {
      log: new LeaderLog(p, epoch, fenced, this.ports.minInSyncReplicas ?? 1),
      epoch,
      recent: [],
      waiters: new Map(),
      sessions: new Map(),
      isrBusy: false,
      unrecorded: new Set(),
      localFailed: false,
    });
  }

  /**
   * This node stops leading p (only its leadership at `epoch`, when given: a
   * later one stays): unacknowledged commits fail (their outcome is unknown
   * to the client).
   */
  stopLeading(p: number, epoch?: number): void {
    const led = this.led.get(p);
    if (!led || (epoch !== undefined && led.epoch !== epoch)) return;
    this.led.delete(p);
    // Shipped, maybe applied by a follower that becomes leader: not retryable.
    const error = new ServiceError('partition_unavailable', 'The partition changed leader while this change was being replicated; its outcome is unknown.', {
      retryAfterSeconds: 1,
    });
    led.log.abandon();
    // Every waiter, not only the entries still pending: none may be left waiting once this leadership ends.
    for (const waiter of led.waiters.values()) waiter.reject(error);
    led.waiters.clear();
  }

  /** Hands p over gracefully: every entry is acknowledged (the runtime closed p first), so nothing fails. */
  async releaseLeadership(p: number): Promise<void> {
    await this.localIdle(p);
    this.stopLeading(p);
  }

  // ---- leader side: commits ----

  commit(ops: readonly WriteOp[]): Promise<void> {
    const groups = new Map<number, WriteOp[]>();
    const localOnly: WriteOp[] = [];
    for (const op of ops) {
      if (op.key[0] === 'm') localOnly.push(op);
      else {
        const p = op.key[1] as number;
        let group = groups.get(p);
        if (!group) groups.set(p, (group = []));
        group.push(op);
      }
    }
    for (const p of groups.keys()) {
      const led = this.led.get(p);
      if (!led || this.ports.heldEpoch(p) !== led.epoch) return Promise.reject(notLeader());
      // Refused before anything is written or shipped: the runtime reloads the actor, a retry is safe.
      if (!led.log.acceptsWrites()) return Promise.reject(notEnoughReplicas(p, led.log.inSyncCopies(), led.log.minInSync));
    }
    const fresh = this.nextLocal === undefined;
    const batch = (this.nextLocal ??= newLocalBatch());
    for (const op of localOnly) batch.localOnly.push(op);
    const waits: Promise<void>[] = [];
    const now = this.ports.clock.monotonicNow();
    for (const [p, group] of groups) {
      const led = this.led.get(p)!;
      const entry = led.log.append(group, now);
      led.recent.push(entry);
      if (led.recent.length > RECENT_ENTRIES) led.recent.splice(0, led.recent.length - RECENT_ENTRIES);
      batch.entries.push({ led, entry, ops: group, version: led.log.version });
      waits.push(new Promise<void>((resolve, reject) => led.waiters.set(entry.seq, { resolve, reject, appended_ms: now })));
      for (const [node, session] of led.sessions) {
        if (session.stage === 'streaming' && led.log.followers.has(node)) this.sendTo(led, node, { t: 'append', entry });
      }
    }
    for (const p of groups.keys()) void this.trackLocal(p, batch.done);
    // After the entries are in it: an idle lane reads the batch at once; a waiting one may find it full now.
    if (fresh) this.lane.submit(this.localWrite(batch));
    else this.lane.grew();
    return waits.length === 1 ? waits[0] : Promise.all(waits).then(() => undefined);
  }

  /**
   * The lane write of a batch of leader entries: the entries made until the
   * lane starts its commit (lmdb-js would group them into one transaction
   * anyway). The lane commits one at a time: if a commit fails, the entries
   * after it of the same partitions must not reach the disk, or this node's
   * copy would claim a version whose log has a hole (found by the seeded
   * simulation: replicas at the same version held different data); `done`
   * marks them failed before the next commit reads its entries.
   *
   * Entries of a leadership that ended meanwhile are not written either: their
   * waiters have failed, and this node may already be following the new
   * leader, whose snapshot or entries a late write of the old log would
   * overwrite (found by the simulation with commits stalling past a lease).
   */
  private localWrite(batch: LocalBatch): LaneWrite {
    let kept: LocalBatch['entries'] = [];
    return {
      ops: () => {
        if (this.nextLocal === batch) this.nextLocal = undefined;
        kept = batch.entries.filter(({ led }) => !led.localFailed && this.led.get(led.log.partition) === led);
        const all: WriteOp[] = [...batch.localOnly];
        // One version per partition: its entries land in this one transaction, so the last one's version covers them.
        const versions = new Map<number, PartitionVersion>();
        for (const { led, ops, version } of kept) {
          for (const op of ops) all.push(op);
          versions.set(led.log.partition, version);
        }
        for (const [p, version] of versions) all.push(versionWrite(p, version));
        return all;
      },
      // Asked only while the lane waits its delay, which ends at FULL_BATCH_OPS: a short walk.
      size: () => batch.entries.reduce((n, { ops }) => n + ops.length, batch.localOnly.length),
      done: (ok, error) => {
        if (ok) {
          for (const { led, entry } of kept) this.settle(led, led.log.localCommitted(entry.seq));
          for (const { led, entry } of kept) dropDurable(led.recent, entry.seq - RECENT_DURABLE_MARGIN);
        }
        else {
          // Followers may hold an entry this node does not: it must not lead on.
          for (const { led } of kept) {
            if (led.localFailed) continue;
            led.localFailed = true;
            this.ports.logger.error({ err: error, partition: led.log.partition }, 'local commit failed; giving the partition up');
            this.ports.deposed(led.log.partition, 'local commit failed');
          }
        }
        batch.resolve();
      },
    };
  }

  private settle(led: LedPartition, settled: Settled): void {
    for (const seq of settled.short) {
      const waiter = led.waiters.get(seq);
      led.waiters.delete(seq);
      waiter?.reject(shortOfReplicas());
    }
    const seqs = settled.acked;
    if (seqs.length === 0) return;
    // A leader that resumes after a pause may process acknowledgements before
    // it notices its lease is gone; by then a newer leader may have answered
    // later writes. Acknowledging now would move fence tokens backwards in
    // the clients' eyes (found by the seeded simulation): the outcome is
    // unknown instead.
    const stillLeading = this.ports.heldEpoch(led.log.partition) === led.epoch;
    for (const seq of seqs) {
      const waiter = led.waiters.get(seq);
      if (!waiter) continue;
      led.waiters.delete(seq);
      if (stillLeading) waiter.resolve();
      else waiter.reject(new ServiceError('partition_unavailable', 'The partition changed leader while this change was being replicated; its outcome is unknown.', { retryAfterSeconds: 1 }));
    }
  }

  private trackLocal(p: number, commit: Promise<unknown>): Promise<unknown> {
    let set = this.inflight.get(p);
    if (!set) this.inflight.set(p, (set = new Set()));
    set.add(commit);
    const done = () => {
      set!.delete(commit);
      if (set!.size === 0 && this.inflight.get(p) === set) this.inflight.delete(p);
    };
    commit.then(done, done);
    return commit;
  }

  private async localIdle(p: number): Promise<void> {
    const set = this.inflight.get(p);
    if (set) await Promise.allSettled([...set]);
  }

  // ---- leader side: followers ----

  /**
   * Makes the followers of p exactly `wanted` (besides in-sync ones that are
   * still needed until their replacements are in sync).
   */
  setFollowers(p: number, wanted: string[], live: Set<string>): void {
    const led = this.led.get(p);
    if (!led) return;
    for (const node of wanted) {
      if (node === this.ports.selfId || led.log.followers.has(node)) continue;
      led.log.addCatchingUp(node);
      led.sessions.set(node, { stage: 'streaming' });
      this.probe(led, node);
    }
    const allWantedInSync = wanted.every((n) => n === this.ports.selfId || led.log.followers.get(n)?.mode === 'in_sync');
    for (const [node, progress] of [...led.log.followers]) {
      if (wanted.includes(node)) continue;
      if (progress.mode === 'in_sync' && live.has(node) && !allWantedInSync) continue;
      if (progress.mode === 'in_sync') void this.changeInSync(led, node, 'remove');
      else {
        this.settle(led, led.log.removeFollower(node));
        led.sessions.delete(node);
      }
    }
    for (const [node, session] of led.sessions) {
      // Counted in sync here, but its addition may not be in etcd: record it again.
      if (led.unrecorded.has(node) && led.log.followers.get(node)?.mode === 'in_sync') {
        void this.changeInSync(led, node, 'add');
        continue;
      }
      if (led.log.followers.get(node)?.mode !== 'catching_up') continue;
      // Its stream broke or never opened (the member was not known yet): probe again on a fresh one.
      if (session.stage === 'streaming' && (!session.stream || session.stream.closed)) this.probe(led, node);
      // Caught up, but the in-sync change was skipped (another was in flight) and no write came since: retry it.
      else if (led.log.isCaughtUp(node)) void this.changeInSync(led, node, 'add');
    }
  }

  /** The follower is in p's in-sync set, here and (as far as this node knows) in etcd: a possible handoff target. */
  inSyncFollower(p: number, node: string): boolean {
    const led = this.led.get(p);
    return led?.log.followers.get(node)?.mode === 'in_sync' && !led.unrecorded.has(node);
  }

  private stream(led: LedPartition, node: string): ReplicateStream | undefined {
    const session = led.sessions.get(node);
    if (!session) return undefined;
    if (!session.stream || session.stream.closed) {
      session.stream = this.ports.streamTo(
        node,
        (reply) => this.onReply(node, reply),
        () => this.onStreamClosed(node),
      );
    }
    return session.stream;
  }

  private sendTo(led: LedPartition, node: string, message: ReplicateMessage): void {
    this.stream(led, node)?.send(message);
  }

  private probe(led: LedPartition, node: string): void {
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
      // An acknowledgement sent to an earlier leadership of this node (an old stream) says nothing about this log.
      if (reply.epoch !== led.epoch) return;
      // Acknowledgements are cumulative: the latency is that of the newest entry this one covers, still unsettled.
      const waiter = led.waiters.get(reply.seq);
      if (waiter) this.ports.observeAck?.(this.ports.clock.monotonicNow() - waiter.appended_ms);
      this.settle(led, led.log.acked(node, reply.seq));
      if (led.log.followers.get(node)?.mode === 'catching_up' && led.log.isCaughtUp(node)) void this.changeInSync(led, node, 'add');
    } else if (reply.t === 'mismatch') {
      this.sendSnapshot(led, node);
    } else if (reply.fence > led.epoch) {
      this.ports.deposed(led.log.partition, `follower ${node} knows a newer epoch`);
    }
  }

  private onStreamClosed(node: string): void {
    for (const led of this.led.values()) {
      const progress = led.log.followers.get(node);
      if (!progress) continue;
      // Whatever was in flight is lost: an in-sync follower leaves the set (etcd first), then re-syncs.
      if (progress.mode === 'in_sync') void this.changeInSync(led, node, 'demote');
    }
  }

  private checkLaggards(): void {
    const now = this.ports.clock.monotonicNow();
    for (const led of this.led.values()) {
      for (const node of led.log.laggards(now, this.ports.replicationTimeoutMs)) void this.changeInSync(led, node, 'demote');
    }
  }

  /**
   * In-sync set changes. 'add': the follower has every entry; entries wait
   * for it from now on, then etcd records it. 'demote'/'remove': etcd first,
   * then entries stop waiting for it (so no entry is acknowledged without a
   * replica that could still be elected).
   *
   * A write that fails (etcd unreachable, no answer in time) may still have
   * been applied, so a failure changes nothing here: a failed 'add' leaves
   * the follower in sync (entries keep waiting for it; it stays in
   * `unrecorded` and the addition is retried by setFollowers), a failed 'demote' or
   * 'remove' leaves it in sync too (retried by checkLaggards, setFollowers).
   * Entries waiting meanwhile settle when the follower acknowledges them, when
   * etcd confirms its removal, or fail when the leadership ends (lease lost):
   * never left waiting for good. Only a definite refusal (this node no longer
   * leads p at that epoch: nothing was written) undoes an 'add'.
   */
  private async changeInSync(led: LedPartition, node: string, change: 'add' | 'demote' | 'remove'): Promise<void> {
    if (led.isrBusy) return;
    const p = led.log.partition;
    if (change === 'add') {
      led.log.markInSync(node);
      led.unrecorded.add(node);
    }
    const others = led.log.inSyncFollowers().filter((n) => change === 'add' || n !== node);
    led.isrBusy = true;
    let recorded = false;
    let failed = false;
    try {
      recorded = await this.ports.recordInSync(p, led.epoch, [this.ports.selfId, ...others]);
    } catch (error) {
      failed = true;
      this.ports.logger.warn({ err: error, partition: p, node, change }, 'in-sync set update failed; will retry');
    } finally {
      led.isrBusy = false;
    }
    if (this.led.get(p) !== led) return;
    // Maybe applied, maybe not: etcd may list the follower now, so entries keep waiting for it (still unrecorded).
    if (failed) return;
    if (!recorded) {
      // Refused (this node no longer leads p at this epoch): nothing was written.
      if (change === 'add') {
        led.unrecorded.delete(node);
        this.settle(led, led.log.demoteFollower(node));
      }
      return;
    }
    // etcd now lists exactly these.
    for (const n of others) led.unrecorded.delete(n);
    if (change !== 'add') led.unrecorded.delete(node);
    this.ports.logger.info({ partition: p, node, change }, 'in-sync set changed');
    if (change === 'remove') {
      this.settle(led, led.log.removeFollower(node));
      led.sessions.delete(node);
    } else if (change === 'demote') {
      this.settle(led, led.log.demoteFollower(node));
      this.probe(led, node);
    }
  }

  private sendSnapshot(led: LedPartition, node: string): void {
    const session = led.sessions.get(node);
    if (!session || session.stage === 'snapshot') return;
    session.stage = 'snapshot';
    const p = led.log.partition;
    // One synchronous read: the data and the version it is at are consistent.
    const at = this.readVersion(p);
    const oldest = led.recent[0];
    if (at.seq < led.log.lastSequence && (!oldest || oldest.seq > at.seq + 1)) {
      // The tail after the visible version is no longer in memory: try again shortly.
      this.ports.clock.setTimer(50, () => {
        if (this.led.get(p) === led && led.sessions.get(node) === session) {
          session.stage = 'streaming';
          this.sendSnapshot(led, node);
        }
      });
      return;
    }
    const records: [StoreKey, unknown][] = [];
    for (const [start, end] of storageKeys.partitionRanges(p)) {
      for (const { key, value } of this.ports.local.range(start, end)) records.push([key, value]);
    }
    this.sendTo(led, node, { t: 'snapshot_begin', partition: p, epoch: led.epoch });
    for (let i = 0; i < records.length; i += SNAPSHOT_CHUNK_RECORDS) {
      this.sendTo(led, node, { t: 'snapshot_chunk', partition: p, epoch: led.epoch, records: records.slice(i, i + SNAPSHOT_CHUNK_RECORDS) });
    }
    this.sendTo(led, node, { t: 'snapshot_end', partition: p, epoch: led.epoch, at: { epoch: at.epoch, seq: at.seq } });
    for (const entry of led.recent) if (entry.seq > at.seq) this.sendTo(led, node, { t: 'append', entry });
    session.stage = 'streaming';
    this.ports.logger.info({ partition: p, node, records: records.length, at: at.seq }, 'snapshot sent to follower');
  }

  // ---- follower side ----

  /**
   * Applies one frame from a leader, in arrival order with every other
   * frame. Frames that arrive while a commit is under way are applied
   * together in the next one: a follower's throughput is then bounded by
   * entries per fsync, not frames per fsync.
   */
  applyFrame(messages: ReplicateMessage[]): Promise<ReplicateReply[]> {
    return new Promise((resolve, reject) => {
      this.frameQueue.push({ messages, resolve, reject });
      this.applying ??= this.drainFrames();
    });
  }

  private async drainFrames(): Promise<void> {
    try {
      while (this.frameQueue.length > 0) {
        const frames = this.frameQueue.splice(0);
        try {
          const round = this.applyMessages(frames.map((f) => f.messages));
          this.applyingRound = round;
          const replies = await round;
          frames.forEach((frame, i) => frame.resolve(replies[i]));
        } catch (error) {
          for (const frame of frames) frame.reject(error);
        }
      }
    } finally {
      this.applying = undefined;
      this.applyingRound = undefined;
    }
  }

  /** Applies frames in order with as few commits as possible; returns each frame's replies (acks after the commit). */
  private async applyMessages(frames: ReplicateMessage[][]): Promise<ReplicateReply[][]> {
    const frameReplies: ReplicateReply[][] = [];
    /** Per frame: partition -> [seq, epoch of the leader acknowledged]. */
    const frameAcks: Map<number, [number, number]>[] = [];
    let replies: ReplicateReply[] = [];
    let acks = new Map<number, [number, number]>();
    let ops: WriteOp[] = [];
    const versions = new Map<number, PartitionVersion>();
    /** Partitions whose version changed since the last flush: written once each, with the operations (one transaction). */
    const changed = new Set<number>();
    const flush = async () => {
      for (const p of changed) ops.push(versionWrite(p, versions.get(p)!));
      changed.clear();
      if (ops.length === 0) return;
      const batch = ops;
      ops = [];
      // Through the lane, with this node's leader entries. Frames that arrived during the
      // commit make the lane wait its delay, so that they share the next one.
      await this.lane.commit(batch, () => this.frameQueue.length > 0);
    };
    const versionOf = (p: number) => versions.get(p) ?? this.readVersion(p);
    const setVersion = (p: number, version: PartitionVersion) => {
      versions.set(p, version);
      changed.add(p);
    };
    const refuseIfLeading = (p: number, epoch: number): boolean => {
      const taking = this.taking.get(p);
      if (taking !== undefined && epoch <= taking) {
        replies.push({ t: 'stale_leader', partition: p, fence: taking });
        return true;
      }
      const led = this.led.get(p);
      if (!led) return false;
      if (epoch <= led.epoch) {
        replies.push({ t: 'stale_leader', partition: p, fence: led.epoch });
        return true;
      }
      // A newer leader exists: this node was deposed without noticing yet. Its commits still
      // on their way to the disk are waited for below, as for any ended leadership.
      this.ports.deposed(p, 'a newer leader is replicating to this node');
      this.stopLeading(p);
      return false;
    };

    for (const messages of frames) {
      replies = [];
      acks = new Map<number, [number, number]>();
      frameReplies.push(replies);
      frameAcks.push(acks);
      for (const message of messages) {
        const p = message.t === 'append' ? message.entry.partition : message.partition;
        const epoch = message.t === 'append' ? message.entry.epoch : message.epoch;
        if (refuseIfLeading(p, epoch)) continue;
        if (this.inflight.has(p)) {
          // Commits of this node's ended leadership of p are still on their way to the
          // disk: one landing after this frame's writes would overwrite them (a
          // snapshot would keep keys it created). Let them land first, then re-read.
          await this.localIdle(p);
          // A version set earlier in this round is written as it was (a later one would follow it in the same commit).
          if (changed.delete(p)) ops.push(versionWrite(p, versions.get(p)!));
          versions.delete(p);
        }
        switch (message.t) {
          case 'append': {
            if (this.awaitingSnapshot.has(p)) break;
            const decision = decideAppend(versionOf(p), message.entry);
            if (decision.kind === 'apply') {
              for (const op of message.entry.ops) ops.push(op);
              setVersion(p, decision.version);
              acks.set(p, [decision.version.seq, epoch]);
            } else if (decision.kind === 'stale_leader') replies.push({ t: 'stale_leader', partition: p, fence: decision.fence });
            else {
              this.awaitingSnapshot.add(p);
              replies.push({ t: 'mismatch', partition: p, seq: versionOf(p).seq });
            }
            break;
          }
          case 'probe': {
            const version = versionOf(p);
            if (epoch < version.fence) replies.push({ t: 'stale_leader', partition: p, fence: version.fence });
            else if (version.epoch === message.at.epoch && version.seq === message.at.seq) {
              this.awaitingSnapshot.delete(p);
              setVersion(p, fenceAt(version, epoch));
              acks.set(p, [version.seq, epoch]);
            } else {
              this.awaitingSnapshot.add(p);
              replies.push({ t: 'mismatch', partition: p, seq: version.seq });
            }
            break;
          }
          case 'snapshot_begin': {
            const version = versionOf(p);
            if (epoch < version.fence) {
              replies.push({ t: 'stale_leader', partition: p, fence: version.fence });
              break;
            }
            await flush();
            for (const [start, end] of storageKeys.partitionRanges(p)) {
              for (const { key } of this.ports.local.range(start, end)) ops.push({ type: 'del', key });
            }
            setVersion(p, { fence: Math.max(version.fence, epoch), epoch: 0, seq: 0 });
            await flush();
            this.awaitingSnapshot.delete(p);
            break;
          }
          case 'snapshot_chunk':
            if (epoch < versionOf(p).fence) break;
            for (const [key, value] of message.records) ops.push({ type: 'put', key: key as StoreKey, value });
            break;
          case 'snapshot_end': {
            const decision = decideSnapshot(versionOf(p), epoch, message.at);
            if (decision.kind === 'apply') {
              setVersion(p, decision.version);
              acks.set(p, [decision.version.seq, epoch]);
            } else replies.push({ t: 'stale_leader', partition: p, fence: decision.fence });
            break;
          }
        }
      }
    }
    await flush();
    frameAcks.forEach((frameAck, i) => {
      for (const [partition, [seq, epoch]] of frameAck) frameReplies[i].push({ t: 'ack', partition, seq, epoch });
    });
    return frameReplies;
  }
}
