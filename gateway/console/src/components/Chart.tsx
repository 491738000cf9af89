import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  color: string;
  values: number[];
}

/** Daily counts as lines (uPlot: small, canvas; lives in the Overview's lazy chunk only). */
export function DailyChart({ dates, series, title }: { dates: string[]; series: ChartSeries[]; title: string }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const host = el.current;
    if (!host) return;
    // The API's `date` is a short day label (SPEC), not a timestamp: days are plotted by position, labelled with it.
    const xs = dates.map((_, i) => i);
    const width = () => Math.max(280, host.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 260,
        scales: { x: { time: false } },
        series: [
          { label: 'Day', value: (_u: uPlot, i: number | null) => (i === null ? '--' : (dates[i] ?? '')) },
          ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, points: { show: xs.length <= 31 } })),
        ],
        axes: [
          { incrs: [1, 2, 5, 10], values: (_u: uPlot, splits: number[]) => splits.map((i) => dates[i] ?? '') },
          { size: 50, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 100_000, 1_000_000] },
        ],
      },
      [xs, ...series.map((s) => s.values)],
      host,
    );
    const resize = () => plot.setSize({ width: width(), height: 260 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [dates, series]);
  // The canvas is not readable by screen readers: the same numbers are in the table below it.
  return <div className="chart" ref={el} role="img" aria-label={title} />;
}
