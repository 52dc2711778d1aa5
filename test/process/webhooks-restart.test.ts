import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * SIGKILL of a node in the middle of a webhook delivery: after the restart
 * the event is delivered, with the same webhook-id, and never under another
 * id (docs/api/webhooks.md, "Outcome of an attempt").
 */
const dirs: string[] = [];
let receiver: Receiver | undefined;
afterAll(async () => {
  await killAllServerProcesses();
  await receiver?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('webhook delivery across a SIGKILL', () => {
  it('retries the in-flight attempt after the restart under the same webhook-id, never another', async () => {
    receiver = await startReceiver();
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-webhooks-'));
    dirs.push(dataDir);
    const env = { WEBHOOK_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_BASE_MS: '200' };
    let server = await startServerProcess({ dataDir, env });
    const registered = await call(server, 'POST', '/api/v1/auth/register', { body: { email: 'hooks@example.com', username: 'hooks', password: 'correct horse battery' } });
    expect(registered.status).toBe(201);
    const token = registered.body.access_token as string;
    const created = await call(server, 'POST', '/api/v1/webhooks', { token, body: { url: `${receiver.url}/kill`, events: ['test.webhook'] } });
    expect(created.status).toBe(201);
    const webhook_id = created.body.data.id as string;

    // The first attempt reaches the target, which never answers; the node dies meanwhile.
    let arrivals = 0;
    receiver.respond.set('/kill', () => (++arrivals === 1 ? 'hang' : { status: 200 }));
    const test = await call(server, 'POST', `/api/v1/webhooks/${webhook_id}/test`, { token });
    expect(test.status).toBe(200);
    await until(() => receiver!.received.length === 1, 'the first attempt');
    const exit = await server.stop('SIGKILL');
    expect(exit.signal).toBe('SIGKILL');

    server = await startServerProcess({ dataDir, env, port: server.port });
    // The attempt's deadline (2 x 1 s + 1 s) passes, it counts as failed, and the retry is delivered.
    await until(() => receiver!.received.length >= 2, 'the retry after the restart');
    const log = await until(async () => {
      const res = await call(server, 'GET', `/api/v1/webhooks/${webhook_id}/deliveries`, { token });
      return res.body.deliveries.some((d: { success: boolean }) => d.success) && res.body;
    }, 'the successful delivery in the log');
    expect(log.deliveries[0]).toMatchObject({ success: true, status_code: 200, attempt_number: 2 });
    expect(log.deliveries[1]).toMatchObject({ success: false, attempt_number: 1, error: expect.stringMatching(/deadline/) });

    // Nothing more arrives: one event, one webhook-id.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    const ids = new Set(receiver.received.map((d) => d.headers['webhook-id']));
    expect(ids.size).toBe(1);
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1].json.id).toBe([...ids][0]);
    await server.stop('SIGTERM');
  }, 90_000);
});
