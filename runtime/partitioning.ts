/**
 * An actor's partition is a stable hash of kind and key (FNV-1a, 32 bits),
 * modulo the partition count fixed when the node or cluster was created.
 */
export function partitionOf(kind: string, key: string, partitionCount: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < kind.length; i++) {
    hash ^= kind.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= 0;
  hash = Math.imul(hash, 0x01000193);
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % partitionCount;
}
