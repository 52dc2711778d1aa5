import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, type ServerProcess, callServer as call } from '../helpers/process.js';

/**
 * SIGKILL of a node while sends and topic publishes are in flight
 * (docs/api/mq.md): after the restart every acknowledged send is in its
 * queue, and every publish that reached any subscribed queue reached each
 * of them exactly once (acknowledged ones all of them): the fan-out through
 * the outbox neither loses nor duplicates a copy.
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const SUBSCRIBERS = 4;

/** Receives and deletes everything a queue holds now; message ids with how often each came. */
async function drain(server: ServerProcess, token: string, queue: string, counts: Map<string, number>): Promise<void> {
  for (;;) {
    const res = await call(server, 'POST', `/api/v1/mq/queues/${queue}/receive`, { token, body: { max_messages: 10, visibility_timeout_seconds: 600 } });
    expect(res.status).toBe(200);
    const messages = res.body.messages as { message_id: string; receipt_handle: string; receive_count: number }[];
    if (messages.length === 0) return;
    for (const message of messages) {
      expect(message.receive_count).toBe(1);
      counts.set(message.message_id, (counts.get(message.message_id) ?? 0) + 1);
    }
    const deleted = await Promise.all(messages.map((message) => call(server, 'DELETE', `/api/v1/mq/queues/${queue}/messages/${message.receipt_handle}`, { token })));
    expect(deleted.map((res) => res.status)).toEqual(messages.map(() => 204));
  }
}

describe('message queue across a SIGKILL', () => {
  it('keeps every acknowledged send, and fans every publish out to each queue exactly once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-mq-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir });
    const registered = await call(server, 'POST', '/api/v1/auth/register', { body: { email: 'mq@example.com', username: 'mqtester', password: 'correct horse battery' } });
    expect(registered.status).toBe(201);
    const token = registered.body.access_token as string;
    expect((await call(server, 'POST', '/api/v1/mq/queues', { token, body: { name: 'direct' } })).status).toBe(201);
    expect((await call(server, 'POST', '/api/v1/mq/topics', { token, body: { name: 'fanout' } })).status).toBe(201);
    const subscribers = Array.from({ length: SUBSCRIBERS }, (_, i) => `sub-${i}`);
    for (const queue of subscribers) {
      expect((await call(server, 'POST', '/api/v1/mq/queues', { token, body: { name: queue } })).status).toBe(201);
      expect((await call(server, 'POST', '/api/v1/mq/topics/fanout/subscriptions', { token, body: { queue_name: queue, raw_message_delivery: true } })).status).toBe(201);
    }

    // Sends and publishes from several concurrent clients; the node is killed while they run.
    const acknowledgedSends = new Set<string>();
    const acknowledgedPublishes = new Set<string>();
    let stopping = false;
    const client = async (kind: 'send' | 'publish', n: number) => {
      for (let i = 0; !stopping; i++) {
        try {
          const path = kind === 'send' ? '/api/v1/mq/queues/direct/messages' : '/api/v1/mq/topics/fanout/messages';
          const res = await call(server, 'POST', path, { token, body: { body: `${kind}-${n}-${i}` } });
          if (res.status === 201) (kind === 'send' ? acknowledgedSends : acknowledgedPublishes).add(res.body.message_id);
        } catch {
          return; // the node died under this request
        }
      }
    };
    const clients = [...Array.from({ length: 4 }, (_, n) => client('send', n)), ...Array.from({ length: 4 }, (_, n) => client('publish', n))];
    const started = Date.now();
    while ((acknowledgedSends.size < 100 || acknowledgedPublishes.size < 60) && Date.now() - started < 30_000) await new Promise((resolve) => setTimeout(resolve, 5));
    const exit = await server.stop('SIGKILL');
    stopping = true;
    await Promise.all(clients);
    expect(exit.signal).toBe('SIGKILL');
    expect(acknowledgedSends.size).toBeGreaterThan(0);
    expect(acknowledgedPublishes.size).toBeGreaterThan(0);

    server = await startServerProcess({ dataDir, port: server.port });
    const direct = new Map<string, number>();
    await drain(server, token, 'direct', direct);
    for (const id of acknowledgedSends) expect(direct.get(id), `acknowledged send ${id}`).toBe(1);
    expect([...direct.values()].every((count) => count === 1)).toBe(true);

    // Copies still in the outbox at the kill are delivered after the restart: drain until every
    // publish seen anywhere is in every queue (bounded).
    const copies = subscribers.map(() => new Map<string, number>());
    const deadline = Date.now() + 30_000;
    for (;;) {
      for (let i = 0; i < SUBSCRIBERS; i++) await drain(server, token, subscribers[i], copies[i]);
      const seen = new Set(copies.flatMap((counts) => [...counts.keys()]));
      const complete = [...seen].every((id) => copies.every((counts) => counts.has(id))) && [...acknowledgedPublishes].every((id) => seen.has(id));
      if (complete || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seen = new Set(copies.flatMap((counts) => [...counts.keys()]));
    for (const id of acknowledgedPublishes) expect(seen.has(id), `acknowledged publish ${id}`).toBe(true);
    for (const id of seen) {
      expect(copies.map((counts) => counts.get(id) ?? 0), `copies of ${id}`).toEqual(Array(SUBSCRIBERS).fill(1));
    }
    // Nothing arrives late as a second copy.
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (let i = 0; i < SUBSCRIBERS; i++) {
      const late = new Map<string, number>();
      await drain(server, token, subscribers[i], late);
      expect([...late.keys()]).toEqual([]);
    }
    await server.stop('SIGTERM');
  }, 120_000);
});
