import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { Empty, ErrorBox, formatDate, Loading, PageHeader, Status } from '../../components/ui';

export default function Campaigns() {
  const campaigns = useQuery({
    queryKey: ['campaigns'],
    queryFn: () => unwrap(api.GET('/v1/campaigns')),
    // Counters move while campaigns send.
    refetchInterval: (q) => (q.state.data?.some((c) => c.status === 'SENDING' || c.status === 'SCHEDULED') ? 5_000 : false),
  });
  return (
    <>
      <PageHeader title="Campaigns">
        <Link className="button primary" to="/campaigns/new">
          New campaign
        </Link>
      </PageHeader>
      <ErrorBox error={campaigns.error} />
      {campaigns.isPending ? <Loading /> : null}
      {campaigns.data?.length === 0 ? (
        <Empty title="No campaign yet">Create a contact book with your audience (Contacts), then compose a campaign with “New campaign”.</Empty>
      ) : null}
      {campaigns.data && campaigns.data.length > 0 ? (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Subject</th>
                <th scope="col">Status</th>
                <th scope="col">Sent</th>
                <th scope="col">Delivered</th>
                <th scope="col">Opened</th>
                <th scope="col">Clicked</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {campaigns.data.map((c) => (
                <tr key={c.id}>
                  <td>
                    <Link to={`/campaigns/${encodeURIComponent(c.id)}`}>{c.name}</Link>
                  </td>
                  <td>{c.subject}</td>
                  <td>{c.status ? <Status value={c.status} /> : '—'}</td>
                  <td>{c.sent.toLocaleString()}</td>
                  <td>{c.delivered.toLocaleString()}</td>
                  <td>{c.opened.toLocaleString()}</td>
                  <td>{c.clicked.toLocaleString()}</td>
                  <td>{formatDate(c.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
