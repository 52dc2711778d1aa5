import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query, when, type Pagination } from '../users/format.js';
import { errorText } from '../../api.js';
import { Pager } from '../users/pager.js';

interface Lock {
  namespace: string;
  key: string;
  is_locked: boolean;
  lock_id: string | null;
  owner_id: string | null;
  fence_token: number;
  acquired_at: string | null;
  expires_at: string | null;
  time_remaining_ms: number;
}

/**
 * A tenant's locks by namespace: GET /admin/locks/namespaces, then GET /admin/locks for the
 * chosen namespace (each lock's live holder, fence token and expiry), refreshed every 5 s.
 */
export function LocksSection({ tenant }: { tenant: string }) {
  const [namespacePage, setNamespacePage] = useState(1);
  const [chosen, setChosen] = useState<string | null>(null);
  const [page, setPage] = useState(1);
  const namespaces = useLoad(
    () =>
      api<{ pagination: Pagination; namespaces: { namespace: string; key_count: number }[] }>(
        'GET',
        `/admin/locks/namespaces${query({ tenant, page: namespacePage, page_size: 50 })}`,
      ),
    [tenant, namespacePage],
    5000,
  );
  const namespace = chosen ?? namespaces.data?.namespaces[0]?.namespace ?? null;
  const locks = useLoad(
    () =>
      namespace === null
        ? Promise.resolve(undefined)
        : api<{ pagination: Pagination; locks: Lock[] }>('GET', `/admin/locks${query({ tenant, namespace, page, page_size: 50 })}`),
    [tenant, namespace, page],
    5000,
  );
  const error = namespaces.error ?? locks.error;

  return (
    <section aria-label="Locks">
      <h2>Locks</h2>
      {error && (
        <p class="error" role="alert">
          {errorText(error)}
        </p>
      )}
      {namespaces.data && namespaces.data.namespaces.length === 0 && <p class="empty">This tenant has never taken a lock.</p>}
      {namespaces.data && namespaces.data.namespaces.length > 0 && (
        <>
          <div class="tabs" role="tablist" aria-label="Lock namespaces">
            {namespaces.data.namespaces.map((item) => (
              <button
                key={item.namespace}
                type="button"
                role="tab"
                aria-selected={item.namespace === namespace}
                onClick={() => {
                  setChosen(item.namespace);
                  setPage(1);
                }}
              >
                {item.namespace} ({item.key_count})
              </button>
            ))}
          </div>
          <Pager pagination={namespaces.data.pagination.total > namespaces.data.pagination.page_size ? namespaces.data.pagination : undefined} onPage={setNamespacePage} />
          <table aria-label={`Locks in ${namespace}`}>
            <thead>
              <tr>
                <th>Key</th>
                <th>State</th>
                <th>Holder (owner_id)</th>
                <th>Fence token</th>
                <th>Acquired</th>
                <th>Expires</th>
                <th>Remaining</th>
              </tr>
            </thead>
            <tbody>
              {locks.data?.locks.map((lock) => (
                <tr key={lock.key}>
                  <td>
                    <code>{lock.key}</code>
                  </td>
                  <td>{lock.is_locked ? <span class="badge bad">held</span> : <span class="badge">free</span>}</td>
                  <td>{lock.owner_id ?? ''}</td>
                  <td>{lock.fence_token}</td>
                  <td>{lock.acquired_at ? when(lock.acquired_at) : ''}</td>
                  <td>{lock.expires_at ? when(lock.expires_at) : ''}</td>
                  <td>{lock.is_locked ? `${Math.ceil(lock.time_remaining_ms / 1000)} s` : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pager pagination={locks.data?.pagination} onPage={setPage} />
        </>
      )}
    </section>
  );
}
