import { describe, expect, it } from 'vitest';
import { emptyDirectory, stepDirectory, type DirectoryState } from '../../actors/mq/directory-state.js';
import { MQ_DIRECTORY_KIND, MQ_QUEUE_KIND, MQ_TOPIC_KIND, mqDirectoryKey, mqQueueKey, mqTopicKey, type DirectoryMessage, type NotificationEnvelope, type QueueMessage, type TopicMessage } from '../../actors/mq/messages.js';
import { emptyQueue, stepQueue, type QueueState } from '../../actors/mq/queue-state.js';
import { emptyTopic, loadTopic, stepTopic, type TopicState } from '../../actors/mq/topic-state.js';
import type { ActorSend, TurnResult } from '../../runtime/index.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The topic actor (subscriptions, fan-out) and the tenant directory, pure. */
const T0 = 1_700_000_000_000;
const TENANT = 'tenant-1';

/** A topic and the queues it talks to, with the outbox between them delivered by hand. */
function topicWorld() {
  const topicKey = mqTopicKey(TENANT, 'events');
  let topic: TopicState = emptyTopic();
  const records = new Map<string, unknown>();
  const queues = new Map<string, QueueState>();
  let requests = 0;
  const world = {
    get topic() {
      return topic;
    },
    queues,
    step(message: TopicMessage, now = T0, asked = false): TurnResult<TopicState, unknown> {
      const result = stepTopic(topic, message, { ...fixedContext(now, MQ_TOPIC_KIND, topicKey), request_id: asked ? `req-${++requests}` : null });
      topic = result.state;
      for (const write of result.writes ?? []) {
        if (write.value === undefined) records.delete(write.subkey);
        else records.set(write.subkey, structuredClone(write.value));
      }
      return result;
    },
    queueStep(name: string, message: QueueMessage, now = T0) {
      const key = mqQueueKey(TENANT, name);
      const result = stepQueue(queues.get(name) ?? emptyQueue(), message, { ...fixedContext(now, MQ_QUEUE_KIND, key), request_id: null });
      queues.set(name, result.state);
      return result;
    },
    createQueue(name: string, fifo = false) {
      world.queueStep(name, { op: 'create', name, settings: { visibility_timeout_seconds: 30, delay_seconds: 0, message_retention_minutes: 60, fifo, max_receive_count: 0, dead_letter_queue: null } });
    },
    /** Delivers sends to queues (and their answers back to the topic) until none is left. */
    deliver(sends: ActorSend[] | undefined, now = T0): TurnResult<TopicState, unknown>[] {
      const answers: TurnResult<TopicState, unknown>[] = [];
      for (const send of sends ?? []) {
        if (send.kind !== MQ_QUEUE_KIND) continue;
        const name = (JSON.parse(send.key) as [string, string])[1];
        const result = world.queueStep(name, send.message as QueueMessage, now);
        for (const back of result.sends ?? []) if (back.kind === MQ_TOPIC_KIND) answers.push(world.step(back.message as TopicMessage, now));
      }
      return answers;
    },
    subscribe(queue_name: string, filter_policy: Record<string, unknown[]> | null = null, raw_message_delivery = false) {
      const started = world.step({ op: 'subscribe', queue_name, filter_policy, raw_message_delivery }, T0, true);
      expect(started.defer).toBe(true);
      return world.deliver(started.sends)[0];
    },
    reload() {
      topic = loadTopic(topicKey, [...records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
    },
  };
  world.step({ op: 'create', name: 'events', settings: { max_message_size_bytes: 1024, retention_minutes: 5, tags: { team: 'core' } } });
  return world;
}

const bodiesOf = (state: QueueState | undefined) => [...(state?.messages.values() ?? [])].map((m) => m.body);

describe('mq topic: subscriptions', () => {
  it('subscribing is a flow: the topic waits for the queue, then answers the deferred ask', () => {
    const w = topicWorld();
    w.createQueue('audit');
    const answered = w.subscribe('audit', { kind: ['order'] });
    expect(answered.replies).toEqual([{ request_id: 'req-1', reply: { subscription: expect.objectContaining({ queue_name: 'audit', queue_id: expect.any(String) }), created: true } }]);
    expect(w.queues.get('audit')!.subscriptions.get('events')).toMatchObject({ topic_name: 'events', filter_policy: { kind: ['order'] } });
    // The same subscription again: the existing one; other settings: 409.
    expect(w.step({ op: 'subscribe', queue_name: 'audit', filter_policy: { kind: ['order'] }, raw_message_delivery: false }).reply).toMatchObject({ created: false });
    expect(codeOf(() => w.step({ op: 'subscribe', queue_name: 'audit', filter_policy: null, raw_message_delivery: false }))).toBe('mq_subscription_exists');
  });

  it('a missing queue or a FIFO queue refuses, and the refusal reaches the caller', () => {
    const w = topicWorld();
    expect(w.subscribe('nowhere').replies).toEqual([{ request_id: 'req-1', error: expect.objectContaining({ code: 'mq_queue_not_found' }) }]);
    w.createQueue('ordered.fifo', true);
    expect(w.subscribe('ordered.fifo').replies).toEqual([{ request_id: 'req-2', error: expect.objectContaining({ code: 'BAD_REQUEST' }) }]);
    expect(w.topic.subscriptions.size).toBe(0);
    expect(w.topic.pending.size).toBe(0);
  });

  it('a queue deleted while its acceptance is on the way back is not subscribed', () => {
    const w = topicWorld();
    w.createQueue('q');
    const started = w.step({ op: 'subscribe', queue_name: 'q', filter_policy: null, raw_message_delivery: false }, T0, true);
    const accepted = w.queueStep('q', started.sends![0].message as QueueMessage);
    const deleted = w.queueStep('q', { op: 'delete' });
    // The deletion's notice arrives first, then the acceptance.
    w.step(deleted.sends!.find((send) => send.kind === MQ_TOPIC_KIND)!.message as TopicMessage);
    const answered = w.step(accepted.sends![0].message as TopicMessage);
    expect(answered.replies).toEqual([{ request_id: 'req-1', error: expect.objectContaining({ code: 'mq_queue_not_found' }) }]);
    expect(w.topic.subscriptions.size).toBe(0);
    expect(w.topic.pending.size).toBe(0);
  });

  it('a second subscribe of a queue while the first waits for it is a conflict; a topic holds at most 100 subscriptions', () => {
    const w = topicWorld();
    w.step({ op: 'subscribe', queue_name: 'slow', filter_policy: null, raw_message_delivery: false }, T0, true);
    expect(codeOf(() => w.step({ op: 'subscribe', queue_name: 'slow', filter_policy: null, raw_message_delivery: false }, T0, true))).toBe('conflict');
    for (let i = 0; i < 99; i++) {
      w.createQueue(`q${i}`);
      w.subscribe(`q${i}`);
    }
    w.createQueue('one-too-many');
    expect(codeOf(() => w.step({ op: 'subscribe', queue_name: 'one-too-many', filter_policy: null, raw_message_delivery: false }))).toBe('mq_limit_reached');
  });

  it('unsubscribe and a deleted queue remove the subscription on both sides', () => {
    const w = topicWorld();
    w.createQueue('a');
    w.createQueue('b');
    w.subscribe('a');
    w.subscribe('b');
    const removed = w.step({ op: 'unsubscribe', queue_name: 'a' });
    w.deliver(removed.sends);
    expect(w.queues.get('a')!.subscriptions.size).toBe(0);
    const gone = w.queueStep('b', { op: 'delete' });
    expect(gone.sends).toContainEqual(expect.objectContaining({ kind: MQ_TOPIC_KIND, message: expect.objectContaining({ op: 'queue-gone', queue_name: 'b' }) }));
    w.step(gone.sends!.find((send) => send.kind === MQ_TOPIC_KIND)!.message as TopicMessage);
    expect(w.topic.subscriptions.size).toBe(0);
    expect(codeOf(() => w.step({ op: 'unsubscribe', queue_name: 'a' }))).toBe('mq_subscription_not_found');
  });
});

describe('mq topic: publish', () => {
  it('fans out one outbox message per matching queue; delivered_to counts them', () => {
    const w = topicWorld();
    for (const name of ['all', 'orders', 'big']) w.createQueue(name);
    w.subscribe('all', null, true);
    w.subscribe('orders', { kind: ['order'] }, true);
    w.subscribe('big', { amount: [{ numeric: ['>=', 100] }] }, true);
    const published = w.step({ op: 'publish', body: 'p1', attributes: { kind: 'order', amount: 5 } });
    expect(published.reply).toMatchObject({ delivered_to: 2, duplicate: false });
    expect(published.sends!.map((send) => send.key).sort()).toEqual([mqQueueKey(TENANT, 'all'), mqQueueKey(TENANT, 'orders')].sort());
    w.deliver(published.sends);
    expect(bodiesOf(w.queues.get('all'))).toEqual(['p1']);
    expect(bodiesOf(w.queues.get('orders'))).toEqual(['p1']);
    expect(bodiesOf(w.queues.get('big'))).toEqual([]);
    expect(w.step({ op: 'get' }).reply).toMatchObject({ message_count: 1, subscription_count: 3 });
  });

  it('raw delivery passes body and attributes; otherwise the queue gets the envelope', () => {
    const w = topicWorld();
    w.createQueue('raw');
    w.createQueue('wrapped');
    w.subscribe('raw', null, true);
    w.subscribe('wrapped', null, false);
    const published = w.step({ op: 'publish', body: 'hello', attributes: { a: 1 } }, T0 + 5);
    w.deliver(published.sends);
    const raw = [...w.queues.get('raw')!.messages.values()][0];
    expect(raw).toMatchObject({ body: 'hello', attributes: { a: 1 } });
    const wrapped = [...w.queues.get('wrapped')!.messages.values()][0];
    expect(wrapped.attributes).toEqual({});
    expect(JSON.parse(wrapped.body) as NotificationEnvelope).toEqual({
      type: 'Notification',
      message_id: (published.reply as { message_id: string }).message_id,
      topic_name: 'events',
      body: 'hello',
      attributes: { a: 1 },
      timestamp: new Date(T0 + 5).toISOString(),
    });
  });

  it('a copy for a queue deleted and re-created since the subscription is dropped', () => {
    const w = topicWorld();
    w.createQueue('q');
    w.subscribe('q', null, true);
    const published = w.step({ op: 'publish', body: 'x', attributes: {} });
    w.queueStep('q', { op: 'delete' });
    w.createQueue('q');
    w.deliver(published.sends);
    expect(bodiesOf(w.queues.get('q'))).toEqual([]);
  });

  it('a publish deduplication_id is remembered for retention_minutes, across a reload', () => {
    const w = topicWorld();
    w.createQueue('q');
    w.subscribe('q', null, true);
    const first = w.step({ op: 'publish', body: 'x', attributes: {}, deduplication_id: 'd' }).reply as { message_id: string };
    w.reload();
    const again = w.step({ op: 'publish', body: 'x', attributes: {}, deduplication_id: 'd' }, T0 + 299_999);
    expect(again.reply).toEqual({ message_id: first.message_id, delivered_to: 1, duplicate: true });
    expect(again.sends ?? []).toEqual([]);
    expect(w.step({ op: 'publish', body: 'x', attributes: {}, deduplication_id: 'd' }, T0 + 300_000).reply).toMatchObject({ duplicate: false });
  });

  it('refuses a body over max_message_size_bytes, and everything on a deleted topic', () => {
    const w = topicWorld();
    expect(codeOf(() => w.step({ op: 'publish', body: 'x'.repeat(1025), attributes: {} }))).toBe('BAD_REQUEST');
    w.step({ op: 'delete' });
    expect(codeOf(() => w.step({ op: 'publish', body: 'x', attributes: {} }))).toBe('mq_topic_not_found');
    expect(codeOf(() => w.step({ op: 'get' }))).toBe('mq_topic_not_found');
  });

  it('deleting the topic detaches its queues', () => {
    const w = topicWorld();
    w.createQueue('q');
    w.subscribe('q');
    const deleted = w.step({ op: 'delete' });
    expect(deleted.sends).toContainEqual({ kind: MQ_DIRECTORY_KIND, key: mqDirectoryKey(TENANT), message: expect.objectContaining({ op: 'remove', type: 'topic' }) });
    w.deliver(deleted.sends);
    expect(w.queues.get('q')!.subscriptions.size).toBe(0);
  });
});

describe('mq directory', () => {
  const run = (state: DirectoryState, message: DirectoryMessage) => stepDirectory(state, message, fixedContext(T0, MQ_DIRECTORY_KIND, mqDirectoryKey(TENANT)));
  const entry = (name: string, created_at: number) => ({ name, id: `id-${name}`, created_at });

  it('applies each change once, in revision order, whatever the delivery order', () => {
    const state = emptyDirectory();
    run(state, { op: 'remove', type: 'queue', name: 'a', rev: 2 });
    run(state, { op: 'upsert', type: 'queue', entry: entry('a', 1), rev: 1 });
    expect(state.live.queue.size).toBe(0);
    run(state, { op: 'upsert', type: 'queue', entry: entry('a', 3), rev: 3 });
    expect(state.live.queue.get('a')?.rev).toBe(3);
  });

  it('lists with q (case-insensitive) and sort_by, paginated', () => {
    const state = emptyDirectory();
    ['beta', 'Alpha', 'gamma', 'alphabet'].forEach((name, i) => run(state, { op: 'upsert', type: 'queue', entry: entry(name, T0 + i), rev: 1 }));
    run(state, { op: 'upsert', type: 'topic', entry: entry('t', T0), rev: 1 });
    const list = (message: Partial<Extract<DirectoryMessage, { op: 'list' }>>) =>
      (run(state, { op: 'list', type: 'queue', sort_by: 'name', page: 1, page_size: 20, ...message }).reply as { total: number; entries: { name: string }[] });
    expect(list({}).entries.map((e) => e.name)).toEqual(['Alpha', 'alphabet', 'beta', 'gamma']);
    expect(list({ sort_by: '-created_at' }).entries.map((e) => e.name)).toEqual(['alphabet', 'gamma', 'Alpha', 'beta']);
    expect(list({ q: 'ALPHA' })).toEqual({ total: 2, entries: [expect.objectContaining({ name: 'Alpha' }), expect.objectContaining({ name: 'alphabet' })] });
    expect(list({ page: 2, page_size: 3 }).entries.map((e) => e.name)).toEqual(['gamma']);
  });
});
