import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../http/config.js';
import { LmdbStore } from '../../runtime/store-lmdb.js';

describe('LMDB_MAP_SIZE_GB', () => {
  it('defaults to 64 GiB and reads the variable', () => {
    expect(loadConfig({}).lmdbMapSizeGb).toBe(64);
    expect(loadConfig({ LMDB_MAP_SIZE_GB: '2' }).lmdbMapSizeGb).toBe(2);
  });

  it('refuses what is not a whole number of GiB from 1 to 4096', () => {
    for (const raw of ['0', '-1', '5000', 'big', '1.5']) expect(() => loadConfig({ LMDB_MAP_SIZE_GB: raw })).toThrow(/LMDB_MAP_SIZE_GB/);
  });

  it('a store opened with a small map writes and reads back, and reopens with the default map', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'map-size-'));
    try {
      const small = new LmdbStore({ path: dir, mapSizeGb: 1 });
      await small.commit([{ type: 'put', key: ['m', 'probe'], value: { n: 1 } }]);
      await small.close();
      const reopened = new LmdbStore({ path: dir });
      expect(reopened.get(['m', 'probe'])).toEqual({ n: 1 });
      await reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
