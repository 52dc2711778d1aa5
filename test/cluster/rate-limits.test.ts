import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, waitClusterSettled, type ClusterHandle } from '../helpers/cluster.js';
import { call, registerUser } from './support/client.js';

/**
 * The edge's rate limit holds across nodes (docs/api/rate-limits.md,
 * "How counting works"): one caller's requests spread over three nodes share
 * one window held by one actor, so 20 concurrent requests against a limit of
 * 3 let exactly 3 through, whichever nodes they reach.
 */
describe('cluster: rate limits across nodes', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: 8 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('20 concurrent requests against a limit of 3, through three nodes: exactly 3 pass, the rest 429 with Retry-After', async () => {
    const [a, b, c] = cluster.nodes;
    const login = await call(a.url, 'POST', '/api/v1/auth/login', undefined, { login: cluster.adminEmail, password: cluster.adminPassword });
    expect(login.status).toBe(200);
    const admin = login.body.access_token as string;
    const tier = await call(b.url, 'POST', '/admin/rate-limits/tiers/endpoints', admin, { endpoint_path: '/api/v1/auth/me', max_requests: 3, window_seconds: 60 });
    expect(tier.status, JSON.stringify(tier.body)).toBeLessThan(300);
    const user = await registerUser(c.url, 'ratelimited');
    // A rule change reaches the other nodes within their rule cache (2 s); cache/clear on a node drops its
    // copy at once. No partition is moving (a limiter whose window actor cannot answer admits).
    await waitClusterSettled(cluster);
    for (const node of cluster.nodes) expect((await call(node.url, 'POST', '/admin/rate-limits/cache/clear', admin)).status).toBe(204);

    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => call(cluster.nodes[i % 3].url, 'GET', '/api/v1/auth/me', user.token)));
    const statuses = replies.map((reply) => reply.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(17);
    const refused = replies.find((reply) => reply.status === 429)!;
    expect(refused.body).toMatchObject({ statusCode: 429, code: 'rate_limited' });
    // Another caller is not limited by this one's window.
    const other = await registerUser(a.url, 'notlimited');
    expect((await call(b.url, 'GET', '/api/v1/auth/me', other.token)).status).toBe(200);
  }, 60_000);
});
