import type { Limits } from './limits.js';
import type { PartitionTable } from './partition-table.js';
import { keys } from './storage-keys.js';
import type { Store, WriteOp } from './store.js';

/**
 * Drops receiver de-duplication records past their retention. The time
 * index ['y', p, received_ms, id] makes this a scan of expired entries only,
 * at most `dedup_sweep_records_max` per sweep, so its cost does not grow with
 * the number of live records. Returns the deletes to commit (empty if none).
 */
export function expiredDedupRecords(store: Store, partitions: PartitionTable, now_ms: number, limits: Limits): WriteOp[] {
  const cutoff_ms = now_ms - limits.dedup_retention_ms;
  const expired: WriteOp[] = [];
  let budget = limits.dedup_sweep_records_max;
  for (let p = 0; p < partitions.count && budget > 0; p++) {
    if (!partitions.owns(p)) continue;
    const [start, end] = keys.dedupExpiredRange(p, cutoff_ms);
    for (const { key, value } of store.range(start, end)) {
      const [kind, actorKey] = value as [string, string];
      expired.push({ type: 'del', key }, { type: 'del', key: keys.dedup(p, kind, actorKey, key[3] as string) });
      if (--budget <= 0) break;
    }
  }
  return expired;
}
