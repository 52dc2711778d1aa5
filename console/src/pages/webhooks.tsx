import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useLoad } from '../hooks.js';
import { navigate, useRoute } from '../route.js';
import { ActionButton, epochTime, LoadState } from './queues/shared.js';
import { WebhookDetail } from './webhooks/detail.js';

/**
 * Webhooks: the administrator's tenant's endpoints (GET /api/v1/webhooks lists every webhook of
 * the caller's tenant for a platform admin), and any webhook by id (an admin may read and act on
 * every webhook). A webhook's page at #/webhooks/<id>: delivery log, dead-letter queue, test event.
 */
export interface Webhook {
  id: string;
  url: string;
  events: string[];
  headers: Record<string, string> | null;
  active: boolean;
  consecutive_failures: number;
  created_at: number;
  created_by: string;
  updated_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
  last_failure_at: number | null;
}

export function WebhooksPage() {
  const route = useRoute();
  const id = route.split('/')[2];
  if (id) return <WebhookDetail id={decodeURIComponent(id)} />;
  return <WebhookList />;
}

function WebhookList() {
  const [search, setSearch] = useState('');
  const [openId, setOpenId] = useState('');
  const list = useLoad(
    () => api<{ webhooks: Webhook[]; pagination: { total: number } }>('GET', `/api/v1/webhooks?page_size=100&sort_by=created_at&sort_order=desc${search ? `&q=${encodeURIComponent(search)}` : ''}`),
    [search],
    3000,
  );
  return (
    <>
      <h1>Webhooks</h1>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (openId.trim()) navigate(`/webhooks/${encodeURIComponent(openId.trim())}`);
        }}
      >
        <label>
          Open a webhook of any tenant by id <input value={openId} onInput={(e) => setOpenId(e.currentTarget.value)} aria-label="Webhook id" placeholder="wh_…" />
        </label>{' '}
        <button type="submit">Open</button>
      </form>
      <h2>Webhooks of your tenant</h2>
      <label>
        URL contains <input value={search} onInput={(e) => setSearch(e.currentTarget.value)} aria-label="Search webhooks" />
      </label>
      <LoadState error={list.error} loading={!list.data} />
      {list.data && (
        <table aria-label="Webhooks">
          <thead>
            <tr>
              <th>URL</th>
              <th>Events</th>
              <th>State</th>
              <th>Failures in a row</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.data.webhooks.map((hook) => (
              <tr key={hook.id}>
                <td>
                  <a href={`#/webhooks/${encodeURIComponent(hook.id)}`}>{hook.url}</a>
                </td>
                <td>{hook.events.join(', ')}</td>
                <td>{hook.active ? 'active' : hook.disabled_at ? 'disabled' : 'inactive'}</td>
                <td>{hook.consecutive_failures}</td>
                <td>{epochTime(hook.created_at)}</td>
                <td>
                  <ActionButton
                    label="Send test event"
                    disabled={!hook.active}
                    run={() => api('POST', `/api/v1/webhooks/${encodeURIComponent(hook.id)}/test`, {})}
                    describe={() => 'sent'}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
