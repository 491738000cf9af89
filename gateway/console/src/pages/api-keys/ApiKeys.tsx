import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, unwrap } from '../../api/client';
import { CopyButton, Empty, ErrorBox, formatDate, Loading, PageHeader } from '../../components/ui';

export default function ApiKeys() {
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [permission, setPermission] = useState<'FULL' | 'SENDING'>('SENDING');
  const [domainId, setDomainId] = useState('');
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const keys = useQuery({ queryKey: ['api-keys'], queryFn: () => unwrap(api.GET('/v1/api-keys')) });
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => unwrap(api.GET('/v1/domains')) });
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/api-keys', { body: { name: name.trim(), permission, ...(domainId ? { domainId } : {}) } })),
    onSuccess: (r) => {
      setCreated({ name: name.trim(), token: r.token });
      setName('');
      void qc.invalidateQueries({ queryKey: ['api-keys'] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/v1/api-keys/{id}', { params: { path: { id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['api-keys'] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  const domainName = (id: string | null | undefined) => (id ? (domains.data?.find((d) => d.id === id)?.name ?? id) : 'All domains');

  return (
    <>
      <PageHeader title="API keys" />
      <form className="row" onSubmit={submit} aria-label="Create an API key">
        <label>
          Name
          <input name="name" required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Permission
          <select value={permission} onChange={(e) => setPermission(e.target.value as 'FULL' | 'SENDING')}>
            <option value="SENDING">Sending only</option>
            <option value="FULL">Full access</option>
          </select>
        </label>
        <label>
          Domain
          <select value={domainId} onChange={(e) => setDomainId(e.target.value)}>
            <option value="">All domains</option>
            {(domains.data ?? []).map((d) => (
              <option key={d.id} value={d.id}>
                {d.name}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" className="primary" disabled={create.isPending}>
          Create key
        </button>
      </form>
      <ErrorBox error={create.error} title="Could not create the key" />
      {created ? (
        <div className="secret" role="status">
          <div>
            <strong>{created.name}</strong>: copy this key now, it is not shown again.
            <div className="mono" data-testid="new-token">
              {created.token}
            </div>
          </div>
          <CopyButton value={created.token} label="Copy key" />
          <button type="button" className="small" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      ) : null}
      <ErrorBox error={keys.error ?? revoke.error} />
      {keys.isPending ? <Loading /> : null}
      {keys.data?.length === 0 ? <Empty title="No API key">Programs send with an API key: create one above.</Empty> : null}
      {keys.data && keys.data.length > 0 ? (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Permission</th>
                <th scope="col">Domain</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((k) => (
                <tr key={k.id}>
                  <td>{k.name}</td>
                  <td className="mono">{k.partialToken}</td>
                  <td>{k.permission}</td>
                  <td>{domainName(k.domainId)}</td>
                  <td>{formatDate(k.createdAt)}</td>
                  <td>{formatDate(k.lastUsed)}</td>
                  <td>
                    <button
                      type="button"
                      className="danger small"
                      aria-label={`Revoke ${k.name}`}
                      disabled={revoke.isPending}
                      onClick={() => {
                        if (window.confirm(`Revoke ${k.name}? Programs using it stop working at once.`)) revoke.mutate(k.id);
                      }}
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
