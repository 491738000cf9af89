import { useMutation } from '@tanstack/react-query';
import { Suspense, useEffect, useState } from 'react';
import { Link, NavLink, Navigate, Outlet, useLocation, useNavigate } from 'react-router';
import { sessionApi } from './api/session';
import { ErrorBox, Loading } from './components/ui';
import { pageRoutes } from './routes';
import { useSession, useSessionChanged } from './session';

/** The signed-in layout: nav, team switcher, sign-out; pages render in <main>. */
export function Shell() {
  const session = useSession();
  const changed = useSessionChanged();
  const location = useLocation();
  const navigate = useNavigate();
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [location.pathname]);

  const switchTeam = useMutation({
    mutationFn: (teamId: string) => sessionApi.switchTeam(teamId),
    onSuccess: (s) => {
      changed(s);
      navigate('/');
    },
  });
  const signOut = useMutation({
    mutationFn: () => sessionApi.signOut(),
    onSettled: () => {
      changed(null);
      navigate('/sign-in');
    },
  });

  if (session.isPending) return <Loading />;
  if (session.error)
    return (
      <main id="main" className="public">
        <ErrorBox error={session.error} title="Could not load your session" />
        <Link to="/sign-in">Sign in</Link>
      </main>
    );
  if (!session.data) return <Navigate to={`/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`} replace />;
  const s = session.data;

  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <button type="button" className="menu-toggle" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen((o) => !o)}>
          Menu
        </button>
        <span className="brand">mailfleet</span>
        <label className="team-switch">
          <span className="sr-only">Team</span>
          <select value={s.team.id} disabled={switchTeam.isPending} onChange={(e) => switchTeam.mutate(e.target.value)}>
            {s.teams.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name}
              </option>
            ))}
          </select>
        </label>
        <span className="user muted">{s.user.email}</span>
        <button type="button" onClick={() => signOut.mutate()} disabled={signOut.isPending}>
          Sign out
        </button>
      </header>
      <nav id="nav" className={menuOpen ? 'nav open' : 'nav'} aria-label="Console">
        <ul>
          {pageRoutes
            .filter((r) => r.nav)
            .map((r) => (
              <li key={r.path}>
                <NavLink to={`/${r.path}`} end={r.path === ''}>
                  {r.nav}
                </NavLink>
              </li>
            ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        <ErrorBox error={switchTeam.error} title="Could not switch team" />
        <Suspense fallback={<Loading />}>
          <Outlet />
        </Suspense>
      </main>
    </div>
  );
}
