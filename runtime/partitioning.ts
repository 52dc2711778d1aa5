import { PARTITION_READS_KIND, partitionOfReadsKey } from './partition-reads.js';

/**
 * An actor's partition is a stable hash of kind and key (FNV-1a, 32 bits),
 * modulo the partition count fixed when the node or cluster was created.
 * Partition reads (partition-reads.ts) name their partition in their key.
 */
export function partitionOf(kind: string, key: string, partitionCount: number): number {
  if (kind === PARTITION_READS_KIND) return partitionOfReadsKey(key, partitionCount) ?? 0;
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
