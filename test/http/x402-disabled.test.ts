import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** X402_ENABLED off (the default): prices can be set and read, but no request is ever refused or charged. */
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
let t: TestNode;
let admin: string;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  admin = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

it('is off by default: priced routes stay free and nothing is charged', async () => {
  expect(t.node.services.config.x402Enabled).toBe(false);
  await t.request('PUT', '/admin/x402/pricing/default', { token: admin, body: { amount_usd: '1' } });
  const user = await t.newUser('free');
  await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '2', principal: user.user_id } });
  const res = await t.request('GET', '/api/v1/distributed-state/n/k/lock', { token: user.token });
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('x402-charged-usd')).toBeNull();
  expect((await t.request('GET', '/api/v1/x402/balance', { token: user.token })).body.balance_usd).toBe('2');
  expect((await t.request('GET', '/api/v1/x402/status')).body.enabled).toBe(false);
  const quote = await t.request('GET', '/api/v1/x402/quote?method=GET&path=/api/v1/distributed-state/n/k/lock', { token: user.token });
  expect(quote.body).toMatchObject({ amount_usd: '1', payable: true });
  const catalog = await t.request('GET', '/x402/catalog');
  expect(catalog.body.enabled).toBe(false);
  expect(catalog.body.items.length).toBeGreaterThan(0);
  // No route is priced while off, so a payment session is accepted only by the x402 endpoints.
  const session = await t.request('POST', '/x402/session', { token: user.token });
  expect((await t.request('GET', '/api/v1/distributed-state/n/k/lock', { token: session.body.token })).status).toBe(403);
  expect((await t.request('GET', '/api/v1/x402/balance', { token: session.body.token })).status).toBe(200);
});
