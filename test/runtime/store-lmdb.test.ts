import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LmdbStore } from '../../runtime/index.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) rmSync(dirs.pop()!, { recursive: true, force: true });
});

describe('LmdbStore', () => {
  it('opens an existing directory whose name has a dot, keeping its files inside it', async () => {
    const root = mkdtempSync(join(tmpdir(), 'store-test-'));
    dirs.push(root);
    const dir = join(root, 'data.v2');
    mkdirSync(dir);
    const store = new LmdbStore({ path: dir });
    await store.commit([{ type: 'put', key: ['m', 'probe'], value: { n: 1 } }]);
    await store.close();
    expect(readdirSync(dir).sort()).toEqual(['data.mdb', 'lock.mdb']);

    const reopened = new LmdbStore({ path: dir });
    expect(reopened.get(['m', 'probe'])).toEqual({ n: 1 });
    await reopened.close();
  });
});
