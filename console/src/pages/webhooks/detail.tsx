import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { navigate } from '../../route.js';
import { ActionButton, epochTime, Json, LoadState, Section } from '../queues/shared.js';
import type { Webhook } from '../webhooks.js';

/**
 * One webhook through /api/v1/webhooks/{id}/...: its state, "send test event" (a real
 * test.webhook event through the normal delivery path), the delivery log with each attempt's
 * request and response, the dead-letter queue with redrive and purge, enable, deactivate, delete.
 */
interface LoggedMessage {
  headers: Record<string, string>;
  body: string;
  body_truncated: boolean;
}
interface Delivery {
  attempt_number: number;
  error: string | null;
  event_id: string;
  event_type: string;
  response_time_ms: number;
  status_code: number | null;
  success: boolean;
  timestamp: number;
  request: (LoggedMessage & { method: string; url: string }) | null;
  response: (LoggedMessage & { status_code: number }) | null;
}
interface DlqEntry {
  attempt_count: number;
  dlq_at: number;
  error: string;
  event_id: string;
  event_type: string;
}

export function WebhookDetail({ id }: { id: string }) {
  const base = `/api/v1/webhooks/${encodeURIComponent(id)}`;
  const hook = useLoad(() => api<Webhook>('GET', base), [base], 3000);
  const log = useLoad(() => api<{ deliveries: Delivery[]; total: number }>('GET', `${base}/deliveries?limit=100`), [base], 2000);
  const dlq = useLoad(() => api<{ entries: DlqEntry[]; total: number }>('GET', `${base}/dlq?limit=100`), [base], 3000);
  const [open, setOpen] = useState<string | null>(null);
  const reload = () => {
    hook.reload();
    log.reload();
    dlq.reload();
  };
  const h = hook.data;

  return (
    <>
      <p>
        <a href="#/webhooks">← Webhooks</a>
      </p>
      <h1>Webhook {id}</h1>
      <LoadState error={hook.error} loading={!hook.data} />
      {h && (
        <>
          <dl class="detail">
            <dt>URL</dt>
            <dd>{h.url}</dd>
            <dt>Events</dt>
            <dd>{h.events.join(', ')}</dd>
            <dt>State</dt>
            <dd>
              {h.active ? 'active' : 'inactive'}
              {h.disabled_reason ? ` (disabled ${epochTime(h.disabled_at)}: ${h.disabled_reason})` : ''}
            </dd>
            <dt>Failures in a row</dt>
            <dd>{h.consecutive_failures}</dd>
            <dt>Created by</dt>
            <dd>
              {h.created_by}, {epochTime(h.created_at)}
            </dd>
            <dt>Custom headers</dt>
            <dd>{h.headers ? Object.entries(h.headers).map(([name, value]) => `${name}: ${value}`).join('; ') : '—'}</dd>
          </dl>
          <p>
            <ActionButton
              label="Send test event"
              disabled={!h.active}
              run={() => api('POST', `${base}/test`, {})}
              describe={() => 'test.webhook sent: its delivery appears in the log'}
              done={() => setTimeout(reload, 300)}
            />{' '}
            {h.active ? (
              <ActionButton
                label="Deactivate"
                danger
                confirm="Deactivate this webhook? Deliveries stop; events waiting for delivery move to the dead-letter queue."
                run={() => api('PATCH', base, { active: false })}
                done={reload}
              />
            ) : (
              <ActionButton label="Enable" run={() => api('POST', `${base}/enable`)} done={reload} />
            )}{' '}
            <ActionButton
              label="Delete"
              danger
              confirm="Delete this webhook with its pending deliveries, delivery log and dead-letter queue?"
              run={() => api('DELETE', base)}
              done={() => navigate('/webhooks')}
            />
          </p>
        </>
      )}

      <Section title="Delivery log">
        <LoadState error={log.error} loading={!log.data} />
        {log.data && (
          <>
            <p>{log.data.total} attempt{log.data.total === 1 ? '' : 's'} kept (the newest 100), newest first.</p>
            <table aria-label="Deliveries">
              <thead>
                <tr>
                  <th>Time</th>
                  <th>Event</th>
                  <th>Type</th>
                  <th>Attempt</th>
                  <th>Status</th>
                  <th>Time taken</th>
                  <th>Error</th>
                </tr>
              </thead>
              <tbody>
                {log.data.deliveries.map((delivery) => {
                  const key = `${delivery.event_id}#${delivery.attempt_number}`;
                  return [
                    <tr key={key}>
                      <td>{epochTime(delivery.timestamp)}</td>
                      <td>
                        <button type="button" class="link" aria-expanded={open === key} onClick={() => setOpen(open === key ? null : key)}>
                          {delivery.event_id}
                        </button>
                      </td>
                      <td>{delivery.event_type}</td>
                      <td>{delivery.attempt_number}</td>
                      <td>{delivery.status_code ?? '—'}</td>
                      <td>{delivery.response_time_ms} ms</td>
                      <td>{delivery.error ?? ''}</td>
                    </tr>,
                    open === key && (
                      <tr key={`${key}:detail`}>
                        <td colSpan={7}>
                          <AttemptDetail delivery={delivery} />
                        </td>
                      </tr>
                    ),
                  ];
                })}
              </tbody>
            </table>
          </>
        )}
      </Section>

      <Section title="Dead-letter queue">
        <LoadState error={dlq.error} loading={!dlq.data} />
        {dlq.data && (
          <>
            <p>
              {dlq.data.total} dead-lettered event{dlq.data.total === 1 ? '' : 's'}.{' '}
              <ActionButton
                label="Purge"
                danger
                disabled={dlq.data.total === 0}
                confirm="Remove every dead-lettered event of this webhook? They cannot be redriven afterwards."
                run={() => api('DELETE', `${base}/dlq`)}
                describe={(answer: { purged: number }) => `${answer.purged} purged`}
                done={reload}
              />
            </p>
            <table aria-label="Dead-lettered events">
              <thead>
                <tr>
                  <th>Event</th>
                  <th>Type</th>
                  <th>Dead-lettered</th>
                  <th>Attempts</th>
                  <th>Error</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {dlq.data.entries.map((entry) => (
                  <tr key={entry.event_id}>
                    <td>{entry.event_id}</td>
                    <td>{entry.event_type}</td>
                    <td>{epochTime(entry.dlq_at)}</td>
                    <td>{entry.attempt_count}</td>
                    <td>{entry.error}</td>
                    <td>
                      <ActionButton
                        label="Redrive"
                        danger
                        confirm={`Deliver event ${entry.event_id} again, as redrive_${entry.event_id}, with a fresh attempt budget?`}
                        run={() => api('POST', `${base}/dlq/${encodeURIComponent(entry.event_id)}/redrive`)}
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
    </>
  );
}

/** One attempt's request and response, as the delivery log keeps them. */
function AttemptDetail({ delivery }: { delivery: Delivery }) {
  const { request, response } = delivery;
  return (
    <div class="attempt" aria-label={`Attempt ${delivery.attempt_number} of ${delivery.event_id}`} role="group">
      <div>
        <h3>Request</h3>
        {request ? (
          <>
            <p>
              {request.method} {request.url}
            </p>
            <Json value={request.headers} />
            <Json value={request.body + (request.body_truncated ? '\n… (cut)' : '')} />
          </>
        ) : (
          <p>Not kept for this attempt.</p>
        )}
      </div>
      <div>
        <h3>Response</h3>
        {response ? (
          <>
            <p>HTTP {response.status_code}</p>
            <Json value={response.headers} />
            <Json value={response.body + (response.body_truncated ? '\n… (cut)' : '')} />
          </>
        ) : (
          <p>No answer{delivery.error ? `: ${delivery.error}` : ''}.</p>
        )}
      </div>
    </div>
  );
}
