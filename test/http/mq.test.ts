import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** The message queue over the real socket (spec doc 1 §4.6; conventions "Message queue data plane"; docs/api/mq.md). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400 } });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
let nameCounter = 0;
const uniqueName = (prefix: string) => `${prefix}-${++nameCounter}`;
const api = (method: string, path: string, body?: unknown, token = alice.token) => t.request(method, `/api/v1/mq${path}`, { token, body });


/** Waits (bounded, real time) for what follows a commit through the outbox. */
async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 500; i++) {
    const value = await check();
    if (value) return value;
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 4));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Moves the manual clock on in steps, letting alarms' turns and the route's next asks run, until `done`. */
async function advanceUntil(done: () => boolean, step_ms: number, steps_max: number): Promise<void> {
  for (let i = 0; i < steps_max && !done(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 40));
    clock().advance(step_ms);
    await settle(5);
  }
  for (let i = 0; i < 100 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function createQueue(body: Record<string, unknown>, token = alice.token) {
  const res = await api('POST', '/queues', body, token);
  expect(res.status, res.text).toBe(201);
  return res.body;
}
async function send(queue: string, body: Record<string, unknown> = { body: 'hello' }) {
  const res = await api('POST', `/queues/${queue}/messages`, body);
  expect(res.status, res.text).toBe(201);
  return res.body.message_id as string;
}
async function receive(queue: string, body: Record<string, unknown> = {}) {
  const res = await api('POST', `/queues/${queue}/receive`, body);
  expect(res.status, res.text).toBe(200);
  return res.body.messages as { message_id: string; receipt_handle: string; body: string; attributes: Record<string, unknown>; receive_count: number; sent_at: string; group_id: string | null }[];
}

describe('mq queues', () => {
  it('creates a queue with defaults (201), returns it again for the same settings (200), 409 for others', async () => {
    const name = uniqueName('orders');
    const created = await createQueue({ name });
    expect(created).toEqual({
      queue_id: expect.any(String),
      name,
      created_at: expect.stringMatching(/Z$/),
      visibility_timeout_seconds: 30,
      delay_seconds: 0,
      message_retention_minutes: 5760,
      fifo: false,
      max_receive_count: 0,
      dead_letter_queue: null,
    });
    const again = await api('POST', '/queues', { name });
    expect(again.status).toBe(200);
    expect(again.body.queue_id).toBe(created.queue_id);
    expectError(await api('POST', '/queues', { name, delay_seconds: 5 }), 409, 'mq_queue_exists');
    expect((await createQueue({ name: `${uniqueName('jobs')}.fifo` })).fifo).toBe(true);
  });

  it('fifo must agree with the name (as SQS): a FIFO queue ends in .fifo, a standard queue does not', async () => {
    const plain = uniqueName('fq');
    const suffixed = `${uniqueName('f')}.fifo`;
    const mismatchedFifo = await api('POST', '/queues', { name: plain, fifo: true });
    expectError(mismatchedFifo, 400, 'BAD_REQUEST');
    expect(mismatchedFifo.body.details).toEqual([{ field: 'body.fifo', message: `is true but the name "${plain}" does not end in .fifo: a FIFO queue's name must end in .fifo` }]);
    expect(mismatchedFifo.body.message).toBe(`body.fifo ${mismatchedFifo.body.details[0].message}`);
    const mismatchedStandard = await api('POST', '/queues', { name: suffixed, fifo: false });
    expectError(mismatchedStandard, 400, 'BAD_REQUEST');
    expect(mismatchedStandard.body.details).toEqual([{ field: 'body.fifo', message: expect.stringMatching(/ends in \.fifo/) }]);
    // Neither was created.
    expectError(await api('GET', `/queues/${plain}`), 404, 'mq_queue_not_found');
    expectError(await api('GET', `/queues/${suffixed}`), 404, 'mq_queue_not_found');
    // Agreeing or omitted: the name decides.
    expect((await createQueue({ name: suffixed, fifo: true })).fifo).toBe(true);
    expect((await createQueue({ name: plain, fifo: false })).fifo).toBe(false);
    expect((await createQueue({ name: `${uniqueName('g')}.fifo` })).fifo).toBe(true);
  });

  it('refuses bad settings with 400', async () => {
    for (const body of [
      {},
      { name: '' },
      { name: 'has space' },
      { name: 'x'.repeat(81) },
      { name: 'ok', visibility_timeout_seconds: -1 },
      { name: 'ok', visibility_timeout_seconds: 43_201 },
      { name: 'ok', delay_seconds: 901 },
      { name: 'ok', message_retention_minutes: 0 },
      { name: 'ok', dead_letter_queue: 'dlq' },
      { name: 'ok', max_receive_count: 3 },
      { name: 'self', dead_letter_queue: 'self', max_receive_count: 3 },
    ]) {
      expectError(await api('POST', '/queues', body), 400, 'BAD_REQUEST');
    }
  });

  it('GET shows settings, statistics and subscriptions; DELETE answers a Message and the queue is gone', async () => {
    const name = uniqueName('detail');
    await createQueue({ name });
    await send(name, { body: 'a' });
    await send(name, { body: 'b' });
    await send(name, { body: 'c', delay_seconds: 60 });
    await receive(name);
    clock().advance(2_000);
    const detail = await api('GET', `/queues/${name}`);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({
      name,
      updated_at: expect.any(String),
      statistics: { approximate_message_count: 1, approximate_not_visible_count: 1, approximate_delayed_count: 1, oldest_message_age_seconds: 2 },
      subscriptions: [],
    });
    const deleted = await api('DELETE', `/queues/${name}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ message: expect.stringContaining(name) });
    expectError(await api('GET', `/queues/${name}`), 404, 'mq_queue_not_found');
    expectError(await api('DELETE', `/queues/${name}`), 404, 'mq_queue_not_found');
    expectError(await api('POST', `/queues/${name}/messages`, { body: 'x' }), 404, 'mq_queue_not_found');
  });

  it('lists the tenant\'s queues with counts, q, sort_by and pagination; another tenant sees none of them', async () => {
    const token = (await t.newUser('lister')).token;
    for (const name of ['zeta', 'alpha', 'alpine', 'beta']) {
      await createQueue({ name }, token);
      clock().advance(1);
    }
    await t.request('POST', '/api/v1/mq/queues/alpha/messages', { token, body: { body: 'x' } });
    const list = (query: string) => t.request('GET', `/api/v1/mq/queues${query}`, { token });
    const all = await until(async () => {
      const res = await list('');
      return res.body.pagination.total === 4 && res;
    }, 'the directory');
    expect(all.body.queues.map((q: { name: string }) => q.name)).toEqual(['alpha', 'alpine', 'beta', 'zeta']);
    expect(all.body.queues[0]).toEqual({ queue_id: expect.any(String), name: 'alpha', created_at: expect.any(String), approximate_message_count: 1, approximate_not_visible_count: 0, approximate_delayed_count: 0, fifo: false, dead_letter_queue: null, subscriptions: [] });
    expect((await list('?q=ALP')).body.queues.map((q: { name: string }) => q.name)).toEqual(['alpha', 'alpine']);
    expect((await list('?sort_by=-name&page=2&page_size=3')).body).toMatchObject({ pagination: { page: 2, page_size: 3, total: 4, has_more: false }, queues: [{ name: 'alpha' }] });
    expect((await list('?sort_by=-created_at')).body.queues.map((q: { name: string }) => q.name)).toEqual(['beta', 'alpine', 'alpha', 'zeta']);
    expectError(await list('?sort_by=size'), 400, 'BAD_REQUEST');
    // Another tenant: an empty list, and 404 on the name.
    expect((await api('GET', '/queues?q=alpine', undefined, bob.token)).body.pagination.total).toBe(0);
    expect((await t.request('GET', '/api/v1/mq/queues/alpine', { token: bob.token })).status).toBe(404);
  });

  it('needs a bearer token', async () => {
    expectError(await t.request('GET', '/api/v1/mq/queues'), 401, 'unauthorized');
  });
});

describe('mq data plane', () => {
  it('send 201, receive with attributes, delete 204; the handle then deletes nothing (404)', async () => {
    const name = uniqueName('plane');
    await createQueue({ name });
    const message_id = await send(name, { body: 'hello', attributes: { kind: 'order', amount: 5, vip: true } });
    const [message] = await receive(name, { max_messages: 10 });
    expect(message).toEqual({ message_id, receipt_handle: expect.any(String), body: 'hello', attributes: { kind: 'order', amount: 5, vip: true }, receive_count: 1, sent_at: expect.stringMatching(/Z$/), group_id: null });
    expect(await receive(name)).toEqual([]);
    const deleted = await api('DELETE', `/queues/${name}/messages/${message.receipt_handle}`);
    expect(deleted.status).toBe(204);
    expectError(await api('DELETE', `/queues/${name}/messages/${message.receipt_handle}`), 404, 'mq_receipt_handle_invalid');
    expectError(await api('DELETE', `/queues/${name}/messages/1.nope`), 404, 'mq_receipt_handle_invalid');
    expectError(await api('DELETE', `/queues/${name}/messages/not-a-handle`), 400, 'BAD_REQUEST');
  });

  it('redelivers after the visibility timeout with receive_count 2 and a new handle; the stale handle cannot delete it', async () => {
    const name = uniqueName('visibility');
    await createQueue({ name, visibility_timeout_seconds: 10 });
    await send(name);
    const [first] = await receive(name);
    clock().advance(10_000);
    const [second] = await receive(name);
    expect(second.receive_count).toBe(2);
    expectError(await api('DELETE', `/queues/${name}/messages/${first.receipt_handle}`), 404, 'mq_receipt_handle_invalid');
    expect((await api('DELETE', `/queues/${name}/messages/${second.receipt_handle}`)).status).toBe(204);
  });

  it('PATCH changes visibility of an in-flight message (200), 409 once it is not in flight', async () => {
    const name = uniqueName('patch');
    await createQueue({ name });
    await send(name);
    const [message] = await receive(name, { visibility_timeout_seconds: 5 });
    const patched = await api('PATCH', `/queues/${name}/messages/${message.receipt_handle}`, { visibility_timeout_seconds: 0 });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toEqual({ message_id: message.message_id, receipt_handle: message.receipt_handle, visibility_timeout_seconds: 0, visible_at: expect.any(String) });
    expectError(await api('PATCH', `/queues/${name}/messages/${message.receipt_handle}`, { visibility_timeout_seconds: 10 }), 409, 'mq_message_not_in_flight');
    const [again] = await receive(name);
    expect(again.receive_count).toBe(2);
    expectError(await api('PATCH', `/queues/${name}/messages/${message.receipt_handle}`, { visibility_timeout_seconds: 10 }), 404, 'mq_receipt_handle_invalid');
    expectError(await api('PATCH', `/queues/${name}/messages/${again.receipt_handle}`, { visibility_timeout_seconds: 43_201 }), 400, 'BAD_REQUEST');
  });

  it('validates send and receive bodies', async () => {
    const name = uniqueName('validate');
    await createQueue({ name });
    for (const body of [{}, { body: '' }, { body: 5 }, { body: 'x', delay_seconds: 901 }, { body: 'x', attributes: { 'bad name': 'x' } }, { body: 'x', attributes: { a: { nested: true } } }, { body: 'x', group_id: 'g' }]) {
      expectError(await api('POST', `/queues/${name}/messages`, body), 400, 'BAD_REQUEST');
    }
    expectError(await api('POST', `/queues/${name}/messages`, { body: 'é'.repeat(140_000) }), 400, 'BAD_REQUEST');
    // No body at all: every receive parameter has a default.
    const bare = await t.request('POST', `/api/v1/mq/queues/${name}/receive`, { token: alice.token });
    expect(bare.status, bare.text).toBe(200);
    expect(bare.body).toEqual({ messages: [] });
    for (const body of [{ max_messages: 0 }, { max_messages: 11 }, { wait_time_seconds: 21 }, { wait_time_seconds: -1 }, { visibility_timeout_seconds: -1 }]) {
      expectError(await api('POST', `/queues/${name}/receive`, body), 400, 'BAD_REQUEST');
    }
  });

  it('FIFO: order per group, group_id required, deduplication_id returns the first message_id', async () => {
    const name = `${uniqueName('fifo')}.fifo`;
    await createQueue({ name });
    expectError(await api('POST', `/queues/${name}/messages`, { body: 'x' }), 400, 'BAD_REQUEST');
    const first = await send(name, { body: 'a1', group_id: 'A', deduplication_id: 'd-1' });
    expect(await send(name, { body: 'a1', group_id: 'A', deduplication_id: 'd-1' })).toBe(first);
    await send(name, { body: 'a2', group_id: 'A' });
    await send(name, { body: 'b1', group_id: 'B' });
    const [a1] = await receive(name);
    expect(a1).toMatchObject({ body: 'a1', group_id: 'A' });
    expect((await receive(name, { max_messages: 10 })).map((m) => m.body)).toEqual(['b1']);
    await api('DELETE', `/queues/${name}/messages/${a1.receipt_handle}`);
    expect((await receive(name, { max_messages: 10 })).map((m) => m.body)).toEqual(['a2']);
  });

  it('moves a message received max_receive_count times to the dead-letter queue', async () => {
    const dlq = uniqueName('dlq');
    const source = uniqueName('source');
    await createQueue({ name: dlq });
    await createQueue({ name: source, max_receive_count: 1, dead_letter_queue: dlq, visibility_timeout_seconds: 5 });
    const message_id = await send(source, { body: 'poison' });
    expect((await receive(source))[0].receive_count).toBe(1);
    clock().advance(5_000);
    expect(await receive(source)).toEqual([]);
    const moved = await until(async () => {
      const messages = await receive(dlq);
      return messages.length > 0 && messages;
    }, 'the dead-letter move');
    expect(moved[0]).toMatchObject({ message_id, body: 'poison', receive_count: 1 });
  });

  it('keeps a message in its queue when the dead-letter queue does not exist', async () => {
    const source = uniqueName('orphan');
    await createQueue({ name: source, max_receive_count: 1, dead_letter_queue: uniqueName('never-created'), visibility_timeout_seconds: 5 });
    const message_id = await send(source, { body: 'kept' });
    await receive(source);
    clock().advance(5_000);
    expect(await receive(source)).toEqual([]);
    // The move is refused and the message comes back, then is received here like any message.
    const [back] = await until(async () => {
      const messages = await receive(source);
      return messages.length > 0 && messages;
    }, 'the refused move to come back');
    expect(back).toMatchObject({ message_id, body: 'kept', receive_count: 2 });
  });

  it('purge deletes every message and counts them', async () => {
    const name = uniqueName('purge');
    await createQueue({ name });
    await send(name);
    await send(name);
    const purged = await api('POST', `/queues/${name}/purge`);
    expect(purged.status).toBe(200);
    expect(purged.body).toEqual({ messages_purged: 2 });
    expect(await receive(name)).toEqual([]);
    expectError(await api('POST', `/queues/${uniqueName('none')}/purge`), 404, 'mq_queue_not_found');
  });

  it('retention: a message past message_retention_minutes is gone', async () => {
    const name = uniqueName('retention');
    await createQueue({ name, message_retention_minutes: 1 });
    await send(name);
    clock().advance(60_000);
    await until(async () => (await api('GET', `/queues/${name}`)).body.statistics.approximate_message_count === 0, 'the sweep');
    expect(await receive(name)).toEqual([]);
  });
});

describe('mq long polling', () => {
  it('a waiting receive gets a message sent meanwhile at once', async () => {
    const name = uniqueName('poll');
    await createQueue({ name });
    const started = Date.now();
    const waiting = receive(name, { wait_time_seconds: 20, max_messages: 10 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const sentAt = Date.now();
    const message_id = await send(name, { body: 'wake up' });
    const messages = await waiting;
    expect(messages.map((m) => m.message_id)).toEqual([message_id]);
    // The manual clock did not move: the send woke it, not a timer. Bounded generously for a loaded machine.
    expect(Date.now() - sentAt).toBeLessThan(2_000);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a 20 s wait answers an empty list at its deadline, not before', async () => {
    const name = uniqueName('empty');
    await createQueue({ name });
    const begun = clock().now();
    let answeredAt: number | null = null;
    const waiting = receive(name, { wait_time_seconds: 20 }).then((messages) => {
      answeredAt = clock().now();
      return messages;
    });
    await advanceUntil(() => answeredAt !== null, 250, 120);
    expect(await waiting).toEqual([]);
    expect(answeredAt! - begun).toBeGreaterThanOrEqual(20_000);
    // The route's next ask may start a step or two after the clock moved (real time on a loaded machine).
    expect(answeredAt! - begun).toBeLessThanOrEqual(21_000);
  });

  it('a waiter that loses the announced message to another consumer waits on to its own deadline', async () => {
    const name = uniqueName('race');
    await createQueue({ name });
    const begun = clock().now();
    const answers: { at: number; count: number }[] = [];
    const waiting = [0, 1].map(() =>
      receive(name, { wait_time_seconds: 20 }).then((messages) => {
        answers.push({ at: clock().now(), count: messages.length });
        return messages;
      }),
    );
    await advanceUntil(() => false, 250, 4);
    await send(name, { body: 'only one' });
    await advanceUntil(() => answers.length === 2, 250, 120);
    await Promise.all(waiting);
    expect(answers.map((answer) => answer.count).sort()).toEqual([0, 1]);
    const empty = answers.find((answer) => answer.count === 0)!;
    expect(empty.at - begun).toBeGreaterThanOrEqual(20_000);
  });

  it('a message sent after the first 12 s of a 20 s wait is still delivered to it', async () => {
    const name = uniqueName('late');
    await createQueue({ name });
    let done = false;
    const waiting = receive(name, { wait_time_seconds: 20 }).then((messages) => {
      done = true;
      return messages;
    });
    await advanceUntil(() => false, 250, 48);
    expect(done).toBe(false);
    const message_id = await send(name, { body: 'late' });
    expect((await waiting).map((m) => m.message_id)).toEqual([message_id]);
  });
});

describe('mq topics', () => {
  it('creates (201), returns the same (200), 409 on other settings; GET, list, DELETE', async () => {
    const name = uniqueName('events');
    const created = await api('POST', '/topics', { name, tags: { team: 'core' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({ topic_id: expect.any(String), name, created_at: expect.any(String), max_message_size_bytes: 262_144, retention_minutes: 5, tags: { team: 'core' } });
    expect((await api('POST', '/topics', { name, tags: { team: 'core' } })).status).toBe(200);
    expectError(await api('POST', '/topics', { name }), 409, 'mq_topic_exists');
    expectError(await api('POST', '/topics', { name: 'bad.name' }), 400, 'BAD_REQUEST');
    const detail = await api('GET', `/topics/${name}`);
    expect(detail.body).toMatchObject({ name, message_count: 0, subscription_count: 0, updated_at: expect.any(String) });
    const listed = await until(async () => {
      const res = await api('GET', `/topics?q=${name}`);
      return res.body.pagination.total === 1 && res;
    }, 'the topic list');
    expect(listed.body.topics).toEqual([{ topic_id: created.body.topic_id, name, created_at: created.body.created_at, message_count: 0, subscription_count: 0 }]);
    expectError(await api('GET', `/topics/${name}`, undefined, bob.token), 404, 'mq_topic_not_found');
    expect((await api('DELETE', `/topics/${name}`)).body).toEqual({ message: expect.stringContaining(name) });
    expectError(await api('GET', `/topics/${name}`), 404, 'mq_topic_not_found');
  });

  it('subscriptions: create, list, errors, delete; the queue shows them', async () => {
    const topic = uniqueName('orders');
    const queue = uniqueName('audit');
    await api('POST', '/topics', { name: topic });
    await createQueue({ name: queue });
    const policy = { kind: ['order', { prefix: 'refund-' }], amount: [{ numeric: ['>=', 100] }] };
    const subscribed = await api('POST', `/topics/${topic}/subscriptions`, { queue_name: queue, filter_policy: policy, raw_message_delivery: true });
    expect(subscribed.status, subscribed.text).toBe(201);
    expect(subscribed.body).toEqual({ subscription_id: expect.any(String), topic_name: topic, queue_name: queue, filter_policy: policy, raw_message_delivery: true, created_at: expect.any(String) });
    expect((await api('POST', `/topics/${topic}/subscriptions`, { queue_name: queue, filter_policy: policy, raw_message_delivery: true })).status).toBe(200);
    expectError(await api('POST', `/topics/${topic}/subscriptions`, { queue_name: queue }), 409, 'mq_subscription_exists');
    expectError(await api('POST', `/topics/${topic}/subscriptions`, { queue_name: uniqueName('missing') }), 404, 'mq_queue_not_found');
    expectError(await api('POST', `/topics/${topic}/subscriptions`, { queue_name: queue, filter_policy: { kind: [{ regex: '.*' }] } }), 400, 'BAD_REQUEST');
    expectError(await api('POST', `/topics/${uniqueName('none')}/subscriptions`, { queue_name: queue }), 404, 'mq_topic_not_found');
    const fifo = `${uniqueName('f')}.fifo`;
    await createQueue({ name: fifo });
    expectError(await api('POST', `/topics/${topic}/subscriptions`, { queue_name: fifo }), 400, 'BAD_REQUEST');

    const list = await api('GET', `/topics/${topic}/subscriptions`);
    expect(list.body).toEqual({ subscriptions: [subscribed.body] });
    const queueDetail = await api('GET', `/queues/${queue}`);
    expect(queueDetail.body.subscriptions).toEqual([{ topic_name: topic, filter_policy: policy, subscribed_at: expect.any(String) }]);
    const summary = await until(async () => (await api('GET', `/queues?q=${queue}`)).body.queues[0], 'the queue list');
    expect(summary.subscriptions).toEqual([topic]);

    const removed = await api('DELETE', `/topics/${topic}/subscriptions/${queue}`);
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ message: expect.any(String) });
    expectError(await api('DELETE', `/topics/${topic}/subscriptions/${queue}`), 404, 'mq_subscription_not_found');
    await until(async () => (await api('GET', `/queues/${queue}`)).body.subscriptions.length === 0, 'the queue to forget it');
  });

  it('publish fans out to the queues whose filter policy matches; raw or enveloped', async () => {
    const topic = uniqueName('feed');
    const [all, big, raw] = [uniqueName('all'), uniqueName('big'), uniqueName('raw')];
    await api('POST', '/topics', { name: topic });
    for (const name of [all, big, raw]) await createQueue({ name });
    await api('POST', `/topics/${topic}/subscriptions`, { queue_name: all });
    await api('POST', `/topics/${topic}/subscriptions`, { queue_name: big, filter_policy: { amount: [{ numeric: ['>', 100] }] } });
    await api('POST', `/topics/${topic}/subscriptions`, { queue_name: raw, raw_message_delivery: true, filter_policy: { region: [{ 'anything-but': 'eu' }] } });

    const published = await api('POST', `/topics/${topic}/messages`, { body: 'small order', attributes: { amount: 5, region: 'us' } });
    expect(published.status, published.text).toBe(201);
    expect(published.body).toEqual({ message_id: expect.any(String), delivered_to: 2 });
    const [enveloped] = await until(async () => {
      const messages = await receive(all);
      return messages.length > 0 && messages;
    }, 'the copy');
    expect(JSON.parse(enveloped.body)).toEqual({ type: 'Notification', message_id: published.body.message_id, topic_name: topic, body: 'small order', attributes: { amount: 5, region: 'us' }, timestamp: expect.any(String) });
    const [rawCopy] = await until(async () => {
      const messages = await receive(raw);
      return messages.length > 0 && messages;
    }, 'the raw copy');
    expect(rawCopy).toMatchObject({ message_id: published.body.message_id, body: 'small order', attributes: { amount: 5, region: 'us' } });
    expect(await receive(big)).toEqual([]);
    expect((await api('GET', `/topics/${topic}`)).body).toMatchObject({ message_count: 1, subscription_count: 3 });
    expectError(await api('POST', `/topics/${uniqueName('none')}/messages`, { body: 'x' }), 404, 'mq_topic_not_found');
    expectError(await api('POST', `/topics/${topic}/messages`, { body: '' }), 400, 'BAD_REQUEST');
  });

  it('answers 404 for every operation on a queue or topic that does not exist', async () => {
    const queue = uniqueName('absent');
    const topic = uniqueName('absent');
    expectError(await api('POST', `/queues/${queue}/receive`, { wait_time_seconds: 0 }), 404, 'mq_queue_not_found');
    expectError(await api('POST', `/queues/${queue}/receive`, { wait_time_seconds: 20 }), 404, 'mq_queue_not_found');
    expectError(await api('DELETE', `/queues/${queue}/messages/1.abc`), 404, 'mq_queue_not_found');
    expectError(await api('PATCH', `/queues/${queue}/messages/1.abc`, { visibility_timeout_seconds: 1 }), 404, 'mq_queue_not_found');
    expectError(await api('GET', `/topics/${topic}/subscriptions`), 404, 'mq_topic_not_found');
    expectError(await api('DELETE', `/topics/${topic}/subscriptions/${queue}`), 404, 'mq_topic_not_found');
    expectError(await api('DELETE', `/topics/${topic}`), 404, 'mq_topic_not_found');
    expectError(await api('GET', `/queues/${queue}`, undefined, bob.token), 404, 'mq_queue_not_found');
  });

  it('deleting a queue removes its subscriptions from the topic', async () => {
    const topic = uniqueName('t');
    const queue = uniqueName('q');
    await api('POST', '/topics', { name: topic });
    await createQueue({ name: queue });
    await api('POST', `/topics/${topic}/subscriptions`, { queue_name: queue });
    await api('DELETE', `/queues/${queue}`);
    await until(async () => (await api('GET', `/topics/${topic}`)).body.subscription_count === 0, 'the topic to forget the queue');
    expect((await api('POST', `/topics/${topic}/messages`, { body: 'x' })).body.delivered_to).toBe(0);
  });
});
