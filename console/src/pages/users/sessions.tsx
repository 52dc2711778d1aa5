import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { confirmAction } from '../../confirm.js';
import { useLoad } from '../../hooks.js';
import { query, when, type Pagination } from './format.js';
import { errorText } from '../../api.js';
import { Pager } from './pager.js';
import type { Session } from './types.js';

/**
 * The user's sessions (GET /admin/auth/sessions?user_id=, newest first; ended and expired ones
 * stay listed for 7 days) and their revocation (DELETE /admin/auth/sessions/{id}).
 * `version` changes when the detail above acted (a ban ends every session): the list reloads.
 */
export function Sessions({ userId, version, onChange }: { userId: string; version: number; onChange: () => void }) {
  const [page, setPage] = useState(1);
  const [activeOnly, setActiveOnly] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const list = useLoad(
    () => api<{ pagination: Pagination; sessions: Session[] }>('GET', `/admin/auth/sessions${query({ user_id: userId, page, page_size: 25 })}`),
    [userId, page, version],
  );
  const sessions = (list.data?.sessions ?? []).filter((session) => !activeOnly || session.active);

  async function revoke(session: Session) {
    if (!(await confirmAction(`End session ${session.id}? Its access and refresh tokens stop working at once.`, 'End session'))) return;
    setError(null);
    try {
      await api('DELETE', `/admin/auth/sessions/${encodeURIComponent(session.id)}`);
      list.reload();
      onChange();
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <section>
      <h2>Sessions</h2>
      <label class="inline">
        <input type="checkbox" checked={activeOnly} onChange={(e) => setActiveOnly(e.currentTarget.checked)} /> Active sessions only (on this page)
      </label>
      {(error || list.error) && (
        <p class="error" role="alert">
          {error ?? errorText(list.error)}
        </p>
      )}
      <table aria-label="Sessions">
        <thead>
          <tr>
            <th>Session</th>
            <th>State</th>
            <th>Created</th>
            <th>Expires</th>
            <th>IP address</th>
            <th>User agent</th>
            <th>Impersonated by</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {sessions.map((session) => (
            <tr key={session.id}>
              <td>
                <code>{session.id}</code>
              </td>
              <td>{session.active ? 'active' : 'ended'}</td>
              <td>{when(session.created_at)}</td>
              <td>{when(session.expires_at)}</td>
              <td>{session.ip_address}</td>
              <td class="clip" title={session.user_agent}>
                {session.user_agent}
              </td>
              <td>{session.impersonated_by ?? ''}</td>
              <td>
                {session.active && (
                  <button type="button" class="danger" onClick={() => revoke(session)}>
                    End
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data && sessions.length === 0 && <p class="empty">{activeOnly ? 'No active session.' : 'No session.'}</p>}
      <Pager pagination={list.data?.pagination} onPage={setPage} />
    </section>
  );
}
