import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { ErrorBox, formatDate, Loading, PageHeader, Pager, Status } from '../../components/ui';
import { EventPicker, SecretOnce } from './Webhooks';

const LIMIT = 20;
type Delivery = {
  id: string; type: string; status: 'PENDING' | 'SUCCESS' | 'FAILED'; attempt: number; createdAt: string; nextAttemptAt: string | null;
  lastError: string | null; responseStatus: number | null; responseTimeMs: number | null; responseText: string | null; payload: string;
};

function DeliveryRecord({ d }: { d: Delivery }) {
  let payload = d.payload;
  try {
    payload = JSON.stringify(JSON.parse(d.payload), null, 2);
  } catch {
    // shown as sent
  }
  return (
    <section className="notice" aria-label="Test delivery">
      <h3>
        Test delivery: <Status value={d.status} />
      </h3>
      <dl className="props">
        <dt>Response</dt>
        <dd>
          {d.responseStatus ?? '—'} {d.responseTimeMs !== null ? `in ${d.responseTimeMs} ms` : ''}
        </dd>
        <dt>Attempt</dt>
        <dd>{d.attempt}</dd>
        {d.lastError ? (
          <>
            <dt>Error</dt>
            <dd>{d.lastError}</dd>
          </>
        ) : null}
        <dt>Body answered</dt>
        <dd className="mono">{d.responseText || '—'}</dd>
      </dl>
      <details>
        <summary>Payload sent</summary>
        <pre>{payload}</pre>
      </details>
    </section>
  );
}

export default function WebhookDetail() {
  const { id = '' } = useParams();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const path = { params: { path: { id } } };
  const [secret, setSecret] = useState<string | null>(null);
  const [page, setPage] = useState(1);
  const [status, setStatus] = useState<'' | 'PENDING' | 'SUCCESS' | 'FAILED'>('');
  const [types, setTypes] = useState<string[] | null>(null);
  const hook = useQuery({ queryKey: ['webhook', id], queryFn: () => unwrap(api.GET('/v1/webhooks/{id}', path)) });
  const deliveries = useQuery({
    queryKey: ['webhook-deliveries', id, page, status],
    queryFn: () => unwrap(api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id }, query: { page, limit: LIMIT, ...(status ? { status } : {}) } } })),
    placeholderData: keepPreviousData,
    refetchInterval: (q) => (q.state.data?.data.some((d) => d.status === 'PENDING') ? 3_000 : 15_000),
  });
  useEffect(() => {
    if (hook.data && types === null) setTypes(hook.data.eventTypes);
  }, [hook.data, types]);
  const changed = () => {
    void qc.invalidateQueries({ queryKey: ['webhook', id] });
    void qc.invalidateQueries({ queryKey: ['webhooks'] });
    void qc.invalidateQueries({ queryKey: ['webhook-deliveries', id] });
  };
  const patch = useMutation({
    mutationFn: (body: { active?: boolean; rotateSecret?: boolean; eventTypes?: string[] }) => unwrap(api.PATCH('/v1/webhooks/{id}', { ...path, body })),
    onSuccess: (w, body) => {
      if (body.rotateSecret) setSecret(w.secret);
      changed();
    },
  });
  const test = useMutation({ mutationFn: () => unwrap(api.POST('/v1/webhooks/{id}/test', path)), onSettled: changed });
  const retry = useMutation({
    mutationFn: (deliveryId: string) => unwrap(api.POST('/v1/webhooks/{id}/deliveries/{deliveryId}/retry', { params: { path: { id, deliveryId } } })),
    onSettled: changed,
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/webhooks/{id}', path)),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['webhooks'] });
      navigate('/webhooks');
    },
  });

  if (hook.isPending) return <Loading />;
  if (hook.error)
    return (
      <>
        <PageHeader title="Webhook" />
        <ErrorBox error={hook.error} />
        <Link to="/webhooks">Back to webhooks</Link>
      </>
    );
  const w = hook.data;
  const active = w.status === 'ACTIVE';
  const typesChanged = types !== null && (types.length !== w.eventTypes.length || types.some((t) => !w.eventTypes.includes(t)));

  return (
    <>
      <PageHeader title="Webhook">
        <button type="button" className="primary" onClick={() => test.mutate()} disabled={test.isPending}>
          {test.isPending ? 'Sending test…' : 'Send test event'}
        </button>
        <button type="button" onClick={() => patch.mutate({ active: !active })} disabled={patch.isPending}>
          {active ? 'Pause' : 'Activate'}
        </button>
        <button
          type="button"
          onClick={() => {
            if (window.confirm('Rotate the secret? The old one stops being used at once.')) patch.mutate({ rotateSecret: true });
          }}
          disabled={patch.isPending}
        >
          Rotate secret
        </button>
        <button
          type="button"
          className="danger"
          onClick={() => {
            if (window.confirm(`Delete the webhook to ${w.url}? Pending deliveries are cancelled.`)) remove.mutate();
          }}
        >
          Delete
        </button>
      </PageHeader>
      <p>
        <Link to="/webhooks">Back to webhooks</Link>
      </p>
      <dl className="props">
        <dt>Endpoint</dt>
        <dd className="mono">{w.url}</dd>
        {w.description ? (
          <>
            <dt>Description</dt>
            <dd>{w.description}</dd>
          </>
        ) : null}
        <dt>Status</dt>
        <dd>
          <span role="status">
            <Status value={w.status} />
            {w.status === 'FAILED' ? ' paused after repeated failures: fix the endpoint, then Activate' : ''}
          </span>
        </dd>
        <dt>Secret</dt>
        <dd className="mono">{w.secret}</dd>
        <dt>Last success</dt>
        <dd>{formatDate(w.lastSuccessAt)}</dd>
        <dt>Last failure</dt>
        <dd>{formatDate(w.lastFailureAt)}</dd>
        <dt>Failures in a row</dt>
        <dd>{w.consecutiveFailures}</dd>
      </dl>
      {secret ? <SecretOnce secret={secret} onDone={() => setSecret(null)} /> : null}
      <ErrorBox error={patch.error ?? remove.error} />
      <ErrorBox error={test.error} title="The test delivery failed" />
      {test.data ? <DeliveryRecord d={test.data} /> : null}

      <h2>Events</h2>
      <EventPicker value={types ?? w.eventTypes} onChange={setTypes} />
      <p>
        <button type="button" disabled={!typesChanged || patch.isPending || (types?.length ?? 0) === 0} onClick={() => types && patch.mutate({ eventTypes: types })}>
          Save events
        </button>
      </p>

      <h2>Deliveries</h2>
      <form className="row" onSubmit={(e) => e.preventDefault()} aria-label="Delivery filter">
        <label>
          Status
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.target.value as typeof status);
              setPage(1);
            }}
          >
            <option value="">Any</option>
            <option value="PENDING">PENDING</option>
            <option value="SUCCESS">SUCCESS</option>
            <option value="FAILED">FAILED</option>
          </select>
        </label>
      </form>
      <ErrorBox error={deliveries.error ?? retry.error} />
      {deliveries.isPending ? <Loading /> : null}
      {deliveries.data && deliveries.data.data.length === 0 ? (
        <p className="empty">No delivery {status ? `with status ${status}` : 'yet'}: send a test event, or wait for an event of the types above.</p>
      ) : null}
      {deliveries.data && deliveries.data.data.length > 0 ? (
        // Focusable so a keyboard can scroll it sideways on a phone (rows may hold no button).
        <div className="table-wrap" tabIndex={0} role="region" aria-label="Deliveries">
          <table>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempt</th>
                <th scope="col">Response</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {deliveries.data.data.map((d) => (
                <tr key={d.id}>
                  <td className="mono">{d.type}</td>
                  <td>
                    <Status value={d.status} />
                    {d.nextAttemptAt && d.status === 'PENDING' ? <div className="muted">next try {formatDate(d.nextAttemptAt)}</div> : null}
                  </td>
                  <td>{d.attempt}</td>
                  <td>
                    {d.responseStatus ?? '—'}
                    {d.lastError ? <div className="muted">{d.lastError}</div> : null}
                  </td>
                  <td>{formatDate(d.createdAt)}</td>
                  <td>
                    {d.status !== 'SUCCESS' ? (
                      <button type="button" className="small" aria-label={`Retry ${d.type} delivery`} disabled={retry.isPending} onClick={() => retry.mutate(d.id)}>
                        Retry
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {deliveries.data ? <Pager page={page} hasNext={page * LIMIT < deliveries.data.count} onPage={setPage} /> : null}
    </>
  );
}
