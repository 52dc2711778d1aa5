/**
 * Where a partition lives: rendezvous (highest-random-weight) hashing over the
 * live members. Every node computes the same ranking from the same member
 * list, and when a member joins or leaves only the partitions that ranked it
 * first (about 1/N of them) change their preferred node.
 */

/** 53-bit FNV-1a style mix of partition and node id: stable across processes and versions. */
function weight(partition: number, nodeId: string): number {
  let h1 = 0x811c9dc5 ^ partition;
  let h2 = 0x01000193 ^ Math.imul(partition, 0x9e3779b1);
  for (let i = 0; i < nodeId.length; i++) {
    const c = nodeId.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
  }
  // Final avalanche so that similar ids ("node-1", "node-2") spread evenly.
  h1 ^= h1 >>> 15;
  h1 = Math.imul(h1, 0x2c1b3c6d);
  h1 ^= h1 >>> 12;
  h2 ^= h2 >>> 13;
  h2 = Math.imul(h2, 0x297a2d39);
  h2 ^= h2 >>> 15;
  return (h1 >>> 0) * 0x200000 + ((h2 >>> 0) & 0x1fffff);
}

/** Every node, most preferred first, for this partition. */
export function rankNodes(partition: number, nodeIds: Iterable<string>): string[] {
  const scored: { id: string; w: number }[] = [];
  for (const id of nodeIds) scored.push({ id, w: weight(partition, id) });
  scored.sort((a, b) => b.w - a.w || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return scored.map((s) => s.id);
}

/** The partition's replica set: the first `replicationFactor` nodes of its ranking. The first is the preferred leader. */
export function replicaSet(partition: number, nodeIds: Iterable<string>, replicationFactor: number): string[] {
  return rankNodes(partition, nodeIds).slice(0, Math.max(1, replicationFactor));
}
