import { useState } from 'preact/hooks';
import { errorText, publicApi, saveSession, type Session } from './api.js';

interface TokenBody extends Session {
  requires_2fa?: undefined;
}
interface SecondStep {
  requires_2fa: true;
  two_factor_token: string;
}

/**
 * Sign-in as a platform administrator, with the same endpoints any client uses: the password
 * step, then the two-factor step when the account has it. A user without the admin role is
 * signed out again: every admin route would refuse them anyway.
 */
export function SignIn() {
  const [login, setLogin] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [twoFactorToken, setTwoFactorToken] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  // The session is kept only once the role is known: keeping it switches the page to the shell.
  async function finish(tokens: Session) {
    const me = await publicApi<{ role: string }>('GET', '/api/v1/auth/me', undefined, tokens.access_token);
    if (me.role !== 'admin') {
      await publicApi('POST', '/api/v1/auth/logout', { refresh_token: tokens.refresh_token }, tokens.access_token).catch(() => undefined);
      throw new Error('This account is not a platform administrator.');
    }
    saveSession({ access_token: tokens.access_token, refresh_token: tokens.refresh_token });
  }

  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (twoFactorToken) {
        await finish(await publicApi<TokenBody>('POST', '/api/v1/auth/2fa/verify', { two_factor_token: twoFactorToken, code }));
      } else {
        const answer = await publicApi<TokenBody | SecondStep>('POST', '/api/v1/auth/login', { login, password });
        if (answer.requires_2fa) setTwoFactorToken(answer.two_factor_token);
        else await finish(answer);
      }
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main class="sign-in">
      <h1>Platform console</h1>
      <form onSubmit={submit}>
        {twoFactorToken ? (
          <label>
            Two-factor code
            <input name="code" autocomplete="one-time-code" value={code} onInput={(e) => setCode(e.currentTarget.value)} required />
          </label>
        ) : (
          <>
            <label>
              E-mail or username
              <input name="login" autocomplete="username" value={login} onInput={(e) => setLogin(e.currentTarget.value)} required />
            </label>
            <label>
              Password
              <input
                name="password"
                type="password"
                autocomplete="current-password"
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
                required
              />
            </label>
          </>
        )}
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {twoFactorToken ? 'Verify' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
