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
}

export class LeaderLog {
  readonly partition: number;
  readonly epoch: number;
  private lastEpoch: number;
  private lastSeq: number;
  readonly followers = new Map<string, FollowerProgress>();
  /** Unacknowledged entries, oldest first. */
  private readonly pending: Pending[] = [];

  constructor(partition: number, epoch: number, version: PartitionVersion) {
    this.partition = partition;
    this.epoch = epoch;
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

  /** Makes the next entry; it waits for the local commit and for every follower in sync now. */
  append(ops: WriteOp[], now_ms: number): LogEntry {
    const entry: LogEntry = { partition: this.partition, epoch: this.epoch, seq: this.lastSeq + 1, prevEpoch: this.lastEpoch, ops };
    this.lastSeq = entry.seq;
    this.lastEpoch = this.epoch;
    const waiting = new Set<string>();
    for (const [node, progress] of this.followers) if (progress.mode === 'in_sync') waiting.add(node);
    this.pending.push({ seq: entry.seq, made_ms: now_ms, local: false, waiting });
    return entry;
  }

  /** The local LMDB commit of this entry is durable. Returns the seqs now acknowledged. */
  localCommitted(seq: number): number[] {
    for (const p of this.pending) if (p.seq === seq) p.local = true;
    return this.settle();
  }

  /** A follower acknowledged everything up to `seq`. Returns the seqs now acknowledged. */
  acked(node: string, seq: number): number[] {
    const progress = this.followers.get(node);
    if (!progress) return [];
    if (seq > progress.acked) progress.acked = seq;
    for (const p of this.pending) if (p.seq <= seq) p.waiting.delete(node);
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
   * was never in it): stop waiting for it. Returns the seqs now acknowledged.
   */
  removeFollower(node: string): number[] {
    this.followers.delete(node);
    for (const p of this.pending) p.waiting.delete(node);
    return this.settle();
  }

  /** Same as removeFollower, but keeps shipping to it as a catching-up follower. */
  demoteFollower(node: string): number[] {
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

  private settle(): number[] {
    const done: number[] = [];
    for (let i = 0; i < this.pending.length; ) {
      const p = this.pending[i];
      if (p.local && p.waiting.size === 0) {
        done.push(p.seq);
        this.pending.splice(i, 1);
      } else i++;
    }
    return done;
  }
}
