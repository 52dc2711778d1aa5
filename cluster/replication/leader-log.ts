import type { WriteOp } from '../../runtime/index.js';
import type { LogEntry, PartitionVersion } from './partition-log.js';

/**
 * The leader's bookkeeping for one partition: numbers entries, knows which
 * followers each unacknowledged entry still waits for, and says when a
 * commit may be acknowledged to its client. Pure (no timers, no I/O), so
 * the real replicator and the seeded simulation run the same rules.
 *
 * The safety rule: an entry is acknowledged only when it is durable locally
 * and on every follower that was in sync when the entry was made, unless that
 * follower has since been removed from the in-sync set *in etcd* (after which
 * it can no longer be elected, so it no longer needs the entry).
 *
 * The durability rule (MIN_IN_SYNC_REPLICAS, as Kafka's min.insync.replicas):
 * `minInSync` copies, the leader's included. A write is accepted only while
 * the in-sync set (leader + in-sync followers) has at least that many
 * (`acceptsWrites`): otherwise the caller refuses it before anything is
 * written, so a retry is safe. An entry accepted under a large enough set
 * whose followers then leave it before acknowledging ends up durable on
 * fewer copies than asked: it is reported as short (`Settled.short`), not
 * acknowledged; it stays written here (its outcome is unknown to the client).
 */
export type FollowerMode = 'in_sync' | 'catching_up';

export interface FollowerProgress {
  mode: FollowerMode;
  /** Highest seq this follower has durably applied (reported by its acknowledgements). */
  acked: number;
}

interface Pending {
  seq: number;
  made_ms: number;
  local: boolean;
  waiting: Set<string>;
  /** Copies known durable besides the leader's: followers that acknowledged it. */
  followerCopies: number;
}

/** Entries that left the pending list: acknowledged, or durable on fewer than minInSync copies. */
export interface Settled {
  acked: number[];
  short: number[];
}

export class LeaderLog {
  readonly partition: number;
  readonly epoch: number;
  private lastEpoch: number;
  private lastSeq: number;
  readonly followers = new Map<string, FollowerProgress>();
  /** Unacknowledged entries, oldest first. */
  private readonly pending: Pending[] = [];

  /** Copies (the leader's included) a write needs: MIN_IN_SYNC_REPLICAS, 1 by default. */
  readonly minInSync: number;

  constructor(partition: number, epoch: number, version: PartitionVersion, minInSync = 1) {
    if (!Number.isInteger(minInSync) || minInSync < 1) throw new Error(`minInSync must be an integer >= 1, got ${minInSync}`);
    this.partition = partition;
    this.epoch = epoch;
    this.minInSync = minInSync;
    this.lastEpoch = version.epoch;
    this.lastSeq = version.seq;
  }

  /** What this replica holds once every entry made so far is applied. */
  get version(): PartitionVersion {
    return { fence: this.epoch, epoch: this.lastEpoch, seq: this.lastSeq };
  }

  get lastSequence(): number {
    return this.lastSeq;
  }

  get pendingCount(): number {
    return this.pending.length;
  }

  /** Copies in the in-sync set now: the leader and its in-sync followers. */
  inSyncCopies(): number {
    let copies = 1;
    for (const progress of this.followers.values()) if (progress.mode === 'in_sync') copies++;
    return copies;
  }

  /** May a write be accepted now? False: refuse it before appending (nothing is written, a retry is safe). */
  acceptsWrites(): boolean {
    return this.inSyncCopies() >= this.minInSync;
  }

  /**
   * Makes the next entry; it waits for the local commit and for every
   * follower in sync now. Call only when acceptsWrites() (an assertion).
   */
  append(ops: WriteOp[], now_ms: number): LogEntry {
    if (!this.acceptsWrites()) throw new Error(`partition ${this.partition}: append with ${this.inSyncCopies()} in-sync copies, fewer than ${this.minInSync}`);
    const entry: LogEntry = { partition: this.partition, epoch: this.epoch, seq: this.lastSeq + 1, prevEpoch: this.lastEpoch, ops };
    this.lastSeq = entry.seq;
    this.lastEpoch = this.epoch;
    const waiting = new Set<string>();
    for (const [node, progress] of this.followers) if (progress.mode === 'in_sync') waiting.add(node);
    this.pending.push({ seq: entry.seq, made_ms: now_ms, local: false, waiting, followerCopies: 0 });
    return entry;
  }

  /** The local LMDB commit of this entry is durable. Returns the entries now settled. */
  localCommitted(seq: number): Settled {
    for (const p of this.pending) if (p.seq === seq) p.local = true;
    return this.settle();
  }

  /** A follower acknowledged everything up to `seq`. Returns the entries now settled. */
  acked(node: string, seq: number): Settled {
    const progress = this.followers.get(node);
    if (!progress) return { acked: [], short: [] };
    if (seq > progress.acked) progress.acked = seq;
    for (const p of this.pending) if (p.seq <= seq && p.waiting.delete(node)) p.followerCopies++;
    return this.settle();
  }

  /**
   * Starts shipping to a follower that is not in sync yet (a probe, then a
   * snapshot if its log differs). `acked` -1: nothing confirmed yet, so it
   * cannot count as caught up before it answers, even when the log is empty.
   */
  addCatchingUp(node: string, acked = -1): void {
    this.followers.set(node, { mode: 'catching_up', acked });
  }

  /**
   * A catching-up follower has acknowledged every entry made so far: from now
   * on entries wait for it. Call before recording it in the in-sync set in
   * etcd, so no entry made after that record is acknowledged without it.
   */
  isCaughtUp(node: string): boolean {
    const progress = this.followers.get(node);
    return progress !== undefined && progress.acked >= 0 && progress.acked >= this.lastSeq;
  }

  markInSync(node: string): void {
    const progress = this.followers.get(node);
    if (progress) progress.mode = 'in_sync';
  }

  /**
   * In-sync followers that an entry made before `now_ms - timeout_ms` still
   * waits for: they must leave the in-sync set (in etcd first) so writes go on.
   */
  laggards(now_ms: number, timeout_ms: number): string[] {
    const late = new Set<string>();
    for (const p of this.pending) {
      if (now_ms - p.made_ms < timeout_ms) break;
      for (const node of p.waiting) late.add(node);
    }
    return [...late];
  }

  /**
   * The follower's removal from the in-sync set is recorded in etcd (or it
   * was never in it): stop waiting for it. Returns the entries now settled
   * (with minInSync > 1, those it was the missing copy of are short).
   */
  removeFollower(node: string): Settled {
    this.followers.delete(node);
    for (const p of this.pending) p.waiting.delete(node);
    return this.settle();
  }

  /** Same as removeFollower, but keeps shipping to it as a catching-up follower. */
  demoteFollower(node: string): Settled {
    const progress = this.followers.get(node);
    for (const p of this.pending) p.waiting.delete(node);
    if (progress) progress.mode = 'catching_up';
    return this.settle();
  }

  inSyncFollowers(): string[] {
    return [...this.followers].filter(([, p]) => p.mode === 'in_sync').map(([node]) => node);
  }

  /** Entries not yet acknowledged by each follower. */
  lag(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [node, p] of this.followers) out[node] = Math.max(0, this.lastSeq - Math.max(0, p.acked));
    return out;
  }

  /** Leadership is lost: every pending entry fails. Returns their seqs. */
  abandon(): number[] {
    const seqs = this.pending.map((p) => p.seq);
    this.pending.length = 0;
    return seqs;
  }

  private settle(): Settled {
    const done: Settled = { acked: [], short: [] };
    for (let i = 0; i < this.pending.length; ) {
      const p = this.pending[i];
      if (p.local && p.waiting.size === 0) {
        (1 + p.followerCopies >= this.minInSync ? done.acked : done.short).push(p.seq);
        this.pending.splice(i, 1);
      } else i++;
    }
    return done;
  }
}
