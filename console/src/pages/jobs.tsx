import { useRef } from 'preact/hooks';
import { api } from '../api.js';
import { useLoad } from '../hooks.js';
import { useRoute } from '../route.js';
import { JobQueueDetail } from './jobs/queue-detail.js';
import { ActionButton, LoadState, Section } from './queues/shared.js';

/**
 * Job queues of every tenant (GET /admin/jobs/queues) with their counts by state; a queue's own
 * page at #/jobs/<tenant>/<queue_id>. Also the two fleet-wide admin calls: cleanup, cancel-bulk.
 */
export interface AdminJobQueue {
  tenant: string;
  id: string;
  name: string;
  owner_id: string;
  active: boolean;
  auto_created: boolean;
  pending_count: number;
  processing_count: number;
  completed_count: number;
  failed_count: number;
  cancelled_count: number;
  retry_policy: { max_attempts: number; backoff_seconds: number };
  dlq_config: { enabled: boolean; max_entries: number };
  concurrency: number;
}

export const queueHref = (queue: { tenant: string; id: string }) => `#/jobs/${encodeURIComponent(queue.tenant)}/${encodeURIComponent(queue.id)}`;

export function JobsPage() {
  const route = useRoute();
  const [, , tenant, queueId] = route.split('/');
  if (tenant && queueId) return <JobQueueDetail tenant={decodeURIComponent(tenant)} queueId={decodeURIComponent(queueId)} />;
  return <QueueList />;
}

function QueueList() {
  const list = useLoad(() => api<{ queues: AdminJobQueue[]; total: number }>('GET', '/admin/jobs/queues?limit=100'), [], 2000);
  return (
    <>
      <h1>Job queues</h1>
      <LoadState error={list.error} loading={!list.data} />
      {list.data && (
        <>
          <p>
            {list.data.total} queue{list.data.total === 1 ? '' : 's'} in every tenant
            {list.data.total > list.data.queues.length ? ` (the first ${list.data.queues.length} shown)` : ''}.
          </p>
          <table aria-label="Job queues">
            <thead>
              <tr>
                <th>Queue</th>
                <th>Tenant</th>
                <th>State</th>
                <th>Scheduled</th>
                <th>Processing</th>
                <th>Completed</th>
                <th>Failed</th>
                <th>Cancelled</th>
              </tr>
            </thead>
            <tbody>
              {list.data.queues.map((queue) => (
                <tr key={`${queue.tenant}/${queue.id}`}>
                  <td>
                    <a href={queueHref(queue)}>{queue.name}</a>
                  </td>
                  <td>{queue.tenant}</td>
                  <td>{queue.active ? 'active' : 'paused'}</td>
                  <td>{queue.pending_count}</td>
                  <td>{queue.processing_count}</td>
                  <td>{queue.completed_count}</td>
                  <td>{queue.failed_count}</td>
                  <td>{queue.cancelled_count}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <FleetActions reload={list.reload} />
    </>
  );
}

/** POST /admin/jobs/cleanup and /admin/jobs/cancel-bulk: every queue of every tenant. */
function FleetActions({ reload }: { reload: () => void }) {
  const retention = useRef<HTMLInputElement>(null);
  const user = useRef<HTMLInputElement>(null);
  return (
    <Section title="Every queue">
      <p>
        <label>
          Remove finished jobs older than (days, empty: each queue's own retention){' '}
          <input type="number" min={0} ref={retention} aria-label="Retention days" />
        </label>{' '}
        <ActionButton
          label="Clean up"
          danger
          confirm="Remove completed, failed and cancelled jobs (and their dead-letter entries) past retention, in every queue of every tenant?"
          describe={(answer: { deleted_count: number }) => `${answer.deleted_count} removed`}
          run={() => api('POST', '/admin/jobs/cleanup', retention.current?.value ? { retention_days: Number(retention.current.value) } : {})}
          done={reload}
        />
      </p>
      <p>
        <label>
          Cancel the scheduled jobs of user id (empty: every user){' '}
          <input ref={user} aria-label="User id" />
        </label>{' '}
        <ActionButton
          label="Cancel jobs"
          danger
          confirm="Cancel every scheduled job of this user (or of every user) in every tenant?"
          describe={(answer: { cancelled_count: number }) => `${answer.cancelled_count} cancelled`}
          run={() => api('POST', '/admin/jobs/cancel-bulk', user.current?.value ? { user_id: user.current.value } : {})}
          done={reload}
        />
      </p>
    </Section>
  );
}
