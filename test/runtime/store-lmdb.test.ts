import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { LmdbStore } from '../../runtime/index.js';
import { isSharedShape, SHARED_STRUCTURES_KEY, SHARED_STRUCTURES_MAX } from '../../runtime/shared-structures.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) rmSync(dirs.pop()!, { recursive: true, force: true });
});
/** A new directory, removed after the test. */
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'store-test-'));
  dirs.push(dir);
  return dir;
};

describe('LmdbStore', () => {
  it('opens an existing directory whose name has a dot, keeping its files inside it', async () => {
    const dir = join(tempDir(), 'data.v2');
    mkdirSync(dir);
    const store = new LmdbStore({ path: dir });
    await store.commit([{ type: 'put', key: ['m', 'probe'], value: { n: 1 } }]);
    await store.close();
    expect(readdirSync(dir).sort()).toEqual(['data.mdb', 'lock.mdb']);

    const reopened = new LmdbStore({ path: dir });
    expect(reopened.get(['m', 'probe'])).toEqual({ n: 1 });
    await reopened.close();
  });

  // A lock's snapshot as the locks area stores it.
  const lockSnapshot = (n: number) => ({
    holder: { lock_id: `lck_${n}`, owner_id: 'owner-12345', acquired_at_ms: 1795974637788 + n, expires_at_ms: 1795974667788 + n, ttl_seconds: 30, fence_token: n, metadata: null },
    last_fence_token: n,
  });
  /** The stored bytes of a key, read with the store closed. */
  const rawBytes = async (dir: string, key: (string | number)[]) => {
    const raw = open({ path: dir, noSubdir: false, encoding: 'binary' });
    const bytes = (raw.get(key) as Buffer | undefined)?.length;
    await raw.close();
    return bytes;
  };

  it('keeps object shapes in a table of its own, so a value carries only its field values', async () => {
    const dir = tempDir();
    const store = new LmdbStore({ path: dir });
    await store.commit([{ type: 'put', key: ['s', 0, 'lock', 'a'], value: lockSnapshot(1) }]);
    await store.close();
    // 172 bytes with the field names inline (before the table), 65 with it.
    expect(await rawBytes(dir, ['s', 0, 'lock', 'a'])).toBeLessThan(80);
    expect(await rawBytes(dir, SHARED_STRUCTURES_KEY)).toBeGreaterThan(0);

    const reopened = new LmdbStore({ path: dir });
    expect(reopened.get(['s', 0, 'lock', 'a'])).toEqual(lockSnapshot(1));
    await reopened.close();
  });

  it('reads values written before the table existed, and writes new ones beside them', async () => {
    const dir = tempDir();
    // As the store was opened before the table: records with their definitions inline.
    const before = open({ path: dir, noSubdir: false, encoding: 'msgpack' });
    const manyShapes = Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`k${i}`, { [`field_${i}`]: i, nested: { [`inner_${i}`]: [i, { deep: `v${i}` }] } }]));
    const old = [
      { key: ['s', 0, 'lock', 'old'], value: lockSnapshot(7) },
      { key: ['s', 0, 'many', 'old'], value: manyShapes },
      { key: ['r', 0, 'list', 'old', 'x'], value: [{ a: 1 }, { a: 2, b: 'two' }, 'text', 3.5, null] },
    ];
    await before.transaction(() => {
      for (const { key, value } of old) before.put(key, value);
    });
    await before.close();

    const store = new LmdbStore({ path: dir });
    for (const { key, value } of old) expect(store.get(key as never)).toEqual(value);
    await store.commit([
      { type: 'put', key: ['s', 0, 'lock', 'new'], value: lockSnapshot(8) },
      { type: 'put', key: ['s', 0, 'many', 'new'], value: manyShapes },
    ]);
    for (const { key, value } of old) expect(store.get(key as never)).toEqual(value);
    await store.close();

    const reopened = new LmdbStore({ path: dir });
    for (const { key, value } of old) expect(reopened.get(key as never)).toEqual(value);
    expect(reopened.get(['s', 0, 'lock', 'new'])).toEqual(lockSnapshot(8));
    expect(reopened.get(['s', 0, 'many', 'new'])).toEqual(manyShapes);
    await reopened.close();
  });

  it('writes shapes past the table\'s limit inline, and reads every one back after a reopen', async () => {
    const dir = tempDir();
    // Without fsync: the limit takes one synchronous commit per shape to reach.
    const store = new LmdbStore({ path: dir, sync: false });
    const shapes = SHARED_STRUCTURES_MAX + 100;
    const value = (i: number) => ({ [`field_${i}`]: i, common_field: `v${i}` });
    for (let i = 0; i < shapes; i += 50) {
      await store.commit(Array.from({ length: 50 }, (_, j) => ({ type: 'put' as const, key: ['s', 0, 'shape', String(i + j)], value: value(i + j) })));
    }
    await store.close();

    const reopened = new LmdbStore({ path: dir });
    for (let i = 0; i < shapes; i++) expect(reopened.get(['s', 0, 'shape', String(i)])).toEqual(value(i));
    await reopened.commit([{ type: 'put', key: ['s', 0, 'lock', 'after'], value: lockSnapshot(9) }]);
    expect(reopened.get(['s', 0, 'lock', 'after'])).toEqual(lockSnapshot(9));
    await reopened.close();
  });
});

describe('isSharedShape', () => {
  it('shares the code\'s snake_case types and keeps data-keyed objects inline', () => {
    expect(isSharedShape(['holder', 'last_fence_token'])).toBe(true);
    expect(isSharedShape([])).toBe(true);
    expect(isSharedShape(['usr_lWvU49j_l5wxoRGaRTNm7w'])).toBe(false);
    expect(isSharedShape(['ada@example.com'])).toBe(false);
    expect(isSharedShape(['12'])).toBe(false);
    expect(isSharedShape(['tier-1'])).toBe(false);
    expect(isSharedShape(Array.from({ length: 49 }, (_, i) => `f${i}`))).toBe(false);
  });
});
