import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** RATE_LIMITS_ENABLED=0: no enforcement (no 429, no RateLimit headers); the admin API still stores tiers. */
let t: TestNode;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };

beforeAll(async () => {
  t = await startTestNode({ config: { rateLimitsEnabled: false, rateLimitDefaultMaxRequests: 1, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  adminToken = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

describe('rate limits switched off', () => {
  it('limits nothing, even under a default of 1 request per minute and an endpoint tier of 1', async () => {
    const user = await t.newUser('free');
    const created = await t.request('POST', '/admin/rate-limits/tiers/endpoints', { token: adminToken, body: { endpoint_path: '/api/v1/auth/me', max_requests: 1, window_seconds: 60 } });
    expect(created.status).toBe(201);
    for (let i = 0; i < 5; i++) {
      const res = await t.request('GET', '/api/v1/auth/me', { token: user.token });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit')).toBeNull();
      expect(res.headers.get('ratelimit-policy')).toBeNull();
    }
    expect((await t.request('GET', '/admin/rate-limits/tiers/default', { token: adminToken })).body).toMatchObject({ max_requests: 1, window_seconds: 60 });
    expect((await t.request('POST', '/admin/rate-limits/cache/clear', { token: adminToken })).status).toBe(204);
  });
});
