import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { createPlatformClient, type PlatformClientOptions } from '../../clients/typescript/src/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Retries against a real node: a POST whose answer is lost (or replaced by a
 * proxy's 503) is sent again with the same Idempotency-Key and applied once;
 * a 429 is retried after its Retry-After, within the client's bounds.
 */

const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
let t: TestNode;
beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
});
afterAll(() => t?.destroy());

const clock = () => t.clock as ManualClock;

interface Sent {
  line: string;
  idempotencyKey: string | null;
  replayed: string | null;
  retryAfter: string | null;
}

/**
 * A signed-up client whose transport is recorded, and whose `spoil` hook can
 * replace the node's real answer after the node has handled the request (the
 * answer lost on the way back, or a proxy's 503 instead of it).
 */
async function signedUpClient(username: string, options: Partial<PlatformClientOptions> = {}) {
  const sent: Sent[] = [];
  const sleeps: number[] = [];
  let spoil: ((request: Request) => Response | Error | null) | null = null;
  const api = createPlatformClient({
    baseUrl: t.url,
    retry: { sleep: async (ms) => void sleeps.push(ms), ...options.retry },
    idempotencyKeys: options.idempotencyKeys,
    fetch: async (request) => {
      const response = await fetch(request);
      const path = new URL(request.url).pathname;
      sent.push({
        line: `${request.method} ${path} ${response.status}`,
        idempotencyKey: request.headers.get('idempotency-key'),
        replayed: response.headers.get('idempotent-replayed'),
        retryAfter: response.headers.get('retry-after'),
      });
      const spoiled = spoil?.(request);
      if (!spoiled) return response;
      spoil = null;
      await response.arrayBuffer(); // the node answered in full; the client never sees it
      if (spoiled instanceof Error) throw spoiled;
      return spoiled;
    },
  });
  const registered = await api.post('/api/v1/auth/register', { body: { email: `${username}@example.com`, username, password: 'correct horse battery' } });
  return {
    api,
    sent,
    sleeps,
    user_id: registered.user.id,
    spoilNext(method: string, outcome: () => Response | Error) {
      spoil = (request) => (request.method === method ? outcome() : null);
    },
  };
}

describe('a retried POST is applied once', () => {
  it('sends a POST whose answer was lost again with the same Idempotency-Key, and the node replays its answer', async () => {
    const { api, sent, sleeps, spoilNext } = await signedUpClient('lost');
    await api.post('/api/v1/mq/queues', { body: { name: 'orders' } });
    const queue = { params: { path: { queue_name: 'orders' } } };
    sent.length = 0;
    spoilNext('POST', () => new TypeError('fetch failed: other side closed'));
    const message = await api.post('/api/v1/mq/queues/{queue_name}/messages', { ...queue, body: { body: 'order 42 paid' } });

    expect(sent.map((s) => s.line)).toEqual(['POST /api/v1/mq/queues/orders/messages 201', 'POST /api/v1/mq/queues/orders/messages 201']);
    expect(sent[0]!.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1]!.idempotencyKey).toBe(sent[0]!.idempotencyKey);
    expect(sent.map((s) => s.replayed)).toEqual([null, 'true']);
    expect(sleeps).toHaveLength(1);
    // Sent twice, applied once: one message in the queue, the one the answer names.
    const stats = await api.get('/api/v1/mq/queues/{queue_name}', queue);
    expect(stats.statistics.approximate_message_count).toBe(1);
    const received = await api.post('/api/v1/mq/queues/{queue_name}/receive', { ...queue, body: { max_messages: 10 } });
    expect(received.messages.map((m) => m.message_id)).toEqual([message.message_id]);
  });

  it('sends a POST answered 503 by a proxy again after its Retry-After, and the node applies it once', async () => {
    const { api, sent, sleeps, spoilNext } = await signedUpClient('proxied');
    await api.post('/api/v1/mq/queues', { body: { name: 'orders' } });
    const queue = { params: { path: { queue_name: 'orders' } } };
    sent.length = 0;
    spoilNext('POST', () => Response.json({ statusCode: 503, code: 'shutting_down', error: 'Service Unavailable', message: 'stopping' }, { status: 503, headers: { 'retry-after': '2' } }));
    await api.post('/api/v1/mq/queues/{queue_name}/messages', { ...queue, body: { body: 'order 43 paid' } });
    expect(sleeps).toEqual([2000]);
    expect(sent.map((s) => s.replayed)).toEqual([null, 'true']);
    expect((await api.get('/api/v1/mq/queues/{queue_name}', queue)).statistics.approximate_message_count).toBe(1);
  });

  it('without idempotency keys, does not send a POST again when its outcome is unknown', async () => {
    const { api, sent, sleeps, spoilNext } = await signedUpClient('unkeyed', { idempotencyKeys: false });
    await api.post('/api/v1/mq/queues', { body: { name: 'orders' } });
    const queue = { params: { path: { queue_name: 'orders' } } };
    sent.length = 0;
    spoilNext('POST', () => new TypeError('fetch failed: other side closed'));
    await expect(api.post('/api/v1/mq/queues/{queue_name}/messages', { ...queue, body: { body: 'order 44 paid' } })).rejects.toThrow('other side closed');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.idempotencyKey).toBeNull();
    expect(sleeps).toEqual([]);
    expect((await api.get('/api/v1/mq/queues/{queue_name}', queue)).statistics.approximate_message_count).toBe(1);
  });
});

describe('429', () => {
  it('is retried after its Retry-After, a bounded number of times', async () => {
    const admin = createPlatformClient({ baseUrl: t.url });
    await admin.post('/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
    const { api, sent, sleeps, user_id } = await signedUpClient('limited');
    await admin.post('/admin/rate-limits/users', {
      body: { user_id, tier: 'default', custom_limits: { '/api/v1/auth/me': { max_requests: 1, window_seconds: 10 } } },
    });
    // The client's wait moves the node's clock instead of sleeping.
    sleeps.length = 0;
    const waited: number[] = [];
    const limited = createPlatformClient({
      baseUrl: t.url,
      tokens: api.tokens,
      retry: {
        sleep: async (ms) => {
          waited.push(ms);
          clock().advance(ms);
        },
      },
      fetch: async (request) => {
        const response = await fetch(request);
        sent.push({ line: `${request.method} ${new URL(request.url).pathname} ${response.status}`, idempotencyKey: null, replayed: null, retryAfter: response.headers.get('retry-after') });
        return response;
      },
    });
    sent.length = 0;
    expect((await limited.get('/api/v1/auth/me')).id).toBe(user_id);
    expect((await limited.get('/api/v1/auth/me')).id).toBe(user_id);
    expect(sent.map((s) => s.line)).toEqual(['GET /api/v1/auth/me 200', 'GET /api/v1/auth/me 429', 'GET /api/v1/auth/me 200']);
    const retryAfter = Number(sent[1]!.retryAfter);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(waited).toEqual([retryAfter * 1000]);

    // One attempt only: the 429 is thrown, typed.
    const once = createPlatformClient({ baseUrl: t.url, tokens: api.tokens, retry: { maxAttempts: 1 } });
    await expect(once.get('/api/v1/auth/me')).rejects.toMatchObject({ status: 429, code: 'rate_limited' });
    // A Retry-After longer than the client will wait is thrown at once, not slept through.
    const impatient: number[] = [];
    const hurried = createPlatformClient({ baseUrl: t.url, tokens: api.tokens, retry: { maxDelayMs: 500, sleep: async (ms) => void impatient.push(ms) } });
    await expect(hurried.get('/api/v1/auth/me')).rejects.toMatchObject({ status: 429, code: 'rate_limited' });
    expect(impatient).toEqual([]);
  });
});
