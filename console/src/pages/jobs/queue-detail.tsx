import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import type { AdminJobQueue } from '../jobs.js';
import { ActionButton, epochTime, Json, LoadState, Section } from '../queues/shared.js';

/**
 * One job queue of any tenant, through /admin/jobs/queues/{tenant}/{queue_id}/...: its counts,
 * pause and resume, its jobs by state with a job's detail, and its dead-letter queue with redrive.
 */
export interface Job {
  id: string;
  queue: string;
  user_id: string;
  status: 'scheduled' | 'processing' | 'completed' | 'failed' | 'cancelled';
  priority: string;
  payload: unknown;
  attempts: number;
  retry_policy: { max_attempts: number; backoff_seconds: number };
  scheduled_at: number;
  created_at: string;
  last_attempt_at: number | null;
  completed_at: number | null;
  error: string | null;
  webhook_config: { url: string; headers: Record<string, string> };
}

interface DlqEntry {
  entry_id: string;
  job_id: string;
  dead_lettered_at: number;
  error: string;
  job: Job;
}

const STATUSES = ['', 'scheduled', 'processing', 'completed', 'failed', 'cancelled'] as const;

export function JobQueueDetail({ tenant, queueId }: { tenant: string; queueId: string }) {
  const base = `/admin/jobs/queues/${encodeURIComponent(tenant)}/${encodeURIComponent(queueId)}`;
  const [status, setStatus] = useState('');
  const [selected, setSelected] = useState<Job | null>(null);
  const queue = useLoad(() => api<AdminJobQueue>('GET', base), [base], 2000);
  const jobs = useLoad(() => api<{ jobs: Job[]; total: number }>('GET', `${base}/jobs?limit=100${status ? `&status=${status}` : ''}`), [base, status], 2000);
  const dlq = useLoad(() => api<{ entries: DlqEntry[]; total: number }>('GET', `${base}/dlq?limit=100`), [base], 2000);
  const reload = () => {
    queue.reload();
    jobs.reload();
    dlq.reload();
  };
  const q = queue.data;

  return (
    <>
      <p>
        <a href="#/jobs">← Job queues</a>
      </p>
      <h1>Job queue {q?.name ?? queueId}</h1>
      <LoadState error={queue.error} loading={queue.data === undefined} />
      {q && (
        <>
          <p>
            Tenant {q.tenant}, owner {q.owner_id}. <strong>{q.active ? 'Active' : 'Paused'}</strong>. Retry: {q.retry_policy.max_attempts} attempts,
            backoff {q.retry_policy.backoff_seconds} s; dead-letter queue {q.dlq_config.enabled ? 'on' : 'off'}; concurrency {q.concurrency}.
          </p>
          <table aria-label="Counts by state">
            <thead>
              <tr>
                <th>Scheduled</th>
                <th>Processing</th>
                <th>Completed</th>
                <th>Failed</th>
                <th>Cancelled</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <td>{q.pending_count}</td>
                <td>{q.processing_count}</td>
                <td>{q.completed_count}</td>
                <td>{q.failed_count}</td>
                <td>{q.cancelled_count}</td>
              </tr>
            </tbody>
          </table>
          <p>
            {q.active ? (
              <ActionButton label="Pause" danger confirm={`Pause queue ${q.name}? It starts no job until resumed.`} run={() => api('POST', `${base}/pause`)} done={reload} />
            ) : (
              <ActionButton label="Resume" run={() => api('POST', `${base}/resume`)} done={reload} />
            )}
          </p>
        </>
      )}

      <Section title="Dead-letter queue">
        <LoadState error={dlq.error} loading={!dlq.data} />
        {dlq.data && (
          <>
            <p>
              {dlq.data.total} dead-lettered job{dlq.data.total === 1 ? '' : 's'}.{' '}
              <ActionButton
                label="Redrive all"
                danger
                disabled={dlq.data.total === 0}
                confirm="Return every dead-lettered job of this queue to the schedule, due now, attempts from 0?"
                run={() => api('POST', `${base}/dlq/redrive`, {})}
                describe={(answer: { redriven_count: number }) => `${answer.redriven_count} redriven`}
                done={reload}
              />
            </p>
            <table aria-label="Dead-lettered jobs">
              <thead>
                <tr>
                  <th>Job</th>
                  <th>Dead-lettered</th>
                  <th>Attempts</th>
                  <th>Error</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {dlq.data.entries.map((entry) => (
                  <tr key={entry.entry_id}>
                    <td>
                      <button type="button" class="link" onClick={() => setSelected(entry.job)}>
                        {entry.job_id}
                      </button>
                    </td>
                    <td>{epochTime(entry.dead_lettered_at)}</td>
                    <td>{entry.job.attempts}</td>
                    <td>{entry.error}</td>
                    <td>
                      <ActionButton
                        label="Redrive"
                        danger
                        confirm={`Redrive job ${entry.job_id}: due now, attempts from 0?`}
                        run={() => api('POST', `${base}/dlq/redrive`, { job_ids: [entry.job_id] })}
                        done={reload}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </>
        )}
      </Section>

      <Section title="Jobs">
        <label>
          State{' '}
          <select value={status} onChange={(e) => setStatus(e.currentTarget.value)} aria-label="Job state">
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s || 'any'}
              </option>
            ))}
          </select>
        </label>
        <LoadState error={jobs.error} loading={!jobs.data} />
        {jobs.data && (
          <table aria-label="Jobs">
            <thead>
              <tr>
                <th>Job</th>
                <th>State</th>
                <th>Priority</th>
                <th>Attempts</th>
                <th>Scheduled at</th>
              </tr>
            </thead>
            <tbody>
              {jobs.data.jobs.map((job) => (
                <tr key={job.id}>
                  <td>
                    <button type="button" class="link" onClick={() => setSelected(job)}>
                      {job.id}
                    </button>
                  </td>
                  <td>{job.status}</td>
                  <td>{job.priority}</td>
                  <td>
                    {job.attempts} / {job.retry_policy.max_attempts}
                  </td>
                  <td>{epochTime(job.scheduled_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {jobs.data && jobs.data.total > jobs.data.jobs.length && <p>The first {jobs.data.jobs.length} of {jobs.data.total} shown.</p>}
      </Section>

      {selected && <JobDetail job={(jobs.data?.jobs.find((j) => j.id === selected.id)) ?? selected} close={() => setSelected(null)} />}
    </>
  );
}

/** A job as the queue keeps it: its attempts so far, the last one's time and error. */
function JobDetail({ job, close }: { job: Job; close: () => void }) {
  return (
    <Section title={`Job ${job.id}`}>
      <dl class="detail">
        <dt>State</dt>
        <dd data-testid="job-state">{job.status}</dd>
        <dt>Attempts</dt>
        <dd>
          {job.attempts} of {job.retry_policy.max_attempts} (backoff {job.retry_policy.backoff_seconds} s, doubling)
        </dd>
        <dt>Last attempt</dt>
        <dd>{epochTime(job.last_attempt_at)}</dd>
        <dt>Last error</dt>
        <dd>{job.error ?? '—'}</dd>
        <dt>Scheduled at</dt>
        <dd>{epochTime(job.scheduled_at)}</dd>
        <dt>Finished at</dt>
        <dd>{epochTime(job.completed_at)}</dd>
        <dt>Created</dt>
        <dd>{new Date(job.created_at).toLocaleString()}</dd>
        <dt>Scheduled by</dt>
        <dd>{job.user_id}</dd>
        <dt>Target</dt>
        <dd>{job.webhook_config.url}</dd>
        <dt>Payload</dt>
        <dd>
          <Json value={job.payload} />
        </dd>
      </dl>
      <button type="button" onClick={close}>
        Close
      </button>
    </Section>
  );
}
