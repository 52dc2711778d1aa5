import type { Store, StoreKey } from './store.js';
import { keys, PARTITION_TABLES } from './storage-keys.js';

/**
 * How many partitions an embedded node's data directory is laid out in.
 *
 * Every storage key starts with its partition (storage-keys.ts), so keys that
 * are neighbours for the user (one tenant's locks, ids handed out in order)
 * are neighbours on disk only within one partition. With 64 partitions, a
 * group commit of 40 writes touches up to 40 separate paths down the B-tree;
 * with one, new keys given out in order land on the same few pages. On one
 * node there is nothing to place or replicate, so a new embedded store uses
 * one partition (docs/performance.md, "One partition on one node, and the
 * probation queue's leak"). A cluster places partitions on nodes and keeps
 * its own count in etcd.
 *
 * The count is recorded in the store the first time a node opens it and never
 * changes: an actor's partition is hash(kind, key) mod the count, so another
 * count would look for every actor in the wrong place.
 */
export const EMBEDDED_PARTITIONS_DEFAULT = 1;

/** The count of a store written before the count was recorded: PARTITIONS' default then. */
export const UNRECORDED_STORE_PARTITIONS = 64;

/** The most partitions a node may be configured with (PARTITIONS, http/config.ts): no key holds a partition at or past it. */
export const PARTITIONS_MAX = 4096;

const RECORD_KEY = keys.meta('partitions');

export class PartitionCountMismatch extends Error {}

/**
 * The store's partition count: the recorded one, or for a store without a
 * record, `requested` (PARTITIONS), else 1 for an empty store and 64 for one
 * with data. Records the count it returns. Throws PartitionCountMismatch when
 * `requested` differs from the record, or when the store holds data in a
 * partition at or past the count.
 */
export async function embeddedPartitionCount(store: Store, requested: number | undefined): Promise<number> {
  const recorded = store.get(RECORD_KEY);
  if (typeof recorded === 'number') {
    if (requested !== undefined && requested !== recorded) {
      throw new PartitionCountMismatch(`PARTITIONS is ${requested}, but this data directory is laid out in ${recorded} partitions; unset PARTITIONS or set it to ${recorded}`);
    }
    return recorded;
  }
  const count = requested ?? (holdsAny(store, 0) ? UNRECORDED_STORE_PARTITIONS : EMBEDDED_PARTITIONS_DEFAULT);
  if (holdsAny(store, count)) {
    throw new PartitionCountMismatch(`this data directory holds data in partition ${count} or above, so it was laid out in more than ${count} partitions; set PARTITIONS to the count it was created with`);
  }
  await store.commit([{ type: 'put', key: RECORD_KEY, value: count }]);
  return count;
}

/**
 * For a cluster node, whose count is the cluster's (etcd): throws
 * PartitionCountMismatch if an embedded node recorded another count in this
 * data directory, whose actors would all be looked for in the wrong place.
 */
export function refuseOtherLayout(store: Store, clusterPartitions: number): void {
  const recorded = store.get(RECORD_KEY);
  if (typeof recorded === 'number' && recorded !== clusterPartitions) {
    throw new PartitionCountMismatch(
      `this data directory was laid out in ${recorded} partitions by an embedded node; a cluster of ${clusterPartitions} partitions cannot use it: give the node an empty DATA_DIR`,
    );
  }
}

/** Whether any partitioned table holds a key in partition `from` or above (one cursor step per table, whatever the store's size). */
function holdsAny(store: Store, from: number): boolean {
  return PARTITION_TABLES.some((table) => {
    const start: StoreKey = [table, from];
    const end: StoreKey = [table, PARTITIONS_MAX];
    for (const _ of store.range(start, end)) return true;
    return false;
  });
}
