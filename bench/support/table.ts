import type { BenchRow } from '../types.js';

/** A figure as people read it: 5,312,004 / 0.734 / 12.5. */
export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return 'FAILED';
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 1) return value.toFixed(2);
  return value.toFixed(3);
}

const COLUMNS = ['area', 'scenario', 'value', 'unit', 'note'] as const;

function cells(row: BenchRow): string[] {
  return [row.area, row.scenario, formatValue(row.value), row.unit, row.note ?? ''];
}

/** A plain-text table with aligned columns (value right-aligned). */
export function formatTable(rows: BenchRow[]): string {
  const body = rows.map(cells);
  const widths = COLUMNS.map((name, i) => Math.max(name.length, ...body.map((line) => line[i].length)));
  const render = (line: readonly string[]) =>
    line.map((cell, i) => (i === 2 ? cell.padStart(widths[i]) : cell.padEnd(widths[i]))).join(' | ').trimEnd();
  return [render(COLUMNS), widths.map((width) => '-'.repeat(width)).join('-|-'), ...body.map(render)].join('\n');
}

/** The same rows as a Markdown table (for docs/performance.md). */
export function formatMarkdownTable(rows: BenchRow[]): string {
  const escape = (cell: string) => cell.replace(/\|/g, '\\|');
  const lines = ['| area | scenario | value | unit | note |', '|---|---|--:|---|---|'];
  for (const row of rows) lines.push('| ' + cells(row).map(escape).join(' | ') + ' |');
  return lines.join('\n');
}
