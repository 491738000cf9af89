/**
 * A labelled progress bar (role progressbar with its numbers, so screen readers and the browser
 * tests read the same values the eye sees). Uses the shared `.meter` style.
 */
export function Progress({ label, value, max, detail }: { label: string; value: number; max: number; detail?: string }) {
  const pct = max > 0 ? Math.min(100, Math.round((value / max) * 100)) : 0;
  return (
    <div className="progress">
      <div className="row" style={{ justifyContent: 'space-between', alignItems: 'baseline' }}>
        <span>{label}</span>
        <span className="muted" aria-live="polite">
          {value.toLocaleString()} / {max.toLocaleString()} ({pct} %){detail ? ` · ${detail}` : ''}
        </span>
      </div>
      <div className="meter" role="progressbar" aria-label={label} aria-valuemin={0} aria-valuemax={max} aria-valuenow={value} aria-valuetext={`${pct} %`}>
        <span style={{ width: `${pct}%` }} />
      </div>
    </div>
  );
}
