import type { LogEntry } from '../../../cluster/replication/partition-log.js';

/** Leader -> follower (the real frames, with the snapshot in one message: it is applied in one commit here). */
export type ReplicateMessage =
  | { t: 'append'; entry: LogEntry }
  | { t: 'probe'; partition: number; epoch: number; at: { epoch: number; seq: number } }
  | { t: 'snapshot'; partition: number; epoch: number; data: Map<string, number>; at: { epoch: number; seq: number } };

/** Follower -> leader (as in cluster/transport/frames.ts: no epoch on acknowledgements). */
export type ReplicateReply =
  | { t: 'ack'; partition: number; seq: number }
  | { t: 'stale_leader'; partition: number; fence: number }
  | { t: 'mismatch'; partition: number; seq: number };

export interface ClientRequest {
  op: 'inc' | 'get';
  partition: number;
  counter: string;
  /** When the client issued the request (reads must reflect every write acknowledged before). */
  issuedAt: number;
}

export type ClientReply = { ok: true; value: number } | { ok: false; error: 'not_leader' | 'unavailable' };

/**
 * Deliberately broken rules, to show the checker fails: acknowledge on the
 * local commit alone; serve without checking the local lease deadline; drop
 * a partition on lease doubt without deleting its key (cluster/leadership.ts
 * as first written: the partition then stays unserved for good); acknowledge
 * entries whose acknowledgements are processed after the leadership is gone
 * (cluster/replication/replicator.ts settle() as first written); run actor
 * batches queued before the leadership was lost (runtime/actor-runtime.ts).
 */
export type SimBug = 'ack_on_local_commit' | 'serve_without_lease' | 'drop_without_release' | 'ack_after_lease' | 'serve_queued_after_loss';

export interface SimConfig {
  partitions: number;
  replicationFactor: number;
  leaseTtlMs: number;
  keepaliveMs: number;
  electionStepMs: number;
  tickMs: number;
  reconcileMs: number;
  replicationTimeoutMs: number;
  bug?: SimBug;
}
