import { startCpuMeter, type CpuUsage } from './cpu-meter.js';
import { runLoadInChild, type WritePathPlan, type WritePathResult } from './write-path-load.js';

/** Shared by the write-path bench files: a measured load run, medians, notes. */
export interface Measured {
  result: WritePathResult;
  cpu: CpuUsage | undefined;
}

/** Runs the plan in a load-generator child; the CPU meter covers the given server pids and the child. */
export async function measure(serverPids: (number | undefined)[], plan: WritePathPlan): Promise<Measured> {
  let stopMeter: (() => CpuUsage | undefined) | undefined;
  const result = await runLoadInChild(plan, (pid) => {
    stopMeter = startCpuMeter([...serverPids.filter((p): p is number => typeof p === 'number'), pid]);
  });
  return { result, cpu: stopMeter?.() };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** The run whose value is the median of the rounds (its latencies go with it). */
export function medianRun(runs: Measured[], value: (m: Measured) => number): Measured {
  const sorted = [...runs].sort((a, b) => value(a) - value(b));
  return sorted[Math.floor(sorted.length / 2)];
}

export function othersMean(runs: { cpu: CpuUsage | undefined }[]): string {
  const known = runs.map((r) => r.cpu?.others_cores).filter((c): c is number => typeof c === 'number');
  if (known.length === 0) return '';
  return `; other processes used ${(known.reduce((a, b) => a + b, 0) / known.length).toFixed(2)} cores (mean)`;
}

export function statusText(result: WritePathResult): string {
  const codes = Object.entries(result.status).map(([code, count]) => `${code}: ${count}`).join(', ');
  const failures = result.errors + result.timeouts > 0 ? `, socket errors ${result.errors}, timeouts ${result.timeouts}` : '';
  return `${codes || 'no responses'}${failures}`;
}

export const round3 = (x: number) => Math.round(x * 1000) / 1000;

export function verdict(met: boolean): string {
  return met ? 'met' : 'NOT met';
}
