import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useNavigate } from 'react-router';
import { sessionApi } from '../../api/session';
import { ErrorBox } from '../../components/ui';
import { inviteToken } from '../../lib/links';
import { useSessionChanged } from '../../session';

export default function AcceptInvite() {
  const navigate = useNavigate();
  const changed = useSessionChanged();
  const [token] = useState(() => inviteToken(window.location.hash));
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const accept = useMutation({
    mutationFn: () => sessionApi.acceptInvite(token ?? '', password, name.trim() || undefined),
    onSuccess: (s) => {
      changed(s);
      navigate('/', { replace: true });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    accept.mutate();
  };
  return (
    <>
      <h1>Join a team on mailfleet</h1>
      {!token ? (
        <ErrorBox error={new Error('This invite link has no token: open the whole link from the invitation.')} title="Invalid invite link" />
      ) : (
        <form className="stack" onSubmit={submit}>
          <p className="muted">New here? Choose a password (10 characters or more). Already have an account with this email? Enter its password.</p>
          <label>
            Your name (optional)
            <input name="name" autoComplete="name" value={name} onChange={(e) => setName(e.target.value)} />
          </label>
          <label>
            Password
            <input type="password" name="password" autoComplete="new-password" required minLength={10} value={password} onChange={(e) => setPassword(e.target.value)} />
          </label>
          <button type="submit" className="primary" disabled={accept.isPending}>
            Accept invite
          </button>
        </form>
      )}
      <ErrorBox error={accept.error} title="Could not accept the invite" />
    </>
  );
}
