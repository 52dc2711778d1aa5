import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppServices } from '../services.js';

const Member = Type.Object({
  node_id: Type.String(),
  http_url: Type.String(),
  grpc_address: Type.String(),
  draining: Type.Boolean(),
  /** That node's view of etcd is fresh (its member record says so): it may be handed partitions. */
  view_fresh: Type.Optional(Type.Boolean()),
});
const PartitionRow = Type.Object({
  partition: Type.Integer(),
  leader: Type.Union([Type.String(), Type.Null()]),
  epoch: Type.Union([Type.Integer(), Type.Null()]),
  isr: Type.Array(Type.String()),
});

/**
 * GET /cluster/status: the cluster as this node sees it (members, and each
 * partition's leader, epoch and in-sync replicas). An operator probe like
 * /metrics: no credential, keep it on the internal network (docs/cluster.md).
 */
export function clusterRoutes(app: FastifyInstance, services: AppServices): void {
  app.get('/cluster/status', {
    schema: {
      tags: ['health'],
      summary: 'Cluster membership and partition leadership as this node sees them.',
      response: {
        200: Type.Object({
          mode: Type.Union([Type.Literal('cluster'), Type.Literal('embedded')]),
          node_id: Type.String(),
          draining: Type.Boolean(),
          /** This node's view of etcd: fresh (read in full and watched since, no break) and the revision of that read. Cluster mode only. */
          view: Type.Optional(Type.Object({ fresh: Type.Boolean(), revision: Type.Integer() })),
          members: Type.Array(Member),
          partitions: Type.Array(PartitionRow),
        }),
      },
    },
  }, async () => {
    if (services.cluster) return { mode: 'cluster' as const, ...services.cluster.status() };
    // One node: it leads every partition, alone.
    return {
      mode: 'embedded' as const,
      node_id: 'embedded',
      draining: false,
      members: [],
      partitions: Array.from({ length: services.config.partitions }, (_, partition) => ({ partition, leader: 'embedded', epoch: null, isr: ['embedded'] })),
    };
  });
}
