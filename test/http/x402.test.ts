import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, ServiceError, type ActorClient } from '../../runtime/index.js';
import { LOCK_KIND } from '../../actors/locks/messages.js';
import { X402_BALANCE_KIND, x402BalanceKey, x402PayerPrincipal, type BalanceView } from '../../actors/x402/messages.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { eventually, settle } from '../helpers/runtime.js';

/**
 * x402 over the real socket with enforcement on (X402_ENABLED=1): the price
 * rules' admin API, quote, status, catalog, balance, top-up, payment
 * sessions, and enforcement from prepaid balances (402 body, charge,
 * Idempotency-Key, 5xx refund, an unconfirmed hold refunded by its alarm).
 * The facilitator flow (X-PAYMENT) is test/http/x402-facilitator.test.ts.
 */
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const PAY_TO = '0x1111111111111111111111111111111111111111';
let t: TestNode;
let admin: string;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let keyCounter = 0;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password, x402Enabled: true, x402PayTo: PAY_TO, accessTokenTtlSeconds: 86_400 } });
  admin = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const LOCK_TEMPLATE = '/api/v1/distributed-state/:namespace/:key/lock';
const lockPath = () => `/api/v1/distributed-state/pay/k${++keyCounter}/lock`;

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

async function balanceOf(token: string): Promise<string> {
  const res = await t.request('GET', '/api/v1/x402/balance', { token });
  expect(res.status, res.text).toBe(200);
  return res.body.balance_usd;
}

async function credit(principal: string, amount_usd: string) {
  const res = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd, principal } });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

describe('price rules (admin)', () => {
  it('creates, reads, replaces and deletes the default rule', async () => {
    expectError(await t.request('GET', '/admin/x402/pricing/default', { token: admin }), 404, 'not_found');
    const put = await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '0.000', description: 'free by default' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ rule_type: 'default', amount_usd: '0', service: null, method: null, path: null, discoverable: true, enabled: true, settle_mode: 'verify_then_settle_after', description: 'free by default' });
    expect(put.body.created_at).toMatch(/Z$/);
    const again = await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '0' } });
    expect(again.body).toMatchObject({ id: put.body.id, description: 'free by default' });
    expect((await t.request('GET', '/admin/x402/pricing/default', { token: admin })).body.id).toBe(put.body.id);
    expect((await t.request('DELETE', '/admin/x402/pricing/default', { token: admin })).body).toEqual({ deleted: true });
    expect((await t.request('DELETE', '/admin/x402/pricing/default', { token: admin })).body).toEqual({ deleted: false });
  });

  it('creates, reads, replaces and deletes service rules', async () => {
    const created = await t.request('POST', '/admin/x402/pricing/services', { token: admin, body: { service: 'Reports', amount_usd: '0.25', discoverable: false } });
    expect(created.status, created.text).toBe(200);
    expect(created.body).toMatchObject({ rule_type: 'service', service: 'reports', amount_usd: '0.25', discoverable: false });
    const put = await t.request('PUT', '/admin/x402/pricing/services/reports', { token: admin, body: { amount_usd: '0.5', settle_mode: 'settle_before' } });
    expect(put.body).toMatchObject({ id: created.body.id, amount_usd: '0.5', discoverable: false, settle_mode: 'settle_before' });
    expect((await t.request('GET', '/admin/x402/pricing/services/REPORTS', { token: admin })).body.amount_usd).toBe('0.5');
    expect((await t.request('DELETE', '/admin/x402/pricing/services/reports', { token: admin })).body).toEqual({ deleted: true });
    expectError(await t.request('GET', '/admin/x402/pricing/services/reports', { token: admin }), 404, 'not_found');
  });

  it('creates, reads and deletes endpoint rules by method and template, whatever the parameter names', async () => {
    const created = await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'patch', path: '/api/v1/widgets/:id', amount_usd: '1.5' } });
    expect(created.status, created.text).toBe(200);
    expect(created.body).toMatchObject({ rule_type: 'endpoint', method: 'PATCH', path: '/api/v1/widgets/:id', service: 'widgets', amount_usd: '1.5' });
    const read = await t.request('GET', '/admin/x402/pricing/endpoints/PATCH/api/v1/widgets/:widget_id', { token: admin });
    expect(read.status, read.text).toBe(200);
    expect(read.body.id).toBe(created.body.id);
    expectError(await t.request('GET', '/admin/x402/pricing/endpoints/GET/api/v1/widgets/:id', { token: admin }), 404, 'not_found');
    expect((await t.request('DELETE', '/admin/x402/pricing/endpoints/patch/api/v1/widgets/:id', { token: admin })).body).toEqual({ deleted: true });
    expect((await t.request('DELETE', '/admin/x402/pricing/endpoints/patch/api/v1/widgets/:id', { token: admin })).body).toEqual({ deleted: false });
  });

  it('lists with rule_type and service filters, sorting and pagination', async () => {
    for (const [service, amount] of [['alpha', '3'], ['beta', '1'], ['gamma', '2']]) {
      await t.request('POST', '/admin/x402/pricing/services', { token: admin, body: { service, amount_usd: amount } });
    }
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: '/api/v1/alpha/:id', amount_usd: '0.1' } });
    const services = await t.request('GET', '/admin/x402/pricing?rule_type=service&sort_by=amount_usd&sort_order=desc&page_size=2', { token: admin });
    expect(services.status, services.text).toBe(200);
    expect(services.body.rules.map((r: { service: string }) => r.service)).toEqual(['alpha', 'gamma']);
    expect(services.body.pagination).toEqual({ page: 1, page_size: 2, total: 3, has_more: true });
    const second = await t.request('GET', '/admin/x402/pricing?rule_type=service&sort_by=amount_usd&sort_order=desc&page_size=2&page=2', { token: admin });
    expect(second.body.rules.map((r: { service: string }) => r.service)).toEqual(['beta']);
    const alpha = await t.request('GET', '/admin/x402/pricing?service=alpha', { token: admin });
    expect(alpha.body.rules.map((r: { rule_type: string }) => r.rule_type).sort()).toEqual(['endpoint', 'service']);
    for (const service of ['alpha', 'beta', 'gamma']) await t.request('DELETE', `/admin/x402/pricing/services/${service}`, { token: admin });
    await t.request('DELETE', '/admin/x402/pricing/endpoints/GET/api/v1/alpha/:id', { token: admin });
  });

  it('refuses bad input with 400 and non-admins with 403', async () => {
    expectError(await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '0.0000001' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: 0.5 } }), 400, 'BAD_REQUEST');
    expectError(await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '1e3' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '1', settle_mode: 'whenever' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'TRACE', path: '/a', amount_usd: '1' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: '/a//b', amount_usd: '1' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', amount_usd: '1' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/admin/x402/pricing/services', { token: admin, body: { service: '../x', amount_usd: '1' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/admin/x402/pricing?page_size=abc', { token: admin }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/admin/x402/pricing', { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('PUT', '/admin/x402/pricing/default', { token: alice.token, body: { amount_usd: '1' } }), 403, 'forbidden');
    expectError(await t.request('POST', '/admin/x402/cache/clear', { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('GET', '/admin/x402/preflight', { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('GET', '/admin/x402/pricing'), 401, 'unauthorized');
  });
});

describe('status, quote, catalog, preflight, cache', () => {
  it('status needs no credential and says enforcement is on', async () => {
    const res = await t.request('GET', '/api/v1/x402/status');
    expect(res.body).toEqual({ enabled: true, networks: ['base-sepolia'], settle_mode_default: 'verify_then_settle_after' });
  });

  it('quotes a template or a concrete path: endpoint beats service beats default', async () => {
    await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '0.001' } });
    await t.request('POST', '/admin/x402/pricing/services', { token: admin, body: { service: 'quoted', amount_usd: '0.02' } });
    const endpoint = await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: '/api/v1/quoted/:id', amount_usd: '0.3', settle_mode: 'settle_before' } });
    const quote = (method: string, path: string) => t.request('GET', `/api/v1/x402/quote?method=${method}&path=${encodeURIComponent(path)}`, { token: alice.token });
    expect((await quote('get', '/api/v1/quoted/42')).body).toEqual({ amount_usd: '0.3', payable: true, rule_id: endpoint.body.id, settle_mode: 'settle_before' });
    expect((await quote('GET', '/api/v1/quoted/:other')).body.amount_usd).toBe('0.3');
    expect((await quote('POST', '/api/v1/quoted/42')).body.amount_usd).toBe('0.02');
    expect((await quote('GET', '/api/v1/elsewhere')).body.amount_usd).toBe('0.001');
    // A query string names no route: quoted as the request is priced, by its path.
    expect((await quote('GET', '/api/v1/quoted/42?x=1')).body.amount_usd).toBe('0.3');
    expect((await quote('POST', '/x402/session')).body).toEqual({ amount_usd: '0', payable: false, rule_id: null, settle_mode: 'verify_then_settle_after' });
    expectError(await quote('BREW', '/a'), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/x402/quote?method=GET&path=relative', { token: alice.token }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/x402/quote?method=GET', { token: alice.token }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/x402/quote?method=GET&path=/a'), 401, 'unauthorized');
    await t.request('DELETE', '/admin/x402/pricing/services/quoted', { token: admin });
    await t.request('DELETE', '/admin/x402/pricing/endpoints/GET/api/v1/quoted/:id', { token: admin });
    await t.request('DELETE', '/admin/x402/pricing/default', { token: admin });
  });

  it('lists discoverable priced routes with x402 v1 and v2 payment requirements', async () => {
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: LOCK_TEMPLATE, amount_usd: '0.05', description: 'Lock status' } });
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'POST', path: LOCK_TEMPLATE, amount_usd: '0.07', discoverable: false } });
    const res = await t.request('GET', '/x402/catalog');
    expect(res.status, res.text).toBe(200);
    expect(res.body.enabled).toBe(true);
    expect(res.body.items).toHaveLength(1);
    const item = res.body.items[0];
    expect(item).toMatchObject({ method: 'GET', path: LOCK_TEMPLATE, amount_usd: '0.05', description: 'Lock status', service: 'distributed-state', resource: `${t.url}${LOCK_TEMPLATE}` });
    expect(item.accepts).toEqual([
      {
        scheme: 'exact',
        network: 'base-sepolia',
        maxAmountRequired: '50000',
        resource: `${t.url}${LOCK_TEMPLATE}`,
        description: 'Lock status',
        mimeType: 'application/json',
        payTo: PAY_TO,
        maxTimeoutSeconds: 60,
        asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
        outputSchema: { input: { type: 'http', method: 'GET', discoverable: true } },
        extra: { name: 'USDC', version: '2' },
      },
    ]);
    expect(item.accepts_v2).toEqual([
      { scheme: 'exact', network: 'eip155:84532', amount: '50000', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', payTo: PAY_TO, maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' } },
    ]);
    await t.request('DELETE', `/admin/x402/pricing/endpoints/POST${LOCK_TEMPLATE}`, { token: admin });
  });

  it('preflight reports each check and readiness', async () => {
    const res = await t.request('GET', '/admin/x402/preflight', { token: admin });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ enabled: true, facilitator_url: '', mainnet: false, networks: ['base-sepolia'], ready: true });
    const checks = Object.fromEntries(res.body.checks.map((c: { check: string }) => [c.check, c]));
    expect(checks.pay_to_configured).toMatchObject({ passed: true, severity: 'required' });
    expect(checks.networks_known).toMatchObject({ passed: true, severity: 'required' });
    expect(checks.price_rules_readable).toMatchObject({ passed: true, severity: 'required' });
    expect(checks.priced_routes).toMatchObject({ passed: true, severity: 'recommended' });
    expect(checks.facilitator_configured).toMatchObject({ passed: false, severity: 'recommended' });
  });

  it('cache/clear answers 204', async () => {
    const res = await t.request('POST', '/admin/x402/cache/clear', { token: admin });
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
  });
});

describe('balance and top-up', () => {
  it('two admin credits carrying the same X-Request-Id are two credits', async () => {
    const user = await t.newUser('credited-twice');
    const headers = { 'x-request-id': 'support-ticket-42' };
    const first = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1', principal: user.user_id }, headers });
    const second = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1', principal: user.user_id }, headers });
    expect([first.status, second.status], second.text).toEqual([200, 200]);
    expect(second.body.transaction).not.toBe(first.body.transaction);
    expect(await balanceOf(user.token)).toBe('2');
  });

  it('an admin credits any principal; the balance is in atomic units and decimal USD', async () => {
    const user = await t.newUser('topup');
    expect((await t.request('GET', '/api/v1/x402/balance', { token: user.token })).body).toEqual({ balance_atomic: 0, balance_usd: '0' });
    const body = await credit(user.user_id, '2.500001');
    expect(body).toMatchObject({ balance_atomic: 2_500_001, balance_usd: '2.500001', credited_usd: '2.500001', transaction: expect.stringMatching(/^admin:/) });
    expect((await t.request('GET', '/api/v1/x402/balance', { token: user.token })).body).toEqual({ balance_atomic: 2_500_001, balance_usd: '2.500001' });
    const own = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1' } });
    expect(own.body.balance_usd).toBe('1');
  });

  it('a payer named with upper-case hex is credited in the balance its proofs spend; a principal that is none is 400', async () => {
    const upper = 'x402:base-sepolia:0xABCDEF0123456789ABCDEF0123456789ABCDEF01';
    const res = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1', principal: upper } });
    expect(res.status, res.text).toBe(200);
    const spent = await (t.node.services.actors as ActorClient).ask<BalanceView>(X402_BALANCE_KIND, x402BalanceKey(x402PayerPrincipal('base-sepolia', '0xabcdef0123456789abcdef0123456789abcdef01')), { op: 'get' });
    expect(spent.balance_atomic).toBe(1_000_000);
    for (const principal of ['no such/principal', 'x402:base-sepolia:0x12', 'usr_', 'someone']) {
      const refused = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1', principal } });
      expect(refused.status, principal).toBe(400);
      expect(refused.body).toMatchObject({ code: 'BAD_REQUEST', details: [{ field: 'body.principal' }] });
    }
  });

  it('a user without an X-PAYMENT proof gets 402 with the requirements for the amount; another principal is 403', async () => {
    const res = await t.request('POST', '/api/v1/x402/topup', { token: bob.token, body: { amount_usd: '5' } });
    expect(res.status, res.text).toBe(402);
    expect(res.body).toMatchObject({ x402Version: 1, code: 'payment_required', statusCode: 402 });
    expect(res.body.accepts[0]).toMatchObject({ maxAmountRequired: '5000000', payTo: PAY_TO, resource: `${t.url}/api/v1/x402/topup` });
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: bob.token, body: { amount_usd: '5', principal: alice.user_id } }), 403, 'forbidden');
  });

  it('refuses bad amounts, a balance above the maximum and missing credentials', async () => {
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '0' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1.1234567' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '-1' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: admin, body: {} }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1000000001' } }), 400, 'BAD_REQUEST');
    await credit('usr_whale', '1000000000');
    expectError(await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '0.000001', principal: 'usr_whale' } }), 409, 'x402_balance_limit_reached');
    expectError(await t.request('GET', '/api/v1/x402/balance'), 401, 'unauthorized');
    expectError(await t.request('POST', '/api/v1/x402/topup', { body: { amount_usd: '1' } }), 401, 'unauthorized');
  });
});

describe('payment sessions', () => {
  it('a signed-in user gets a payment session token that works on x402 routes and priced routes only', async () => {
    const res = await t.request('POST', '/x402/session', { token: alice.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ principal: alice.user_id, token_type: 'Bearer', expires_in: 900, token: expect.stringMatching(/^x402s\./) });
    expect(await balanceOf(res.body.token)).toBe(await balanceOf(alice.token));
    expectError(await t.request('GET', '/api/v1/auth/me', { token: res.body.token }), 403, 'insufficient_scope');
    expectError(await t.request('POST', '/api/v1/distributed-state/free/k/lock', { token: res.body.token, body: { owner_id: 'o' } }), 403, 'insufficient_scope');
    // The session dies with the user's session.
    const user = await t.newUser('logout');
    const session = await t.request('POST', '/x402/session', { token: user.token });
    expect((await t.request('POST', '/api/v1/auth/logout', { token: user.token })).status).toBeLessThan(300);
    expectError(await t.request('GET', '/api/v1/x402/balance', { token: session.body.token }), 401, 'unauthorized');
  });

  it('expires after X402_SESSION_TTL_SECONDS', async () => {
    const res = await t.request('POST', '/x402/session', { token: bob.token });
    (t.clock as ManualClock).advance(901_000);
    await settle();
    expectError(await t.request('GET', '/api/v1/x402/balance', { token: res.body.token }), 401, 'unauthorized');
  });

  it('without a credential or a proof it answers 402 with the requirements; forged tokens and API keys are refused', async () => {
    const res = await t.request('POST', '/x402/session', { body: { amount_usd: '0.5' } });
    expect(res.status, res.text).toBe(402);
    expect(res.body.accepts[0]).toMatchObject({ maxAmountRequired: '500000', resource: `${t.url}/x402/session` });
    const none = await t.request('POST', '/x402/session');
    expect(none.status).toBe(402);
    expect(none.body.accepts[0].maxAmountRequired).toBe('1000000');
    expectError(await t.request('POST', '/x402/session', { token: 'x402s.forged' }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/x402/balance', { token: 'x402s.eyJhbGciOiJub25lIn0.e30.' }), 401, 'unauthorized');
    const key = await t.request('POST', '/api/v1/auth/api-keys', { token: alice.token, body: { name: 'k', scopes: ['*'] } });
    expectError(await t.request('POST', '/x402/session', { token: key.body.key }), 403, 'forbidden');
    expectError(await t.request('POST', '/x402/session', { body: { amount_usd: 'ten' } }), 400, 'BAD_REQUEST');
  });
});

describe('enforcement from a prepaid balance', () => {
  let payer: Awaited<ReturnType<TestNode['newUser']>>;
  const actors = () => t.node.services.actors as ActorClient;

  beforeAll(async () => {
    payer = await t.newUser('payer');
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: LOCK_TEMPLATE, amount_usd: '0.05', description: 'Lock status' } });
  });

  it('a caller who has not paid gets 402 with the x402 body and the v2 requirements header', async () => {
    const path = lockPath();
    const res = await t.request('GET', path, { token: payer.token });
    expect(res.status, res.text).toBe(402);
    expect(res.body).toMatchObject({ x402Version: 1, statusCode: 402, code: 'payment_required', error: expect.stringContaining('Insufficient prepaid balance'), message: expect.any(String) });
    expect(res.body.accepts).toHaveLength(1);
    expect(res.body.accepts[0]).toMatchObject({ scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '50000', resource: `${t.url}${path}`, payTo: PAY_TO, description: 'Lock status' });
    const v2 = JSON.parse(Buffer.from(res.headers.get('payment-required')!, 'base64').toString('utf8'));
    expect(v2).toMatchObject({ x402Version: 2, resource: { url: `${t.url}${path}` }, accepts: [{ network: 'eip155:84532', amount: '50000', payTo: PAY_TO }] });
    // Routes without a price are untouched.
    expect((await t.request('POST', lockPath(), { token: payer.token, body: { owner_id: 'o' } })).status).toBe(200);
  });

  it('charges a prepaid balance once per request and reports it', async () => {
    await credit(payer.user_id, '0.12');
    const first = await t.request('GET', lockPath(), { token: payer.token });
    expect(first.status, first.text).toBe(200);
    expect(first.headers.get('x402-charged-usd')).toBe('0.05');
    expect(first.headers.get('x402-balance-usd')).toBe('0.07');
    expect((await t.request('GET', lockPath(), { token: payer.token })).status).toBe(200);
    expect(await balanceOf(payer.token)).toBe('0.02');
    const broke = await t.request('GET', lockPath(), { token: payer.token });
    expect(broke.status).toBe(402);
    expect(await balanceOf(payer.token)).toBe('0.02');
  });

  it('an X-Request-Id the client chose does not make later requests free: each is paid', async () => {
    // The test before left 0.02.
    await credit(payer.user_id, '0.10');
    const headers = { 'x-request-id': 'trace-chosen-by-the-client' };
    for (let i = 0; i < 2; i++) {
      const paid = await t.request('GET', lockPath(), { token: payer.token, headers });
      expect(paid.status, paid.text).toBe(200);
      expect(paid.headers.get('x402-charged-usd')).toBe('0.05');
    }
    expect(await balanceOf(payer.token)).toBe('0.02');
    const broke = await t.request('GET', lockPath(), { token: payer.token, headers });
    expect(broke.status).toBe(402);
  });

  it('an Idempotency-Key on a GET does not make later requests free: each runs, each is paid', async () => {
    await credit(payer.user_id, '0.13');
    const path = lockPath();
    const headers = { 'idempotency-key': `idem-${keyCounter}` };
    expect((await t.request('GET', path, { token: payer.token, headers })).status).toBe(200);
    const again = await t.request('GET', path, { token: payer.token, headers });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(again.headers.get('x402-charged-usd')).toBe('0.05');
    expect(await balanceOf(payer.token)).toBe('0.05');
  });

  it('a POST replayed by its Idempotency-Key is not charged again', async () => {
    const user = await t.newUser('replay');
    await credit(user.user_id, '0.2');
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'POST', path: LOCK_TEMPLATE, amount_usd: '0.1' } });
    try {
      const path = lockPath();
      const headers = { 'idempotency-key': `post-${keyCounter}` };
      const first = await t.request('POST', path, { token: user.token, body: { owner_id: 'o' }, headers });
      expect(first.status, first.text).toBe(200);
      const replay = await t.request('POST', path, { token: user.token, body: { owner_id: 'o' }, headers });
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.body.lock_id).toBe(first.body.lock_id);
      expect(await balanceOf(user.token)).toBe('0.1');
    } finally {
      await t.request('DELETE', `/admin/x402/pricing/endpoints/POST${LOCK_TEMPLATE}`, { token: admin });
    }
  });

  it('a 402 is not stored under the Idempotency-Key: after paying, the same key runs the request', async () => {
    const user = await t.newUser('pay402');
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'POST', path: LOCK_TEMPLATE, amount_usd: '0.1' } });
    try {
      const path = lockPath();
      const headers = { 'idempotency-key': `pay-${keyCounter}` };
      expect((await t.request('POST', path, { token: user.token, body: { owner_id: 'o' }, headers })).status).toBe(402);
      await credit(user.user_id, '0.1');
      const paid = await t.request('POST', path, { token: user.token, body: { owner_id: 'o' }, headers });
      expect(paid.status, paid.text).toBe(200);
      expect(paid.headers.get('idempotent-replayed')).toBeNull();
      expect(paid.headers.get('x402-charged-usd')).toBe('0.1');
      const replay = await t.request('POST', path, { token: user.token, body: { owner_id: 'o' }, headers });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await balanceOf(user.token)).toBe('0');
    } finally {
      await t.request('DELETE', `/admin/x402/pricing/endpoints/POST${LOCK_TEMPLATE}`, { token: admin });
    }
  });

  it('an Idempotency-Key on a POST the idempotency store does not cover (no bearer required) makes no run free', async () => {
    const owner = await t.newUser('pubform');
    const form = await t.request('POST', '/api/v1/forms', { token: owner.token, body: { name: 'pub', title: 'Pub', schema: { type: 'object' }, spam: { allow_anonymous: true, rate_limit_per_minute: 100 } } });
    expect(form.status, form.text).toBe(201);
    expect((await t.request('POST', `/api/v1/forms/${form.body.form_id}/status`, { token: owner.token, body: { status: 'active' } })).status).toBe(200);
    const template = '/api/v1/forms/:form_id/submissions/public';
    await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'POST', path: template, amount_usd: '0.2' } });
    try {
      const user = await t.newUser('pubpayer');
      await credit(user.user_id, '0.5');
      const headers = { 'idempotency-key': 'same-key' };
      const runs = [];
      for (let i = 0; i < 3; i++) runs.push(await t.request('POST', `/api/v1/forms/${form.body.form_id}/submissions/public`, { token: user.token, body: { data: { n: i } }, headers }));
      expect(runs.map((run) => run.status)).toEqual([201, 201, 402]);
      expect(new Set(runs.slice(0, 2).map((run) => run.body.submission_id)).size).toBe(2);
      expect(runs.slice(0, 2).map((run) => run.headers.get('x402-charged-usd'))).toEqual(['0.2', '0.2']);
      expect(await balanceOf(user.token)).toBe('0.1');
    } finally {
      await t.request('DELETE', `/admin/x402/pricing/endpoints/POST${template}`, { token: admin });
    }
  });

  it('a rule naming one resource prices that resource, as its quote says, and not its neighbours', async () => {
    const user = await t.newUser('oneres');
    await credit(user.user_id, '1');
    const premium = '/api/v1/distributed-state/pay/premium/lock';
    const rule = await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: premium, amount_usd: '0.07' } });
    expect(rule.status, rule.text).toBeLessThan(300);
    try {
      const quoted = await t.request('GET', `/api/v1/x402/quote?method=GET&path=${encodeURIComponent(premium)}`, { token: user.token });
      expect(quoted.body.amount_usd).toBe('0.07');
      const paid = await t.request('GET', premium, { token: user.token });
      expect(paid.status, paid.text).toBe(200);
      expect(paid.headers.get('x402-charged-usd')).toBe('0.07');
      // The template's rule (0.05, from beforeAll) still prices the other keys.
      expect((await t.request('GET', lockPath(), { token: user.token })).headers.get('x402-charged-usd')).toBe('0.05');
    } finally {
      await t.request('DELETE', `/admin/x402/pricing/endpoints/GET${premium}`, { token: admin });
    }
  });

  it('prices a path by the route it reaches: an encoded character or a segment reading * is no way around a rule', async () => {
    const user = await t.newUser('encoded');
    for (const path of ['/api/v1/distributed-state/a/b/%6cock', '/api/v1/distributed-stat%65/a/b/lock', '/api/v1/distributed-state/*/b/lock', '/api/v1/distributed-state/a/*/lock']) {
      const res = await t.request('GET', path, { token: user.token });
      expect(res.status, `${path}: ${res.text}`).toBe(402);
    }
    const quoted = await t.request('GET', `/api/v1/x402/quote?method=GET&path=${encodeURIComponent('/api/v1/distributed-state/*/b/lock')}`, { token: user.token });
    expect(quoted.body).toMatchObject({ amount_usd: '0.05', payable: true });
    // A rule naming one resource prices it however its path is spelled.
    await credit(user.user_id, '1');
    const premium = '/api/v1/distributed-state/pay/premium/lock';
    expect((await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: premium, amount_usd: '0.07' } })).status).toBeLessThan(300);
    try {
      const spelled = await t.request('GET', '/api/v1/distributed-state/pay/premiu%6d/lock', { token: user.token });
      expect(spelled.status, spelled.text).toBe(200);
      expect(spelled.headers.get('x402-charged-usd')).toBe('0.07');
      const quotedSpelled = await t.request('GET', `/api/v1/x402/quote?method=GET&path=${encodeURIComponent('/api/v1/distributed-state/pay/premiu%6d/lock')}`, { token: user.token });
      expect(quotedSpelled.body.amount_usd).toBe('0.07');
    } finally {
      await t.request('DELETE', `/admin/x402/pricing/endpoints/GET${premium}`, { token: admin });
    }
  });

  it('concurrent requests never take the balance below zero', async () => {
    const user = await t.newUser('racer');
    await credit(user.user_id, '0.15');
    const results = await Promise.all(Array.from({ length: 12 }, () => t.request('GET', lockPath(), { token: user.token })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    expect(results.filter((r) => r.status === 402)).toHaveLength(9);
    expect(await balanceOf(user.token)).toBe('0');
  });

  it('refunds the charge when the request fails with a 5xx', async () => {
    const user = await t.newUser('refund');
    await credit(user.user_id, '0.05');
    const client = actors();
    const ask = client.ask.bind(client);
    client.ask = ((kind: string, key: string, message: unknown, options?: object) =>
      kind === LOCK_KIND ? Promise.reject(new ServiceError('partition_unavailable', 'simulated outage')) : ask(kind, key, message, options)) as ActorClient['ask'];
    try {
      const res = await t.request('GET', lockPath(), { token: user.token });
      expectError(res, 503, 'partition_unavailable');
      expect(res.headers.get('x402-charged-usd')).toBe('0.05');
    } finally {
      client.ask = ask;
    }
    await eventually(async () => expect(await balanceOf(user.token)).toBe('0.05'));
    // The refunded balance pays the next request.
    expect((await t.request('GET', lockPath(), { token: user.token })).status).toBe(200);
  });

  it('refunds a hold whose settlement never arrived once its 5 minutes are up', async () => {
    const user = await t.newUser('lost');
    await credit(user.user_id, '0.05');
    const client = actors();
    const tell = client.tell.bind(client);
    client.tell = ((kind: string, key: string, message: { op?: string }) => (message.op === 'settle' ? undefined : tell(kind, key, message))) as ActorClient['tell'];
    try {
      expect((await t.request('GET', lockPath(), { token: user.token })).status).toBe(200);
    } finally {
      client.tell = tell;
    }
    expect(await balanceOf(user.token)).toBe('0');
    (t.clock as ManualClock).advance(5 * 60_000 + 1);
    await settle();
    await eventually(async () => expect(await balanceOf(user.token)).toBe('0.05'));
  });

  it('a payment session token pays on a priced route', async () => {
    const user = await t.newUser('session');
    await credit(user.user_id, '0.05');
    const session = await t.request('POST', '/x402/session', { token: user.token });
    const res = await t.request('GET', lockPath(), { token: session.body.token });
    expect(res.status, res.text).toBe(200);
    expect(await balanceOf(user.token)).toBe('0');
  });
});
