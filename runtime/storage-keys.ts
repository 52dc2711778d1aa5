import type { StoreKey } from './store.js';

/**
 * The key layout, in one place. Every key starts with a one-letter table and
 * the partition, so a partition's data is one set of contiguous ranges that
 * can be shipped, snapshotted or dropped as a unit.
 *
 *   ['s', p, kind, key]                 snapshot of a `snapshot` actor
 *   ['r', p, kind, key, subkey]         record of a `records` actor
 *   ['t', p, kind, key, name]           durable alarm -> due_ms
 *   ['u', p, due_ms, kind, key, name]   the same alarm, by time (loaded a window at a time)
 *   ['o', p, id]                        outbox entry -> {kind, key, message}
 *   ['x', p, kind, key, message_id]     receiver de-duplication -> received_ms
 *   ['y', p, received_ms, message_id]   the same, by time -> [kind, key] (for the sweep)
 *   ['v', p]                            the partition's replication version (cluster/replication/partition-log.ts)
 *   ['m', name]                         node metadata (not replicated): 'partitions', an embedded store's count (partition-count.ts)
 *                                       'structures', the value encoder's shape table (shared-structures.ts)
 */
const END = '\uffff';

export const keys = {
  snapshot: (p: number, kind: string, key: string): StoreKey => ['s', p, kind, key],
  record: (p: number, kind: string, key: string, subkey: string): StoreKey => ['r', p, kind, key, subkey],
  recordRange: (p: number, kind: string, key: string): [StoreKey, StoreKey] => [
    ['r', p, kind, key, ''],
    ['r', p, kind, key, END],
  ],
  alarm: (p: number, kind: string, key: string, name: string): StoreKey => ['t', p, kind, key, name],
  alarmRange: (p: number): [StoreKey, StoreKey] => [['t', p, ''], ['t', p, END]],
  alarmByTime: (p: number, due_ms: number, kind: string, key: string, name: string): StoreKey => ['u', p, due_ms, kind, key, name],
  /** Alarms of partition p due in [from_ms, to_ms). */
  alarmDueRange: (p: number, from_ms: number, to_ms: number): [StoreKey, StoreKey] => [['u', p, from_ms], ['u', p, to_ms]],
  outbox: (p: number, id: string): StoreKey => ['o', p, id],
  outboxRange: (p: number): [StoreKey, StoreKey] => [['o', p, ''], ['o', p, END]],
  dedup: (p: number, kind: string, key: string, messageId: string): StoreKey => ['x', p, kind, key, messageId],
  dedupByTime: (p: number, received_ms: number, messageId: string): StoreKey => ['y', p, received_ms, messageId],
  /** De-duplication records received before `before_ms`, oldest first. */
  dedupExpiredRange: (p: number, before_ms: number): [StoreKey, StoreKey] => [['y', p, 0], ['y', p, before_ms]],
  meta: (name: string): StoreKey => ['m', name],
  version: (p: number): StoreKey => ['v', p],
  /** Every range holding partition p's data (what a replica snapshot carries), the version excluded. */
  partitionRanges: (p: number): [StoreKey, StoreKey][] => PARTITION_TABLES.map((t) => [[t, p], [t, p + 1]]),
};

/** The tables whose keys start with the partition. */
export const PARTITION_TABLES = ['s', 'r', 't', 'u', 'o', 'x', 'y'] as const;
