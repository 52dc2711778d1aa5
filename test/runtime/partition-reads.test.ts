import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime, LmdbStore, ManualClock, PARTITION_READS_KIND, partitionOf, partitionReadsKey, storageKeys, type SnapshotActorDefinition } from '../../runtime/index.js';
import { prefixEnd, readPartition, type GroupsRead, type SnapshotsRead } from '../../runtime/partition-reads.js';

/** Partition reads on a real LMDB store: prefixes, cursors, counts and JSON-array groups. */
let dir: string;
let store: LmdbStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'partition-reads-'));
  store = new LmdbStore({ path: dir });
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const key = (...parts: string[]) => JSON.stringify(parts);
async function putSnapshots(p: number, kind: string, actorKeys: string[]): Promise<void> {
  await store.commit(actorKeys.map((k, i) => ({ type: 'put' as const, key: storageKeys.snapshot(p, kind, k), value: { i } })));
}

describe('prefixEnd', () => {
  it('is the first string after every string with the prefix', () => {
    expect(prefixEnd('["a",')).toBe('["a"-');
    expect('["a",\u{1F600}"]' < prefixEnd('["a",')).toBe(true);
    expect(() => prefixEnd('')).toThrow();
    expect(() => prefixEnd('a\uffff')).toThrow();
  });
});

describe('readPartition snapshots', () => {
  it("returns one prefix's actors in key order, with their count, after a cursor, up to a limit", async () => {
    await putSnapshots(3, 'lock', [key('t1', 'ns', 'b'), key('t1', 'ns', 'a'), key('t1', 'ns2', 'a'), key('t10', 'ns', 'a'), key('t1', 'ns', 'c')]);
    await putSnapshots(3, 'other', [key('t1', 'ns', 'z')]);
    await putSnapshots(4, 'lock', [key('t1', 'ns', 'd')]);
    const all = readPartition(store, 3, { op: 'snapshots', kind: 'lock', prefix: '["t1","ns",', limit: 10 }) as SnapshotsRead;
    expect(all.entries.map(([k]) => k)).toEqual([key('t1', 'ns', 'a'), key('t1', 'ns', 'b'), key('t1', 'ns', 'c')]);
    expect(all.entries[0]![1]).toEqual({ i: 1 });
    expect(all.count).toBe(3);

    const firstTwo = readPartition(store, 3, { op: 'snapshots', kind: 'lock', prefix: '["t1","ns",', limit: 2 }) as SnapshotsRead;
    expect(firstTwo.entries.map(([k]) => k)).toEqual([key('t1', 'ns', 'a'), key('t1', 'ns', 'b')]);
    expect(firstTwo.count).toBe(3);
    const rest = readPartition(store, 3, { op: 'snapshots', kind: 'lock', prefix: '["t1","ns",', after: key('t1', 'ns', 'b'), limit: 2 }) as SnapshotsRead;
    expect(rest.entries.map(([k]) => k)).toEqual([key('t1', 'ns', 'c')]);

    // The tenant t10 is not t1's: the prefix ends with the element's closing quote and comma.
    const tenant = readPartition(store, 3, { op: 'snapshots', kind: 'lock', prefix: '["t1",', limit: 10 }) as SnapshotsRead;
    expect(tenant.count).toBe(4);
    expect((readPartition(store, 3, { op: 'snapshots', kind: 'lock', prefix: '["t1",', limit: 0 }) as SnapshotsRead).entries).toEqual([]);
  });

  it('refuses what is not a read', () => {
    expect(() => readPartition(store, 0, { op: 'snapshots', kind: 'lock', prefix: '', limit: 1 })).toThrow(/partition read/);
    expect(() => readPartition(store, 0, { op: 'snapshots', kind: 'lock', prefix: '[', limit: 1e9 })).toThrow(/partition read/);
    expect(() => readPartition(store, 0, { op: 'drop' } as never)).toThrow(/partition read/);
  });
});

describe('readPartition groups', () => {
  it('groups JSON-array keys by their next element, with counts, after a cursor, up to a limit', async () => {
    await putSnapshots(1, 'lock', [
      key('t', 'jobs', 'a'),
      key('t', 'jobs', 'b'),
      key('t', 'jobs2', 'a'),
      key('t', 'bill"ing', 'x'),
      key('t', 'émoji\u{1F600}', 'x'),
      key('u', 'jobs', 'a'),
    ]);
    // Keys in no group: the next element is its last one, or is not a string.
    await store.commit([
      { type: 'put', key: storageKeys.snapshot(1, 'lock', '["t","solo"]'), value: 1 },
      { type: 'put', key: storageKeys.snapshot(1, 'lock', '["t",7,"x"]'), value: 1 },
    ]);
    const read = (extra: { after?: string; limit?: number } = {}) =>
      (readPartition(store, 1, { op: 'groups', kind: 'lock', prefix: '["t",', limit: extra.limit ?? 100, after: extra.after }) as GroupsRead).groups;
    expect(read()).toEqual([
      { group: 'bill"ing', count: 1 },
      { group: 'jobs', count: 2 },
      { group: 'jobs2', count: 1 },
      { group: 'émoji\u{1F600}', count: 1 },
    ]);
    expect(read({ limit: 2 }).map((g) => g.group)).toEqual(['bill"ing', 'jobs']);
    expect(read({ after: 'jobs' }).map((g) => g.group)).toEqual(['jobs2', 'émoji\u{1F600}']);
    expect(read({ after: 'zzz' }).map((g) => g.group)).toEqual(['émoji\u{1F600}']); // code point order, as LMDB keeps it
    expect(read({ after: 'émoji\u{1F600}' })).toEqual([]);
  });
});

describe('partition reads through the runtime', () => {
  it('are addressed to their partition, answered by the runtime that serves it, and refused elsewhere', async () => {
    const counter: SnapshotActorDefinition<number, 'add', number> = { kind: 'c', storage: 'snapshot', initial: () => 0, step: (n) => ({ state: n + 1, reply: n + 1 }) };
    const runtime = new ActorRuntime({ store, clock: new ManualClock(0), partitionCount: 8, initialPartitions: 'none' });
    runtime.register(counter);
    await runtime.start();
    expect(partitionOf(PARTITION_READS_KIND, partitionReadsKey(5), 8)).toBe(5);
    const p = partitionOf('c', '["x","y"]', 8);
    runtime.openPartition(p);
    await runtime.ask('c', '["x","y"]', 'add');
    const read = { op: 'snapshots', kind: 'c', prefix: '["x",', limit: 10 };
    expect(await runtime.ask(PARTITION_READS_KIND, partitionReadsKey(p), read)).toEqual({ entries: [['["x","y"]', 1]], count: 1 });
    await expect(runtime.ask(PARTITION_READS_KIND, partitionReadsKey((p + 1) % 8), read)).rejects.toMatchObject({ code: 'not_leader' });
    await expect(runtime.ask(PARTITION_READS_KIND, '08', read)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(runtime.ask(PARTITION_READS_KIND, '9', read)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    // No activation: a read is not an actor.
    expect(runtime.activeActorCount()).toBe(1);
    await runtime.stop();
    store = new LmdbStore({ path: dir });
  });
});
