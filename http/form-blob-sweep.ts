import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Removes what uploads left half-written in the forms blob store
 * (DATA_DIR/form-blobs): a file still named `<blob_id>.part` is an upload
 * that never completed (the node crashed or was killed while it streamed; a
 * refused or failed upload removes its own). One not written to for longer
 * than `staleAfterMs` belongs to no live request: a request cannot outlast
 * HTTP_REQUEST_TIMEOUT_MS, and the file's modification time moves with
 * every chunk written. Completed files are never touched here.
 *
 * Returns how many files it removed. A directory that disappears meanwhile is skipped.
 */
export async function sweepPartialUploads(dataDir: string, staleAfterMs: number, now_ms: number): Promise<number> {
  let removed = 0;
  const walk = async (directory: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(directory, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile() && entry.name.endsWith('.part')) {
        try {
          const { mtimeMs } = await stat(path);
          if (now_ms - mtimeMs <= staleAfterMs) continue;
          await rm(path, { force: true });
          removed++;
        } catch {
          // Gone meanwhile (its upload completed or failed): nothing to do.
        }
      }
    }
  };
  await walk(join(dataDir, 'form-blobs'));
  return removed;
}
