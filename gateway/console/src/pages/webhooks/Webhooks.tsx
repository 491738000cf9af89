import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { CopyButton, Empty, ErrorBox, formatDate, Loading, PageHeader, Status } from '../../components/ui';
import { EVENT_GROUPS } from './events';

/** The event-type picker: one checkbox per type, a whole group at once. */
export function EventPicker({ value, onChange }: { value: readonly string[]; onChange: (v: string[]) => void }) {
  const selected = new Set(value);
  const toggle = (types: readonly string[], on: boolean) => {
    const next = new Set(selected);
    for (const t of types) if (on) next.add(t);
    else next.delete(t);
    onChange([...next]);
  };
  return (
    <div className="stack">
      {EVENT_GROUPS.map((g) => (
        <fieldset key={g.group} className="row" style={{ alignItems: 'center' }}>
          <legend>
            <label style={{ flexDirection: 'row', alignItems: 'center', gap: '0.4rem' }}>
              <input type="checkbox" checked={g.types.every((t) => selected.has(t))} onChange={(e) => toggle(g.types, e.target.checked)} />
              All {g.group.toLowerCase()} events
            </label>
          </legend>
          {g.types.map((t) => (
            <label key={t} style={{ flexDirection: 'row', alignItems: 'center', gap: '0.3rem', fontWeight: 400 }}>
              <input type="checkbox" checked={selected.has(t)} onChange={(e) => toggle([t], e.target.checked)} />
              <span className="mono">{t}</span>
            </label>
          ))}
        </fieldset>
      ))}
    </div>
  );
}

export function SecretOnce({ secret, onDone }: { secret: string; onDone: () => void }) {
  return (
    <div className="secret" role="status">
      <div>
        Signing secret: copy it now, it is not shown again.
        <div className="mono" data-testid="webhook-secret">
          {secret}
        </div>
      </div>
      <CopyButton value={secret} label="Copy secret" />
      <button type="button" className="small" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

export default function Webhooks() {
  const qc = useQueryClient();
  const [url, setUrl] = useState('https://');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<string[]>(['email.delivered', 'email.bounced', 'email.complained']);
  const [created, setCreated] = useState<{ id: string; secret: string } | null>(null);
  const hooks = useQuery({ queryKey: ['webhooks'], queryFn: () => unwrap(api.GET('/v1/webhooks')) });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/webhooks', { body: { url: url.trim(), eventTypes: types, ...(description.trim() ? { description: description.trim() } : {}) } })),
    onSuccess: (w) => {
      setCreated({ id: w.id, secret: w.secret });
      setUrl('https://');
      setDescription('');
      void qc.invalidateQueries({ queryKey: ['webhooks'] });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };

  return (
    <>
      <PageHeader title="Webhooks" />
      <form className="stack" onSubmit={submit} aria-label="Create a webhook">
        <div className="row">
          <label>
            Endpoint URL (HTTPS)
            <input type="url" required pattern="https://.*" size={40} value={url} onChange={(e) => setUrl(e.target.value)} />
          </label>
          <label>
            Description (optional)
            <input value={description} onChange={(e) => setDescription(e.target.value)} />
          </label>
        </div>
        <EventPicker value={types} onChange={setTypes} />
        <button type="submit" className="primary" disabled={create.isPending || types.length === 0}>
          Create webhook
        </button>
      </form>
      <ErrorBox error={create.error} title="Could not create the webhook" />
      {created ? (
        <>
          <SecretOnce secret={created.secret} onDone={() => setCreated(null)} />
          <p>
            <Link to={`/webhooks/${encodeURIComponent(created.id)}`}>Open the new webhook to send a test event</Link>
          </p>
        </>
      ) : null}

      <h2>Endpoints</h2>
      <ErrorBox error={hooks.error} />
      {hooks.isPending ? <Loading /> : null}
      {hooks.data?.length === 0 ? <Empty title="No webhook yet">Add your HTTPS endpoint above to receive delivery, bounce and other events as they happen.</Empty> : null}
      {hooks.data && hooks.data.length > 0 ? (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Endpoint</th>
                <th scope="col">Status</th>
                <th scope="col">Events</th>
                <th scope="col">Last success</th>
                <th scope="col">Failures in a row</th>
              </tr>
            </thead>
            <tbody>
              {hooks.data.map((w) => (
                <tr key={w.id}>
                  <td>
                    <Link to={`/webhooks/${encodeURIComponent(w.id)}`}>{w.url}</Link>
                    {w.description ? <div className="muted">{w.description}</div> : null}
                  </td>
                  <td>
                    <Status value={w.status} />
                  </td>
                  <td>{w.eventTypes.length}</td>
                  <td>{formatDate(w.lastSuccessAt)}</td>
                  <td>{w.consecutiveFailures}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
