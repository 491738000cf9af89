import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { CopyButton, ErrorBox, formatDate, Loading, PageHeader, Status } from '../../components/ui';

type Period = 'day' | 'week' | 'month';
interface TrackingChange {
  openTracking?: boolean;
  clickTracking?: boolean;
}

export default function DomainDetail() {
  const { id = '' } = useParams();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [period, setPeriod] = useState<Period>('month');
  // The value a box was just set to, shown until its change is answered: set in the same render as the click
  // (the mutation's own pending state arrives a tick later, and a controlled box would flip back meanwhile).
  const [optimistic, setOptimistic] = useState<TrackingChange>({});
  const path = { params: { path: { id } } };
  const domain = useQuery({
    queryKey: ['domain', id],
    queryFn: () => unwrap(api.GET('/v1/domains/{id}', path)),
    // Verification runs in the background: poll while it is under way, then stop.
    refetchInterval: (q) => (q.state.data && (q.state.data.isVerifying || q.state.data.status === 'PENDING') ? 2_000 : false),
  });
  const analytics = useQuery({
    queryKey: ['domain-analytics', id, period],
    queryFn: () => unwrap(api.GET('/v1/domains/{id}/analytics', { params: { path: { id }, query: { period } } })),
  });
  const changed = () => {
    void qc.invalidateQueries({ queryKey: ['domain', id] });
    void qc.invalidateQueries({ queryKey: ['domains'] });
  };
  const verify = useMutation({ mutationFn: () => unwrap(api.PUT('/v1/domains/{id}/verify', path)), onSuccess: changed });
  const tracking = useMutation({
    mutationFn: (body: TrackingChange) => unwrap(api.PATCH('/v1/domains/{id}', { ...path, body })),
    onSuccess: (d) => {
      qc.setQueryData(['domain', id], d);
      changed();
    },
    onSettled: () => setOptimistic({}),
  });
  const setTracking = (body: TrackingChange) => {
    setOptimistic(body);
    tracking.mutate(body);
  };
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/domains/{id}', path)),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['domains'] });
      navigate('/domains');
    },
  });

  if (domain.isPending) return <Loading />;
  if (domain.error)
    return (
      <>
        <PageHeader title="Domain" />
        <ErrorBox error={domain.error} />
        <Link to="/domains">Back to domains</Link>
      </>
    );
  const d = domain.data;
  const openTracking = optimistic.openTracking ?? d.openTracking;
  const clickTracking = optimistic.clickTracking ?? d.clickTracking;
  const verifying = d.isVerifying || d.status === 'PENDING' || verify.isPending;

  return (
    <>
      <PageHeader title={d.name}>
        <button type="button" className="primary" onClick={() => verify.mutate()} disabled={verifying}>
          {verifying ? 'Verifying…' : 'Verify DNS records'}
        </button>
        <button
          type="button"
          className="danger"
          onClick={() => {
            if (window.confirm(`Delete ${d.name}? Emails scheduled from it will fail.`)) remove.mutate();
          }}
        >
          Delete
        </button>
      </PageHeader>
      <p>
        <Link to="/domains">Back to domains</Link>
      </p>
      <p role="status" aria-live="polite">
        Status: <Status value={d.status} /> {d.lastCheckedTime ? <span className="muted">last checked {formatDate(d.lastCheckedTime)}</span> : null}
      </p>
      <ErrorBox error={verify.error ?? tracking.error ?? remove.error} />
      {d.verificationError || d.errorMessage ? <div className="notice">{d.verificationError ?? d.errorMessage}</div> : null}

      <h2>DNS records</h2>
      <p className="muted">Publish these at your DNS provider, then verify.</p>
      <div className="table-wrap" tabIndex={0}>
        <table>
          <thead>
            <tr>
              <th scope="col">Type</th>
              <th scope="col">Name</th>
              <th scope="col">Value</th>
              <th scope="col">Priority</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {d.dnsRecords.map((r) => (
              <tr key={`${r.type}-${r.name}-${r.value}`}>
                <td>
                  {r.type}
                  {r.recommended ? <div className="muted">recommended</div> : null}
                </td>
                <td className="mono">
                  {r.name} <CopyButton value={r.name} label="Copy name" />
                </td>
                <td className="mono">
                  {r.value} <CopyButton value={r.value} label="Copy value" />
                </td>
                <td>{r.priority ?? '—'}</td>
                <td>
                  <Status value={r.status} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>

      <h2>Tracking</h2>
      <div className="stack">
        <label style={{ flexDirection: 'row', alignItems: 'center', gap: '0.5rem' }}>
          <input type="checkbox" checked={openTracking} disabled={tracking.isPending} onChange={(e) => setTracking({ openTracking: e.target.checked })} />
          Open tracking (a pixel in HTML mail)
        </label>
        <label style={{ flexDirection: 'row', alignItems: 'center', gap: '0.5rem' }}>
          <input type="checkbox" checked={clickTracking} disabled={tracking.isPending} onChange={(e) => setTracking({ clickTracking: e.target.checked })} />
          Click tracking (links go through the gateway)
        </label>
      </div>

      <h2>Analytics</h2>
      <label>
        Period
        <select value={period} onChange={(e) => setPeriod(e.target.value as Period)}>
          <option value="day">Last day</option>
          <option value="week">Last week</option>
          <option value="month">Last month</option>
        </select>
      </label>
      <ErrorBox error={analytics.error} />
      {analytics.data ? (
        <div className="cards" style={{ marginTop: '0.75rem' }}>
          {(
            [
              ['Sent', analytics.data.totalSent, null],
              ['Delivered', analytics.data.totalDelivered, analytics.data.deliveryRate],
              ['Opened', analytics.data.totalOpened, analytics.data.openRate],
              ['Clicked', analytics.data.totalClicked, analytics.data.clickRate],
            ] as const
          ).map(([label, n, rate]) => (
            <div className="card" key={label}>
              <div className="muted">{label}</div>
              <div className="value">{n.toLocaleString()}</div>
              {rate !== null ? <div className="muted">{rate.toFixed(1)} %</div> : null}
            </div>
          ))}
        </div>
      ) : null}
    </>
  );
}
