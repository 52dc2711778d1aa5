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
  leaseTtlSeconds: number;
  prefix: string;
  /** A follower that has not acknowledged an entry after this long leaves the in-sync set. */
  replicationTimeoutMs: number;
  /** How long the edge keeps retrying a request whose partition has no reachable leader. */
  forwardDeadlineMs: number;
}
