import { basename } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setArea } from './status-line.js';
import type { BenchRow } from '../types.js';

/**
 * Child process of run-all.ts: imports one compiled bench file, runs its
 * run(), and sends the rows (or the error) back over IPC. One process per
 * file keeps the figures of one benchmark free of the heap and JIT state
 * left by another, and a crash costs one file, not the run.
 */
export type RunOneMessage = { rows: BenchRow[] } | { error: string };

function send(message: RunOneMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) {
      process.stdout.write(JSON.stringify(message) + '\n');
      resolve();
      return;
    }
    process.send(message, () => resolve());
  });
}

function isRow(value: unknown): value is BenchRow {
  const row = value as BenchRow;
  return typeof row === 'object' && row !== null && typeof row.area === 'string' && typeof row.scenario === 'string'
    && typeof row.value === 'number' && typeof row.unit === 'string' && (row.note === undefined || typeof row.note === 'string');
}

async function main(): Promise<void> {
  const file = process.argv[2];
  if (!file) throw new Error('usage: run-one.js <compiled bench file>');
  setArea(basename(file, '.bench.js'));
  const module = (await import(pathToFileURL(file).href)) as { run?: () => Promise<unknown> };
  if (typeof module.run !== 'function') throw new Error(`${file} does not export run()`);
  const rows = await module.run();
  if (!Array.isArray(rows) || !rows.every(isRow)) throw new Error(`${file}: run() did not return BenchRow[]`);
  await send({ rows });
}

main().then(
  () => process.exit(0),
  async (error: unknown) => {
    await send({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  },
);
