import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The administrators' context list (GET /admin/presence/contexts) over the real socket. */
const ADMIN_EMAIL = 'presence-admin@example.com';
const ADMIN_PASSWORD = 'presence admin password';

let t: TestNode;
let adminToken: string;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  adminToken = await t.loginAdmin();
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const admin = (path: string) => t.request('GET', path, { token: adminToken });
const ids = (body: { contexts?: { context: { id: string } }[] }) => body.contexts?.map((c) => c.context.id);

describe('GET /admin/presence/contexts', () => {
  it("lists a tenant's contexts with their occupancy now", async () => {
    for (const id of ['lobby', 'arena']) {
      expect((await t.request('POST', '/api/v1/presence/contexts', { token: alice.token, body: { id, kind: 'room' } })).status).toBe(201);
    }
    expect((await t.request('POST', '/api/v1/presence/contexts', { token: bob.token, body: { id: 'bobs', kind: 'document' } })).status).toBe(201);
    for (const subject of ['u1', 'u2']) {
      const beat = await t.request('POST', '/api/v1/presence/lobby/heartbeat', { token: alice.token, body: { subject: { id: subject, kind: 'user' } } });
      expect(beat.status).toBe(200);
    }

    await expect.poll(async () => ids((await admin(`/admin/presence/contexts?tenant=${alice.user_id}`)).body)).toEqual(['arena', 'lobby']);
    const list = await admin(`/admin/presence/contexts?tenant=${alice.user_id}`);
    expect(list.status).toBe(200);
    expect(list.body.pagination).toEqual({ page: 1, page_size: 20, total: 2, has_more: false });
    const lobby = list.body.contexts[1];
    expect(lobby.context).toMatchObject({ id: 'lobby', kind: 'room' });
    expect(lobby.occupancy).toMatchObject({ active: 2, total: 2, occupancy_state: 'open' });
    expect(list.body.contexts[0].occupancy).toMatchObject({ total: 0 });

    expect(ids((await admin(`/admin/presence/contexts?tenant=${alice.user_id}&page=2&page_size=1`)).body)).toEqual(['lobby']);
    await expect.poll(async () => ids((await admin(`/admin/presence/contexts?tenant=${bob.user_id}`)).body)).toEqual(['bobs']);
  });

  it('is for administrators only, and needs a tenant', async () => {
    expect((await t.request('GET', `/admin/presence/contexts?tenant=${alice.user_id}`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', `/admin/presence/contexts?tenant=${alice.user_id}`)).status).toBe(401);
    const missing = await admin('/admin/presence/contexts');
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('BAD_REQUEST');
  });
});
