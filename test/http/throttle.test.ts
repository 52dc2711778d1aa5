import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Throttle plans over the real socket (spec doc 1 §4.14, §7; docs/api/throttle.md). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let planCounter = 0;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
const base = '/api/v1/throttle/plans';
const newPlanId = () => `plan-${++planCounter}`;

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

async function createPlan(body: Record<string, unknown> = {}, token = alice.token) {
  const plan_id = (body.plan_id as string | undefined) ?? newPlanId();
  const res = await t.request('POST', base, { token, body: { plan_id, limits: { max_requests: 3, window_seconds: 60 }, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

const check = (plan_id: string, body: Record<string, unknown>, query = '', token = alice.token) =>
  t.request('POST', `${base}/${plan_id}/check${query}`, { token, body });
const peek = (plan_id: string, subject: string, token = alice.token) => t.request('POST', `${base}/${plan_id}/peek`, { token, body: { subject } });
const refund = (plan_id: string, subject: string, consume_token: string) => t.request('POST', `${base}/${plan_id}/refund`, { token: alice.token, body: { subject, consume_token } });

/** Waits (bounded, real time) for a condition that depends on commits and outbox deliveries. */
async function until<T>(condition: () => Promise<T | false>, what: string, timeout_ms = 5_000): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const value = await condition();
    if (value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('throttle plans: CRUD', () => {
  it('creates a plan with defaults and reads it back', async () => {
    const plan_id = newPlanId();
    const res = await t.request('POST', base, { token: alice.token, body: { plan_id, limits: { max_requests: 100, window_seconds: 60 }, tags: ['api'], unknown_field: 1 } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      plan_id,
      owner_id: alice.user_id,
      description: '',
      limits: { max_requests: 100, window_seconds: 60 },
      actions: {},
      default_enforcement: 'soft',
      headers_mode: 'none',
      refund_window_seconds: 60,
      subject_namespaces: [],
      tags: ['api'],
      created_at: expect.stringMatching(/Z$/),
      updated_at: res.body.created_at,
      version: expect.any(Number),
    });
    const read = await t.request('GET', `${base}/${plan_id}`, { token: alice.token });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
  });

  it('refuses a taken plan_id, bad fields and an action costlier than the limit', async () => {
    const plan = await createPlan();
    expectError(await t.request('POST', base, { token: alice.token, body: { plan_id: plan.plan_id, limits: { max_requests: 1, window_seconds: 1 } } }), 409, 'throttle_plan_exists');
    expectError(await t.request('POST', base, { token: alice.token, body: { plan_id: 'x' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { plan_id: 'bad id', limits: { max_requests: 1, window_seconds: 1 } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { plan_id: 'p0', limits: { max_requests: 0, window_seconds: 1 } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { plan_id: 'p0', limits: { max_requests: 1, window_seconds: 1 }, default_enforcement: 'strict' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { plan_id: 'p0', limits: { max_requests: 1, window_seconds: 1 }, actions: { 'bad name': { cost: 1 } } } }), 400, 'BAD_REQUEST');
    const costly = await t.request('POST', base, { token: alice.token, body: { plan_id: 'p0', limits: { max_requests: 2, window_seconds: 1 }, actions: { export: { cost: 3 } } } });
    expectError(costly, 400, 'BAD_REQUEST');
    expect(costly.body.details[0].field).toBe('body.actions.export.cost');
    expectError(await t.request('GET', `${base}/p0`, { token: alice.token }), 404, 'not_found');
    expectError(await t.request('POST', base, { body: { plan_id: 'p0', limits: { max_requests: 1, window_seconds: 1 } } }), 401, 'unauthorized');
  });

  it('patches a plan (limits field by field) and deletes it', async () => {
    const plan = await createPlan({ description: 'before', actions: { read: { cost: 1 } } });
    const patched = await t.request('PATCH', `${base}/${plan.plan_id}`, { token: alice.token, body: { description: 'after', limits: { window_seconds: 10 }, tags: ['x'] } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ description: 'after', limits: { max_requests: 3, window_seconds: 10 }, tags: ['x'], actions: { read: { cost: 1 } } });
    expect(patched.body.version).toBeGreaterThan(plan.version);
    expectError(await t.request('PATCH', `${base}/${plan.plan_id}`, { token: alice.token, body: { limits: { max_requests: 0 } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('PATCH', `${base}/nope`, { token: alice.token, body: {} }), 404, 'not_found');

    // A plan_id or owner_id in the body changes nothing: no copy under another id, no other plan overwritten.
    const other = await createPlan({ description: 'the other one' });
    const smuggled = await t.request('PATCH', `${base}/${plan.plan_id}`, { token: alice.token, body: { plan_id: other.plan_id, owner_id: 'usr_evil', description: 'moved?' } });
    expect(smuggled.status, smuggled.text).toBe(200);
    expect(smuggled.body).toMatchObject({ plan_id: plan.plan_id, owner_id: plan.owner_id, description: 'moved?' });
    expect((await t.request('GET', `${base}/${other.plan_id}`, { token: alice.token })).body).toMatchObject({ plan_id: other.plan_id, description: 'the other one' });

    const deleted = await t.request('DELETE', `${base}/${plan.plan_id}`, { token: alice.token });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ message: expect.any(String), plan_id: plan.plan_id });
    expectError(await t.request('GET', `${base}/${plan.plan_id}`, { token: alice.token }), 404, 'not_found');
    expectError(await check(plan.plan_id, { subject: 'user:1' }), 404, 'not_found');
    expectError(await t.request('DELETE', `${base}/${plan.plan_id}`, { token: alice.token }), 404, 'not_found');
  });

  it('lists with q, tag, sort and pagination; another tenant sees nothing of it', async () => {
    const carol = await t.newUser('carol');
    const make = async (plan_id: string, description: string, tags: string[]) => {
      const res = await t.request('POST', base, { token: carol.token, body: { plan_id, description, tags, limits: { max_requests: 5, window_seconds: 5 } } });
      expect(res.status, res.text).toBe(201);
      clock().advance(1_000);
    };
    await make('login', 'Login attempts', ['auth']);
    await make('search', 'Search API', ['api']);
    await make('export', 'Export API', ['api', 'bulk']);
    const list = async (query: string) => {
      const res = await t.request('GET', `${base}${query}`, { token: carol.token });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    expect((await list('')).plans.map((p: { plan_id: string }) => p.plan_id)).toEqual(['login', 'search', 'export']);
    expect((await list('?sort_by=created_at&sort_order=desc')).plans.map((p: { plan_id: string }) => p.plan_id)).toEqual(['export', 'search', 'login']);
    expect((await list('?q=api')).plans.map((p: { plan_id: string }) => p.plan_id)).toEqual(['search', 'export']);
    expect((await list('?tag=bulk')).plans.map((p: { plan_id: string }) => p.plan_id)).toEqual(['export']);
    const page = await list('?page=2&page_size=2');
    expect(page.pagination).toEqual({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(page.plans.map((p: { plan_id: string }) => p.plan_id)).toEqual(['export']);
    expect((await list('?page=0&page_size=1')).pagination).toEqual({ page: 1, page_size: 1, total: 3, has_more: true });
    await t.request('PATCH', `${base}/login`, { token: carol.token, body: { description: 'Login attempts v2' } });
    expect((await list('?sort_by=updated_at&sort_order=desc')).plans[0].plan_id).toBe('login');
    expectError(await t.request('GET', `${base}?sort_by=name`, { token: carol.token }), 400, 'BAD_REQUEST');

    // Tenancy: bob's list is his own, carol's plan is 404 to him, and bob can use the same id.
    const bobs = await t.request('GET', base, { token: bob.token });
    expect(bobs.body.plans.map((p: { plan_id: string }) => p.plan_id)).not.toContain('login');
    expectError(await t.request('GET', `${base}/login`, { token: bob.token }), 404, 'not_found');
    expectError(await check('login', { subject: 'user:1' }, '', bob.token), 404, 'not_found');
    expectError(await t.request('DELETE', `${base}/login`, { token: bob.token }), 404, 'not_found');
    const same = await t.request('POST', base, { token: bob.token, body: { plan_id: 'login', limits: { max_requests: 1, window_seconds: 1 } } });
    expect(same.status).toBe(201);
  });
});

describe('throttle plans: check, peek, refund, reset, stats', () => {
  it('soft enforcement answers 200 allowed false; the override enforcement=hard answers 429 with Retry-After', async () => {
    const plan = await createPlan();
    const subject = 'user:soft';
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await check(plan.plan_id, { subject }));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(results.map((r) => r.body.allowed)).toEqual([true, true, true, false]);
    expect(results[0].body).toEqual({
      allowed: true,
      consume_token: expect.stringMatching(/^ct_/),
      cost: 1,
      limit: 3,
      reason: 'within_limit',
      remaining: 2,
      reset_after_seconds: 20,
      reset_at: expect.any(Number),
      retry_after_seconds: 0,
    });
    expect(results[3].body).toMatchObject({ allowed: false, reason: 'limit_exceeded', remaining: 0, retry_after_seconds: 20 });
    // Only the edge rate limit's own item (docs/api/rate-limits.md): this plan's headers_mode is not standard.
    expect(results[3].headers.get('ratelimit') ?? '').not.toContain(plan.plan_id);

    const hard = await check(plan.plan_id, { subject }, '?enforcement=hard');
    expectError(hard, 429, 'throttle_limit_exceeded');
    expect(hard.headers.get('retry-after')).toBe('20');
    expect(hard.body.details).toMatchObject({ allowed: false, reason: 'limit_exceeded', retry_after_seconds: 20, consume_token: expect.any(String) });
    expectError(await check(plan.plan_id, { subject }, '?enforcement=strict'), 400, 'BAD_REQUEST');
  });

  /** The plan's item of a RateLimit list field (the edge rate limit's item may come first). */
  const planItem = (field: string | null, plan_id: string) => (field ?? '').split(', ').find((item) => item.startsWith(`"${plan_id}"`));

  it("a hard plan answers 429 by default; enforcement=soft overrides it; headers_mode standard adds the RateLimit fields", async () => {
    const plan = await createPlan({ default_enforcement: 'hard', headers_mode: 'standard', limits: { max_requests: 2, window_seconds: 10 } });
    const subject = 'user:hard';
    const first = await check(plan.plan_id, { subject });
    expect(first.status).toBe(200);
    expect(planItem(first.headers.get('ratelimit-policy'), plan.plan_id)).toBe(`"${plan.plan_id}";q=2;w=10`);
    expect(planItem(first.headers.get('ratelimit'), plan.plan_id)).toBe(`"${plan.plan_id}";r=1;t=5`);
    await check(plan.plan_id, { subject });
    const denied = await check(plan.plan_id, { subject });
    expectError(denied, 429, 'throttle_limit_exceeded');
    expect(denied.headers.get('retry-after')).toBe('5');
    expect(planItem(denied.headers.get('ratelimit'), plan.plan_id)).toBe(`"${plan.plan_id}";r=0;t=10`);
    const soft = await check(plan.plan_id, { subject }, '?enforcement=soft');
    expect(soft.status).toBe(200);
    expect(soft.body.allowed).toBe(false);
    // Time refills the bucket: one unit every 5 s.
    clock().advance(5_000);
    expect((await check(plan.plan_id, { subject })).body).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("consumes the action's cost, or the body's cost; refuses unknown actions and impossible costs", async () => {
    const plan = await createPlan({ limits: { max_requests: 10, window_seconds: 60 }, actions: { export: { cost: 4 } } });
    expect((await check(plan.plan_id, { subject: 'user:c', action: 'export' })).body).toMatchObject({ allowed: true, cost: 4, remaining: 6 });
    expect((await check(plan.plan_id, { subject: 'user:c', action: 'export', cost: 2 })).body).toMatchObject({ allowed: true, cost: 2, remaining: 4 });
    expect((await check(plan.plan_id, { subject: 'user:c', action: 'export' })).body).toMatchObject({ allowed: true, remaining: 0 });
    expect((await check(plan.plan_id, { subject: 'user:c', cost: 1 })).body).toMatchObject({ allowed: false });
    const unknown = await check(plan.plan_id, { subject: 'user:c', action: 'import' });
    expectError(unknown, 400, 'BAD_REQUEST');
    expect(unknown.body.details[0].field).toBe('body.action');
    // Names of Object.prototype's members are no actions either (they once reached the actor as a function: 500).
    for (const action of ['toString', 'constructor', 'hasOwnProperty', '__proto__']) {
      const inherited = await check(plan.plan_id, { subject: 'user:c', action });
      expectError(inherited, 400, 'BAD_REQUEST');
      expect(inherited.body.details[0].field, action).toBe('body.action');
    }
    expectError(await check(plan.plan_id, { subject: 'user:c', cost: 11 }), 400, 'throttle_cost_exceeds_limit');
    expectError(await check(plan.plan_id, { subject: 'user:c', cost: 0 }), 400, 'BAD_REQUEST');
    expectError(await check(plan.plan_id, {}), 400, 'BAD_REQUEST');
  });

  it('refuses e-mail addresses and phone numbers as subjects, and subjects outside the plan\'s namespaces', async () => {
    const plan = await createPlan();
    for (const subject of ['alice@example.com', '+14155552671', '(415) 555-2671', '4155552671']) {
      const res = await check(plan.plan_id, { subject });
      expectError(res, 400, 'throttle_subject_invalid');
      expect(res.body.details[0].field).toBe('body.subject');
      expectError(await peek(plan.plan_id, subject), 400, 'throttle_subject_invalid');
    }
    const namespaced = await createPlan({ subject_namespaces: ['user', 'org'] });
    expect((await check(namespaced.plan_id, { subject: 'org:acme' })).status).toBe(200);
    expectError(await check(namespaced.plan_id, { subject: 'device:1' }), 400, 'throttle_subject_invalid');
  });

  it('peek never consumes; reset fills the bucket', async () => {
    const plan = await createPlan();
    const subject = 'user:peek';
    expect((await peek(plan.plan_id, subject)).body).toEqual({ limit: 3, remaining: 3, reset_after_seconds: 0, reset_at: expect.any(Number) });
    await check(plan.plan_id, { subject, cost: 2 });
    for (let i = 0; i < 3; i++) expect((await peek(plan.plan_id, subject)).body).toMatchObject({ remaining: 1, reset_after_seconds: 40 });
    const reset = await t.request('POST', `${base}/${plan.plan_id}/reset`, { token: alice.token, body: { subject } });
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ message: expect.any(String) });
    expect((await peek(plan.plan_id, subject)).body).toMatchObject({ remaining: 3, reset_after_seconds: 0 });
    expectError(await t.request('POST', `${base}/nope/reset`, { token: alice.token, body: { subject } }), 404, 'not_found');
  });

  it('refunds within the refund window, once per token', async () => {
    const plan = await createPlan({ refund_window_seconds: 30 });
    const subject = 'user:refund';
    const a = await check(plan.plan_id, { subject, cost: 2 });
    const b = await check(plan.plan_id, { subject, cost: 1 });
    const denied = await check(plan.plan_id, { subject, cost: 1 });
    expect(denied.body.allowed).toBe(false);

    const first = await refund(plan.plan_id, subject, a.body.consume_token);
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ refunded: true, cost_refunded: 2, reason: 'refunded' });
    expect((await peek(plan.plan_id, subject)).body.remaining).toBe(2);
    expect((await refund(plan.plan_id, subject, a.body.consume_token)).body).toEqual({ refunded: false, cost_refunded: 0, reason: 'already_refunded' });
    expect((await refund(plan.plan_id, subject, denied.body.consume_token)).body).toMatchObject({ refunded: false, reason: 'nothing_consumed' });

    clock().advance(30_001);
    expect((await refund(plan.plan_id, subject, b.body.consume_token)).body).toEqual({ refunded: false, cost_refunded: 0, reason: 'refund_window_passed' });
    expectError(await refund(plan.plan_id, subject, 'ct_forged'), 400, 'throttle_consume_token_invalid');
    // A token of another subject does not refund this one.
    const other = await check(plan.plan_id, { subject: 'user:other' });
    expectError(await refund(plan.plan_id, subject, other.body.consume_token), 400, 'throttle_consume_token_invalid');
    expectError(await t.request('POST', `${base}/${plan.plan_id}/refund`, { token: alice.token, body: { subject } }), 400, 'BAD_REQUEST');
  });

  it('a refund into a full bucket gives nothing back and says so; the token stays usable once there is room', async () => {
    const plan = await createPlan({ limits: { max_requests: 3, window_seconds: 3600 }, refund_window_seconds: 60 });
    const subject = 'user:full';
    const a = await check(plan.plan_id, { subject, cost: 2 });
    expect((await t.request('POST', `${base}/${plan.plan_id}/reset`, { token: alice.token, body: { subject } })).status).toBe(200);
    expect((await refund(plan.plan_id, subject, a.body.consume_token)).body).toEqual({ refunded: false, cost_refunded: 0, reason: 'bucket_full' });
    expect((await peek(plan.plan_id, subject)).body.remaining).toBe(3);
    // One unit used: the refund gives back what fits (1 of 2), once.
    await check(plan.plan_id, { subject, cost: 1 });
    expect((await refund(plan.plan_id, subject, a.body.consume_token)).body).toEqual({ refunded: true, cost_refunded: 1, reason: 'refunded' });
    expect((await peek(plan.plan_id, subject)).body.remaining).toBe(3);
    expect((await refund(plan.plan_id, subject, a.body.consume_token)).body.reason).toBe('already_refunded');
  });

  it('20 concurrent checks against a limit of 3 let exactly 3 through; stats add up after the flush', async () => {
    const plan = await createPlan({ default_enforcement: 'hard' });
    const results = await Promise.all(Array.from({ length: 20 }, () => check(plan.plan_id, { subject: 'user:hot' })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    expect(results.filter((r) => r.status === 429)).toHaveLength(17);
    const token = results.find((r) => r.status === 200)!.body.consume_token;
    expect((await refund(plan.plan_id, 'user:hot', token)).body.refunded).toBe(true);
    await check(plan.plan_id, { subject: 'user:cold' });

    const stats = () => t.request('GET', `${base}/${plan.plan_id}/stats`, { token: alice.token });
    clock().advance(1_000);
    await settle();
    const totals = await until(async () => {
      const res = await stats();
      return res.body.total_checks === 21 && res.body.total_refunded === 1 ? res.body : false;
    }, 'the stats flush');
    expect(totals).toEqual({ plan_id: plan.plan_id, total_checks: 21, total_allowed: 4, total_denied: 17, total_refunded: 1 });
    expectError(await t.request('GET', `${base}/nope/stats`, { token: alice.token }), 404, 'not_found');
  });

  it('a plan deleted and created again under the same id starts with full buckets and zero totals', async () => {
    const plan = await createPlan({ limits: { max_requests: 1, window_seconds: 3600 } });
    expect((await check(plan.plan_id, { subject: 'user:1' })).body.allowed).toBe(true);
    expect((await check(plan.plan_id, { subject: 'user:1' })).body.allowed).toBe(false);
    await t.request('DELETE', `${base}/${plan.plan_id}`, { token: alice.token });
    await createPlan({ plan_id: plan.plan_id, limits: { max_requests: 1, window_seconds: 3600 } });
    expect((await check(plan.plan_id, { subject: 'user:1' })).body.allowed).toBe(true);
    expect((await t.request('GET', `${base}/${plan.plan_id}/stats`, { token: alice.token })).body.total_checks).toBe(0);
  });

  it('a PATCH of the limits applies to the next check at once', async () => {
    const plan = await createPlan({ limits: { max_requests: 1, window_seconds: 3600 } });
    expect((await check(plan.plan_id, { subject: 'user:p' })).body.allowed).toBe(true);
    expect((await check(plan.plan_id, { subject: 'user:p' })).body.allowed).toBe(false);
    await t.request('PATCH', `${base}/${plan.plan_id}`, { token: alice.token, body: { limits: { max_requests: 5 } } });
    expect((await check(plan.plan_id, { subject: 'user:p' })).body).toMatchObject({ allowed: true, limit: 5 });
  });
});
