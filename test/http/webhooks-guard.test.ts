import net from 'node:net';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemNetwork } from '../../http/webhook-delivery.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The delivery guard on a node with WEBHOOK_ALLOW_PRIVATE_TARGETS off. DNS is
 * answered from a table and the "public" documentation addresses are mapped
 * to local sockets by the injected network port, so the test can show what
 * the guard refuses and where the worker really connects.
 */
let t: TestNode;
let receiver: Receiver;
let redirector: Server;
let user: Awaited<ReturnType<TestNode['newUser']>>;
const dialed: string[] = [];
const resolutions = new Map<string, number>();
/** 203.0.113.0/24 (TEST-NET-3) stands for public hosts; each maps to a local port. */
const publicToLocal = new Map<string, number>();
const dns = new Map<string, string[] | ((count: number) => string[])>();

beforeAll(async () => {
  receiver = await startReceiver();
  redirector = createServer((request, response) => {
    response.writeHead(302, { location: `http://127.0.0.1:${receiver.port}/stolen` });
    response.end();
  });
  await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
  publicToLocal.set('203.0.113.10', receiver.port);
  publicToLocal.set('203.0.113.11', (redirector.address() as AddressInfo).port);
  dns.set('hook.example', ['203.0.113.10']);
  dns.set('redirect.example', ['203.0.113.11']);
  dns.set('metadata.example', ['169.254.169.254']);
  dns.set('loopback.example', ['127.0.0.1']);
  dns.set('mixed.example', ['203.0.113.10', '10.0.0.5']);
  // DNS rebinding: the first answer is public, every later one loopback.
  dns.set('rebind.example', (count) => (count === 1 ? ['203.0.113.10'] : ['127.0.0.1']));

  t = await startTestNode({ config: { webhookAllowPrivateTargets: false, webhookTimeoutMs: 1000 } });
  t.node.webhookDelivery.network = {
    async resolve(hostname) {
      const count = (resolutions.get(hostname) ?? 0) + 1;
      resolutions.set(hostname, count);
      const answer = dns.get(hostname);
      if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return typeof answer === 'function' ? answer(count) : answer;
    },
    connect(options) {
      dialed.push(options.address);
      const local = publicToLocal.get(options.address);
      if (local !== undefined) return net.connect({ host: '127.0.0.1', port: local });
      return systemNetwork.connect(options);
    },
  };
  user = await t.newUser('guard');
});
afterAll(async () => {
  await t?.destroy();
  await receiver?.close();
  await new Promise((resolve) => redirector?.close(resolve));
});

async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 1000; i++) {
    const value = await check();
    if (value) return value;
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 3));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Each target gets its own user (tenant), so a test event fans out to that webhook only. */
async function deliverTo(url: string) {
  user = await t.newUser('guard');
  const created = await t.request('POST', '/api/v1/webhooks', { token: user.token, body: { url, events: ['test.webhook'] } });
  expect(created.status, created.text).toBe(201);
  const id = created.body.data.id as string;
  const test = await t.request('POST', `/api/v1/webhooks/${id}/test`, { token: user.token });
  expect(test.status, test.text).toBe(200);
  return id;
}
async function deadLettered(id: string) {
  return until(async () => {
    const res = await t.request('GET', `/api/v1/webhooks/${id}/dlq`, { token: user.token });
    return res.body.total === 1 && (res.body.entries[0] as { error: string; attempt_count: number });
  }, `the refusal of ${id}`);
}

describe('webhook delivery guard (WEBHOOK_ALLOW_PRIVATE_TARGETS off)', () => {
  it('refuses a direct 127.0.0.1, private or metadata URL at creation', async () => {
    for (const url of [`${receiver.url}/x`, 'http://10.1.2.3/x', 'http://169.254.169.254/latest/meta-data', 'http://[::1]:8080/', 'http://[::ffff:127.0.0.1]/']) {
      const res = await t.request('POST', '/api/v1/webhooks', { token: user.token, body: { url, events: ['test.webhook'] } });
      expect(res.status, `${url}: ${res.text}`).toBe(400);
      expect(res.body.code).toBe('BAD_REQUEST');
    }
  });

  it('delivers to a public address (connecting to the checked address)', async () => {
    const id = await deliverTo('http://hook.example/ok');
    await until(async () => receiver.received.some((d) => d.path === '/ok'), 'the delivery');
    expect(dialed).toContain('203.0.113.10');
    const log = await t.request('GET', `/api/v1/webhooks/${id}/deliveries`, { token: user.token });
    expect(log.body.deliveries[0]).toMatchObject({ success: true, status_code: 200 });
  });

  it('refuses a hostname resolving to 169.254.169.254 or to loopback, and one with any private answer: dead-lettered at once, never connected', async () => {
    for (const [host, reason] of [['metadata.example', /169\.254\.169\.254.*cloud metadata/], ['loopback.example', /127\.0\.0\.1.*loopback/], ['mixed.example', /10\.0\.0\.5.*private/]] as const) {
      const before = dialed.length;
      const entry = await deadLettered(await deliverTo(`http://${host}/x`));
      expect(entry.error).toMatch(/^target_refused/);
      expect(entry.error).toMatch(reason);
      expect(entry.attempt_count).toBe(1);
      expect(dialed.slice(before)).toEqual([]);
    }
  });

  it('refuses a redirect to 127.0.0.1 (each hop is checked)', async () => {
    const entry = await deadLettered(await deliverTo('http://redirect.example/start'));
    expect(entry.error).toMatch(/target_refused: 127\.0\.0\.1 is a loopback address/);
    expect(receiver.received.some((d) => d.path === '/stolen')).toBe(false);
  });

  it('resolves once and connects to the checked address, so a DNS answer that changes to loopback is never reached', async () => {
    const before = dialed.length;
    const id = await deliverTo('http://rebind.example/rebind');
    await until(async () => receiver.received.some((d) => d.path === '/rebind'), 'the delivery');
    expect(resolutions.get('rebind.example')).toBe(1);
    expect(dialed.slice(before)).toEqual(['203.0.113.10']);
    void id;
  });
});
