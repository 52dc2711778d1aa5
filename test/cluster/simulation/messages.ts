/**
 * Faults injected through the ports, to show the checker catches what they
 * break (each must make some seed fail):
 * - `followers_ack_unapplied`: the transport acknowledges every append to the
 *   leader at once, before (or without) the follower storing it;
 * - `clock_stops_while_paused`: a node's monotonic clock does not count the
 *   time it was paused (as CLOCK_MONOTONIC does not count a suspended
 *   machine), so it trusts a lease that may have expired.
 */
export type SimFault = 'followers_ack_unapplied' | 'clock_stops_while_paused';

export interface SimConfig {
  partitions: number;
  replicationFactor: number;
  /** MIN_IN_SYNC_REPLICAS; 1 when absent. */
  minInSyncReplicas?: number;
  leaseTtlSeconds: number;
  replicationTimeoutMs: number;
  forwardDeadlineMs: number;
  /** REPLICATION_COMMIT_DELAY_MS; 0 when absent. */
  commitDelayMs?: number;
  fault?: SimFault;
  /** During an etcd outage, half of a node's writes are applied with their answer lost (FakeEtcdClient). */
  etcdLostAnswers?: boolean;
  /**
   * The store commits every commit queued when a commit starts together, and
   * answers them in one event (lmdb-js's batched transactions): continuations
   * of different commits interleave, as they do on LMDB.
   */
  groupCommits?: boolean;
}

export type ClientReply = { ok: true; value: number } | { ok: false; error: string };
