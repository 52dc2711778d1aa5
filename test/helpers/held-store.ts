import type { Store, StoreKey, WriteOp } from '../../runtime/index.js';

/**
 * A Store whose commits wait until the test releases or fails each one: it
 * stands for LMDB's write and fsync in tests of what a node does while a
 * commit is in flight (the replicator, the commit lane). Released commits are
 * applied to `data`, which `get` reads.
 */
export class HeldStore implements Store {
  readonly data = new Map<string, unknown>();
  readonly commits: { ops: readonly WriteOp[]; release: () => void; fail: (error: Error) => void }[] = [];

  get(key: StoreKey): unknown {
    return this.data.get(JSON.stringify(key));
  }
  range(): Iterable<{ key: StoreKey; value: unknown }> {
    return [];
  }
  count(): number {
    return 0;
  }
  commit(ops: readonly WriteOp[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.commits.push({
        ops,
        fail: reject,
        release: () => {
          for (const op of ops) {
            if (op.type === 'put') this.data.set(JSON.stringify(op.key), op.value);
            else this.data.delete(JSON.stringify(op.key));
          }
          resolve();
        },
      });
    });
  }
  async close(): Promise<void> {}
  /** Releases commit i and lets its continuations run. */
  async release(i: number): Promise<void> {
    this.commits[i].release();
    await settled();
  }
  /** Fails commit i and lets its continuations run. */
  async fail(i: number, error: Error): Promise<void> {
    this.commits[i].fail(error);
    await settled();
  }
}

async function settled(): Promise<void> {
  for (let turn = 0; turn < 5; turn++) await Promise.resolve();
}
