import { useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader, Pager, Status } from '../../components/ui';

// The API serves at most 20 per page.
const LIMIT = 20;
export const EMAIL_STATUSES = [
  'QUEUED', 'SENT', 'DELIVERED', 'OPENED', 'CLICKED', 'BOUNCED', 'COMPLAINED', 'DELIVERY_DELAYED',
  'REJECTED', 'RENDERING_FAILURE', 'FAILED', 'CANCELLED', 'SUPPRESSED',
] as const;

/** Start of a yyyy-mm-dd day (local time, as the date input shows it) as ISO 8601; end: start of the next day. */
function dayBound(day: string, end: boolean): string | undefined {
  if (!day) return undefined;
  const d = new Date(`${day}T00:00:00`);
  if (end) d.setDate(d.getDate() + 1);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

export default function Emails() {
  // Filters live in the URL: a reload or a shared link shows the same list.
  const [params, setParams] = useSearchParams();
  const page = Math.max(1, Number(params.get('page') ?? '1') || 1);
  const domainId = params.get('domain') ?? '';
  const status = params.get('status') ?? '';
  const from = params.get('from') ?? '';
  const to = params.get('to') ?? '';
  const set = (changes: Record<string, string>) => {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v);
      else next.delete(k);
    }
    if (!('page' in changes)) next.delete('page');
    setParams(next);
  };

  const domains = useQuery({ queryKey: ['domains'], queryFn: () => unwrap(api.GET('/v1/domains')) });
  const emails = useQuery({
    queryKey: ['emails', page, domainId, from, to],
    queryFn: () =>
      unwrap(
        api.GET('/v1/emails', {
          params: { query: { page, limit: LIMIT, ...(domainId ? { domainId: [domainId] } : {}), startDate: dayBound(from, false), endDate: dayBound(to, true) } },
        }),
      ),
    refetchInterval: 10_000,
  });
  // The API filters by domain and date; status is the latest status, filtered on the page shown.
  const rows = (emails.data?.data ?? []).filter((e) => !status || e.latestStatus === status);
  const domainName = (id: string) => domains.data?.find((d) => d.id === id)?.name ?? id;

  return (
    <>
      <PageHeader title="Emails" />
      <form className="row" onSubmit={(e) => e.preventDefault()} aria-label="Filters">
        <label>
          Status
          <select value={status} onChange={(e) => set({ status: e.target.value })}>
            <option value="">Any</option>
            {EMAIL_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Domain
          <select value={domainId} onChange={(e) => set({ domain: e.target.value })}>
            <option value="">Any</option>
            {(domains.data ?? []).map((d) => (
              <option key={d.id} value={d.id}>
                {d.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          From
          <input type="date" value={from} onChange={(e) => set({ from: e.target.value })} />
        </label>
        <label>
          To
          <input type="date" value={to} onChange={(e) => set({ to: e.target.value })} />
        </label>
      </form>
      {status ? <p className="muted">Status filters the page shown ({emails.data?.data.length ?? 0} emails).</p> : null}
      <ErrorBox error={emails.error} />
      {emails.isPending ? <Loading /> : null}
      {emails.data && rows.length === 0 ? (
        <Empty title={emails.data.count === 0 && !domainId && !from && !to ? 'No email yet' : 'No email matches these filters'}>
          {emails.data.count === 0 ? 'Send one with POST /v1/emails (see the API docs), or from the Dev inbox page in local mode.' : null}
        </Empty>
      ) : null}
      {rows.length > 0 ? (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">To</th>
                <th scope="col">Status</th>
                <th scope="col">Domain</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e) => (
                <tr key={e.id}>
                  <td>
                    <Link to={`/emails/${encodeURIComponent(e.id)}`}>{e.subject || '(no subject)'}</Link>
                  </td>
                  <td>{e.to.join(', ')}</td>
                  <td>
                    <Status value={e.latestStatus} />
                    {e.scheduledAt && e.latestStatus === 'QUEUED' ? <div className="muted">scheduled {formatDate(e.scheduledAt)}</div> : null}
                  </td>
                  <td>{domainName(e.domainId)}</td>
                  <td>{formatDate(e.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {emails.data ? <Pager page={page} hasNext={page * LIMIT < emails.data.count} onPage={(p) => set({ page: String(p) })} /> : null}
    </>
  );
}
