import type { ClusterKeys } from './etcd-keys.js';

/**
 * An operator's request that a node hand every partition over and stay up,
 * empty: the key `drain/<node>` in etcd, which that node watches
 * (cluster-node.ts) and removes when it leaves. The one place this key is
 * written: the CLI (`npm run cluster -- drain`) and the admin route
 * (`POST /admin/cluster/nodes/{node_id}/drain`) both come here.
 */
export interface DrainRequest {
  node_id: string;
  requested_at: string;
}

export type DrainOutcome =
  | { ok: true; request: DrainRequest }
  /** `not_member`: no live member has that id. `no_other_node`: no other serving member could take its partitions. */
  | { ok: false; reason: 'not_member' | 'no_other_node' };

/** Writes one etcd key (the CLI's Etcd3 client or a node's Coordination port). */
export type KeyWriter = (key: string, value: string) => Promise<unknown>;

/**
 * Checks the request against the members as the caller read them, then
 * writes it. A node that is the only serving member has nobody to hand its
 * partitions to: its drain would stop at once with every partition still on
 * it, so the request is refused instead of written.
 */
export async function requestDrain(
  write: KeyWriter,
  keys: ClusterKeys,
  members: readonly { node_id: string; draining: boolean }[],
  nodeId: string,
  now: Date,
): Promise<DrainOutcome> {
  if (!members.some((m) => m.node_id === nodeId)) return { ok: false, reason: 'not_member' };
  if (!members.some((m) => m.node_id !== nodeId && !m.draining)) return { ok: false, reason: 'no_other_node' };
  const request: DrainRequest = { node_id: nodeId, requested_at: now.toISOString() };
  await write(keys.drain(nodeId), JSON.stringify({ requested_at: request.requested_at }));
  return { ok: true, request };
}
