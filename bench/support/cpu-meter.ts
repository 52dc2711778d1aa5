import { readFileSync } from 'node:fs';

/**
 * CPU used during a measurement, from /proc (Linux; elsewhere it reports
 * nothing): by the processes that take part (this one, a server) and by
 * everything else on the machine. On a shared machine the second figure says
 * how far other work may have skewed a result.
 */
export interface CpuUsage {
  /** Cores used by the listed processes (all their threads), e.g. 0.95. */
  participants_cores: number;
  /** Cores used by every other process. */
  others_cores: number;
  machine_cores: number;
  /** How long the meter ran. */
  seconds: number;
}

const TICKS_PER_SECOND = 100;

function machineBusyTicks(): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait.
    return fields.reduce((sum, value, i) => (i === 3 || i === 4 ? sum : sum + value), 0);
  } catch {
    return undefined;
  }
}

function processTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/**
 * Starts a meter over `pids`. A participant that has exited by the time the
 * meter stops has no /proc entry left: pass what it reported of its own CPU
 * (ChildDone.cpu_seconds) as `exitedSeconds`, or it lands in `others_cores`.
 */
export function startCpuMeter(pids: number[]): (exitedSeconds?: number) => CpuUsage | undefined {
  const machineStart = machineBusyTicks();
  const participantsStart = pids.reduce((sum, pid) => sum + processTicks(pid), 0);
  const started_ms = performance.now();
  return (exitedSeconds = 0) => {
    const machineEnd = machineBusyTicks();
    if (machineStart === undefined || machineEnd === undefined) return undefined;
    const seconds = (performance.now() - started_ms) / 1000;
    const participants = pids.reduce((sum, pid) => sum + processTicks(pid), 0) - participantsStart + exitedSeconds * TICKS_PER_SECOND;
    const machine = machineEnd - machineStart;
    const cores = (ticks: number) => Math.round((ticks / TICKS_PER_SECOND / seconds) * 100) / 100;
    return { participants_cores: cores(participants), others_cores: cores(Math.max(0, machine - participants)), machine_cores: cores(machine), seconds };
  };
}

/** "others used 0.1 cores" (or nothing where /proc is missing). */
export function othersNote(usage: CpuUsage | undefined): string {
  return usage ? `; other processes used ${usage.others_cores.toFixed(2)} cores` : '';
}
