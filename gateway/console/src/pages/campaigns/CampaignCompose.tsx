import { useMutation, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../../api/client';
import { ErrorBox, MailFrame, PageHeader } from '../../components/ui';
import { contactValues, fillPlaceholders, placeholdersOf, textAsHtml } from '../shared/placeholders';
import { describeSchedule, resolveSchedule } from './schedule';

const STARTER_HTML = '<p>Hello {{firstName}},</p>\n<p>Write your message here.</p>\n<p><a href="{{service_unsubscribe_url}}">Unsubscribe</a></p>';
const STARTER_TEXT = 'Hello {{firstName}},\n\nWrite your message here.\n\nUnsubscribe: {{service_unsubscribe_url}}';
const UNSUBSCRIBE = /\{\{\s*service_unsubscribe_url\s*\}\}/;
const SAMPLE_CONTACT = { email: 'jane@example.com', firstName: 'Jane', lastName: 'Doe', properties: {} as Record<string, string> };

type When = 'draft' | 'now' | 'later';

export default function CampaignCompose() {
  const navigate = useNavigate();
  const [name, setName] = useState('');
  const [bookId, setBookId] = useState('');
  const [from, setFrom] = useState('');
  const [subject, setSubject] = useState('');
  const [previewText, setPreviewText] = useState('');
  const [format, setFormat] = useState<'html' | 'text'>('html');
  const [body, setBody] = useState(STARTER_HTML);
  const [when, setWhen] = useState<When>('now');
  const [scheduledAt, setScheduledAt] = useState('tomorrow at 9am');
  const [batchSize, setBatchSize] = useState('');
  const [batchWindow, setBatchWindow] = useState('');
  const [previewId, setPreviewId] = useState('');

  const books = useQuery({ queryKey: ['contact-books'], queryFn: () => unwrap(api.GET('/v1/contactBooks')) });
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => unwrap(api.GET('/v1/domains')) });
  const templates = useQuery({ queryKey: ['templates'], queryFn: () => unwrap(api.GET('/v1/templates')) });
  const contacts = useQuery({
    queryKey: ['contacts', bookId, 'preview'],
    queryFn: () => unwrap(api.GET('/v1/contactBooks/{contactBookId}/contacts', { params: { path: { contactBookId: bookId }, query: { page: 1, limit: 50 } } })),
    enabled: Boolean(bookId),
  });
  const verified = (domains.data ?? []).filter((d) => d.status === 'SUCCESS');

  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/campaigns', {
          body: {
            name: name.trim(),
            contactBookId: bookId,
            from: from.trim(),
            subject,
            ...(previewText ? { previewText } : {}),
            ...(format === 'html' ? { html: body } : { content: body }),
            ...(when === 'now' ? { sendNow: true } : {}),
            ...(when === 'later' ? { scheduledAt: scheduledAt.trim() } : {}),
            ...(batchSize ? { batchSize: Number(batchSize) } : {}),
            ...(batchWindow ? { batchWindowMinutes: Number(batchWindow) } : {}),
          },
        }),
      ),
    onSuccess: (c) => navigate(`/campaigns/${encodeURIComponent(c.id)}`),
  });

  const previewContact = contacts.data?.find((c) => c.id === previewId) ?? contacts.data?.[0] ?? SAMPLE_CONTACT;
  const names = placeholdersOf(subject, body);
  const values = contactValues(previewContact, names, `${location.origin}/v1/campaigns/unsubscribe?token=…`);
  const resolved = when === 'later' ? resolveSchedule(scheduledAt) : null;
  const missingUnsubscribe = !UNSUBSCRIBE.test(body);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };

  return (
    <>
      <PageHeader title="New campaign" />
      <p>
        <Link to="/campaigns">Back to campaigns</Link>
      </p>
      <div style={{ display: 'grid', gap: '1.5rem', gridTemplateColumns: 'repeat(auto-fit, minmax(min(100%, 26rem), 1fr))' }}>
        <form className="stack" onSubmit={submit} aria-label="Compose a campaign">
          <label>
            Campaign name
            <input required value={name} onChange={(e) => setName(e.target.value)} />
          </label>
          <label>
            Contact book
            <select required value={bookId} onChange={(e) => setBookId(e.target.value)}>
              <option value="">Choose a book…</option>
              {(books.data ?? []).map((b) => (
                <option key={b.id} value={b.id}>
                  {b.name} ({b._count.contacts} contacts)
                </option>
              ))}
            </select>
          </label>
          {books.data?.length === 0 ? (
            <p className="notice">
              No contact book yet: <Link to="/contacts">create one and import contacts</Link> first.
            </p>
          ) : null}
          <label>
            From
            <input required type="text" list="from-domains" value={from} placeholder="News <news@your-domain>" onChange={(e) => setFrom(e.target.value)} />
            <datalist id="from-domains">
              {verified.map((d) => (
                <option key={d.id} value={`news@${d.name}`} />
              ))}
            </datalist>
          </label>
          {domains.data && verified.length === 0 ? (
            <p className="notice">
              The sender must be on a verified domain: <Link to="/domains">add and verify one</Link>.
            </p>
          ) : null}
          <label>
            Subject
            <input required value={subject} size={40} onChange={(e) => setSubject(e.target.value)} />
          </label>
          <label>
            Preview text (optional)
            <input value={previewText} size={40} onChange={(e) => setPreviewText(e.target.value)} />
          </label>
          {templates.data && templates.data.length > 0 ? (
            <label>
              Start from a template
              <select
                value=""
                onChange={(e) => {
                  const t = templates.data.find((x) => x.id === e.target.value);
                  if (!t) return;
                  if (!subject) setSubject(t.subject);
                  if (t.html) {
                    setFormat('html');
                    setBody(t.html);
                  } else if (t.content) {
                    setFormat('text');
                    setBody(t.content);
                  }
                }}
              >
                <option value="">Choose…</option>
                {templates.data.map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.name}
                  </option>
                ))}
              </select>
            </label>
          ) : null}
          <fieldset className="row">
            <legend>Body format</legend>
            {(['html', 'text'] as const).map((f) => (
              <label key={f} style={{ flexDirection: 'row', alignItems: 'center', gap: '0.4rem' }}>
                <input
                  type="radio"
                  name="format"
                  checked={format === f}
                  onChange={() => {
                    setFormat(f);
                    if (body === STARTER_HTML || body === STARTER_TEXT) setBody(f === 'html' ? STARTER_HTML : STARTER_TEXT);
                  }}
                />
                {f === 'html' ? 'HTML' : 'Plain text'}
              </label>
            ))}
          </fieldset>
          <label style={{ width: '100%' }}>
            Body
            <textarea required rows={12} className="mono" aria-label="Body" value={body} onChange={(e) => setBody(e.target.value)} aria-describedby="placeholders-help" />
          </label>
          <p id="placeholders-help" className="muted">
            Placeholders: {'{{firstName}}'}, {'{{lastName}}'}, {'{{email}}'}, {'{{properties.KEY}}'} and the required {'{{service_unsubscribe_url}}'}.
          </p>
          {missingUnsubscribe ? (
            <p className="notice" role="status">
              The body must contain {'{{service_unsubscribe_url}}'}: the API refuses a campaign without it.
            </p>
          ) : null}
          <fieldset className="stack">
            <legend>When</legend>
            {(
              [
                ['draft', 'Save as a draft'],
                ['now', 'Send now'],
                ['later', 'Schedule'],
              ] as const
            ).map(([v, label]) => (
              <label key={v} style={{ flexDirection: 'row', alignItems: 'center', gap: '0.4rem' }}>
                <input type="radio" name="when" checked={when === v} onChange={() => setWhen(v)} />
                {label}
              </label>
            ))}
            {when === 'later' ? (
              <>
                <label>
                  Send at (ISO 8601 or words: “tomorrow at 9am”, “in 2 hours”)
                  <input value={scheduledAt} onChange={(e) => setScheduledAt(e.target.value)} aria-describedby="resolved-time" />
                </label>
                <p id="resolved-time" role="status" className={resolved ? undefined : 'error'}>
                  {resolved ? describeSchedule(resolved) : 'Not a date or time the platform understands'}
                </p>
              </>
            ) : null}
          </fieldset>
          <div className="row">
            <label>
              Batch size (emails per batch)
              <input type="number" min={1} max={100000} value={batchSize} placeholder="all at once" onChange={(e) => setBatchSize(e.target.value)} />
            </label>
            <label>
              Batch window (minutes between batches)
              <input type="number" min={0} value={batchWindow} placeholder="5" onChange={(e) => setBatchWindow(e.target.value)} />
            </label>
          </div>
          <button type="submit" className="primary" disabled={create.isPending}>
            {create.isPending ? 'Saving…' : when === 'now' ? 'Send campaign' : when === 'later' ? 'Schedule campaign' : 'Save draft'}
          </button>
          <ErrorBox error={create.error} title="The campaign was not saved" />
        </form>
        <section aria-label="Preview">
          <h2>Preview</h2>
          <label>
            As received by
            <select value={previewId} onChange={(e) => setPreviewId(e.target.value)} disabled={!contacts.data || contacts.data.length === 0}>
              {contacts.data && contacts.data.length > 0 ? (
                contacts.data.map((c) => (
                  <option key={c.id} value={c.id}>
                    {c.email}
                  </option>
                ))
              ) : (
                <option value="">{SAMPLE_CONTACT.email} (sample: choose a book with contacts)</option>
              )}
            </select>
          </label>
          <dl className="props">
            <dt>From</dt>
            <dd>{from || '—'}</dd>
            <dt>To</dt>
            <dd>{previewContact.email}</dd>
            <dt>Subject</dt>
            <dd data-testid="preview-subject">{fillPlaceholders(subject, values, false) || '—'}</dd>
          </dl>
          <MailFrame title="Campaign preview" html={format === 'html' ? fillPlaceholders(body, values, true) : textAsHtml(fillPlaceholders(body, values, false))} />
        </section>
      </div>
    </>
  );
}
