import client from 'prom-client';

/** The cluster's own metrics, in the node's prom-client registry. */
export class ClusterMetrics {
  readonly partitionMoves: client.Counter;
  readonly leadershipChanges: client.Counter<'change'>;
  readonly forwarded: client.Counter;
  readonly replicationAck: client.Histogram;

  constructor(registry: client.Registry, view: { partitionsLed(): number; maxLag(): number; inSyncFollowers(): number }) {
    this.partitionMoves = new client.Counter({
      name: 'cluster_partition_moves_total',
      help: 'Partitions this node handed over to another node (join, drain, rebalance).',
      registers: [registry],
    });
    this.leadershipChanges = new client.Counter({
      name: 'cluster_leadership_changes_total',
      help: 'Partition leadership gained or lost by this node.',
      labelNames: ['change'],
      registers: [registry],
    });
    this.forwarded = new client.Counter({
      name: 'cluster_forwarded_requests_total',
      help: 'Actor messages this node forwarded to another node (the partition leader).',
      registers: [registry],
    });
    this.replicationAck = new client.Histogram({
      name: 'cluster_replication_ack_duration_seconds',
      help: "Time from a log entry's append on this leader to a follower's acknowledgement of it (durable on the follower), over the newest entry each acknowledgement covers.",
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers: [registry],
    });
    new client.Gauge({
      name: 'cluster_partitions_led',
      help: 'Partitions this node leads.',
      registers: [registry],
      collect() {
        this.set(view.partitionsLed());
      },
    });
    new client.Gauge({
      name: 'cluster_replication_lag_entries',
      help: 'Largest number of entries a follower of a partition led here has not acknowledged.',
      registers: [registry],
      collect() {
        this.set(view.maxLag());
      },
    });
    new client.Gauge({
      name: 'cluster_in_sync_followers',
      help: 'In-sync followers summed over the partitions this node leads.',
      registers: [registry],
      collect() {
        this.set(view.inSyncFollowers());
      },
    });
  }
}
