import { existsSync, readFileSync } from 'node:fs';

/**
 * Flush requests completed by this machine's disks, from /proc/diskstats
 * (Linux 5.5 and later; elsewhere undefined). Every fsync that reaches the
 * disk is one, so the difference over a run, divided by the writes it
 * acknowledged, says how many fsyncs each write cost: group commit shows as
 * a small fraction, a topology whose commits batch less as a larger one.
 * Whole disks only (a partition's flushes are also counted on its disk).
 */
export function diskFlushes(): number | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/diskstats', 'utf8');
  } catch {
    return undefined;
  }
  let flushes: number | undefined;
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    // major minor name, then the statistics; the 15th of them (index 18) is "flush requests completed".
    if (fields.length < 20 || !existsSync(`/sys/block/${fields[2]}`)) continue;
    flushes = (flushes ?? 0) + Number(fields[18]);
  }
  return flushes;
}
