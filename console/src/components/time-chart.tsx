import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  color: string;
  values: (number | null)[];
}

const PALETTE = ['#2454c5', '#b3261e', '#c77c02', '#2e7d32', '#6a1b9a'];
export const seriesColor = (i: number) => PALETTE[i % PALETTE.length];

/**
 * A time series chart (uPlot): `times` in epoch seconds, one line per series (null: a gap).
 * `data-points` on the figure says how many points it holds (the browser test watches it grow).
 */
export function TimeChart({ title, unit, times, series }: { title: string; unit: string; times: number[]; series: ChartSeries[] }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.label).join('|');

  useEffect(() => {
    if (!host.current) return undefined;
    plot.current = new uPlot(
      {
        width: 480,
        height: 190,
        legend: { show: true },
        scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(1e-9, (max ?? 1) * 1.1)] } },
        axes: [{}, { label: unit, size: 60 }],
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 1.5, spanGaps: false }))],
      },
      [times, ...series.map((s) => s.values)],
      host.current,
    );
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape]);

  useEffect(() => {
    plot.current?.setData([times, ...series.map((s) => s.values)]);
  }, [times, series]);

  return (
    <figure class="chart" aria-label={title} data-points={times.length}>
      <figcaption>{title}</figcaption>
      <div ref={host} />
    </figure>
  );
}
