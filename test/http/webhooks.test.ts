import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle, untilWithClock } from '../helpers/runtime.js';
import { startReceiver, type ReceivedDelivery, type Receiver } from '../helpers/webhook-receiver.js';
import { orgOfTwo } from '../helpers/org-tenant.js';

/** Webhooks over the real socket, delivering to a local receiver (spec doc 1 §4.11, §6; docs/api/webhooks.md). */
let t: TestNode;
let receiver: Receiver;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
/** Longer than any backoff before attempt 5 (5 s base: at most 40 s). */
const RETRY_WAIT_MS = 60_000;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({
    clock: 'manual',
    config: { webhookTimeoutMs: 400, webhookDisableAfterFailures: 3, accessTokenTtlSeconds: 86_400, adminEmail: ADMIN.email, adminPassword: ADMIN.password },
  });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
  await receiver?.close();
});

const clock = () => t.clock as ManualClock;
let pathCounter = 0;
const newPath = (name: string) => `/${name}-${++pathCounter}`;

const until = <T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, rounds?: number) =>
  untilWithClock(clock, check, what, rounds);
async function create(body: Record<string, unknown>, token = alice.token) {
  const res = await t.request('POST', '/api/v1/webhooks', { token, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string; secret: string; url: string };
}
const at = (path: string) => receiver.received.filter((d) => d.path === path);
async function deliveries(id: string, token = alice.token) {
  const res = await t.request('GET', `/api/v1/webhooks/${id}/deliveries`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body as { deliveries: { attempt_number: number; success: boolean; status_code: number | null; error: string | null; event_id: string }[]; total: number };
}
async function dlq(id: string) {
  const res = await t.request('GET', `/api/v1/webhooks/${id}/dlq`, { token: alice.token });
  expect(res.status, res.text).toBe(200);
  return res.body as { entries: { event_id: string; attempt_count: number; error: string; event_type: string; message_id: string }[]; total: number };
}
async function get(id: string, token = alice.token) {
  return t.request('GET', `/api/v1/webhooks/${id}`, { token });
}
function verify(secret: string, delivery: ReceivedDelivery) {
  return new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>);
}
/** Signature check without the library's 5-minute timestamp window (for deliveries after the manual clock moved). */
function signedWith(secret: string, delivery: ReceivedDelivery): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.${delivery.body}`).digest('base64');
  return String(delivery.headers['webhook-signature']).split(' ').includes(`v1,${expected}`);
}
/** Runs every due retry: moves the manual clock past the longest backoff and waits for the attempt to land. */
async function nextAttempt(path: string, count: number) {
  clock().advance(RETRY_WAIT_MS);
  await until(() => at(path).length >= count, `attempt ${count} at ${path}`);
}

describe('redirects', () => {
  it('keeps the custom headers within the target\'s origin: a redirect elsewhere carries only the signed ones', async () => {
    const user = await t.newUser('redir');
    const same = newPath('landed-same');
    const cross = newPath('landed-cross');
    receiver.respond.set('/hop-same', () => ({ status: 307, headers: { location: same } }));
    // Another origin: the same receiver under another host name.
    receiver.respond.set('/hop-cross', () => ({ status: 307, headers: { location: `http://localhost:${receiver.port}${cross}` } }));
    for (const path of ['/hop-same', '/hop-cross']) {
      const hook = await create({ url: `${receiver.url}${path}`, events: ['test.webhook'], headers: { Authorization: 'Bearer TOPSECRET', 'X-Team': 'core' } }, user.token);
      expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: user.token })).status).toBe(200);
    }
    const [kept] = await until(() => at(same).length === 1 && at(same), 'the same-origin hop');
    const [dropped] = await until(() => at(cross).length === 1 && at(cross), 'the cross-origin hop');
    expect(kept.headers).toMatchObject({ authorization: 'Bearer TOPSECRET', 'x-team': 'core' });
    expect(dropped.headers.authorization).toBeUndefined();
    expect(dropped.headers['x-team']).toBeUndefined();
    expect(dropped.headers).toMatchObject({ 'webhook-id': expect.any(String), 'webhook-signature': expect.stringMatching(/^v1,/), 'content-type': 'application/json' });
  });
});

describe('an answer whose body never ends', () => {
  it('counts by its status: a 2xx is delivered once its headers come within the time-out, the body read until then', async () => {
    const trickler = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.write('accepted, ');
      // ...and never ends: the socket stays open until the server closes.
    });
    await new Promise<void>((resolve) => trickler.listen(0, '127.0.0.1', resolve));
    try {
      const user = await t.newUser('trickle');
      const hook = await create({ url: `http://127.0.0.1:${(trickler.address() as AddressInfo).port}/slow`, events: ['test.webhook'] }, user.token);
      expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: user.token })).status).toBe(200);
      const log = await until(async () => {
        const res = await deliveries(hook.id, user.token);
        return res.total === 1 && res;
      }, 'the attempt');
      expect(log.deliveries[0]).toMatchObject({ attempt_number: 1, success: true, status_code: 200, error: null });
    } finally {
      trickler.closeAllConnections();
      await new Promise((resolve) => trickler.close(resolve));
    }
  });
});

describe('catalog and CRUD', () => {
  it('lists the fixed event catalog', async () => {
    const res = await t.request('GET', '/api/v1/webhooks/events', { token: alice.token });
    expect(res.status).toBe(200);
    expect(res.body.events.map((e: { event_type: string }) => e.event_type)).toEqual(['entity.status_changed', 'entity.liveness_anomaly', 'rate_limit.exceeded', 'test.webhook']);
  });

  it('creates with 201 and the envelope; refuses unknown events with BAD_REQUEST and bad URLs or headers with 400', async () => {
    const res = await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { url: `${receiver.url}/a`, events: ['test.webhook'], headers: { 'X-Team': 'core' } } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ status: 201, msg: expect.any(String), data: { url: `${receiver.url}/a`, events: ['test.webhook'], headers: { 'X-Team': 'core' }, active: true } });
    expect(res.body.data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(res.body.data.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    expect(res.body.data.id).toMatch(/^wh_/);
    expectError(await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { url: `${receiver.url}/a`, events: ['user.created'] } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { url: 'not a url', events: ['test.webhook'] } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { url: 'ftp://x.example/', events: ['test.webhook'] } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { url: `${receiver.url}/a`, events: ['test.webhook'], headers: { 'webhook-id': 'x' } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { events: ['test.webhook'] } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/webhooks', { body: { url: `${receiver.url}/a`, events: ['test.webhook'] } }), 401, 'unauthorized');
  });

  it('reads, patches and deletes for the owner; another tenant gets 404, unless a platform admin', async () => {
    const hook = await create({ url: `${receiver.url}/crud`, events: ['test.webhook'] });
    const read = await get(hook.id);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: hook.id, created_by: alice.user_id, consecutive_failures: 0, disabled_at: null, disabled_reason: null, last_failure_at: null, secret: hook.secret, headers: null });
    expect(typeof read.body.created_at).toBe('number');
    expectError(await get(hook.id, bob.token), 404, 'not_found');
    expectError(await t.request('PATCH', `/api/v1/webhooks/${hook.id}`, { token: bob.token, body: { active: false } }), 404, 'not_found');
    expectError(await t.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token: bob.token }), 404, 'not_found');
    expectError(await t.request('POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, { token: bob.token }), 404, 'not_found');
    expect((await get(hook.id, adminToken)).status).toBe(200);
    expectError(await get('wh_nope'), 404, 'not_found');

    const patched = await t.request('PATCH', `/api/v1/webhooks/${hook.id}`, { token: alice.token, body: { events: ['test.webhook', 'entity.status_changed'], headers: { 'X-A': '1' } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ events: ['test.webhook', 'entity.status_changed'], headers: { 'X-A': '1' }, active: true });
    expectError(await t.request('PATCH', `/api/v1/webhooks/${hook.id}`, { token: alice.token, body: { events: ['bogus'] } }), 400, 'BAD_REQUEST');
    const admin = await t.request('PATCH', `/api/v1/webhooks/${hook.id}`, { token: adminToken, body: { headers: null } });
    expect(admin.body.headers).toBeNull();

    expect((await t.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token: alice.token })).status).toBe(204);
    expectError(await get(hook.id), 404, 'not_found');
  });

  it("answers an organization's webhook only in the organization: another member gets 403, its creator after leaving gets 404", async () => {
    const { org_id, owner, member, ownerKey, memberKey } = await orgOfTwo(t, 'Hooks Org');
    const ownerPath = `/org-owner-${++pathCounter}`;
    await create({ url: `${receiver.url}${ownerPath}`, events: ['test.webhook'], headers: { Authorization: 'Bearer OWNER' } }, ownerKey);
    const mine = await create({ url: `${receiver.url}/org-member-${pathCounter}`, events: ['test.webhook'] }, memberKey);
    expectError(await get(mine.id, ownerKey), 403, 'forbidden');
    // The member's personal token is another tenant's credential.
    expectError(await get(mine.id, member.token), 404, 'not_found');
    expect((await get(mine.id, memberKey)).status).toBe(200);
    // Removed from the organization, the member keeps no hold on the webhook made there.
    expect((await t.request('DELETE', `/api/v1/orgs/${org_id}/members/${member.user_id}`, { token: owner.token })).status).toBe(200);
    expectError(await t.request('PATCH', `/api/v1/webhooks/${mine.id}`, { token: member.token, body: { url: `${receiver.url}/stolen` } }), 404, 'not_found');
    expectError(await t.request('POST', `/api/v1/webhooks/${mine.id}/test`, { token: member.token, body: { data: { forged: true } } }), 404, 'not_found');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(at(ownerPath)).toEqual([]);
    // A platform admin still manages it.
    expect((await t.request('DELETE', `/api/v1/webhooks/${mine.id}`, { token: adminToken })).status).toBe(204);
  });

  it('lists the caller\'s webhooks with filters, sort and paging; other users see none of them', async () => {
    const carol = await t.newUser('carol');
    const one = await create({ url: `${receiver.url}/l1`, events: ['test.webhook'] }, carol.token);
    clock().advance(1000);
    const two = await create({ url: `${receiver.url}/l2`, events: ['entity.status_changed'] }, carol.token);
    await t.request('PATCH', `/api/v1/webhooks/${two.id}`, { token: carol.token, body: { active: false } });
    const all = await t.request('GET', '/api/v1/webhooks', { token: carol.token });
    expect(all.status, all.text).toBe(200);
    expect(all.body.pagination).toEqual({ page: 1, page_size: 20, total: 2, has_more: false });
    expect(all.body.webhooks.map((w: { id: string }) => w.id)).toEqual([one.id, two.id]);
    const inactive = await t.request('GET', '/api/v1/webhooks?filter=active:eq:false', { token: carol.token });
    expect(inactive.body.webhooks.map((w: { id: string }) => w.id)).toEqual([two.id]);
    const byEvent = await t.request('GET', '/api/v1/webhooks?filter=events:contains:test.webhook&sort_order=desc', { token: carol.token });
    expect(byEvent.body.webhooks.map((w: { id: string }) => w.id)).toEqual([one.id]);
    const paged = await t.request('GET', '/api/v1/webhooks?page_size=1&page=2', { token: carol.token });
    expect(paged.body).toMatchObject({ pagination: { page: 2, page_size: 1, total: 2, has_more: false }, webhooks: [{ id: two.id }] });
    expectError(await t.request('GET', '/api/v1/webhooks?filter=color:eq:red', { token: carol.token }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/webhooks?filter=active:like:x', { token: carol.token }), 400, 'BAD_REQUEST');
    // Other users of the platform see none of them.
    expect((await t.request('GET', '/api/v1/webhooks', { token: bob.token })).body.pagination.total).toBe(0);
  });
});

describe('delivery', () => {
  it('test fans test.webhook out to every active subscribed webhook, signed (Standard Webhooks) with custom headers; inactive: invalid_configuration', async () => {
    const dave = await t.newUser('dave');
    const p1 = newPath('fan');
    const p2 = newPath('fan');
    const p3 = newPath('fan');
    const named = await create({ url: `${receiver.url}${p1}`, events: ['entity.status_changed'], headers: { 'X-Custom': 'yes' } }, dave.token);
    const subscribed = await create({ url: `${receiver.url}${p2}`, events: ['test.webhook'] }, dave.token);
    const other = await create({ url: `${receiver.url}${p3}`, events: ['entity.liveness_anomaly'] }, dave.token);
    const res = await t.request('POST', `/api/v1/webhooks/${named.id}/test`, { token: dave.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ enqueued: true, webhook_id: named.id });
    const [first] = await until(() => at(p1).length === 1 && at(p1), 'the named webhook\'s delivery');
    const [second] = await until(() => at(p2).length === 1 && at(p2), 'the subscribed webhook\'s delivery');
    expect(verify(named.secret, first)).toMatchObject({ type: 'test.webhook', data: { webhook_id: named.id } });
    expect(verify(subscribed.secret, second)).toMatchObject({ type: 'test.webhook' });
    expect(first.headers['webhook-id']).toBe(second.headers['webhook-id']);
    expect(first.json).toMatchObject({ id: first.headers['webhook-id'], type: 'test.webhook', timestamp: expect.any(String) });
    expect(first.headers['service-signature']).toBe(first.headers['webhook-signature']);
    expect(first.headers['x-custom']).toBe('yes');
    expect(first.headers['content-type']).toBe('application/json');
    expect(at(p3)).toHaveLength(0);
    await until(async () => (await deliveries(named.id, dave.token)).total === 1, 'the delivery log');
    expect((await deliveries(named.id, dave.token)).deliveries[0]).toMatchObject({ attempt_number: 1, success: true, status_code: 200, error: null, event_id: first.headers['webhook-id'] });

    await t.request('PATCH', `/api/v1/webhooks/${named.id}`, { token: dave.token, body: { active: false } });
    expectError(await t.request('POST', `/api/v1/webhooks/${named.id}/test`, { token: dave.token }), 400, 'invalid_configuration');
    void other;
  });

  it('keeps each attempt\'s request and response in the delivery log, bounded', async () => {
    const path = newPath('logged');
    let calls = 0;
    receiver.respond.set(path, () => ({ status: ++calls === 1 ? 503 : 200, headers: { 'x-receiver': `call-${calls}` } }));
    const hook = await create({ url: `${receiver.url}${path}`, events: ['test.webhook'], headers: { 'X-Team': 'core' } });
    const big = 'x'.repeat(5_000);
    expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: alice.token, body: { data: { big } } })).status).toBe(200);
    await until(async () => (await deliveries(hook.id)).total === 1, 'attempt 1 logged');
    clock().advance(RETRY_WAIT_MS);
    await until(async () => (await deliveries(hook.id)).total === 2, 'attempt 2 logged');
    const [second, first] = (await deliveries(hook.id)).deliveries as any[];
    const sent = at(path);
    expect(first).toMatchObject({ attempt_number: 1, success: false, status_code: 503 });
    expect(first.request).toMatchObject({
      method: 'POST',
      url: `${receiver.url}${path}`,
      headers: { 'X-Team': 'core', 'content-type': 'application/json', 'webhook-id': sent[0].headers['webhook-id'], 'webhook-signature': sent[0].headers['webhook-signature'] },
      body_truncated: true,
    });
    expect(first.request.body).toBe(sent[0].body.slice(0, 4_096));
    expect(first.response).toEqual({ status_code: 503, headers: expect.objectContaining({ 'x-receiver': 'call-1', 'content-type': 'text/plain' }), body: 'failed with 503', body_truncated: false });
    expect(second.request.headers['webhook-timestamp']).toBe(sent[1].headers['webhook-timestamp']);
    expect(second.response).toMatchObject({ status_code: 200, headers: { 'x-receiver': 'call-2' }, body: 'ok' });
  });

  it('logs no response for an attempt that got none (time-out)', async () => {
    const path = newPath('hang');
    receiver.respond.set(path, 'hang');
    const hook = await create({ url: `${receiver.url}${path}`, events: ['test.webhook'] });
    await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: alice.token });
    await until(async () => (await deliveries(hook.id)).total === 1, 'the timed-out attempt logged', 2000);
    const [entry] = (await deliveries(hook.id)).deliveries as any[];
    expect(entry).toMatchObject({ status_code: null, response: null, error: expect.stringMatching(/timeout/), request: { method: 'POST', url: `${receiver.url}${path}` } });
    await t.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token: alice.token });
  });

  it('dead-letters a 4xx at once; disables after the threshold of exhausted events; enable clears it; purge empties the DLQ', async () => {
    const path = newPath('gone');
    receiver.respond.set(path, 410);
    const hook = await create({ url: `${receiver.url}${path}`, events: ['test.webhook'] });
    for (let i = 1; i <= 3; i++) {
      const res = await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: alice.token });
      expect(res.status, res.text).toBe(200);
      await until(async () => (await dlq(hook.id)).total === i, `event ${i} dead-lettered`);
    }
    expect(at(path)).toHaveLength(3);
    const disabled = await get(hook.id);
    expect(disabled.body).toMatchObject({ active: false, consecutive_failures: 3, disabled_at: expect.any(Number), disabled_reason: expect.stringMatching(/3 consecutive/) });
    expect((await dlq(hook.id)).entries[0]).toMatchObject({ attempt_count: 1, error: expect.stringMatching(/410/) });
    const listed = await t.request('GET', '/api/v1/webhooks?filter=active:eq:false', { token: alice.token });
    expect(listed.body.webhooks.map((w: { id: string }) => w.id)).toContain(hook.id);
    expectError(await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: alice.token }), 400, 'invalid_configuration');

    const enabled = await t.request('POST', `/api/v1/webhooks/${hook.id}/enable`, { token: alice.token });
    expect(enabled.status, enabled.text).toBe(200);
    expect(enabled.body).toMatchObject({ active: true, consecutive_failures: 0, disabled_at: null, disabled_reason: null });
    const purged = await t.request('DELETE', `/api/v1/webhooks/${hook.id}/dlq`, { token: alice.token });
    expect(purged.body).toEqual({ purged: 3 });
    expect((await dlq(hook.id)).total).toBe(0);
  });

  it('rotate-secret signs later deliveries with the new secret at once (and the previous one alongside)', async () => {
    const path = newPath('rotate');
    const hook = await create({ url: `${receiver.url}${path}`, events: ['test.webhook'] });
    const rotated = await t.request('POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, { token: alice.token });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.secret).not.toBe(hook.secret);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: alice.token });
    const [delivery] = await until(() => at(path).length === 1 && at(path), 'the delivery');
    expect(verify(rotated.body.secret, delivery)).toMatchObject({ type: 'test.webhook' });
    expect(verify(hook.secret, delivery)).toMatchObject({ type: 'test.webhook' });
    expect(String(delivery.headers['webhook-signature']).split(' ')).toHaveLength(2);
  });

  it('delivers liveness events: entity.status_changed from a heartbeat, under the tenant\'s webhooks', async () => {
    const erin = await t.newUser('erin');
    const path = newPath('liveness');
    const hook = await create({ url: `${receiver.url}${path}`, events: ['entity.status_changed'] }, erin.token);
    const beat = await t.request('POST', '/api/v1/liveness', { token: erin.token, body: { entity_id: 'sensor-1' } });
    expect(beat.status, beat.text).toBe(200);
    const [delivery] = await until(() => at(path).length === 1 && at(path), 'the status_changed delivery');
    expect(verify(hook.secret, delivery)).toMatchObject({ type: 'entity.status_changed', data: { entity_id: 'sensor-1', old_status: 'unknown', new_status: 'alive' } });
    // Another tenant's heartbeat reaches none of erin's webhooks.
    await t.request('POST', '/api/v1/liveness', { token: alice.token, body: { entity_id: 'sensor-1' } });
    await settle();
    expect(at(path)).toHaveLength(1);
  });
  it('retries 5xx, 429 and time-outs with backoff, then dead-letters after 5 attempts under one webhook-id; redrive sends redrive_<id> with the original payload', async () => {
    const path = newPath('retry');
    // Attempt n answers plan[n - 1]; 'hang' never answers (the 400 ms time-out ends the attempt).
    const plan: (number | 'hang')[] = [500, 429, 'hang', 503, 502, 200];
    receiver.respond.set(path, () => {
      const answer = plan[at(path).length - 1] ?? 200;
      return answer === 'hang' ? 'hang' : { status: answer };
    });
    const hook = await create({ url: `${receiver.url}${path}`, events: ['test.webhook'] });
    await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: alice.token, body: { data: { order: 42 } } });
    await until(() => at(path).length === 1, 'attempt 1');
    await until(async () => (await deliveries(hook.id)).total === 1, 'attempt 1 logged');
    await nextAttempt(path, 2);
    await until(async () => (await deliveries(hook.id)).total === 2, 'attempt 2 logged');
    await nextAttempt(path, 3);
    await until(async () => (await deliveries(hook.id)).total === 3, 'attempt 3 times out', 2000);
    await nextAttempt(path, 4);
    await until(async () => (await deliveries(hook.id)).total === 4, 'attempt 4 logged');
    await nextAttempt(path, 5);
    await until(async () => (await dlq(hook.id)).total === 1, 'dead-lettered');

    const log = (await deliveries(hook.id)).deliveries;
    expect(log.map((d) => d.attempt_number)).toEqual([5, 4, 3, 2, 1]);
    expect(log.map((d) => d.status_code)).toEqual([502, 503, null, 429, 500]);
    expect(log[2].error).toMatch(/timeout/);
    const ids = new Set(at(path).map((d) => d.headers['webhook-id']));
    expect(ids.size).toBe(1);
    for (const delivery of at(path)) expect(signedWith(hook.secret, delivery)).toBe(true);
    const [entry] = (await dlq(hook.id)).entries;
    expect(entry).toMatchObject({ attempt_count: 5, event_type: 'test.webhook', event_id: [...ids][0], message_id: [...ids][0], error: expect.stringMatching(/502/) });
    const read = await get(hook.id);
    expect(read.body).toMatchObject({ consecutive_failures: 1, active: true, last_failure_at: expect.any(Number) });

    expectError(await t.request('POST', `/api/v1/webhooks/${hook.id}/dlq/evt_unknown/redrive`, { token: alice.token }), 404, 'dlq_entry_not_found');
    const redriven = await t.request('POST', `/api/v1/webhooks/${hook.id}/dlq/${entry.event_id}/redrive`, { token: alice.token });
    expect(redriven.status, redriven.text).toBe(200);
    expect(redriven.body).toEqual({ event_id: `redrive_${entry.event_id}`, redriven: true, webhook_id: hook.id });
    const again = await until(() => at(path).length === 6 && at(path)[5], 'the redriven delivery');
    expect(again.headers['webhook-id']).toBe(`redrive_${entry.event_id}`);
    expect(again.json).toMatchObject({ id: `redrive_${entry.event_id}`, type: 'test.webhook', data: { order: 42 } });
    expect(again.json.timestamp).toBe(at(path)[0].json.timestamp);
    expect((await dlq(hook.id)).total).toBe(0);
    await until(async () => (await get(hook.id)).body.consecutive_failures === 0, 'success resets the count');
  });
});
