import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query, type Pagination } from '../users/format.js';
import { errorText } from '../../api.js';
import { Pager } from '../users/pager.js';

interface ContextWithOccupancy {
  context: { id: string; kind: string; resource_id: string; capacity: { max_active: number } };
  occupancy: { active: number; idle: number; stale: number; observers: number; total: number; occupancy_state: string; available_agents: number };
}

/** A tenant's presence contexts with their occupancy now (GET /admin/presence/contexts), every 5 s. */
export function PresenceSection({ tenant }: { tenant: string }) {
  const [page, setPage] = useState(1);
  const contexts = useLoad(
    () => api<{ pagination: Pagination; contexts: ContextWithOccupancy[] }>('GET', `/admin/presence/contexts${query({ tenant, page, page_size: 50 })}`),
    [tenant, page],
    5000,
  );
  return (
    <section aria-label="Presence contexts">
      <h2>Presence contexts</h2>
      {contexts.error && (
        <p class="error" role="alert">
          {errorText(contexts.error)}
        </p>
      )}
      {contexts.data && contexts.data.contexts.length === 0 && <p class="empty">This tenant has no presence context.</p>}
      {contexts.data && contexts.data.contexts.length > 0 && (
        <table aria-label="Presence contexts">
          <thead>
            <tr>
              <th>Context</th>
              <th>Kind</th>
              <th>Active</th>
              <th>Idle</th>
              <th>Stale</th>
              <th>Observers</th>
              <th>Available agents</th>
              <th>Capacity</th>
            </tr>
          </thead>
          <tbody>
            {contexts.data.contexts.map(({ context, occupancy }) => (
              <tr key={context.id}>
                <td>
                  <code>{context.id}</code>
                </td>
                <td>{context.kind}</td>
                <td>{occupancy.active}</td>
                <td>{occupancy.idle}</td>
                <td>{occupancy.stale}</td>
                <td>{occupancy.observers}</td>
                <td>{occupancy.available_agents}</td>
                <td>
                  {occupancy.total - occupancy.observers} / {context.capacity.max_active} ({occupancy.occupancy_state})
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager pagination={contexts.data?.pagination} onPage={setPage} />
    </section>
  );
}
