import type { Impersonation } from './types.js';

/**
 * What POST /admin/auth/users/{id}/impersonate answered, as the API gives it: the new session's
 * tokens, or (target with two-factor) the challenge the target's code completes at
 * POST /api/v1/auth/2fa/verify. The console does not use the tokens itself: it stays signed in
 * as the administrator.
 */
export function ImpersonationResult({ result, onClose }: { result: Impersonation; onClose: () => void }) {
  return (
    <section class="panel" aria-label="Impersonation">
      <h2>Impersonation of {result.user.email}</h2>
      {result.requires_2fa ? (
        <>
          <p>
            This user has two-factor on: their TOTP or backup code completes the sign-in at <code>POST /api/v1/auth/2fa/verify</code>{' '}
            with this token (valid 5 minutes).
          </p>
          <dl>
            <dt>two_factor_token</dt>
            <dd>
              <code class="token">{result.two_factor_token}</code>
            </dd>
          </dl>
        </>
      ) : (
        <>
          <p>
            A new session of this user, marked <code>impersonated_by</code> you, lasting at most one hour. It cannot create or change
            credentials.
          </p>
          <dl>
            <dt>token_type</dt>
            <dd>{result.token_type}</dd>
            <dt>expires_in</dt>
            <dd>{result.expires_in} s</dd>
            <dt>access_token</dt>
            <dd>
              <code class="token">{result.access_token}</code>
            </dd>
            <dt>refresh_token</dt>
            <dd>
              <code class="token">{result.refresh_token}</code>
            </dd>
          </dl>
        </>
      )}
      <button type="button" onClick={onClose}>
        Close
      </button>
    </section>
  );
}
