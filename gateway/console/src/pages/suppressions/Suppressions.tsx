import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader, Pager, Status } from '../../components/ui';

const LIMIT = 50;
const REASONS = ['HARD_BOUNCE', 'COMPLAINT', 'MANUAL', 'UNSUBSCRIBE'] as const;
type Reason = (typeof REASONS)[number];
const EXPLAIN: Record<Reason, string> = {
  HARD_BOUNCE: 'address invalid or mailbox missing',
  COMPLAINT: 'recipient marked a mail as spam',
  MANUAL: 'added by hand',
  UNSUBSCRIBE: 'recipient opted out',
};

export default function Suppressions() {
  const qc = useQueryClient();
  const [page, setPage] = useState(1);
  const [search, setSearch] = useState('');
  const [reason, setReason] = useState<Reason | ''>('');
  const [email, setEmail] = useState('');
  const [newReason, setNewReason] = useState<Reason>('MANUAL');
  const list = useQuery({
    queryKey: ['suppressions', page, search.trim(), reason],
    queryFn: () =>
      unwrap(api.GET('/v1/suppressions', { params: { query: { page, limit: LIMIT, ...(search.trim() ? { search: search.trim() } : {}), ...(reason ? { reason } : {}) } } })),
    placeholderData: keepPreviousData,
  });
  const add = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/suppressions', { body: { email: email.trim(), reason: newReason, source: 'console' } })),
    onSuccess: () => {
      setEmail('');
      void qc.invalidateQueries({ queryKey: ['suppressions'] });
    },
  });
  const remove = useMutation({
    mutationFn: (address: string) => unwrap(api.DELETE('/v1/suppressions/email/{email}', { params: { path: { email: address } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['suppressions'] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    add.mutate();
  };
  const filtered = Boolean(search.trim() || reason);

  return (
    <>
      <PageHeader title="Suppressions" />
      <p className="muted">Mail to these addresses is not sent (status SUPPRESSED). Removing one allows sending to it again.</p>
      <form className="row" onSubmit={submit} aria-label="Suppress an address">
        <label>
          Address to suppress
          <input type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Reason
          <select value={newReason} onChange={(e) => setNewReason(e.target.value as Reason)}>
            {REASONS.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" className="primary" disabled={add.isPending}>
          Suppress
        </button>
      </form>
      <ErrorBox error={add.error} title="Could not suppress the address" />

      <h2>Suppressed addresses</h2>
      <form className="row" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input
            type="search"
            value={search}
            placeholder="part of an address"
            onChange={(e) => {
              setSearch(e.target.value);
              setPage(1);
            }}
          />
        </label>
        <label>
          Reason
          <select
            value={reason}
            onChange={(e) => {
              setReason(e.target.value as Reason | '');
              setPage(1);
            }}
          >
            <option value="">Any</option>
            {REASONS.map((r) => (
              <option key={r} value={r}>
                {r} ({EXPLAIN[r]})
              </option>
            ))}
          </select>
        </label>
      </form>
      <ErrorBox error={list.error ?? remove.error} />
      {list.isPending ? <Loading /> : null}
      {list.data?.suppressions.length === 0 ? (
        <Empty title={filtered ? 'No suppression matches these filters' : 'No suppressed address'}>
          {filtered ? 'Clear the search or the reason.' : 'Hard bounces, complaints and unsubscribes land here by themselves; add an address above to stop mail to it.'}
        </Empty>
      ) : null}
      {list.data && list.data.suppressions.length > 0 ? (
        <>
          <p className="muted">{list.data.total.toLocaleString()} addresses</p>
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Address</th>
                  <th scope="col">Reason</th>
                  <th scope="col">Source</th>
                  <th scope="col">Since</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.data.suppressions.map((s) => (
                  <tr key={s.id}>
                    <td>{s.email}</td>
                    <td>
                      <Status value={s.reason} />
                    </td>
                    <td>{s.source ?? '—'}</td>
                    <td>{formatDate(s.createdAt)}</td>
                    <td>
                      <button
                        type="button"
                        className="danger small"
                        aria-label={`Remove ${s.email}`}
                        disabled={remove.isPending}
                        onClick={() => {
                          if (window.confirm(`Allow mail to ${s.email} again?`)) remove.mutate(s.email);
                        }}
                      >
                        Remove
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager page={page} hasNext={page * LIMIT < list.data.total} onPage={setPage} />
        </>
      ) : null}
    </>
  );
}
