import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import type { ActorClient } from '../../runtime/index.js';
import { WebhookDeliveryWorker } from '../../http/webhook-delivery.js';
import { WEBHOOK_ATTEMPT_EVENT, type WebhookAttempt } from '../../actors/webhooks/messages.js';
import { eventually } from '../helpers/runtime.js';

/**
 * A target that never answers fills only its own waiting list (per_host_queue_max), so an
 * attempt for another target still finds room in the worker's queue and is delivered.
 */
let hanging: Server;
let healthy: Server;
const sockets = new Set<Socket>();
const portOf = (server: Server) => (server.address() as { port: number }).port;

beforeAll(async () => {
  hanging = createServer(() => undefined);
  healthy = createServer((_request, response) => response.end('ok'));
  for (const server of [hanging, healthy]) {
    server.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await Promise.all([hanging, healthy].map((server) => new Promise((resolve) => server.close(resolve))));
});

describe('webhook delivery queues per target host', () => {
  it('delivers to a healthy target while a hanging one has filled its own waiting list', async () => {
    const events = new EventEmitter();
    const told: { key: string; message: { status_code: number | null } }[] = [];
    const actors = { tell: (_kind: string, key: string, message: { status_code: number | null }) => told.push({ key, message }) } as unknown as ActorClient;
    const worker = new WebhookDeliveryWorker({
      events,
      actors,
      settings: () => ({ attempt_timeout_ms: 30_000, disable_after_failures: 1, retry_base_ms: 1 }),
      allowPrivateTargets: true,
      logger: pino({ level: 'silent' }),
      concurrency_max: 4,
      per_host_max: 1,
      queue_max: 8,
      per_host_queue_max: 2,
    });
    const attempt = (webhook_id: string, port: number, n: number): WebhookAttempt => ({
      webhook_id,
      event_id: `evt_${n}`,
      attempt: 1,
      url: `http://127.0.0.1:${port}/hook`,
      headers: { 'content-type': 'application/json' },
      body: '{}',
      timeout_ms: 30_000,
    });
    const publish = (data: WebhookAttempt) => events.emit('event', { type: WEBHOOK_ATTEMPT_EVENT, data, kind: 'webhook', key: data.webhook_id, at_ms: 0 });
    worker.start();
    try {
      // One in flight (per_host_max 1), two waiting, the other nine refused for room: queue_max is never reached.
      for (let n = 0; n < 12; n++) publish(attempt('wh_hanging', portOf(hanging), n));
      publish(attempt('wh_healthy', portOf(healthy), 100));
      await eventually(() => expect(told).toEqual([{ key: 'wh_healthy', message: expect.objectContaining({ status_code: 200 }) }]), 5_000);
    } finally {
      worker.stop();
    }
  });
});
