import type { BenchRow } from '../types.js';
import { printLine, setScenario } from './status-line.js';

/** Progress goes to stderr so stdout carries only the final table (with the run's position: status-line.ts). */
export function progress(message: string): void {
  printLine(message);
}

export interface Scenario {
  name: string;
  /** The area of the failure row if it throws (default: the runScenarios area). */
  area?: string;
  run(): Promise<BenchRow[]>;
}

/**
 * Runs scenarios one after another. A scenario that throws becomes one row
 * with value NaN and the error in its note; run-all.ts counts such rows as
 * failures (exit code 1) and keeps going with the next scenario.
 */
export async function runScenarios(area: string, scenarios: Scenario[]): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const [index, scenario] of scenarios.entries()) {
    const started_ms = performance.now();
    setScenario(area, index + 1, scenarios.length, scenario.name);
    progress(`${area} ${index + 1}/${scenarios.length}: ${scenario.name} ...`);
    try {
      const produced = await scenario.run();
      rows.push(...produced);
      progress(`${area} ${index + 1}/${scenarios.length}: ${scenario.name} done in ${((performance.now() - started_ms) / 1000).toFixed(1)} s`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      progress(`${area}: ${scenario.name} FAILED: ${error instanceof Error ? error.stack : message}`);
      rows.push({ area: scenario.area ?? area, scenario: scenario.name, value: Number.NaN, unit: '', note: `FAILED: ${message}` });
    }
  }
  return rows;
}

/** A row failed when its value is not a finite number. */
export function isFailedRow(row: BenchRow): boolean {
  return typeof row.value !== 'number' || !Number.isFinite(row.value);
}
