/**
 * A cluster node's settings. Read from the environment by http/config.ts
 * (ETCD_ENDPOINTS and friends; docs/cluster.md); cluster/ owns the shape so
 * that it never imports http/.
 */
export interface ClusterConfig {
  etcdEndpoints: string[];
  nodeId: string;
  grpcPort: number;
  advertiseHost: string;
  replicationFactor: number;
  /**
   * Copies of a partition (the leader's included) that must be in sync for a
   * write to be accepted (MIN_IN_SYNC_REPLICAS, 1..replicationFactor): with
   * fewer, writes get 503 not_enough_replicas and nothing is written.
   */
  minInSyncReplicas: number;
  leaseTtlSeconds: number;
  prefix: string;
  /** A follower that has not acknowledged an entry after this long leaves the in-sync set. */
  replicationTimeoutMs: number;
  /**
   * Under load, a node waits this long after one local commit (a leader's
   * entries, a follower's applies) before the next, so that it carries more
   * writes per fsync (REPLICATION_COMMIT_DELAY_MS; 0 = never wait). A commit
   * with nothing queued behind it is never delayed.
   */
  commitDelayMs: number;
  /** How long the edge keeps retrying a request whose partition has no reachable leader. */
  forwardDeadlineMs: number;
}
