import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * Rituals over the real socket (spec doc 2 §4.10; docs/api/rituals.md): a
 * three-member organization acting through organization API keys, so the
 * parties share a tenant; escalations reach a local webhook receiver and a
 * message-queue topic read back through a subscribed queue.
 */
let t: TestNode;
let receiver: Receiver;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let carol: User;
let outsider: User;
/** Organization API keys: the tenant is the organization, user_id the member. */
const keys: Record<'alice' | 'bob' | 'carol', string> = { alice: '', bob: '', carol: '' };
const base = '/api/v1/rituals';

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400 * 30 } });
  [alice, bob, carol, outsider] = await Promise.all([t.newUser('alice'), t.newUser('bob'), t.newUser('carol'), t.newUser('outsider')]);
  const org = await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Ritual Co' } });
  expect(org.status, org.text).toBe(201);
  const org_id = org.body.org_id as string;
  for (const member of [bob, carol]) {
    const invite = await t.request('POST', `/api/v1/orgs/${org_id}/invitations`, { token: alice.token, body: { email: member.email, role: 'member' } });
    expect(invite.status, invite.text).toBe(201);
    const accepted = await t.request('POST', `/api/v1/auth/invitations/${invite.body.id}/accept`, { token: member.token, body: { token: invite.body.token } });
    expect(accepted.status, accepted.text).toBe(200);
  }
  for (const [name, user] of [['alice', alice], ['bob', bob], ['carol', carol]] as const) {
    const key = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'rituals', scopes: ['*'], org_id } });
    expect(key.status, key.text).toBe(201);
    keys[name] = key.body.key;
  }
});
afterAll(async () => {
  await t?.destroy();
  await receiver?.close();
});

const clock = () => t.clock as ManualClock;
async function until<T>(check: () => Promise<T | undefined | false> | T | undefined | false, what: string): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await check();
    if (value) return value;
    clock().advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}
const as = (who: keyof typeof keys) => keys[who];
async function ok(method: string, path: string, token: string, body?: unknown, status = 200) {
  const res = await t.request(method, path, { token, body });
  expect(res.status, res.text).toBe(status);
  return res.body;
}
function parts(...names: (keyof typeof keys)[]) {
  const ids = { alice: () => alice.user_id, bob: () => bob.user_id, carol: () => carol.user_id };
  return names.map((name) => ({ part_id: name, assigned_to: ids[name]() }));
}
async function define(body: Record<string, unknown>, token = as('alice')) {
  const created = await ok('POST', `${base}/definitions`, token, { name: 'launch', parts: parts('alice', 'bob', 'carol'), window_ms: 2_000, ...body }, 201);
  return created.ritual_def_id as string;
}
async function arm(def_id: string, token = as('alice'), body: Record<string, unknown> = {}) {
  return ok('POST', `${base}/${def_id}/arm`, token, body, 201);
}
const perform = (attempt_id: string, part_id: string, token: string) => t.request('POST', `${base}/attempts/${attempt_id}/perform`, { token, body: { part_id } });
const api = (path: string) => `/api/v1/mq${path}`;
async function queueOnTopic(topic: string, queue: string) {
  await ok('POST', api('/topics'), as('alice'), { name: topic }, 201);
  await ok('POST', api('/queues'), as('alice'), { name: queue }, 201);
  const sub = await t.request('POST', api(`/topics/${topic}/subscriptions`), { token: as('alice'), body: { queue_name: queue } });
  expect(sub.status, sub.text).toBeLessThan(300);
}
async function receiveAll(queue: string) {
  const res = await t.request('POST', api(`/queues/${queue}/receive`), { token: as('alice'), body: { max_messages: 10 } });
  expect(res.status, res.text).toBe(200);
  return (res.body.messages as { body: string }[]).map((m) => JSON.parse(JSON.parse(m.body).body));
}

describe('definitions', () => {
  it('creates with defaults, reads, lists with q, sort and filter, versions on PUT; another tenant sees 404', async () => {
    const def_id = await define({ name: 'dawn chorus', description: 'three voices' });
    const def = await ok('GET', `${base}/definitions/${def_id}`, as('bob'));
    expect(def).toMatchObject({
      ritual_def_id: def_id, name: 'dawn chorus', mode: 'forward', ordering: ['alice', 'bob', 'carol'], quorum: { required: 3, of: 3 },
      checkin_interval_seconds: 0, arm_ttl_seconds: 3600, escalation: [], on_complete: null, on_dispute: 'none', version: 1, created_by: alice.user_id,
    });
    expect(def.parts[0]).toEqual({ part_id: 'alice', assigned_to: alice.user_id, actor_type: 'user' });

    const listed = await ok('GET', `${base}/definitions?q=chorus`, as('carol'));
    expect(listed.definitions.map((d: { ritual_def_id: string }) => d.ritual_def_id)).toEqual([def_id]);
    expect(listed.pagination).toEqual({ page: 1, page_size: 20, total: 1, has_more: false });
    const filtered = await ok('GET', `${base}/definitions?filter=name:eq:dawn%20chorus&sort_by=name&sort_order=asc`, as('carol'));
    expect(filtered.definitions).toHaveLength(1);
    expectError(await t.request('GET', `${base}/definitions?filter=colour:eq:red`, { token: as('carol') }), 400, 'BAD_REQUEST');
    // A value the field cannot hold is a 400 naming it, not an empty list.
    for (const filter of ['version:gt:abc', 'created_at:gt:notadate', 'version:in:1|x', 'version:eq:1.5']) {
      const refused = await t.request('GET', `${base}/definitions?filter=${encodeURIComponent(filter)}`, { token: as('carol') });
      expectError(refused, 400, 'BAD_REQUEST');
      expect(refused.body.details[0].field, filter).toBe('querystring.filter');
    }
    for (const filter of ['version:gte:1', 'created_at:gt:2020-01-01T00:00:00Z', 'created_at:gt:0', 'version:in:1|2']) {
      expect((await t.request('GET', `${base}/definitions?filter=${encodeURIComponent(filter)}`, { token: as('carol') })).status, filter).toBe(200);
    }

    // Only the creator changes it; a change is a new version, the old one stays readable.
    expectError(await t.request('PUT', `${base}/definitions/${def_id}`, { token: as('bob'), body: { name: 'x', parts: parts('bob'), window_ms: 10 } }), 403, 'forbidden');
    const v2 = await ok('PUT', `${base}/definitions/${def_id}`, as('alice'), { name: 'dawn chorus', parts: parts('alice', 'bob'), window_ms: 500, mode: 'reverse' });
    expect(v2).toMatchObject({ version: 2, mode: 'reverse', window_ms: 500 });
    expect(await ok('GET', `${base}/definitions/${def_id}?version=1`, as('alice'))).toMatchObject({ version: 1, window_ms: 2_000 });
    expectError(await t.request('GET', `${base}/definitions/${def_id}?version=9`, { token: as('alice') }), 404, 'not_found');
    expectError(await t.request('PUT', `${base}/definitions/nope`, { token: as('alice'), body: { name: 'x', parts: parts('bob'), window_ms: 10 } }), 404, 'not_found');
    // An attempt armed from version 1 keeps version 1's rules.
    const old = await arm(def_id, as('alice'), { version: 1 });
    expect(old.version).toBe(1);
    expect((await ok('GET', `${base}/attempts/${old.attempt_id}`, as('alice'))).version).toBe(1);

    // The outsider's tenant is their own: the definition does not exist there.
    expectError(await t.request('GET', `${base}/definitions/${def_id}`, { token: outsider.token }), 404, 'not_found');
    expectError(await t.request('POST', `${base}/${def_id}/arm`, { token: outsider.token }), 404, 'not_found');
    expect((await ok('GET', `${base}/definitions`, outsider.token)).definitions).toEqual([]);
  });

  it('refuses inconsistent definitions with 400 and a stable code', async () => {
    const bad = async (body: Record<string, unknown>, field: string) => {
      const res = await t.request('POST', `${base}/definitions`, { token: as('alice'), body: { name: 'bad', parts: parts('alice', 'bob'), window_ms: 1_000, ...body } });
      expectError(res, 400, 'BAD_REQUEST');
      expect(JSON.stringify(res.body.details)).toContain(field);
    };
    await bad({ parts: [...parts('alice'), ...parts('alice')] }, 'part_id');
    await bad({ ordering: ['alice'] }, 'ordering');
    await bad({ ordering: ['alice', 'zed'] }, 'ordering');
    await bad({ quorum: { required: 3, of: 2 } }, 'quorum');
    await bad({ quorum: { required: 1, of: 5 } }, 'quorum.of');
    await bad({ escalation: [{ after_missed_seconds: 5, webhook_ids: ['w'] }] }, 'checkin_interval_seconds');
    await bad({ checkin_interval_seconds: 5, escalation: [{ after_missed_seconds: 5 }] }, 'escalation.0');
    await bad({ window_ms: 0 }, 'window_ms');
    await bad({ mode: 'sideways' }, 'mode');
    // A part id that is a name of Object.prototype (it keys the analytics' lateness record).
    for (const part_id of ['__proto__', 'constructor']) await bad({ parts: [{ part_id, assigned_to: alice.user_id }], ordering: [part_id] }, 'part_id');
    expectError(await t.request('POST', `${base}/definitions`, { token: as('alice'), body: { name: 'no parts', parts: [], window_ms: 5 } }), 400, 'BAD_REQUEST');
  });
});

describe('attempts', () => {
  it('completes when the quorum performs in order within the window; refuses strangers, repeats and out-of-order with nothing changed', async () => {
    const def_id = await define({ mode: 'forward', window_ms: 2_000 });
    const armed = await arm(def_id, as('bob'));
    expect(armed).toMatchObject({ status: 'armed', rehearsal: false, ritual_def_id: def_id, version: 1 });
    expect(armed.deadline_ms - armed.armed_at_ms).toBe(3600 * 1000);
    const id = armed.attempt_id as string;

    // Bob may not perform alice's part: 403, and the attempt is unchanged.
    const untouched = await ok('GET', `${base}/attempts/${id}`, as('alice'));
    expectError(await perform(id, 'alice', as('bob')), 403, 'ritual_not_assignee');
    expectError(await t.request('POST', `${base}/attempts/${id}/checkin`, { token: as('carol'), body: { part_id: 'bob' } }), 403, 'ritual_not_assignee');
    expect(await ok('GET', `${base}/attempts/${id}`, as('alice'))).toEqual(untouched);
    expectError(await perform(id, 'nobody', as('bob')), 404, 'ritual_part_not_found');
    // Forward: alice first; carol may not skip bob, since every part is required (the attempt could never complete).
    await ok('POST', `${base}/attempts/${id}/checkin`, as('alice'), { part_id: 'alice' });
    const first = await perform(id, 'alice', as('alice'));
    expectError(await t.request('POST', `${base}/attempts/${id}/checkin`, { token: as('alice'), body: { part_id: 'alice' } }), 409, 'ritual_part_already_performed');
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ performed: 1, required: 3, status: 'performing', report: null });
    clock().advance(500);
    const skip = await perform(id, 'carol', as('carol'));
    expectError(skip, 409, 'ritual_out_of_order');
    expect(skip.body.details).toMatchObject({ part_id: 'carol', skipped: ['bob'], quorum: { required: 3, of: 3 } });
    const view = await ok('GET', `${base}/attempts/${id}`, as('bob'));
    expect(view.performances.map((p: { part_id: string }) => p.part_id)).toEqual(['alice']);
    expect(view.status).toBe('performing');
    // The window closes short of the quorum: the alarm fails it, naming bob and carol as late.
    clock().advance(1_600);
    const failed = await until(async () => {
      const res = await ok('GET', `${base}/${def_id}/history?status=failed`, as('alice'));
      return res.attempts.find((a: { attempt_id: string }) => a.attempt_id === id);
    }, 'the window alarm');
    expect(failed.report).toMatchObject({
      outcome: 'failed', reason: 'window_closed', performed: 1, required: 3,
      late: [{ part_id: 'bob', late_by_ms: null, performed: false }, { part_id: 'carol', late_by_ms: null, performed: false }],
    });
    // A late performance is still recorded, with how late (a near miss: within one window).
    clock().advance(300);
    const late = await perform(id, 'bob', as('bob'));
    expect(late.status, late.text).toBe(200);
    expect(late.body).toMatchObject({ status: 'failed', late_by_ms: 400 });
    expect(late.body.report.late).toEqual([
      { part_id: 'bob', assigned_to: bob.user_id, late_by_ms: 400, performed: true },
      { part_id: 'carol', assigned_to: carol.user_id, late_by_ms: null, performed: false },
    ]);

    // A clean run: in order, within the window.
    const second = (await arm(def_id)).attempt_id as string;
    for (const who of ['alice', 'bob', 'carol'] as const) {
      const res = await perform(second, who, as(who));
      expect(res.status, res.text).toBe(200);
      clock().advance(100);
    }
    const done = await ok('GET', `${base}/attempts/${second}`, as('carol'));
    expect(done).toMatchObject({ status: 'completed' });
    expect(done.report).toMatchObject({ outcome: 'completed', reason: 'quorum_reached', spread_ms: 200, late: [], skipped: [] });
    expectError(await perform(second, 'alice', as('alice')), 409, 'ritual_part_already_performed');
    expectError(await t.request('POST', `${base}/attempts/${second}/checkin`, { token: as('alice'), body: { part_id: 'alice' } }), 409, 'ritual_attempt_closed');

    // Analytics, fed by outbox deltas: one success, one failure, bob the lateness leader with a near miss, then carol.
    const analytics = await until(async () => {
      const res = await ok('GET', `${base}/${def_id}/analytics`, as('alice'));
      return res.total_attempts === 2 && res.lateness_leaders[0]?.near_miss_count === 1 && res;
    }, 'analytics');
    expect(analytics).toMatchObject({ ritual_def_id: def_id, completed: 1, failed: 1, success_rate: 0.5, median_spread_ms: 200 });
    expect(analytics.lateness_leaders).toEqual([
      { part_id: 'bob', late_count: 1, near_miss_count: 1, total_late_ms: 400 },
      { part_id: 'carol', late_count: 1, near_miss_count: 0, total_late_ms: 0 },
    ]);
    const sampled = await ok('GET', `${base}/${def_id}/analytics?sample=1`, as('alice'));
    expect(sampled).toMatchObject({ total_attempts: 1, completed: 1, failed: 0, success_rate: 1, lateness_leaders: [], sampled: 1 });
  });

  it('reverse and any_order modes, a partial quorum, rehearsals out of the analytics, and the deadline alarm', async () => {
    const reverse = await define({ mode: 'reverse', quorum: { required: 2, of: 3 } });
    const id = (await arm(reverse, as('carol'), { rehearsal: true })).attempt_id as string;
    const c = await perform(id, 'carol', as('carol'));
    expect(c.status, c.text).toBe(200);
    const a = await perform(id, 'alice', as('alice'));
    expect(a.body).toMatchObject({ status: 'completed', performed: 2, required: 2 });
    expect(a.body.report.skipped).toEqual(['bob']);
    const rehearsal = await ok('GET', `${base}/attempts/${id}`, as('alice'));
    expect(rehearsal.rehearsal).toBe(true);
    await until(async () => (await ok('GET', `${base}/${reverse}/history`, as('alice'))).attempts[0]?.status === 'completed', 'the history');
    expect(await ok('GET', `${base}/${reverse}/analytics`, as('alice'))).toMatchObject({ total_attempts: 0, completed: 0 });

    const anyOrder = await define({ mode: 'any_order', arm_ttl_seconds: 60, window_ms: 60_000 });
    const x = (await arm(anyOrder)).attempt_id as string;
    expect((await perform(x, 'carol', as('carol'))).status).toBe(200);
    expect((await perform(x, 'alice', as('alice'))).status).toBe(200);
    clock().advance(60_000);
    const expired = await until(async () => {
      const res = await ok('GET', `${base}/${anyOrder}/history?status=failed`, as('alice'));
      return res.attempts[0];
    }, 'the deadline alarm');
    expect(expired.report).toMatchObject({ reason: 'deadline', late: [{ part_id: 'bob', performed: false }] });
    expectError(await perform(x, 'bob', as('bob')), 409, 'ritual_attempt_closed');
  });

  it('countdown publishes on the channel topic and holds performances until the window opens', async () => {
    await queueOnTopic('ritual-start', 'ritual-start-q');
    const def_id = await define({ announce_channel: 'ritual-start', parts: parts('alice', 'bob'), window_ms: 1_000, on_complete: { pubsub_channel: 'ritual-start' } });
    // Carol is neither the creator nor an assignee: she may not arm it.
    expectError(await t.request('POST', `${base}/${def_id}/arm`, { token: as('carol'), body: {} }), 403, 'forbidden');
    const id = (await arm(def_id)).attempt_id as string;
    expectError(await t.request('POST', `${base}/attempts/${id}/countdown`, { token: outsider.token, body: {} }), 404, 'not_found');
    const countdown = await ok('POST', `${base}/attempts/${id}/countdown`, as('bob'), { seconds: 5 });
    expect(countdown).toMatchObject({ attempt_id: id, channel: 'ritual-start', seconds: 5, status: 'counting_down' });
    expect(countdown.window_open_ms).toBe(clock().now() + 5_000);
    expectError(await t.request('POST', `${base}/attempts/${id}/countdown`, { token: as('bob'), body: {} }), 409, 'ritual_attempt_state');
    expectError(await perform(id, 'alice', as('alice')), 409, 'ritual_window_not_open');
    const announced = await until(async () => (await receiveAll('ritual-start-q'))[0], 'the countdown on the topic');
    expect(announced).toMatchObject({ type: 'ritual.countdown', data: { attempt_id: id, ritual_def_id: def_id, seconds: 5, window_open_ms: countdown.window_open_ms } });
    clock().advance(5_000);
    expect((await perform(id, 'alice', as('alice'))).body).toMatchObject({ status: 'performing' });
    expect((await perform(id, 'bob', as('bob'))).body).toMatchObject({ status: 'completed' });
    const completed = await until(async () => (await receiveAll('ritual-start-q')).find((m) => m.type === 'ritual.completed'), 'on_complete on the topic');
    expect(completed.data).toMatchObject({ attempt_id: id, report: { outcome: 'completed', reason: 'quorum_reached', performed: 2 } });
    const noChannel = (await arm(await define({}))).attempt_id;
    expectError(await t.request('POST', `${base}/attempts/${noChannel}/countdown`, { token: as('alice') }), 400, 'BAD_REQUEST');
  });
});

describe('check-ins and escalation', () => {
  it('a missed check-in escalates after after_missed_seconds: a signed delivery to the named webhook and a message on the topic', async () => {
    await queueOnTopic('pager', 'pager-q');
    const hook = await t.request('POST', '/api/v1/webhooks', { token: as('alice'), body: { url: `${receiver.url}/pager`, events: ['test.webhook'] } });
    expect(hook.status, hook.text).toBe(201);
    const webhook = hook.body.data as { id: string; secret: string };
    const def_id = await define({
      parts: parts('alice', 'bob'),
      checkin_interval_seconds: 60,
      arm_ttl_seconds: 3_600,
      escalation: [
        { after_missed_seconds: 30, webhook_ids: [webhook.id], pubsub_channel: 'pager' },
        { after_missed_seconds: 120, pubsub_channel: 'pager' },
      ],
    });
    const id = (await arm(def_id)).attempt_id as string;
    // Check-ins by the assignee only; each answers the next deadline.
    expectError(await t.request('POST', `${base}/attempts/${id}/checkin`, { token: as('bob'), body: { part_id: 'alice' } }), 403, 'ritual_not_assignee');
    clock().advance(50_000);
    const checkin = await ok('POST', `${base}/attempts/${id}/checkin`, as('alice'), { part_id: 'alice' });
    expect(checkin).toEqual({ attempt_id: id, part_id: 'alice', next_deadline_ms: clock().now() + 60_000, status: 'armed' });
    // Bob missed his at 60 s; the first step fires at 90 s with no request (alice checked in at 50 s: hers is due at 110 + 30 s).
    clock().advance(40_001);
    const delivered = await until(() => receiver.received.find((d) => d.path === '/pager'), 'the escalation webhook');
    const payload = new Webhook(webhook.secret).verify(delivered.body, delivered.headers as Record<string, string>) as { type: string; data: Record<string, unknown> };
    expect(payload).toMatchObject({ type: 'ritual.escalation', data: { attempt_id: id, part_id: 'bob', assigned_to: bob.user_id, step: 0, after_missed_seconds: 30 } });
    const published = await until(async () => (await receiveAll('pager-q')).find((m) => m.data.part_id === 'bob'), 'the escalation on the topic');
    expect(published).toMatchObject({ type: 'ritual.escalation', data: { step: 0, missed_at_ms: expect.any(Number) } });
    const view = await ok('GET', `${base}/attempts/${id}`, as('alice'));
    expect(view.escalations.map((e: { part_id: string; step: number }) => [e.part_id, e.step])).toEqual([['bob', 0]]);
    // Bob checks in: his escalation starts over, so no second step fires for him at 180 s.
    await ok('POST', `${base}/attempts/${id}/checkin`, as('bob'), { part_id: 'bob' });
    clock().advance(50_000);
    await until(async () => (await ok('GET', `${base}/attempts/${id}`, as('alice'))).escalations.length === 2, 'alice escalated');
    const after = await ok('GET', `${base}/attempts/${id}`, as('alice'));
    expect(after.escalations.map((e: { part_id: string; step: number }) => [e.part_id, e.step])).toEqual([['bob', 0], ['alice', 0]]);
  });
});

describe('bad input', () => {
  it('unknown attempts and definitions are 404; malformed bodies 400', async () => {
    expectError(await t.request('GET', `${base}/attempts/nope`, { token: as('alice') }), 404, 'not_found');
    expectError(await perform('nope', 'alice', as('alice')), 404, 'not_found');
    expectError(await t.request('GET', `${base}/nope/history`, { token: as('alice') }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/nope/analytics`, { token: as('alice') }), 404, 'not_found');
    expectError(await t.request('POST', `${base}/attempts/nope/perform`, { token: as('alice'), body: {} }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/attempts/nope/perform`, { token: as('alice'), body: { part_id: 'has space' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', `${base}/attempts/nope`), 401, 'unauthorized');
  });
});
