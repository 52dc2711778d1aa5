import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * The admin cluster routes on an embedded node (docs/cluster.md, "From the
 * console or the API"): the one-node view, its live stream, and the drain
 * request refused with nothing to drain to. Cluster mode's drain goes through
 * the same function as the CLI (test/unit/cluster-drain-request.test.ts).
 */
const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'admin password 123';

let t: TestNode;
let adminToken: string;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  expect(res.status, res.text).toBe(200);
  adminToken = res.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

/** Reads server-sent events from the stream until `count` events arrived. */
async function readEvents(response: Response, count: number): Promise<{ event: string; data: any }[]> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: { event: string; data: any }[] = [];
  let buffer = '';
  while (events.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (data !== undefined) events.push({ event, data: JSON.parse(data) });
    }
  }
  await reader.cancel();
  return events;
}

describe('admin cluster routes', () => {
  it('need an administrator: 401 without a token, 403 for a user', async () => {
    const user = await t.newUser('plain');
    for (const [method, path] of [
      ['GET', '/admin/cluster/status'],
      ['GET', '/admin/cluster/stream'],
      ['POST', '/admin/cluster/nodes/embedded/drain'],
    ]) {
      expect((await t.request(method, path)).status, `${method} ${path}`).toBe(401);
      const forbidden = await t.request(method, path, { token: user.token });
      expect(forbidden.status, `${method} ${path}`).toBe(403);
      expect(forbidden.body.code).toBe('forbidden');
    }
  });

  it('GET /admin/cluster/status on an embedded node: one member, embedded, leading every partition alone', async () => {
    const res = await t.request('GET', '/admin/cluster/status', { token: adminToken });
    expect(res.status, res.text).toBe(200);
    expect(res.body.mode).toBe('embedded');
    expect(res.body.node_id).toBe('embedded');
    expect(res.body.members).toEqual([{ node_id: 'embedded', http_url: t.url, draining: false, view_fresh: true, leads: 8, follows: 0 }]);
    expect(res.body.partitions).toHaveLength(8);
    expect(res.body.partitions[3]).toEqual({ partition: 3, leader: 'embedded', epoch: null, isr: ['embedded'], followers: [] });
  });

  it('GET /admin/cluster/stream sends the view at once, then again at least every 5 s', async () => {
    const response = await fetch(`${t.url}/admin/cluster/stream`, { headers: { authorization: `Bearer ${adminToken}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const started = Date.now();
    const events = await readEvents(response, 2);
    expect(events.map((e) => e.event)).toEqual(['status', 'status']);
    expect(events[0].data.members[0].node_id).toBe('embedded');
    expect(events[1].data).toEqual(events[0].data);
    expect(Date.now() - started).toBeLessThan(8_000);
  }, 15_000);

  it('POST drain of the embedded node: 409 no_drain_target; of an unknown node: 404; nothing changes', async () => {
    const refused = await t.request('POST', '/admin/cluster/nodes/embedded/drain', { token: adminToken });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.code).toBe('no_drain_target');
    expect(refused.body.message).toContain('embedded');
    const unknown = await t.request('POST', '/admin/cluster/nodes/n9/drain', { token: adminToken });
    expect(unknown.status, unknown.text).toBe(404);
    expect(unknown.body.code).toBe('not_found');
    const status = await t.request('GET', '/admin/cluster/status', { token: adminToken });
    expect(status.body.members[0].draining).toBe(false);
    expect((await t.request('GET', '/health/ready')).status).toBe(200);
  });

  it('the routes are in /openapi.json', async () => {
    const doc = (await t.request('GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/admin/cluster/status', '/admin/cluster/stream', '/admin/cluster/nodes/{node_id}/drain']));
  });
});

describe('an open stream', () => {
  it('does not hold up the node\'s stop', async () => {
    const other = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
    const login = await other.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    const response = await fetch(`${other.url}/admin/cluster/stream`, { headers: { authorization: `Bearer ${login.body.access_token}` } });
    expect(response.status).toBe(200);
    const started = Date.now();
    await other.destroy();
    expect(Date.now() - started).toBeLessThan(5_000);
    await response.body?.cancel().catch(() => undefined);
  }, 20_000);
});
