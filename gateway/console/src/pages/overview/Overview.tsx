import { useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { api, unwrap } from '../../api/client';
import { DailyChart, type ChartSeries } from '../../components/Chart';
import { Empty, ErrorBox, Loading, PageHeader } from '../../components/ui';

/** Common guides: Gmail/Yahoo want a spam (complaint) rate under 0.3 %; bounces above 2 % hurt delivery. */
export const COMPLAINT_LIMIT_PERCENT = 0.3;
export const BOUNCE_LIMIT_PERCENT = 2;

const SERIES = [
  ['sent', 'Sent', '#0a58ca'],
  ['delivered', 'Delivered', '#1a7f37'],
  ['opened', 'Opened', '#8250df'],
  ['clicked', 'Clicked', '#bf3989'],
  ['bounced', 'Bounced', '#b42318'],
  ['complained', 'Complained', '#9a6700'],
] as const;

function Rate({ label, value, limit }: { label: string; value: number; limit: number }) {
  const bad = value >= limit;
  return (
    <div className={`card ${bad ? 'bad' : 'good'}`}>
      <div className="muted">{label}</div>
      <div className="value">{value.toFixed(2)} %</div>
      <div className="muted">
        {bad ? 'Above' : 'Below'} the {limit} % guide
      </div>
    </div>
  );
}

function Usage({ label, used, limit }: { label: string; used: number; limit: number }) {
  const share = limit > 0 ? Math.min(100, (used / limit) * 100) : 0;
  return (
    <div className="card">
      <div className="muted">{label}</div>
      <div className="value">
        {used.toLocaleString()} <span className="muted">/ {limit > 0 ? limit.toLocaleString() : 'unlimited'}</span>
      </div>
      <div className="meter" role="progressbar" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(share)}>
        <span style={{ width: `${share}%` }} />
      </div>
    </div>
  );
}

export default function Overview() {
  const [days, setDays] = useState<7 | 30>(7);
  const series = useQuery({ queryKey: ['time-series', days], queryFn: () => unwrap(api.GET('/v1/analytics/time-series', { params: { query: { days } } })) });
  const reputation = useQuery({ queryKey: ['reputation'], queryFn: () => unwrap(api.GET('/v1/analytics/reputation')) });
  const usage = useQuery({ queryKey: ['usage'], queryFn: () => unwrap(api.GET('/v1/analytics')) });
  const settings = useQuery({ queryKey: ['settings'], queryFn: () => unwrap(api.GET('/v1/settings')) });

  const chart = useMemo(() => {
    const rows = series.data?.result ?? [];
    return { dates: rows.map((r) => r.date), series: SERIES.map(([key, label, color]): ChartSeries => ({ label, color, values: rows.map((r) => r[key]) })) };
  }, [series.data]);
  const sum = (rows: { sent: number }[] | undefined) => (rows ?? []).reduce((n, r) => n + r.sent, 0);

  return (
    <>
      <PageHeader title="Overview">
        <div role="group" aria-label="Period">
          <button type="button" aria-pressed={days === 7} className={days === 7 ? 'primary' : ''} onClick={() => setDays(7)}>
            7 days
          </button>{' '}
          <button type="button" aria-pressed={days === 30} className={days === 30 ? 'primary' : ''} onClick={() => setDays(30)}>
            30 days
          </button>
        </div>
      </PageHeader>

      <h2>Usage</h2>
      <ErrorBox error={usage.error ?? settings.error} />
      {usage.data && settings.data ? (
        <div className="cards">
          <Usage label="Sent today (UTC)" used={sum(usage.data.day)} limit={settings.data.dailyEmailLimit} />
          <Usage label="Sent this month (UTC)" used={sum(usage.data.month)} limit={settings.data.monthlyEmailLimit} />
        </div>
      ) : usage.isPending || settings.isPending ? (
        <Loading />
      ) : null}

      <h2>Reputation</h2>
      <ErrorBox error={reputation.error} />
      {reputation.data ? (
        <div className="cards">
          <Rate label="Bounce rate" value={reputation.data.bounceRate} limit={BOUNCE_LIMIT_PERCENT} />
          <Rate label="Complaint (spam) rate" value={reputation.data.complaintRate} limit={COMPLAINT_LIMIT_PERCENT} />
          <div className="card">
            <div className="muted">Delivered / hard bounced / complained</div>
            <div className="value">
              {reputation.data.delivered.toLocaleString()} / {reputation.data.hardBounced.toLocaleString()} / {reputation.data.complained.toLocaleString()}
            </div>
          </div>
        </div>
      ) : null}

      <h2>Last {days} days</h2>
      <ErrorBox error={series.error} />
      {series.isPending ? <Loading /> : null}
      {series.data ? (
        series.data.totalCounts.sent === 0 ? (
          <Empty title={`No email in the last ${days} days`}>Send one with POST /v1/emails or from a campaign.</Empty>
        ) : (
          <>
            <DailyChart dates={chart.dates} series={chart.series} title={`Daily email counts, last ${days} days`} />
            <div className="table-wrap" tabIndex={0}>
              <table>
                <caption className="sr-only">Totals of the last {days} days</caption>
                <thead>
                  <tr>
                    {SERIES.map(([key, label]) => (
                      <th key={key} scope="col">
                        {label}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  <tr>
                    {SERIES.map(([key]) => (
                      <td key={key}>{series.data.totalCounts[key].toLocaleString()}</td>
                    ))}
                  </tr>
                </tbody>
              </table>
            </div>
          </>
        )
      ) : null}
    </>
  );
}
