import { EventEmitter } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import type { ActorClient } from '../../runtime/index.js';
import { WebhookDeliveryWorker } from '../../http/webhook-delivery.js';
import type { WebhookAttempt } from '../../actors/webhooks/messages.js';

/**
 * Deliveries keep their connections alive (http/pinned-agent.ts): a raw TCP receiver counts
 * the connections it is given. In `hang-up` mode it answers only the first request of each
 * connection and drops the connection at the second, as a receiver whose idle timeout fired
 * as the request arrived: the delivery is sent again on a new connection, not failed.
 */
let server: Server;
let port: number;
let mode: 'keep-alive' | 'hang-up' = 'keep-alive';
let connections = 0;
let answered = 0;
const sockets = new Set<Socket>();

beforeAll(async () => {
  server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let requests = 0;
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      // Requests are small POSTs: a complete one is headers plus content-length bytes.
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.slice(end + 4 + length);
        requests++;
        if (mode === 'hang-up' && requests > 1) {
          socket.destroy();
          return;
        }
        answered++;
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\n\r\nok');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

function worker(): WebhookDeliveryWorker {
  return new WebhookDeliveryWorker({
    events: new EventEmitter(),
    actors: {} as ActorClient,
    settings: () => ({ attempt_timeout_ms: 5_000, disable_after_failures: 1, retry_base_ms: 1 }),
    allowPrivateTargets: true,
    logger: pino({ level: 'silent' }),
  });
}
const attempt = (n: number): WebhookAttempt => ({
  webhook_id: 'wh_1',
  event_id: `evt_${n}`,
  attempt: 1,
  url: `http://127.0.0.1:${port}/hook`,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ n }),
  timeout_ms: 5_000,
});

describe('webhook deliveries over kept-alive connections', () => {
  it('sends twenty deliveries to one receiver over one connection', async () => {
    mode = 'keep-alive';
    connections = 0;
    const sender = worker();
    try {
      for (let n = 0; n < 20; n++) {
        const outcome = await sender.perform(attempt(n), performance.now() + 5_000);
        expect(outcome).toMatchObject({ status_code: 200, error: null });
      }
      expect(connections).toBe(1);
    } finally {
      sender.stop();
    }
  });

  it('sends a delivery again on a new connection when a kept-alive one is dropped as it arrives', async () => {
    mode = 'hang-up';
    connections = 0;
    answered = 0;
    const sender = worker();
    try {
      expect(await sender.perform(attempt(1), performance.now() + 5_000)).toMatchObject({ status_code: 200 });
      expect(await sender.perform(attempt(2), performance.now() + 5_000)).toMatchObject({ status_code: 200 });
      expect(answered).toBe(2);
      expect(connections).toBe(2);
    } finally {
      sender.stop();
    }
  });
});
