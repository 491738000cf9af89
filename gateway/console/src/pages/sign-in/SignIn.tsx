import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Navigate, useNavigate, useSearchParams } from 'react-router';
import { sessionApi } from '../../api/session';
import { ErrorBox } from '../../components/ui';
import { safeNext } from '../../lib/links';
import { useSession, useSessionChanged } from '../../session';

export default function SignIn() {
  const [params] = useSearchParams();
  const next = safeNext(params.get('next'));
  const navigate = useNavigate();
  const session = useSession();
  const changed = useSessionChanged();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useMutation({
    mutationFn: () => sessionApi.signIn(email, password),
    onSuccess: (s) => {
      changed(s);
      navigate(next, { replace: true });
    },
  });
  if (session.data) return <Navigate to={next} replace />;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    signIn.mutate();
  };
  return (
    <>
      <h1>Sign in to mailfleet</h1>
      <form className="stack" onSubmit={submit} aria-describedby={signIn.error ? 'sign-in-error' : undefined}>
        <label>
          Email
          <input type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password
          <input type="password" name="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <button type="submit" className="primary" disabled={signIn.isPending}>
          {signIn.isPending ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <div id="sign-in-error">
        <ErrorBox error={signIn.error} title="Sign-in failed" />
      </div>
      <p className="muted">
        Programs use API keys (<a href="/docs">API docs</a>). An account comes from an invite or from{' '}
        <code>npx mailfleet user create</code>.
      </p>
    </>
  );
}
