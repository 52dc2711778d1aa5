import { startCpuMeter, type CpuUsage } from './cpu-meter.js';
import { diskFlushes } from './disk-flushes.js';
import { runLoadInChild, type WritePathPlan, type WritePathResult } from './write-path-load.js';

/** Shared by the write-path bench files: a measured load run, medians, notes. */
export interface Measured {
  result: WritePathResult;
  /** The server processes and the load generator, against the rest of the machine. */
  cpu: CpuUsage | undefined;
  /** CPU seconds of the server processes alone (all their threads). */
  serverCpuSeconds: number | undefined;
  /** Disk flushes (fsyncs reaching the disk) during the run, machine-wide. */
  flushes: number | undefined;
}

/** Runs the plan in a load-generator child; the CPU meter covers the given server pids and the child. */
export async function measure(serverPids: (number | undefined)[], plan: WritePathPlan): Promise<Measured> {
  const servers = serverPids.filter((p): p is number => typeof p === 'number');
  let stopMeter: ((exitedSeconds?: number) => CpuUsage | undefined) | undefined;
  let generatorSeconds = 0;
  let stopServerMeter: (() => CpuUsage | undefined) | undefined;
  let flushesAtStart: number | undefined;
  const result = await runLoadInChild(
    plan,
    (pid) => {
      stopMeter = startCpuMeter([...servers, pid]);
      stopServerMeter = startCpuMeter(servers);
      flushesAtStart = diskFlushes();
    },
    (done) => (generatorSeconds = done.cpu_seconds),
  );
  const flushesAtEnd = diskFlushes();
  const cpu = stopMeter?.(generatorSeconds);
  const serverUsage = stopServerMeter?.();
  const serverCpuSeconds = serverUsage ? serverUsage.participants_cores * serverUsage.seconds : undefined;
  const flushes = flushesAtStart === undefined || flushesAtEnd === undefined ? undefined : flushesAtEnd - flushesAtStart;
  return { result, cpu, serverCpuSeconds, flushes };
}

/** Responses of any status. */
function answeredOf(m: Measured): number {
  return Object.values(m.result.status).reduce((a, b) => a + b, 0);
}

/** The servers' CPU per answered request, in µs (all their threads), or undefined without /proc. */
export function serverCpuPerRequest(m: Measured): number | undefined {
  const answered = answeredOf(m);
  if (m.serverCpuSeconds === undefined || answered === 0) return undefined;
  return Math.round((m.serverCpuSeconds * 1e6) / answered);
}

/** Disk flushes per answered request, or undefined where /proc/diskstats has no flush count. */
export function flushesPerRequest(m: Measured): number | undefined {
  const answered = answeredOf(m);
  if (m.flushes === undefined || answered === 0) return undefined;
  return round3(m.flushes / answered);
}

/**
 * "per round 0.71, 0.84, 0.66 (median 0.71)": the ratio of each round's pair.
 * The two runs of a round are seconds apart, so a change in the machine's
 * speed between rounds, which moves both, cancels out of these.
 */
export function perRoundRatios(numerators: number[], denominators: number[]): string {
  const ratios = numerators.map((n, i) => round3(n / denominators[i]));
  return `per round ${ratios.join(', ')} (median ${median(ratios)})`;
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
