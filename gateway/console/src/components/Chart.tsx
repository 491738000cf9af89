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
    const xs = dates.map((d) => Date.parse(`${d.slice(0, 10)}T00:00:00Z`) / 1000);
    const width = () => Math.max(280, host.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 260,
        scales: { x: { time: true } },
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, points: { show: xs.length <= 31 } }))],
        axes: [{}, { size: 50 }],
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
