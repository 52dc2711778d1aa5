import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** A dead-letter queue's redrive: POST /api/v1/mq/queues/{queue_name}/redrive (docs/api/mq.md). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode();
  alice = await t.newUser('alice');
});
afterAll(async () => {
  await t?.destroy();
});

const api = (method: string, path: string, body?: unknown) => t.request(method, `/api/v1/mq${path}`, { token: alice.token, body });

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code });
}

async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 500; i++) {
    const value = await check();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const count = async (queue: string) => (await api('GET', `/queues/${queue}`)).body.statistics.approximate_message_count as number;

/** Sends `bodies` to `source` and receives each twice (visibility 0): the second receive moves it to the DLQ. */
async function deadLetter(source: string, dlq: string, bodies: string[]): Promise<void> {
  for (const body of bodies) expect((await api('POST', `/queues/${source}/messages`, { body })).status).toBe(201);
  for (let i = 0; i < 2; i++) await api('POST', `/queues/${source}/receive`, { max_messages: 10, visibility_timeout_seconds: 0 });
  await until(async () => (await count(dlq)) === bodies.length, 'the dead-lettered messages');
}

describe('mq redrive', () => {
  it('moves the messages not in flight to the destination, oldest first, receive_count from 0', async () => {
    expect((await api('POST', '/queues', { name: 'orders-dlq' })).status).toBe(201);
    expect((await api('POST', '/queues', { name: 'orders', max_receive_count: 1, dead_letter_queue: 'orders-dlq' })).status).toBe(201);
    await deadLetter('orders', 'orders-dlq', ['a', 'b', 'c']);

    // One is in flight in the DLQ (a consumer holds it): it stays.
    const held = await api('POST', '/queues/orders-dlq/receive', { max_messages: 1, visibility_timeout_seconds: 600 });
    expect(held.body.messages).toHaveLength(1);
    const first = await api('POST', '/queues/orders-dlq/redrive', { destination: 'orders', max_messages: 1 });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ moved: 1, remaining: 2 });
    const rest = await api('POST', '/queues/orders-dlq/redrive', { destination: 'orders' });
    expect(rest.body).toEqual({ moved: 1, remaining: 1 });
    await until(async () => (await count('orders')) === 2, 'the redriven messages in orders');
    const received = await api('POST', '/queues/orders/receive', { max_messages: 10 });
    expect(received.body.messages.map((m: { body: string }) => m.body).sort()).toEqual(['a', 'b', 'c'].filter((b) => b !== held.body.messages[0].body));
    expect(received.body.messages.every((m: { receive_count: number }) => m.receive_count === 1)).toBe(true);
  });

  it('a destination that does not exist: 404 mq_queue_not_found and nothing moves; refuses itself, unknown queues and bad bodies', async () => {
    expect((await api('POST', '/queues', { name: 'lost-dlq' })).status).toBe(201);
    expect((await api('POST', '/queues', { name: 'lost', max_receive_count: 1, dead_letter_queue: 'lost-dlq' })).status).toBe(201);
    await deadLetter('lost', 'lost-dlq', ['x', 'y']);
    const missing = await api('POST', '/queues/lost-dlq/redrive', { destination: 'nowhere' });
    expectError(missing, 404, 'mq_queue_not_found');
    expect(missing.body.message).toBe('The destination queue "nowhere" does not exist; nothing was moved.');
    expect(missing.body.details).toEqual([{ field: 'body.destination', message: 'does not exist' }]);
    // Nothing left the queue, and the destination was not created.
    expect(await count('lost-dlq')).toBe(2);
    expectError(await api('GET', '/queues/nowhere'), 404, 'mq_queue_not_found');
    // Another tenant's queue of that name does not exist for the caller either.
    const bob = await t.newUser('bob');
    expect((await t.request('POST', '/api/v1/mq/queues', { token: bob.token, body: { name: 'bobs' } })).status).toBe(201);
    expectError(await api('POST', '/queues/lost-dlq/redrive', { destination: 'bobs' }), 404, 'mq_queue_not_found');
    expect(await count('lost-dlq')).toBe(2);

    expectError(await api('POST', '/queues/lost-dlq/redrive', { destination: 'lost-dlq' }), 400, 'BAD_REQUEST');
    expectError(await api('POST', '/queues/lost-dlq/redrive', {}), 400, 'BAD_REQUEST');
    expectError(await api('POST', '/queues/lost-dlq/redrive', { destination: 'lost', max_messages: 1001 }), 400, 'BAD_REQUEST');
    expectError(await api('POST', '/queues/never-made/redrive', { destination: 'lost' }), 404, 'mq_queue_not_found');
    // The destination existing again, the same call moves the messages.
    expect((await api('POST', '/queues', { name: 'nowhere' })).status).toBe(201);
    expect((await api('POST', '/queues/lost-dlq/redrive', { destination: 'nowhere' })).body).toEqual({ moved: 2, remaining: 0 });
    await until(async () => (await count('nowhere')) === 2, 'the redriven messages');
  });

  it('sends a message back when the destination is of the other type (FIFO, standard)', async () => {
    expect((await api('POST', '/queues', { name: 'std-dlq' })).status).toBe(201);
    expect((await api('POST', '/queues', { name: 'std', max_receive_count: 1, dead_letter_queue: 'std-dlq' })).status).toBe(201);
    expect((await api('POST', '/queues', { name: 'ordered.fifo' })).status).toBe(201);
    await deadLetter('std', 'std-dlq', ['z']);
    expect((await api('POST', '/queues/std-dlq/redrive', { destination: 'ordered.fifo' })).body).toEqual({ moved: 1, remaining: 0 });
    await until(async () => (await count('std-dlq')) === 1, 'the message back in its dead-letter queue');
    expect(await count('ordered.fifo')).toBe(0);
  });
});
