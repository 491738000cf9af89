import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader, Status } from '../../components/ui';

export default function Domains() {
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [name, setName] = useState('');
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => unwrap(api.GET('/v1/domains')) });
  const add = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/domains', { body: { name: name.trim(), region: 'us-east-1' } })),
    onSuccess: (d) => {
      void qc.invalidateQueries({ queryKey: ['domains'] });
      navigate(`/domains/${encodeURIComponent(d.id)}`);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    add.mutate();
  };
  return (
    <>
      <PageHeader title="Domains" />
      <form className="row" onSubmit={submit}>
        <label>
          Domain name
          <input name="domain" required placeholder="mail.example.com" value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="submit" className="primary" disabled={add.isPending}>
          Add domain
        </button>
      </form>
      <ErrorBox error={add.error} title="Could not add the domain" />
      <ErrorBox error={domains.error} />
      {domains.isPending ? <Loading /> : null}
      {domains.data?.length === 0 ? <Empty title="No domain yet">Add the domain you send from; you will get the DNS records to publish.</Empty> : null}
      {domains.data && domains.data.length > 0 ? (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Domain</th>
                <th scope="col">Status</th>
                <th scope="col">Tracking</th>
                <th scope="col">Added</th>
              </tr>
            </thead>
            <tbody>
              {domains.data.map((d) => (
                <tr key={d.id}>
                  <td>
                    <Link to={`/domains/${encodeURIComponent(d.id)}`}>{d.name}</Link>
                  </td>
                  <td>
                    <Status value={d.status} />
                  </td>
                  <td>{[d.openTracking ? 'opens' : '', d.clickTracking ? 'clicks' : ''].filter(Boolean).join(', ') || 'off'}</td>
                  <td>{formatDate(d.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
