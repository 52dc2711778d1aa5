import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { embeddedPartitionCount, LmdbStore, PartitionCountMismatch, refuseOtherLayout, storageKeys } from '../../runtime/index.js';

const dirs: string[] = [];
const stores: LmdbStore[] = [];
afterEach(async () => {
  while (stores.length) await stores.pop()!.close();
  while (dirs.length) rmSync(dirs.pop()!, { recursive: true, force: true });
});

function openStore(dir?: string): { dir: string; store: LmdbStore } {
  const path = dir ?? mkdtempSync(join(tmpdir(), 'partition-count-'));
  if (!dir) dirs.push(path);
  const store = new LmdbStore({ path });
  stores.push(store);
  return { dir: path, store };
}

async function reopen(dir: string, store: LmdbStore): Promise<LmdbStore> {
  stores.splice(stores.indexOf(store), 1);
  await store.close();
  return openStore(dir).store;
}

describe('embeddedPartitionCount', () => {
  it('lays a new store out in one partition, records it, and keeps it when reopened', async () => {
    const { dir, store } = openStore();
    expect(await embeddedPartitionCount(store, undefined)).toBe(1);
    const again = await reopen(dir, store);
    expect(await embeddedPartitionCount(again, undefined)).toBe(1);
  });

  it('takes PARTITIONS for a new store, and refuses another count once recorded', async () => {
    const { dir, store } = openStore();
    expect(await embeddedPartitionCount(store, 8)).toBe(8);
    const again = await reopen(dir, store);
    expect(await embeddedPartitionCount(again, undefined)).toBe(8);
    expect(await embeddedPartitionCount(again, 8)).toBe(8);
    await expect(embeddedPartitionCount(again, 1)).rejects.toThrow(PartitionCountMismatch);
    await expect(embeddedPartitionCount(again, 1)).rejects.toThrow(/PARTITIONS is 1, but this data directory is laid out in 8 partitions/);
  });

  it('takes a store with data and no record for one of the old default, 64 partitions', async () => {
    const { store } = openStore();
    await store.commit([{ type: 'put', key: storageKeys.snapshot(63, 'lock', 'k'), value: { n: 1 } }]);
    expect(await embeddedPartitionCount(store, undefined)).toBe(64);
    expect(store.get(storageKeys.meta('partitions'))).toBe(64);
  });

  it('refuses a count that leaves a stored partition out', async () => {
    const { store } = openStore();
    await store.commit([{ type: 'put', key: storageKeys.record(9, 'queue', 'q', 'm1'), value: { n: 1 } }]);
    await expect(embeddedPartitionCount(store, 8)).rejects.toThrow(/holds data in partition 8 or above/);
    expect(store.get(storageKeys.meta('partitions'))).toBeUndefined();
    expect(await embeddedPartitionCount(store, 16)).toBe(16);
  });

  it('keeps a cluster node off a data directory an embedded node laid out in another count', async () => {
    const { store } = openStore();
    expect(() => refuseOtherLayout(store, 64)).not.toThrow();
    await embeddedPartitionCount(store, undefined);
    expect(() => refuseOtherLayout(store, 64)).toThrow(/laid out in 1 partitions by an embedded node; a cluster of 64 partitions cannot use it/);
    expect(() => refuseOtherLayout(store, 1)).not.toThrow();
  });
});
