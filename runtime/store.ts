/**
 * The storage port. The runtime sees an ordered key-value store with
 * synchronous reads and one atomic commit per batch of writes; LMDB is the
 * implementation (store-lmdb.ts), and the cluster layer can wrap it to ship
 * committed batches to followers.
 *
 * Keys are tuples ordered element by element. The layout is owned by
 * storage-keys.ts.
 */
export type StoreKey = (string | number)[];

export type WriteOp = { type: 'put'; key: StoreKey; value: unknown } | { type: 'del'; key: StoreKey };

export interface Store {
  get(key: StoreKey): unknown;
  /** Entries with start <= key < end, in key order. */
  range(start: StoreKey, end: StoreKey): Iterable<{ key: StoreKey; value: unknown }>;
  /** How many entries have start <= key < end (no value is read). */
  count(start: StoreKey, end: StoreKey): number;
  /** Applies every op atomically; resolves once durable. */
  commit(ops: readonly WriteOp[]): Promise<void>;
  close(): Promise<void>;
}
