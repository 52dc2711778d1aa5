/** The cluster view of GET /admin/cluster/status and its stream (http/cluster-view.ts on the node). */
export interface ClusterView {
  mode: 'cluster' | 'embedded';
  node_id: string;
  members: { node_id: string; http_url: string; draining: boolean; view_fresh: boolean; leads: number; follows: number }[];
  partitions: {
    partition: number;
    leader: string | null;
    epoch: number | null;
    isr: string[];
    followers: { node_id: string; mode: string; lag: number | null }[];
  }[];
}
