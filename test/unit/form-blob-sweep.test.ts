import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sweepPartialUploads } from '../../http/form-blob-sweep.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('sweepPartialUploads', () => {
  it('removes .part files not written to for longer than the limit, and nothing else', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sweep-'));
    dirs.push(dataDir);
    const bucket = join(dataDir, 'form-blobs', 'ab', 'c'.repeat(32), 'default');
    mkdirSync(bucket, { recursive: true });
    const now = Date.now();
    const file = (name: string, age_ms: number) => {
      const path = join(bucket, name);
      writeFileSync(path, 'x');
      const at = (now - age_ms) / 1000;
      utimesSync(path, at, at);
      return path;
    };
    const stale = file('blob_old.part', 2 * 3_600_000);
    const live = file('blob_live.part', 1_000);
    const complete = file('blob_done', 10 * 3_600_000);
    const other = file('notes.txt.partial', 10 * 3_600_000);
    expect(await sweepPartialUploads(dataDir, 3_600_000, now)).toBe(1);
    expect([existsSync(stale), existsSync(live), existsSync(complete), existsSync(other)]).toEqual([false, true, true, true]);
    // Nothing left to remove; a data dir without a blob store is fine too.
    expect(await sweepPartialUploads(dataDir, 3_600_000, now)).toBe(0);
    expect(await sweepPartialUploads(join(dataDir, 'missing'), 0, now)).toBe(0);
  });
});
