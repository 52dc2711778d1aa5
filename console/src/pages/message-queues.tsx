import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useLoad } from '../hooks.js';
import { ActionButton, LoadState } from './queues/shared.js';

/**
 * Message queues of the administrator's tenant (the mq API is per tenant: GET /api/v1/mq/queues),
 * with their counts (visible, in flight, delayed). A queue another queue names as its
 * dead_letter_queue is shown as a DLQ, with redrive back to its source; any queue can be purged
 * or deleted. Every destructive action is confirmed first.
 */
interface MqQueue {
  queue_id: string;
  name: string;
  created_at: string;
  approximate_message_count: number;
  approximate_not_visible_count: number;
  approximate_delayed_count: number;
  fifo: boolean;
  dead_letter_queue: string | null;
  subscriptions: string[];
}

export function MessageQueuesPage() {
  const [search, setSearch] = useState('');
  const list = useLoad(
    () => api<{ queues: MqQueue[]; pagination: { total: number } }>('GET', `/api/v1/mq/queues?page_size=100${search ? `&q=${encodeURIComponent(search)}` : ''}`),
    [search],
    2000,
  );
  const queues = list.data?.queues ?? [];
  // Which queues send their dead letters to each queue: those are its redrive destinations.
  const sourcesOf = (name: string) => queues.filter((q) => q.dead_letter_queue === name).map((q) => q.name);

  return (
    <>
      <h1>Message queues</h1>
      <p>The queues of your tenant (the message queue API is per tenant).</p>
      <label>
        Name contains <input value={search} onInput={(e) => setSearch(e.currentTarget.value)} aria-label="Search queues" />
      </label>
      <LoadState error={list.error} loading={!list.data} />
      {list.data && (
        <>
          <p>
            {list.data.pagination.total} queue{list.data.pagination.total === 1 ? '' : 's'}
            {list.data.pagination.total > queues.length ? ` (the first ${queues.length} shown)` : ''}.
          </p>
          <table aria-label="Message queues">
            <thead>
              <tr>
                <th>Queue</th>
                <th>Type</th>
                <th>Visible</th>
                <th>In flight</th>
                <th>Delayed</th>
                <th>Dead letters go to</th>
                <th>Topics</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {queues.map((queue) => (
                <QueueRow key={queue.queue_id} queue={queue} sources={sourcesOf(queue.name)} reload={list.reload} />
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}

function QueueRow({ queue, sources, reload }: { queue: MqQueue; sources: string[]; reload: () => void }) {
  const [destination, setDestination] = useState(sources[0] ?? '');
  const target = sources.includes(destination) ? destination : sources[0];
  const path = `/api/v1/mq/queues/${encodeURIComponent(queue.name)}`;
  return (
    <tr>
      <td>
        {queue.name}
        {sources.length > 0 && <span class="tag"> dead-letter queue of {sources.join(', ')}</span>}
      </td>
      <td>{queue.fifo ? 'FIFO' : 'standard'}</td>
      <td>{queue.approximate_message_count}</td>
      <td>{queue.approximate_not_visible_count}</td>
      <td>{queue.approximate_delayed_count}</td>
      <td>{queue.dead_letter_queue ?? '—'}</td>
      <td>{queue.subscriptions.join(', ') || '—'}</td>
      <td>
        <div class="actions">
          {sources.length > 0 && (
            <>
              {sources.length > 1 && (
                <select value={target} onChange={(e) => setDestination(e.currentTarget.value)} aria-label={`Redrive ${queue.name} to`}>
                  {sources.map((source) => (
                    <option key={source} value={source}>
                      {source}
                    </option>
                  ))}
                </select>
              )}
              <ActionButton
                label="Redrive"
                danger
                disabled={queue.approximate_message_count + queue.approximate_delayed_count === 0}
                confirm={`Move the messages of ${queue.name} that are not in flight (up to 1,000) back to ${target}?`}
                run={() => api('POST', `${path}/redrive`, { destination: target })}
                describe={(answer: { moved: number; remaining: number }) => `${answer.moved} moved, ${answer.remaining} left`}
                done={reload}
              />
            </>
          )}
          <ActionButton
            label="Purge"
            danger
            confirm={`Delete every message of ${queue.name}, in flight and delayed too?`}
            run={() => api('POST', `${path}/purge`)}
            describe={(answer: { messages_purged: number }) => `${answer.messages_purged} purged`}
            done={reload}
          />
          <ActionButton label="Delete" danger confirm={`Delete queue ${queue.name} with its messages?`} run={() => api('DELETE', path)} done={reload} />
        </div>
      </td>
    </tr>
  );
}
