import type { Store, StoreKey, WriteOp } from '../../runtime/index.js';
import type { Replicator } from './replicator.js';

/**
 * The runtime's store in cluster mode: reads are local (a leader's LMDB holds
 * every acknowledged write of its partitions), commits go through the
 * replicator, which resolves them once in-sync followers have them too.
 */
export class ReplicatedStore implements Store {
  constructor(
    private readonly local: Store,
    private readonly replicator: Replicator,
  ) {}

  get(key: StoreKey): unknown {
    return this.local.get(key);
  }

  range(start: StoreKey, end: StoreKey): Iterable<{ key: StoreKey; value: unknown }> {
    return this.local.range(start, end);
  }

  count(start: StoreKey, end: StoreKey): number {
    return this.local.count(start, end);
  }

  commit(ops: readonly WriteOp[]): Promise<void> {
    return this.replicator.commit(ops);
  }

  close(): Promise<void> {
    return this.local.close();
  }
}
