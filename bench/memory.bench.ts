import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MemoryProbeResult } from './support/memory-probe.js';
import { runScenarios, type Scenario } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * Memory per actor: 100k activations in a fresh node process started with
 * --expose-gc (support/memory-probe.ts), heap after full GCs before, with the
 * actors active, and after runtime.passivateIdle(0).
 * Targets (issue 2): active small actor < 2 KiB; passivated actor ~0 bytes.
 */
const AREA = 'memory';
const COUNT = Number(process.env.BENCH_MEMORY_ACTORS ?? 100_000);
const probeScript = join(dirname(fileURLToPath(import.meta.url)), 'support', 'memory-probe.js');

function probe(kind: 'counter' | 'lock'): Promise<MemoryProbeResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', probeScript, kind, String(COUNT)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const line = stdout.trim().split('\n').pop();
      if (code !== 0 || !line) reject(new Error(`memory probe exited with ${signal ?? `code ${code}`}`));
      else resolve(JSON.parse(line) as MemoryProbeResult);
    });
  });
}

function rows(result: MemoryProbeResult, label: string, stateNote: string): BenchRow[] {
  if (result.active !== result.count) throw new Error(`${result.active} actors active, expected ${result.count}`);
  if (result.passivated !== result.count) throw new Error(`${result.passivated} actors passivated, expected ${result.count}`);
  const activeBytes = Math.round((result.heap_active_bytes - result.heap_base_bytes) / result.count);
  const passivatedBytes = Math.round((result.heap_passivated_bytes - result.heap_base_bytes) / result.count);
  const alarms = result.pending_alarms > 0 ? `; ${result.pending_alarms.toLocaleString('en-US')} expiry alarms still pending (stored in LMDB; only those due within the alarm window are held in RAM)` : '';
  return [
    {
      area: AREA,
      scenario: `active ${label} actor`,
      value: activeBytes,
      unit: 'bytes/actor',
      note: `heap delta after GC, ${result.count.toLocaleString('en-US')} activations, ${stateNote}, key string included; target < 2,048`,
    },
    {
      area: AREA,
      scenario: `passivated ${label} actor`,
      value: passivatedBytes,
      unit: 'bytes/actor',
      note: `after passivateIdle(0), heap vs the baseline${alarms}; target ~0`,
    },
  ];
}

export async function run(): Promise<BenchRow[]> {
  const scenarios: Scenario[] = [
    { name: 'counter actor', run: async () => rows(await probe('counter'), 'counter', 'state {count}') },
    { name: 'held lock actor', run: async () => rows(await probe('lock'), 'held-lock', 'state with holder, metadata null (no expiry alarm: expiry is read from the holder)') },
  ];
  return runScenarios(AREA, scenarios);
}
