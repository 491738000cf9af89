import { useMutation, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { sessionApi } from '../../api/session';
import { Empty, ErrorBox, formatDate, Loading, MailFrame, PageHeader, Status } from '../../components/ui';

/** The local SMTP sink's mailbox simulator (deploy/src/smtp-sink.ts): any domain, `+tag` allowed. */
export const SIMULATOR_ADDRESSES = [
  ['bounce@…', 'bounces: the email ends BOUNCED and the address is suppressed'],
  ['softbounce@…', 'is deferred once (DELIVERY_DELAYED), then delivered'],
  ['complaint@…', 'is delivered, then reported as spam (COMPLAINED; the address is suppressed)'],
] as const;

function SendTest() {
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => unwrap(api.GET('/v1/domains')) });
  const verified = (domains.data ?? []).filter((d) => d.status === 'SUCCESS');
  const [domain, setDomain] = useState('');
  const [to, setTo] = useState('you@example.org');
  const [subject, setSubject] = useState('Test from the mailfleet console');
  const from = domain || verified[0]?.name || '';
  const send = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/emails', {
          body: { from: `Console test <test@${from}>`, to, subject, html: `<p>${subject}</p><p>Sent from the mailfleet console.</p>`, text: `${subject}\n\nSent from the mailfleet console.` },
        }),
      ),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    send.mutate();
  };
  if (domains.data && verified.length === 0)
    return (
      <p className="muted">
        To send a test email, first add and verify a domain on the <Link to="/domains">Domains</Link> page.
      </p>
    );
  return (
    <form className="row" onSubmit={submit} aria-label="Send a test email">
      <label>
        From domain
        <select value={from} onChange={(e) => setDomain(e.target.value)}>
          {verified.map((d) => (
            <option key={d.id} value={d.name}>
              {d.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        To
        <input name="to" type="email" required value={to} onChange={(e) => setTo(e.target.value)} />
      </label>
      <label>
        Subject
        <input name="subject" required value={subject} onChange={(e) => setSubject(e.target.value)} />
      </label>
      <button type="submit" className="primary" disabled={send.isPending || !from}>
        Send test email
      </button>
      <ErrorBox error={send.error} title="Could not send" />
      {send.data ? (
        <p role="status">
          Accepted: <Link to={`/emails/${encodeURIComponent(send.data.emailId)}`}>see its timeline</Link>
        </p>
      ) : null}
    </form>
  );
}

function Message({ id }: { id: string }) {
  const msg = useQuery({ queryKey: ['inbox', id], queryFn: () => sessionApi.inboxMessage(id) });
  if (msg.isPending) return <Loading />;
  if (msg.error) return <ErrorBox error={msg.error} />;
  const m = msg.data;
  return (
    <section aria-labelledby="message-h">
      <h2 id="message-h">{m.subject || '(no subject)'}</h2>
      <dl className="props">
        <dt>From</dt>
        <dd>{m.from}</dd>
        <dt>To</dt>
        <dd>{m.to.join(', ')}</dd>
        <dt>Received</dt>
        <dd>{formatDate(m.receivedAt)}</dd>
        <dt>DKIM</dt>
        <dd>
          <Status value={m.dkim.result} /> {m.dkim.domain ? <span className="mono">d={m.dkim.domain}</span> : null}{' '}
          {m.dkim.selector ? <span className="mono">s={m.dkim.selector}</span> : null}
        </dd>
        {m.simulator ? (
          <>
            <dt>Simulator</dt>
            <dd>{m.simulator}</dd>
          </>
        ) : null}
      </dl>
      <h3>HTML</h3>
      {m.html ? <MailFrame html={m.html} title="HTML part of the received message" /> : <p className="muted">No HTML part.</p>}
      <h3>Text</h3>
      {m.text ? <pre>{m.text}</pre> : <p className="muted">No text part.</p>}
      <h3>Headers</h3>
      <div className="table-wrap" tabIndex={0}>
        <table>
          <tbody>
            {m.headers.map((h, i) => (
              <tr key={`${h.name}-${i}`}>
                <th scope="row">{h.name}</th>
                <td className="mono">{h.value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

export default function DevInbox() {
  const [params, setParams] = useSearchParams();
  const selected = params.get('id');
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const inbox = useQuery({ queryKey: ['inbox-list', cursor], queryFn: () => sessionApi.inbox(cursor), refetchInterval: 3_000 });

  return (
    <>
      <PageHeader title="Dev inbox" />
      <p className="muted">
        In local mode (<code>npm start</code>) the platform delivers every email to its own SMTP sink instead of the internet: what the recipient
        would get is here.
      </p>
      <h2>Send a test email</h2>
      <SendTest />
      <h2>Simulator addresses</h2>
      <ul>
        {SIMULATOR_ADDRESSES.map(([addr, what]) => (
          <li key={addr}>
            <code>{addr}</code> {what}
          </li>
        ))}
        <li>any other address is delivered.</li>
      </ul>
      <h2>Received</h2>
      <ErrorBox error={inbox.error} />
      {inbox.isPending ? <Loading /> : null}
      {inbox.data?.data.length === 0 ? <Empty title="The inbox is empty">Send a test email above.</Empty> : null}
      {inbox.data && inbox.data.data.length > 0 ? (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">From</th>
                <th scope="col">To</th>
                <th scope="col">DKIM</th>
                <th scope="col">Received</th>
              </tr>
            </thead>
            <tbody>
              {inbox.data.data.map((m) => (
                <tr key={m.id} aria-current={m.id === selected ? 'true' : undefined}>
                  <td>
                    <Link to={`?id=${encodeURIComponent(m.id)}`} onClick={() => setParams({ id: m.id })}>
                      {m.subject || '(no subject)'}
                    </Link>
                  </td>
                  <td>{m.from}</td>
                  <td>{m.to.join(', ')}</td>
                  <td>
                    <Status value={m.dkim} />
                  </td>
                  <td>{formatDate(m.receivedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {inbox.data?.nextCursor ? (
        <button type="button" onClick={() => setCursor(inbox.data.nextCursor ?? undefined)}>
          Older messages
        </button>
      ) : null}
      {cursor ? (
        <button type="button" onClick={() => setCursor(undefined)}>
          Newest
        </button>
      ) : null}
      {selected ? <Message id={selected} /> : null}
    </>
  );
}
