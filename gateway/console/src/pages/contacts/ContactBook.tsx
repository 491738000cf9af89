import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState, type FormEvent } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader, Pager } from '../../components/ui';
import { Progress } from '../shared/Progress';
import { chunks, contactsToCsv, parseContactsCsv, type ContactRow } from './csv';

const PAGE = 500;
/** Rows per bulk request: small enough that the bar moves often, large enough to stay well under the rate limit. */
const CHUNK = 100;

type Contact = { id: string; email: string; firstName: string | null; lastName: string | null; subscribed: boolean; properties: Record<string, string>; createdAt: string };

interface ImportState {
  file: string;
  total: number;
  done: number;
  created: number;
  updated: number;
  errors: { line: number; email: string; message: string }[];
  failure: unknown;
  finished: boolean;
}

function ContactForm({ initial, onSave, onCancel, pending, submitLabel }: {
  initial?: Contact;
  onSave: (c: { email: string; firstName: string; lastName: string; subscribed: boolean }) => void;
  onCancel?: () => void;
  pending: boolean;
  submitLabel: string;
}) {
  const [email, setEmail] = useState(initial?.email ?? '');
  const [firstName, setFirst] = useState(initial?.firstName ?? '');
  const [lastName, setLast] = useState(initial?.lastName ?? '');
  const [subscribed, setSubscribed] = useState(initial?.subscribed ?? true);
  return (
    <form
      className="row"
      aria-label={initial ? `Edit ${initial.email}` : 'Add a contact'}
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        onSave({ email: email.trim(), firstName: firstName.trim(), lastName: lastName.trim(), subscribed });
      }}
    >
      <label>
        Email
        <input type="email" required value={email} disabled={Boolean(initial)} onChange={(e) => setEmail(e.target.value)} />
      </label>
      <label>
        First name
        <input value={firstName} onChange={(e) => setFirst(e.target.value)} />
      </label>
      <label>
        Last name
        <input value={lastName} onChange={(e) => setLast(e.target.value)} />
      </label>
      <label style={{ flexDirection: 'row', alignItems: 'center', gap: '0.4rem' }}>
        <input type="checkbox" checked={subscribed} onChange={(e) => setSubscribed(e.target.checked)} />
        Subscribed
      </label>
      <button type="submit" className="primary" disabled={pending}>
        {submitLabel}
      </button>
      {onCancel ? (
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      ) : null}
    </form>
  );
}

export default function ContactBook() {
  const { bookId = '' } = useParams();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [page, setPage] = useState(1);
  const [search, setSearch] = useState('');
  const [editing, setEditing] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const [imp, setImp] = useState<ImportState | null>(null);
  const [exporting, setExporting] = useState<{ done: number; error: unknown } | null>(null);
  const fileRef = useRef<HTMLInputElement>(null);
  const bookPath = { params: { path: { id: bookId } } };
  const contactsPath = { params: { path: { contactBookId: bookId } } };

  const book = useQuery({ queryKey: ['contact-book', bookId], queryFn: () => unwrap(api.GET('/v1/contactBooks/{id}', bookPath)) });
  // A whole address is looked up in the whole book (the API's `emails` filter); anything else
  // filters the page shown by address and name (the API has no substring search).
  const exact = /^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/.test(search.trim()) ? search.trim() : '';
  const contacts = useQuery({
    queryKey: ['contacts', bookId, page, exact],
    queryFn: () =>
      unwrap(
        api.GET('/v1/contactBooks/{contactBookId}/contacts', {
          params: { path: { contactBookId: bookId }, query: exact ? { emails: exact } : { page, limit: PAGE } },
        }),
      ),
  });
  const refresh = () => {
    void qc.invalidateQueries({ queryKey: ['contacts', bookId] });
    void qc.invalidateQueries({ queryKey: ['contact-book', bookId] });
    void qc.invalidateQueries({ queryKey: ['contact-books'] });
  };
  const add = useMutation({
    mutationFn: (c: { email: string; firstName: string; lastName: string; subscribed: boolean }) =>
      unwrap(api.POST('/v1/contactBooks/{contactBookId}/contacts', { ...contactsPath, body: { email: c.email, firstName: c.firstName || null, lastName: c.lastName || null, subscribed: c.subscribed } })),
    onSuccess: () => {
      setAdding(false);
      refresh();
    },
  });
  const update = useMutation({
    mutationFn: ({ id, ...body }: { id: string; firstName?: string | null; lastName?: string | null; subscribed?: boolean }) =>
      unwrap(api.PATCH('/v1/contactBooks/{contactBookId}/contacts/{contactId}', { params: { path: { contactBookId: bookId, contactId: id } }, body })),
    onSuccess: () => {
      setEditing(null);
      refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/v1/contactBooks/{contactBookId}/contacts/{contactId}', { params: { path: { contactBookId: bookId, contactId: id } } })),
    onSuccess: refresh,
  });
  const removeBook = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/contactBooks/{id}', bookPath)),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['contact-books'] });
      navigate('/contacts');
    },
  });

  /** Sends the rows chunk after chunk; the bar moves per chunk; row errors keep their CSV line. */
  async function runImport(file: File) {
    const parsed = parseContactsCsv(await file.text());
    const state: ImportState = {
      file: file.name, total: parsed.rows.length, done: 0, created: 0, updated: 0,
      errors: parsed.problems.map((p) => ({ line: p.line, email: '', message: p.message })), failure: null, finished: false,
    };
    setImp({ ...state });
    let offset = 0;
    for (const chunk of chunks<ContactRow>(parsed.rows, CHUNK)) {
      try {
        const r = await unwrap(
          api.POST('/v1/contactBooks/{contactBookId}/contacts/bulk', { ...contactsPath, body: chunk as unknown as Record<string, never>[] }),
        );
        state.created += r.created;
        state.updated += r.updated;
        // Line numbers as in the file: the header is line 1.
        for (const e of r.errors) state.errors.push({ line: offset + e.index + 2, email: e.email, message: `${e.message} (${e.code})` });
      } catch (err) {
        state.failure = err;
        break;
      }
      offset += chunk.length;
      state.done = offset;
      setImp({ ...state, errors: [...state.errors] });
    }
    state.finished = true;
    setImp({ ...state, errors: [...state.errors] });
    refresh();
  }

  /** Every page of the book, then one CSV file. */
  async function runExport() {
    setExporting({ done: 0, error: null });
    try {
      const all: Contact[] = [];
      for (let p = 1; ; p++) {
        const batch = await unwrap(api.GET('/v1/contactBooks/{contactBookId}/contacts', { params: { path: { contactBookId: bookId }, query: { page: p, limit: 5000 } } }));
        all.push(...batch);
        setExporting({ done: all.length, error: null });
        if (batch.length < 5000) break;
      }
      const url = URL.createObjectURL(new Blob([contactsToCsv(all)], { type: 'text/csv' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `${(book.data?.name ?? 'contacts').replace(/[^\w.-]+/g, '_')}.csv`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setExporting(null);
    } catch (err) {
      setExporting({ done: 0, error: err });
    }
  }

  if (book.isPending) return <Loading />;
  if (book.error)
    return (
      <>
        <PageHeader title="Contact book" />
        <ErrorBox error={book.error} />
        <Link to="/contacts">Back to contact books</Link>
      </>
    );
  const b = book.data;
  const q = search.trim().toLowerCase();
  const rows = (contacts.data ?? []).filter(
    (c) => !q || c.email.toLowerCase().includes(q) || `${c.firstName ?? ''} ${c.lastName ?? ''}`.toLowerCase().includes(q),
  );
  const importing = imp !== null && !imp.finished;

  return (
    <>
      <PageHeader title={b.name}>
        <button type="button" className="primary" onClick={() => setAdding(true)}>
          Add contact
        </button>
        <button type="button" onClick={() => fileRef.current?.click()} disabled={importing}>
          Import CSV
        </button>
        <button type="button" onClick={() => void runExport()} disabled={exporting !== null && !exporting.error}>
          Export CSV
        </button>
        <button
          type="button"
          className="danger"
          onClick={() => {
            if (window.confirm(`Delete ${b.name} and its ${b.details.totalContacts} contacts?`)) removeBook.mutate();
          }}
        >
          Delete book
        </button>
      </PageHeader>
      <p>
        <Link to="/contacts">Back to contact books</Link>
      </p>
      <p className="muted">
        {b.details.totalContacts.toLocaleString()} contacts, {b.details.unsubscribedContacts.toLocaleString()} unsubscribed
        {b.details.campaigns.length > 0 ? ` · used by ${b.details.campaigns.map((c) => c.name).join(', ')}` : ''}
      </p>
      <input
        ref={fileRef}
        type="file"
        accept=".csv,text/csv"
        className="sr-only"
        aria-label="CSV file to import"
        tabIndex={-1}
        onChange={(e) => {
          const f = e.target.files?.[0];
          e.target.value = '';
          if (f) void runImport(f);
        }}
      />
      <ErrorBox error={removeBook.error} />
      {exporting?.error ? <ErrorBox error={exporting.error} title="Export failed" /> : null}
      {exporting && !exporting.error ? <p role="status">Exporting… {exporting.done.toLocaleString()} contacts read</p> : null}

      {imp ? (
        <section className="notice" aria-label="CSV import">
          <Progress label={`Importing ${imp.file}`} value={imp.done} max={imp.total} detail={imp.finished ? 'finished' : 'sending'} />
          <p role="status">
            {imp.finished
              ? `Import finished: ${imp.created} created, ${imp.updated} updated, ${imp.errors.length} rows refused.`
              : `Sent ${imp.done} of ${imp.total} rows…`}
          </p>
          <ErrorBox error={imp.failure} title={`Import stopped after ${imp.done} rows`} />
          {imp.errors.length > 0 ? (
            <details open={imp.errors.length <= 20}>
              <summary>Rows refused ({imp.errors.length})</summary>
              <div className="table-wrap" tabIndex={0} role="region" aria-label="Rows refused">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Line</th>
                      <th scope="col">Email</th>
                      <th scope="col">Problem</th>
                    </tr>
                  </thead>
                  <tbody>
                    {imp.errors.slice(0, 500).map((e, i) => (
                      <tr key={`${e.line}-${i}`}>
                        <td>{e.line}</td>
                        <td>{e.email || '—'}</td>
                        <td>{e.message}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </details>
          ) : null}
          {imp.finished ? (
            <button type="button" className="small" onClick={() => setImp(null)}>
              Close
            </button>
          ) : null}
        </section>
      ) : null}

      {adding ? (
        <>
          <h2>Add a contact</h2>
          <ContactForm onSave={(c) => add.mutate(c)} onCancel={() => setAdding(false)} pending={add.isPending} submitLabel="Save contact" />
          <ErrorBox error={add.error} title="Could not add the contact" />
        </>
      ) : null}

      <h2>Contacts</h2>
      <form className="row" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input type="search" value={search} placeholder="email or name" onChange={(e) => setSearch(e.target.value)} />
        </label>
      </form>
      <ErrorBox error={contacts.error ?? update.error ?? remove.error} />
      {contacts.isPending ? <Loading /> : null}
      {contacts.data && contacts.data.length === 0 && exact ? <Empty title="No contact with this address">Add it with “Add contact”.</Empty> : null}
      {contacts.data && contacts.data.length === 0 && page === 1 && !exact ? (
        <Empty title="This book has no contact yet">Add one with “Add contact”, or import a CSV file with an email column (first name, last name and other columns are kept).</Empty>
      ) : null}
      {contacts.data && contacts.data.length > 0 && rows.length === 0 ? <Empty title="No contact matches this search">A whole address is looked up in the whole book; a part of one, or a name, in the page shown.</Empty> : null}
      {rows.length > 0 ? (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Name</th>
                <th scope="col">Subscribed</th>
                <th scope="col">Properties</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((c) =>
                editing === c.id ? (
                  <tr key={c.id}>
                    <td colSpan={6}>
                      <ContactForm
                        initial={c}
                        pending={update.isPending}
                        submitLabel="Save"
                        onCancel={() => setEditing(null)}
                        onSave={(v) => update.mutate({ id: c.id, firstName: v.firstName || null, lastName: v.lastName || null, subscribed: v.subscribed })}
                      />
                    </td>
                  </tr>
                ) : (
                  <tr key={c.id}>
                    <td>{c.email}</td>
                    <td>{[c.firstName, c.lastName].filter(Boolean).join(' ') || '—'}</td>
                    <td>
                      <label style={{ flexDirection: 'row', alignItems: 'center', gap: '0.4rem', fontWeight: 400 }}>
                        <input
                          type="checkbox"
                          checked={c.subscribed}
                          disabled={update.isPending}
                          onChange={(e) => update.mutate({ id: c.id, subscribed: e.target.checked })}
                        />
                        <span className="sr-only">Subscribed: {c.email}</span>
                        <span aria-hidden="true">{c.subscribed ? 'yes' : 'no'}</span>
                      </label>
                    </td>
                    <td className="mono">
                      {Object.entries(c.properties)
                        .map(([k, v]) => `${k}=${v}`)
                        .join(', ') || '—'}
                    </td>
                    <td>{formatDate(c.createdAt)}</td>
                    <td>
                      <div className="row">
                        <button type="button" className="small" aria-label={`Edit ${c.email}`} onClick={() => setEditing(c.id)}>
                          Edit
                        </button>
                        <button
                          type="button"
                          className="danger small"
                          aria-label={`Delete ${c.email}`}
                          disabled={remove.isPending}
                          onClick={() => {
                            if (window.confirm(`Delete ${c.email}?`)) remove.mutate(c.id);
                          }}
                        >
                          Delete
                        </button>
                      </div>
                    </td>
                  </tr>
                ),
              )}
            </tbody>
          </table>
        </div>
      ) : null}
      {contacts.data && !exact ? <Pager page={page} hasNext={contacts.data.length === PAGE} onPage={setPage} /> : null}
    </>
  );
}
