import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader } from '../../components/ui';
import { placeholdersOf } from '../shared/placeholders';

export default function Templates() {
  const templates = useQuery({ queryKey: ['templates'], queryFn: () => unwrap(api.GET('/v1/templates')) });
  return (
    <>
      <PageHeader title="Templates">
        <Link className="button primary" to="/templates/new">
          New template
        </Link>
      </PageHeader>
      <ErrorBox error={templates.error} />
      {templates.isPending ? <Loading /> : null}
      {templates.data?.length === 0 ? (
        <Empty title="No template yet">Create one with “New template”; programs then send it with POST /v1/emails and its variables.</Empty>
      ) : null}
      {templates.data && templates.data.length > 0 ? (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Subject</th>
                <th scope="col">Variables</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {templates.data.map((t) => (
                <tr key={t.id}>
                  <td>
                    <Link to={`/templates/${encodeURIComponent(t.id)}`}>{t.name}</Link>
                  </td>
                  <td>{t.subject}</td>
                  <td className="mono">{placeholdersOf(t.subject, t.html, t.content).join(', ') || '—'}</td>
                  <td>{formatDate(t.updatedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
