import type { ClusterStatusView } from '../cluster/cluster-node.js';
import type { NodeStatus } from '../cluster/etcd-keys.js';

/**
 * The cluster as operators see it (GET /admin/cluster/status and its live
 * stream, the console's cluster page): members with what they lead and
 * follow, and each partition's leader, epoch, in-sync replicas and
 * followers with their lag. Leadership comes from this node's view of etcd;
 * lag from what each leader last published (status/<node>, every 2 s), taken
 * only from the partition's current leader.
 */
export interface ClusterView {
  mode: 'cluster' | 'embedded';
  /** The node that answered. */
  node_id: string;
  members: {
    node_id: string;
    http_url: string;
    draining: boolean;
    view_fresh: boolean;
    leads: number;
    follows: number;
  }[];
  partitions: {
    partition: number;
    leader: string | null;
    epoch: number | null;
    isr: string[];
    /** The leader's followers: `in_sync` or `catching_up`, and entries not yet acknowledged (null: not published yet). */
    followers: { node_id: string; mode: string; lag: number | null }[];
  }[];
}

/** The embedded node's name in every view (as GET /cluster/status says it). */
export const EMBEDDED_NODE_ID = 'embedded';

/** One node with no etcd: it leads every partition, alone, with no follower. */
export function embeddedView(partitions: number, httpUrl: string): ClusterView {
  return {
    mode: 'embedded',
    node_id: EMBEDDED_NODE_ID,
    members: [{ node_id: EMBEDDED_NODE_ID, http_url: httpUrl, draining: false, view_fresh: true, leads: partitions, follows: 0 }],
    partitions: Array.from({ length: partitions }, (_, partition) => ({ partition, leader: EMBEDDED_NODE_ID, epoch: null, isr: [EMBEDDED_NODE_ID], followers: [] })),
  };
}

/** This node's status merged with the leaders' published records. */
export function clusterView(status: ClusterStatusView, published: readonly NodeStatus[]): ClusterView {
  const byNode = new Map(published.map((record) => [record.node_id, record]));
  const partitions = status.partitions.map((row) => {
    const record = row.leader === null ? undefined : byNode.get(row.leader);
    const modes = record?.followers?.[row.partition] ?? {};
    const lags = record?.lag?.[row.partition] ?? {};
    // A partition without a leader has no followers (its in-sync record names who may be elected).
    const names = new Set(row.leader === null ? [] : [...Object.keys(modes), ...row.isr.filter((node) => node !== row.leader)]);
    const followers = [...names].sort().map((node_id) => ({
      node_id,
      mode: modes[node_id] ?? (row.isr.includes(node_id) ? 'in_sync' : 'catching_up'),
      lag: typeof lags[node_id] === 'number' ? lags[node_id] : null,
    }));
    return { partition: row.partition, leader: row.leader, epoch: row.epoch, isr: row.isr, followers };
  });
  const members = status.members
    .map((m) => ({
      node_id: m.node_id,
      http_url: m.http_url,
      draining: m.draining,
      view_fresh: m.view_fresh,
      leads: partitions.filter((row) => row.leader === m.node_id).length,
      follows: partitions.filter((row) => row.leader !== null && row.leader !== m.node_id && row.isr.includes(m.node_id)).length,
    }))
    .sort((a, b) => (a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0));
  return { mode: 'cluster', node_id: status.node_id, members, partitions };
}
