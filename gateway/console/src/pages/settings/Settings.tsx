import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, unwrap } from '../../api/client';
import { sessionApi, type CreatedInvite } from '../../api/session';
import { CopyButton, Empty, ErrorBox, formatDate, Loading, PageHeader } from '../../components/ui';
import { useSession } from '../../session';

function Users({ selfId }: { selfId: string }) {
  const qc = useQueryClient();
  const users = useQuery({ queryKey: ['users'], queryFn: () => sessionApi.users() });
  const remove = useMutation({ mutationFn: (id: string) => sessionApi.removeUser(id), onSuccess: () => qc.invalidateQueries({ queryKey: ['users'] }) });
  return (
    <>
      <h2>Users</h2>
      <ErrorBox error={users.error ?? remove.error} />
      {users.isPending ? <Loading /> : null}
      {users.data ? (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Name</th>
                <th scope="col">Since</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {users.data.data.map((u) => (
                <tr key={u.id}>
                  <td>{u.email}</td>
                  <td>{u.name ?? '—'}</td>
                  <td>{formatDate(u.createdAt)}</td>
                  <td>
                    {u.id === selfId ? (
                      <span className="muted">you</span>
                    ) : (
                      <button
                        type="button"
                        className="danger small"
                        aria-label={`Remove ${u.email}`}
                        onClick={() => {
                          if (window.confirm(`Remove ${u.email} from this team? Their sessions end at once.`)) remove.mutate(u.id);
                        }}
                      >
                        Remove
                      </button>
                    )}
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

function Invites() {
  const qc = useQueryClient();
  const [email, setEmail] = useState('');
  const [created, setCreated] = useState<CreatedInvite | null>(null);
  const invites = useQuery({ queryKey: ['invites'], queryFn: () => sessionApi.invites() });
  const invite = useMutation({
    mutationFn: () => sessionApi.invite(email.trim()),
    onSuccess: (r) => {
      setCreated(r);
      setEmail('');
      void qc.invalidateQueries({ queryKey: ['invites'] });
    },
  });
  const cancel = useMutation({ mutationFn: (id: string) => sessionApi.deleteInvite(id), onSuccess: () => qc.invalidateQueries({ queryKey: ['invites'] }) });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    invite.mutate();
  };
  const pending = (invites.data?.data ?? []).filter((i) => !i.acceptedAt);
  return (
    <>
      <h2>Invites</h2>
      <form className="row" onSubmit={submit} aria-label="Invite a user">
        <label>
          Email
          <input type="email" name="invite-email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <button type="submit" className="primary" disabled={invite.isPending}>
          Invite
        </button>
      </form>
      <ErrorBox error={invite.error ?? cancel.error} title="Invite failed" />
      {created ? (
        <div className="secret" role="status">
          <div>
            Invite link for <strong>{created.email}</strong> (shown once, valid until {formatDate(created.expiresAt)}
            {created.mailed ? '; also sent by email' : '; not mailed: the team has no verified domain'}):
            <div className="mono">{created.url}</div>
          </div>
          <CopyButton value={created.url} label="Copy link" />
        </div>
      ) : null}
      <ErrorBox error={invites.error} />
      {invites.data && pending.length === 0 ? <Empty title="No pending invite" /> : null}
      {pending.length > 0 ? (
        <div className="table-wrap" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Sent</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {pending.map((i) => (
                <tr key={i.id}>
                  <td>{i.email}</td>
                  <td>{formatDate(i.createdAt)}</td>
                  <td>{formatDate(i.expiresAt)}</td>
                  <td>
                    <button type="button" className="small" aria-label={`Cancel the invite of ${i.email}`} onClick={() => cancel.mutate(i.id)}>
                      Cancel
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

export default function Settings() {
  const session = useSession();
  const settings = useQuery({ queryKey: ['settings'], queryFn: () => unwrap(api.GET('/v1/settings')) });
  const s = settings.data;
  return (
    <>
      <PageHeader title="Settings" />
      <h2>Team</h2>
      <ErrorBox error={settings.error} />
      {settings.isPending ? <Loading /> : null}
      {s ? (
        <dl className="props">
          <dt>Name</dt>
          <dd>{s.name}</dd>
          <dt>Team id</dt>
          <dd className="mono">
            {s.id} <CopyButton value={s.id} label="Copy team id" />
          </dd>
          <dt>Plan</dt>
          <dd>{s.plan}</dd>
          <dt>Daily limit</dt>
          <dd>{s.dailyEmailLimit > 0 ? `${s.dailyEmailLimit.toLocaleString()} emails` : 'unlimited'}</dd>
          <dt>Monthly limit</dt>
          <dd>{s.monthlyEmailLimit > 0 ? `${s.monthlyEmailLimit.toLocaleString()} emails` : 'unlimited'}</dd>
        </dl>
      ) : null}
      {session.data ? <Users selfId={session.data.user.id} /> : null}
      <Invites />
    </>
  );
}
