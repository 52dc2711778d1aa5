import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServerProcess, type ServerProcess } from './server-process.js';

/**
 * A server process run under `valgrind --tool=callgrind`, which counts the
 * instructions each thread executes, whatever else the machine is doing.
 * The counters are zeroed after a warm-up and dumped after the measured
 * load (callgrind_control), so start-up and V8's first compilations are not
 * counted.
 *
 * Two things this machine needs:
 * - valgrind cannot map more than about 32 GiB for its client, so the
 *   project's node runs with a smaller LMDB map (LMDB_MAP_SIZE_GB, set by the
 *   caller);
 * - callgrind_control finds the process through files named after USER and
 *   HOST: both processes get the same values and their own --vgdb-prefix.
 */
export interface CallgrindServer {
  url: string;
  /** Everything the process wrote to stdout so far. */
  output(): string;
  /** Zeroes every thread's counters. */
  zero(): void;
  /** Dumps the counters: instructions per thread since the last zero, the event loop's thread first. */
  dump(): Promise<number[]>;
  stop(): Promise<void>;
}

const VGDB_ENV = { USER: 'bench', LOGNAME: 'bench', HOST: '127.0.0.1' };

export function valgrindAvailable(): boolean {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function startUnderCallgrind(script: string, env: Record<string, string>, readyPath: string, readyTimeout_ms: number): Promise<CallgrindServer> {
  const outDir = mkdtempSync(join(tmpdir(), 'bench-callgrind-'));
  const prefix = `--vgdb-prefix=${join(outDir, 'vgdb')}`;
  const launcher = [
    'valgrind',
    '--tool=callgrind',
    '--vgdb=yes',
    prefix,
    // V8 writes machine code and runs it: every write outside a file mapping may be code.
    '--smc-check=all-non-file',
    '--separate-threads=yes',
    '--dump-instr=no',
    `--callgrind-out-file=${join(outDir, 'cg.%p')}`,
  ];
  let output = '';
  let server: ServerProcess;
  try {
    server = await startServerProcess(script, { ...env, ...VGDB_ENV }, {
      launcher,
      readyPath,
      startTimeout_ms: readyTimeout_ms,
      poll_ms: 1000,
      onStdout: (chunk) => (output += chunk.toString('utf8')),
    });
  } catch (error) {
    rmSync(outDir, { recursive: true, force: true });
    throw error;
  }
  const pid = server.child.pid!;
  const control = (...args: string[]) => execFileSync('callgrind_control', [prefix, ...args, String(pid)], { env: { ...process.env, ...VGDB_ENV }, stdio: 'ignore' });
  let dumps = 0;

  return {
    url: server.url,
    output: () => output,
    zero: () => control('--zero'),
    async dump() {
      dumps++;
      control('--dump');
      // One file per thread: cg.<pid>.<dump>-<thread>, thread 01 the event loop.
      const pattern = new RegExp(`^cg\\.${pid}\\.${dumps}-(\\d+)$`);
      // The threads' files are written one after another: read them once their number holds for a second.
      let seen = -1;
      for (let waited = 0; waited < 30; waited++) {
        const files = readdirSync(outDir).filter((name) => pattern.test(name));
        if (files.length === 0 || files.length !== seen) {
          seen = files.length;
          await sleep(1000);
          continue;
        }
        const counts = files.map((name) => {
          const text = readFileSync(join(outDir, name), 'utf8');
          const total = /^(?:summary|totals): (\d+)/m.exec(text);
          return { thread: Number(pattern.exec(name)![1]), instructions: total ? Number(total[1]) : undefined };
        });
        if (counts.every((c) => c.instructions !== undefined)) {
          return counts.sort((a, b) => a.thread - b.thread).map((c) => c.instructions!);
        }
        await sleep(1000);
      }
      throw new Error(`callgrind wrote no complete dump ${dumps} (${readdirSync(outDir).join(', ')})`);
    },
    async stop() {
      await server.stop(60_000);
      rmSync(outDir, { recursive: true, force: true });
    },
  };
}
