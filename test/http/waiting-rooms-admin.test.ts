import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The administrators' room list (GET /admin/waiting-rooms) over the real socket. */
const ADMIN_EMAIL = 'rooms-admin@example.com';
const ADMIN_PASSWORD = 'rooms admin password';

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

describe('GET /admin/waiting-rooms', () => {
  it("lists one tenant's rooms with waiting, active and admitted counts", async () => {
    const room = { capacity: 10, admission_rate: { batch_size: 5, interval_seconds: 3600 }, auto_admit: false };
    expect((await t.request('POST', '/api/v1/waiting-rooms', { token: alice.token, body: { room_id: 'launch', ...room } })).status).toBe(201);
    expect((await t.request('POST', '/api/v1/waiting-rooms', { token: alice.token, body: { room_id: 'checkout', ...room } })).status).toBe(201);
    expect((await t.request('POST', '/api/v1/waiting-rooms', { token: bob.token, body: { room_id: 'bobs-room', ...room } })).status).toBe(201);
    for (const member_id of ['m1', 'm2', 'm3']) {
      expect((await t.request('POST', '/api/v1/waiting-rooms/launch/join', { token: alice.token, body: { member_id } })).status).toBe(200);
    }
    const admitted = await t.request('POST', '/api/v1/waiting-rooms/launch/admit', { token: alice.token, body: { count: 1 } });
    expect(admitted.body.admitted).toHaveLength(1);

    await expect.poll(async () => (await admin(`/admin/waiting-rooms?tenant=${alice.user_id}`)).body.pagination?.total).toBe(2);
    const list = await admin(`/admin/waiting-rooms?tenant=${alice.user_id}`);
    expect(list.status).toBe(200);
    const launch = list.body.rooms.find((r: { room_id: string }) => r.room_id === 'launch');
    expect(launch).toMatchObject({ capacity: 10, auto_admit: false, status: 'active', admission_rate: { batch_size: 5, interval_seconds: 3600 } });
    expect(launch.statistics).toMatchObject({ waiting_count: 2, active_count: 1, total_admitted: 1 });
    expect(launch.statistics.current_admission_rate).toBeGreaterThan(0);

    const filtered = await admin(`/admin/waiting-rooms?tenant=${alice.user_id}&q=CHECK`);
    expect(filtered.body.rooms.map((r: { room_id: string }) => r.room_id)).toEqual(['checkout']);
    await expect.poll(async () => (await admin(`/admin/waiting-rooms?tenant=${bob.user_id}`)).body.rooms?.map((r: { room_id: string }) => r.room_id)).toEqual(['bobs-room']);
    expect((await admin('/admin/waiting-rooms?tenant=usr_nobody')).body).toEqual({ pagination: { page: 1, page_size: 20, total: 0, has_more: false }, rooms: [] });
  });

  it('is for administrators only, and needs a tenant', async () => {
    expect((await t.request('GET', `/admin/waiting-rooms?tenant=${alice.user_id}`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', `/admin/waiting-rooms?tenant=${alice.user_id}`)).status).toBe(401);
    const missing = await admin('/admin/waiting-rooms');
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('BAD_REQUEST');
  });
});
