import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { confirmAction } from '../../confirm.js';
import { useLoad } from '../../hooks.js';
import { when } from './format.js';
import { errorText } from '../../api.js';
import { ImpersonationResult } from './impersonation.js';
import { Sessions } from './sessions.js';
import type { Impersonation, UserDetail as Detail } from './types.js';

/**
 * One user (GET /admin/auth/users/{id}): profile, counts, organizations, the ban, and the
 * actions: ban (with a reason) and unban, impersonation, and the sessions below.
 * The API keeps its rules (no banning or impersonating yourself, no impersonating an admin or a
 * banned user): the page shows its refusal as it comes.
 */
export function UserDetail({ id }: { id: string }) {
  const [version, setVersion] = useState(0);
  const detail = useLoad(() => api<Detail>('GET', `/admin/auth/users/${encodeURIComponent(id)}`), [id, version]);
  const [reason, setReason] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [impersonation, setImpersonation] = useState<Impersonation | null>(null);
  const changed = () => setVersion((v) => v + 1);

  async function act(question: string, label: string, run: () => Promise<void>) {
    if (!(await confirmAction(question, label))) return;
    setError(null);
    try {
      await run();
      changed();
    } catch (err) {
      setError(errorText(err));
    }
  }

  const ban = (event: Event) => {
    event.preventDefault();
    void act(`Ban ${user?.email}? Every session ends at once, and their tokens and API keys are refused.`, 'Ban', async () => {
      await api('POST', `/admin/auth/users/${encodeURIComponent(id)}/ban`, { reason });
      setReason('');
    });
  };
  const unban = () =>
    act(`Unban ${user?.email}? They can sign in again (ended sessions stay ended).`, 'Unban', () =>
      api('POST', `/admin/auth/users/${encodeURIComponent(id)}/unban`),
    );
  const impersonate = () =>
    act(`Impersonate ${user?.email}? This opens a session of theirs, for at most an hour, marked with your id.`, 'Impersonate', async () => {
      setImpersonation(await api<Impersonation>('POST', `/admin/auth/users/${encodeURIComponent(id)}/impersonate`));
    });

  const user = detail.data?.user;
  return (
    <section>
      <p>
        <a href="#/users">All users</a>
      </p>
      {detail.error && (
        <p class="error" role="alert">
          {errorText(detail.error)}
        </p>
      )}
      {detail.data && user && (
        <>
          <h1>{user.email}</h1>
          <dl class="facts">
            <dt>Id</dt>
            <dd>
              <code>{user.id}</code>
            </dd>
            <dt>Username</dt>
            <dd>{user.username}</dd>
            <dt>Name</dt>
            <dd>{user.display_name}</dd>
            <dt>Role</dt>
            <dd>{user.role}</dd>
            <dt>E-mail verified</dt>
            <dd>{user.email_verified ? 'yes' : 'no'}</dd>
            <dt>Two-factor</dt>
            <dd>{user.two_factor_enabled ? 'on' : 'off'}</dd>
            <dt>Created</dt>
            <dd>{when(user.created_at)}</dd>
            <dt>Active sessions</dt>
            <dd data-testid="active-session-count">{detail.data.active_session_count}</dd>
            <dt>API keys</dt>
            <dd>{detail.data.api_key_count}</dd>
            <dt>Linked accounts</dt>
            <dd>{detail.data.identities.map((identity) => `${identity.provider_display_name} (${identity.provider_email || 'no e-mail'})`).join(', ') || 'none'}</dd>
            <dt>Organizations</dt>
            <dd>
              {detail.data.org_memberships.length === 0
                ? 'none'
                : detail.data.org_memberships.map((membership, index) => (
                    <span key={membership.org_id}>
                      {index > 0 && ', '}
                      <a href={`#/organizations/${encodeURIComponent(membership.org_id)}`}>{membership.org_name}</a> ({membership.role})
                    </span>
                  ))}
            </dd>
            <dt>Coordination</dt>
            <dd>
              <a href={`#/coordination/${encodeURIComponent(user.id)}`}>Locks, waiting rooms, presence and liveness of this user</a>
            </dd>
            <dt>Status</dt>
            <dd>
              {detail.data.ban ? (
                <span class="badge bad">
                  banned {when(detail.data.ban.banned_at)} by {detail.data.ban.banned_by}: {detail.data.ban.reason}
                </span>
              ) : (
                <span class="badge">active</span>
              )}
            </dd>
          </dl>
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
          <div class="actions">
            {detail.data.ban ? (
              <button type="button" onClick={unban}>
                Unban
              </button>
            ) : (
              <form class="inline" onSubmit={ban}>
                <label>
                  Ban reason
                  <input name="reason" required maxLength={500} value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
                </label>
                <button type="submit" class="danger">
                  Ban
                </button>
              </form>
            )}
            <button type="button" onClick={impersonate}>
              Impersonate
            </button>
          </div>
          {impersonation && <ImpersonationResult result={impersonation} onClose={() => setImpersonation(null)} />}
          <Sessions userId={user.id} version={version} onChange={changed} />
        </>
      )}
    </section>
  );
}
