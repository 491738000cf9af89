import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { ErrorBox, formatDate, Loading, MailFrame, PageHeader, Status } from '../../components/ui';

/** yyyy-mm-ddThh:mm in local time, what <input type="datetime-local"> takes. */
function localInput(iso: string | null): string {
  const d = iso ? new Date(iso) : new Date(Date.now() + 3_600_000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export default function EmailDetail() {
  const { id = '' } = useParams();
  const qc = useQueryClient();
  const email = useQuery({
    queryKey: ['email', id],
    queryFn: () => unwrap(api.GET('/v1/emails/{emailId}', { params: { path: { emailId: id } } })),
    // The timeline grows while the mail travels.
    refetchInterval: 5_000,
  });
  const [when, setWhen] = useState('');
  const refresh = () => qc.invalidateQueries({ queryKey: ['email', id] });
  const reschedule = useMutation({
    mutationFn: (scheduledAt: string | null) => unwrap(api.PATCH('/v1/emails/{emailId}', { params: { path: { emailId: id } }, body: { scheduledAt } })),
    onSuccess: refresh,
  });
  const cancel = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/emails/{emailId}/cancel', { params: { path: { emailId: id } } })),
    onSuccess: refresh,
  });

  if (email.isPending) return <Loading />;
  if (email.error)
    return (
      <>
        <PageHeader title="Email" />
        <ErrorBox error={email.error} />
        <Link to="/emails">Back to emails</Link>
      </>
    );
  const e = email.data;
  const scheduled = e.latestStatus === 'QUEUED' && e.scheduledAt !== null && Date.parse(e.scheduledAt) > Date.now();
  const envelope: [string, string][] = [
    ['From', e.from],
    ['To', e.to.join(', ')],
    ...(e.cc?.length ? [['Cc', e.cc.join(', ')] as [string, string]] : []),
    ...(e.bcc?.length ? [['Bcc', e.bcc.join(', ')] as [string, string]] : []),
    ...(e.replyTo?.length ? [['Reply-To', e.replyTo.join(', ')] as [string, string]] : []),
    ['Subject', e.subject],
    ['Email id', e.id],
    ['Created', formatDate(e.createdAt)],
    ...(e.scheduledAt ? [['Scheduled for', formatDate(e.scheduledAt)] as [string, string]] : []),
  ];

  return (
    <>
      <PageHeader title={e.subject || '(no subject)'}>
        <Status value={e.latestStatus} />
      </PageHeader>
      <p>
        <Link to="/emails">Back to emails</Link>
      </p>
      {scheduled ? (
        <section aria-labelledby="schedule-h" className="notice">
          <h2 id="schedule-h">Scheduled</h2>
          <div className="row">
            <label>
              New time
              <input type="datetime-local" value={when || localInput(e.scheduledAt)} onChange={(ev) => setWhen(ev.target.value)} />
            </label>
            <button type="button" onClick={() => reschedule.mutate(new Date(when || localInput(e.scheduledAt)).toISOString())} disabled={reschedule.isPending}>
              Reschedule
            </button>
            <button type="button" onClick={() => reschedule.mutate(null)} disabled={reschedule.isPending}>
              Send now
            </button>
            <button type="button" className="danger" onClick={() => cancel.mutate()} disabled={cancel.isPending}>
              Cancel email
            </button>
          </div>
          <ErrorBox error={reschedule.error ?? cancel.error} />
        </section>
      ) : null}

      <h2>Headers</h2>
      <dl className="props">
        {envelope.map(([k, v]) => (
          <div key={k} style={{ display: 'contents' }}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>

      <h2>Timeline</h2>
      <ol className="timeline" aria-label="Events">
        {e.emailEvents.map((ev, i) => (
          <li key={`${ev.status}-${ev.createdAt}-${i}`}>
            <Status value={ev.status} /> <span className="muted">{formatDate(ev.createdAt)}</span>
            {ev.data && Object.keys(ev.data).length > 0 ? <pre>{JSON.stringify(ev.data, null, 2)}</pre> : null}
          </li>
        ))}
      </ol>

      <h2>HTML</h2>
      {e.html ? <MailFrame html={e.html} title="HTML part of the email" /> : <p className="muted">No HTML part.</p>}
      <h2>Text</h2>
      {e.text ? <pre>{e.text}</pre> : <p className="muted">No text part.</p>}
    </>
  );
}
