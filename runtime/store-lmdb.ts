import { open, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { isSharedShape, SHARED_STRUCTURES_KEY, SHARED_STRUCTURES_MAX } from './shared-structures.js';
import type { Store, StoreKey, WriteOp } from './store.js';

/** msgpackr options lmdb-js hands to its encoder (open.js) that its types do not list. */
type EncoderOptions = RootDatabaseOptionsWithPath & {
  maxSharedStructures: number;
  shouldShareStructure: (keys: string[]) => boolean;
};

export interface LmdbStoreOptions {
  path: string;
  /**
   * `true` (default): a commit resolves only after LMDB has synced it to disk.
   * `false`: after it is committed and visible (survives a process crash, not
   * a power loss). Used by nothing but explicit opt-in (env DURABILITY=commit).
   */
  sync?: boolean;
  /** The most the data file may grow to, in GiB (default 64). LMDB maps lazily: address space, not RAM. */
  mapSizeGb?: number;
}

/** The default map: room for large actors. */
export const LMDB_MAP_SIZE_GB_DEFAULT = 64;

/**
 * One LMDB environment per node. lmdb-js queues the writes of many commit()
 * calls made close together into one transaction and one fsync: group commit
 * across actors comes for free, on top of the per-actor batching of turns.
 */
export class LmdbStore implements Store {
  private readonly db: RootDatabase;

  constructor(options: LmdbStoreOptions) {
    const sync = options.sync ?? true;
    const lmdbOptions: EncoderOptions = {
      path: options.path,
      // The path is always a directory. lmdb-js otherwise guesses from the
      // name: one with a dot ("data.v2", mktemp's "tmp.X1y2") would be taken
      // for a file and fail to open as "Is a directory".
      noSubdir: false,
      // Commits are flushed before their promise resolves; overlapping sync
      // would resolve on visibility, before the data is on disk.
      overlappingSync: false,
      noSync: !sync,
      encoding: 'msgpack',
      // Object shapes in a table of the store's own, not in every value (shared-structures.ts).
      sharedStructuresKey: SHARED_STRUCTURES_KEY,
      maxSharedStructures: SHARED_STRUCTURES_MAX,
      shouldShareStructure: isSharedShape,
      // Room for large actors; LMDB maps lazily, so this is address space, not RAM.
      mapSize: (options.mapSizeGb ?? LMDB_MAP_SIZE_GB_DEFAULT) * 1024 ** 3,
    };
    this.db = open(lmdbOptions);
  }

  get(key: StoreKey): unknown {
    return this.db.get(key);
  }

  *range(start: StoreKey, end: StoreKey): Iterable<{ key: StoreKey; value: unknown }> {
    for (const { key, value } of this.db.getRange({ start, end })) {
      yield { key: key as StoreKey, value };
    }
  }

  count(start: StoreKey, end: StoreKey): number {
    return this.db.getCount({ start, end });
  }

  commit(ops: readonly WriteOp[]): Promise<void> {
    return this.db
      .batch(() => {
        for (const op of ops) {
          if (op.type === 'put') this.db.put(op.key, op.value);
          else this.db.remove(op.key);
        }
      })
      .then(() => undefined);
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
