/**
 * The cluster's state in etcd, in one place. Everything lives under one
 * prefix (`CLUSTER_PREFIX`, default `/platform/`), so several clusters can
 * share an etcd. Values are JSON.
 *
 *   config                       {partitions, replication_factor, created_at}   written once, at cluster creation
 *   members/<node>               MemberRecord                                    under the node's lease
 *   partitions/<p>/leader        LeaderRecord                                    under the leader's lease; create revision = epoch
 *   partitions/<p>/isr           IsrRecord                                       persistent; changed by the leader only
 *   status/<node>                NodeStatus                                      under the node's lease, refreshed every few seconds
 *   drain/<node>                 {requested_at}                                  written by `cluster drain`, removed when the node leaves
 *   rebalance                    {requested_at}                                  written by `cluster rebalance`
 */
export interface ClusterConfigRecord {
  partitions: number;
  replication_factor: number;
  created_at: string;
}

export interface MemberRecord {
  node_id: string;
  http_url: string;
  grpc_address: string;
  started_at: string;
  /** True once the node is draining: placement skips it and it hands its partitions over. */
  draining: boolean;
  /**
   * True while the node's view of members and partition leaders follows etcd
   * (read in full, watched since, no break), with the revision of that read.
   * Partitions are handed over only to a node whose view is fresh. Absent on
   * records of older versions (read as fresh).
   */
  view_fresh?: boolean;
  view_revision?: number;
  /** The lease the record lives under: a new one means a new life of the node (peers reopen their channel to it). */
  lease_id?: string;
}

export interface LeaderRecord {
  node_id: string;
  grpc_address: string;
}

/** The in-sync replicas of a partition: only these may become its leader. */
export interface IsrRecord {
  /** Epoch of the leader that wrote this record. */
  epoch: number;
  leader: string;
  /** Node ids holding every acknowledged write, the leader included. */
  replicas: string[];
}

export interface NodeStatus {
  node_id: string;
  at: string;
  /** Partitions this node leads. */
  leading: number[];
  /** Per led partition with followers: follower -> entries not yet acknowledged by it. */
  lag: Record<string, Record<string, number>>;
  /** Per led partition: follower -> 'in_sync' | 'catching_up'. */
  followers: Record<string, Record<string, string>>;
  forwarded_total: number;
}

export function clusterKeys(prefix: string) {
  const base = prefix.endsWith('/') ? prefix : `${prefix}/`;
  return {
    base,
    config: `${base}config`,
    membersPrefix: `${base}members/`,
    member: (node: string) => `${base}members/${node}`,
    partitionsPrefix: `${base}partitions/`,
    leader: (p: number) => `${base}partitions/${p}/leader`,
    isr: (p: number) => `${base}partitions/${p}/isr`,
    statusPrefix: `${base}status/`,
    status: (node: string) => `${base}status/${node}`,
    drainPrefix: `${base}drain/`,
    drain: (node: string) => `${base}drain/${node}`,
    rebalance: `${base}rebalance`,
  };
}

export type ClusterKeys = ReturnType<typeof clusterKeys>;

/** partitions/<p>/leader or partitions/<p>/isr -> [p, 'leader' | 'isr'], anything else -> undefined. */
export function parsePartitionKey(keys: ClusterKeys, key: string): [number, 'leader' | 'isr'] | undefined {
  if (!key.startsWith(keys.partitionsPrefix)) return undefined;
  const [p, what] = key.slice(keys.partitionsPrefix.length).split('/');
  const partition = Number(p);
  if (!Number.isInteger(partition) || (what !== 'leader' && what !== 'isr')) return undefined;
  return [partition, what];
}
