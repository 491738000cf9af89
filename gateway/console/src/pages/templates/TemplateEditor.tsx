import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { ErrorBox, Loading, MailFrame, PageHeader } from '../../components/ui';
import { fillPlaceholders, placeholdersOf, textAsHtml } from '../shared/placeholders';

const STARTER = '<h1>Hello {{name}}</h1>\n<p>Write your message here.</p>';

/** Create (`/templates/new`) or edit a template, with a live preview and its `{{variables}}`. */
export default function TemplateEditor() {
  const { id = 'new' } = useParams();
  const isNew = id === 'new';
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [name, setName] = useState('');
  const [subject, setSubject] = useState('');
  const [html, setHtml] = useState(isNew ? STARTER : '');
  const [content, setContent] = useState('');
  const [sample, setSample] = useState<Record<string, string>>({});
  const [view, setView] = useState<'html' | 'text'>('html');
  const [saved, setSaved] = useState(false);

  const template = useQuery({
    queryKey: ['template', id],
    queryFn: () => unwrap(api.GET('/v1/templates/{id}', { params: { path: { id } } })),
    enabled: !isNew,
  });
  useEffect(() => {
    if (template.data) {
      setName(template.data.name);
      setSubject(template.data.subject);
      setHtml(template.data.html ?? '');
      setContent(template.data.content ?? '');
    }
  }, [template.data]);

  const save = useMutation({
    mutationFn: async () => {
      const body = { name: name.trim(), subject, html, content };
      if (isNew) return (await unwrap(api.POST('/v1/templates', { body }))).id;
      await unwrap(api.PATCH('/v1/templates/{id}', { params: { path: { id } }, body }));
      return id;
    },
    onSuccess: (savedId) => {
      setSaved(true);
      void qc.invalidateQueries({ queryKey: ['templates'] });
      void qc.invalidateQueries({ queryKey: ['template', savedId] });
      if (isNew) navigate(`/templates/${encodeURIComponent(savedId)}`, { replace: true });
    },
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/templates/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['templates'] });
      navigate('/templates');
    },
  });

  if (!isNew && template.isPending) return <Loading />;
  if (!isNew && template.error)
    return (
      <>
        <PageHeader title="Template" />
        <ErrorBox error={template.error} />
        <Link to="/templates">Back to templates</Link>
      </>
    );

  const variables = placeholdersOf(subject, html, content);
  const values: Record<string, string | undefined> = {};
  for (const v of variables) if (sample[v]) values[v] = sample[v];
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    save.mutate();
  };
  const change = <T,>(set: (v: T) => void) => (v: T) => {
    setSaved(false);
    set(v);
  };

  return (
    <>
      <PageHeader title={isNew ? 'New template' : `Template: ${template.data?.name ?? ''}`}>
        {!isNew ? (
          <button
            type="button"
            className="danger"
            onClick={() => {
              if (window.confirm(`Delete the template ${name}?`)) remove.mutate();
            }}
          >
            Delete
          </button>
        ) : null}
      </PageHeader>
      <p>
        <Link to="/templates">Back to templates</Link>
      </p>
      <div style={{ display: 'grid', gap: '1.5rem', gridTemplateColumns: 'repeat(auto-fit, minmax(min(100%, 26rem), 1fr))' }}>
        <form className="stack" onSubmit={submit} aria-label="Template">
          <label>
            Name
            <input required value={name} onChange={(e) => change(setName)(e.target.value)} />
          </label>
          <label>
            Subject
            <input required value={subject} size={40} onChange={(e) => change(setSubject)(e.target.value)} />
          </label>
          <label style={{ width: '100%' }}>
            HTML
            <textarea rows={12} className="mono" aria-label="HTML" value={html} onChange={(e) => change(setHtml)(e.target.value)} />
          </label>
          <label style={{ width: '100%' }}>
            Plain text version
            <textarea rows={6} className="mono" aria-label="Plain text version" value={content} onChange={(e) => change(setContent)(e.target.value)} />
          </label>
          <div className="row">
            <button type="submit" className="primary" disabled={save.isPending}>
              {save.isPending ? 'Saving…' : isNew ? 'Create template' : 'Save'}
            </button>
            <span role="status">{saved ? 'Saved' : ''}</span>
          </div>
          <ErrorBox error={save.error ?? remove.error} title="Could not save the template" />
        </form>
        <section aria-label="Preview">
          <h2>Variables</h2>
          {variables.length === 0 ? (
            <p className="muted">No variable yet: write {'{{name}}'} in the subject or body; senders give its value in `variables`.</p>
          ) : (
            <div className="row">
              {variables.map((v) => (
                <label key={v}>
                  <span className="mono">{`{{${v}}}`}</span>
                  <input value={sample[v] ?? ''} placeholder="sample value" onChange={(e) => setSample({ ...sample, [v]: e.target.value })} />
                </label>
              ))}
            </div>
          )}
          <h2>Preview</h2>
          <p>
            <strong>Subject:</strong> {fillPlaceholders(subject, values, false) || <span className="muted">(none)</span>}
          </p>
          <div className="row" role="group" aria-label="Preview part">
            <button type="button" className="small" aria-pressed={view === 'html'} onClick={() => setView('html')}>
              HTML
            </button>
            <button type="button" className="small" aria-pressed={view === 'text'} onClick={() => setView('text')}>
              Text
            </button>
          </div>
          <MailFrame title="Template preview" html={view === 'html' ? fillPlaceholders(html, values, true) : textAsHtml(fillPlaceholders(content, values, false))} />
        </section>
      </div>
    </>
  );
}
