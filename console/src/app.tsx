import { useEffect, useState } from 'preact/hooks';
import { api, loadSession, onSessionChange, saveSession, type Session } from './api.js';
import { useLoad } from './hooks.js';
import { pages } from './pages/index.js';
import { useRoute } from './route.js';
import { SignIn } from './sign-in.js';

/** The shell: sign-in until there is an administrator's session, then navigation and the page. */
export function App() {
  const [session, setSession] = useState<Session | null>(loadSession());
  useEffect(() => onSessionChange(setSession), []);
  return session ? <Shell session={session} /> : <SignIn />;
}

function Shell({ session }: { session: Session }) {
  const route = useRoute();
  const me = useLoad(() => api<{ email: string; username: string }>('GET', '/api/v1/auth/me'), [session.access_token]);
  const page = pages.find((p) => route === `/${p.path}` || route.startsWith(`/${p.path}/`)) ?? pages[0];

  async function signOut() {
    await api('POST', '/api/v1/auth/logout', { refresh_token: session.refresh_token }).catch(() => undefined);
    saveSession(null);
  }

  return (
    <div class="shell">
      <header>
        <strong>Platform console</strong>
        <span class="who">{me.data ? `Signed in as ${me.data.email}` : ''}</span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <nav>
        {pages.map((p) => (
          <a key={p.path} href={`#/${p.path}`} class={p === page ? 'active' : ''}>
            {p.title}
          </a>
        ))}
      </nav>
      <main>{page ? <page.component /> : <p>No pages.</p>}</main>
    </div>
  );
}
