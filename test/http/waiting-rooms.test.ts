import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Waiting rooms over the real socket (spec §4.10, conventions "Waiting room", docs/api/waiting-rooms.md). */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let roomCounter = 0;

const config = { accessTokenTtlSeconds: 86_400 };

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
const base = '/api/v1/waiting-rooms';
const newRoomId = () => `room-${++roomCounter}`;

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

function call(method: string, path: string, body?: unknown, token = alice.token) {
  return t.request(method, path, { token, body });
}

async function createRoom(overrides: Record<string, unknown> = {}, token = alice.token): Promise<string> {
  const room_id = (overrides.room_id as string) ?? newRoomId();
  const res = await call('POST', base, { room_id, capacity: 100, admission_rate: { batch_size: 10, interval_seconds: 60 }, auto_admit: false, ...overrides }, token);
  expect(res.status, res.text).toBe(201);
  return room_id;
}

/** Waits (bounded, real time) for a condition that depends on commits after an alarm or an outbox delivery. */
async function until(check: () => Promise<boolean>, what: string, timeout_ms = 5_000) {
  const deadline = Date.now() + timeout_ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const join = (room_id: string, body?: unknown, token = alice.token) => call('POST', `${base}/${room_id}/join`, body, token);
const position = (room_id: string, member_id: string) => call('GET', `${base}/${room_id}/position?member_id=${encodeURIComponent(member_id)}`);

describe('room CRUD', () => {
  it('creates a room (201 Room), reads it with statistics, lists it, replaces and deletes it', async () => {
    const room_id = newRoomId();
    const now = clock().now();
    const created = await call('POST', base, {
      room_id,
      capacity: 50,
      admission_rate: { batch_size: 5, interval_seconds: 30 },
      priority_groups: [{ name: 'vip', boost: 10, match_rules: { tier: 'gold' } }],
      metadata: { event: 'launch' },
      unknown_field: 'ignored',
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({
      room_id,
      admission_rate: { batch_size: 5, interval_seconds: 30 },
      anti_gaming: { join_rate_limit_max_attempts: 10, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 30 },
      auto_admit: true,
      capacity: 50,
      created_at: new Date(now).toISOString(),
      created_by: alice.user_id,
      metadata: { event: 'launch' },
      priority_groups: [{ name: 'vip', boost: 10, match_rules: { tier: 'gold' } }],
      queue_strategy: 'fifo',
      session_ttl_seconds: 300,
      status: 'active',
      updated_at: new Date(now).toISOString(),
    });
    expectError(await call('POST', base, { room_id, capacity: 1, admission_rate: { batch_size: 1, interval_seconds: 1 } }), 409, 'waiting_room_exists');

    const detail = await call('GET', `${base}/${room_id}`);
    expect(detail.status).toBe(200);
    expect(detail.body).not.toHaveProperty('created_by');
    expect(detail.body).toMatchObject({
      room_id,
      capacity: 50,
      statistics: { active_count: 0, average_wait_seconds: 0, current_admission_rate: 0, total_admitted: 0, waiting_count: 0 },
    });

    clock().advance(1000);
    const replaced = await call('PUT', `${base}/${room_id}`, { capacity: 80, admission_rate: { batch_size: 8 }, status: 'paused' });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body).toMatchObject({ capacity: 80, admission_rate: { batch_size: 8, interval_seconds: 30 }, status: 'paused', created_by: alice.user_id });
    expect(replaced.body.updated_at).toBe(new Date(now + 1000).toISOString());
    expectError(await call('PUT', `${base}/${room_id}`, { capacity: 0 }), 400, 'BAD_REQUEST');
    const unchanged = await call('PUT', `${base}/${room_id}`);
    expect(unchanged.status, unchanged.text).toBe(200);
    expect(unchanged.body).toMatchObject({ capacity: 80, status: 'paused' });
    expectError(await call('PUT', `${base}/no-such-room`, { capacity: 3 }), 404, 'not_found');

    const listed = await call('GET', `${base}?q=${room_id}`);
    expect(listed.body.rooms).toEqual([
      { room_id, auto_admit: true, capacity: 80, created_at: new Date(now).toISOString(), created_by: alice.user_id, queue_strategy: 'fifo', status: 'paused', updated_at: new Date(now + 1000).toISOString() },
    ]);

    const deleted = await call('DELETE', `${base}/${room_id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expectError(await call('GET', `${base}/${room_id}`), 404, 'not_found');
    expectError(await call('DELETE', `${base}/${room_id}`), 404, 'not_found');
    expect((await call('GET', `${base}?q=${room_id}`)).body.rooms).toEqual([]);
  });

  it.each([
    [{ capacity: 0 }, 'body.capacity'],
    [{ capacity: -1 }, 'body.capacity'],
    [{ capacity: '10' }, 'body.capacity'],
    [{ admission_rate: { batch_size: 0, interval_seconds: 10 } }, 'body.admission_rate.batch_size'],
    [{ admission_rate: { batch_size: 1, interval_seconds: -10 } }, 'body.admission_rate.interval_seconds'],
    [{ session_ttl_seconds: -5 }, 'body.session_ttl_seconds'],
    [{ anti_gaming: { rejoin_cooldown_seconds: -1 } }, 'body.anti_gaming.rejoin_cooldown_seconds'],
    [{ queue_strategy: 'random' }, 'body.queue_strategy'],
    [{ priority_groups: [{ name: 'vip', boost: -3 }] }, 'body.priority_groups.0.boost'],
    [{ priority_groups: [{ name: 'vip', match_rules: { tier: { regex: '.*' } } }] }, 'body.priority_groups.0.match_rules.tier.regex'],
    [{ priority_groups: [{ name: 'vip' }, { name: 'vip' }] }, 'body.priority_groups.1.name'],
    [{ room_id: 'global-bans' }, 'body.room_id'],
    [{ room_id: 'has space' }, 'body.room_id'],
  ])('create refuses %j with 400 naming %s', async (overrides, field) => {
    const res = await call('POST', base, { room_id: newRoomId(), capacity: 10, admission_rate: { batch_size: 1, interval_seconds: 10 }, ...overrides });
    expectError(res, 400, 'BAD_REQUEST');
    expect(res.body.details).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
  });

  it('rooms are per tenant: another tenant gets 404 and lists nothing of them', async () => {
    const room_id = await createRoom();
    expectError(await call('GET', `${base}/${room_id}`, undefined, bob.token), 404, 'not_found');
    expectError(await join(room_id, {}, bob.token), 404, 'not_found');
    expect((await call('GET', base, undefined, bob.token)).body.rooms.map((r: { room_id: string }) => r.room_id)).not.toContain(room_id);
    // Bob may use the same room id for his own room.
    const own = await call('POST', base, { room_id, capacity: 7, admission_rate: { batch_size: 1, interval_seconds: 1 } }, bob.token);
    expect(own.status).toBe(201);
    expect((await call('GET', `${base}/${room_id}`)).body.capacity).toBe(100);
  });

  it('requires a bearer token', async () => {
    expectError(await t.request('GET', base), 401, 'unauthorized');
    expectError(await t.request('POST', `${base}/x/join`, { body: {} }), 401, 'unauthorized');
  });

  it('lists with q, sort, filters and pagination; bad filters are 400', async () => {
    const carol = await t.newUser('carol');
    const ids = ['shop-a', 'shop-b', 'event-c'];
    const capacities = [10, 500, 50];
    for (let i = 0; i < ids.length; i++) {
      clock().advance(1000);
      await createRoom({ room_id: ids[i], capacity: capacities[i], status: i === 1 ? 'paused' : 'active' }, carol.token);
    }
    const list = async (query: string) => {
      const res = await call('GET', `${base}?${query}`, undefined, carol.token);
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    expect((await list('')).rooms.map((r: { room_id: string }) => r.room_id)).toEqual(['event-c', 'shop-b', 'shop-a']);
    expect((await list('sort_by=capacity&sort_order=asc')).rooms.map((r: { room_id: string }) => r.room_id)).toEqual(['shop-a', 'event-c', 'shop-b']);
    expect((await list('q=SHOP')).rooms.map((r: { room_id: string }) => r.room_id)).toEqual(['shop-b', 'shop-a']);
    expect((await list('filter=status:eq:paused')).rooms.map((r: { room_id: string }) => r.room_id)).toEqual(['shop-b']);
    expect((await list('filter=capacity:gt:20&filter=status:ne:paused')).rooms.map((r: { room_id: string }) => r.room_id)).toEqual(['event-c']);
    expect((await list('filter=capacity:in:10|50')).pagination.total).toBe(2);
    expect((await list(`filter=created_by:eq:${carol.user_id}&filter=queue_strategy:eq:fifo`)).pagination.total).toBe(3);
    const page = await list('page=2&page_size=2');
    expect(page.pagination).toEqual({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(page.rooms).toHaveLength(1);
    expect((await list('page=0&page_size=500')).pagination).toEqual({ page: 1, page_size: 100, total: 3, has_more: false });
    for (const bad of ['filter=color:eq:red', 'filter=status:like:x', 'filter=status', 'filter=capacity:gt:many', 'sort_by=name', 'sort_order=up', 'page=-1']) {
      expectError(await call('GET', `${base}?${bad}`, undefined, carol.token), 400, 'BAD_REQUEST');
    }
  });
});

describe('members', () => {
  it('join (member_id defaults to the caller), position, members, leave', async () => {
    const room_id = await createRoom({ priority_groups: [{ name: 'gold', boost: 5, match_rules: { tier: 'gold' } }] });
    const first = await join(room_id);
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({
      estimated_wait_seconds: 6,
      joined_at: new Date(clock().now()).toISOString(),
      member_id: alice.user_id,
      position: 1,
      priority_group: 'default',
      room_id,
      status: 'waiting',
    });
    expect((await join(room_id, { member_id: 'm-2' })).body.position).toBe(2);
    const gold = await join(room_id, { member_id: 'm-gold', metadata: { tier: 'gold' } });
    expect(gold.body).toMatchObject({ position: 1, priority_group: 'gold' });

    const mine = await call('GET', `${base}/${room_id}/position`);
    expect(mine.body).toMatchObject({ member_id: alice.user_id, position: 2, ahead_count: 1, priority_effective: 0, status: 'waiting', room_id });
    expect((await position(room_id, 'm-gold')).body).toMatchObject({ position: 1, ahead_count: 0, priority_effective: 5, priority_group: 'gold' });
    expectError(await position(room_id, 'nobody'), 404, 'not_found');

    const members = await call('GET', `${base}/${room_id}/members?status=waiting&limit=2&offset=1`);
    expect(members.status).toBe(200);
    expect(members.body).toMatchObject({ total: 3, limit: 2, offset: 1 });
    expect(members.body.members.map((m: { member_id: string; position: number }) => [m.member_id, m.position])).toEqual([
      [alice.user_id, 2],
      ['m-2', 3],
    ]);
    expect(members.body.members[0]).toMatchObject({ status: 'waiting', group_id: 'default', priority: 0, metadata: {}, admitted_at: null, room_id });
    expectError(await call('GET', `${base}/${room_id}/members?status=gone`), 400, 'BAD_REQUEST');

    const left = await call('POST', `${base}/${room_id}/leave`);
    expect(left.status).toBe(204);
    expectError(await call('POST', `${base}/${room_id}/leave`), 404, 'not_found');
    expect((await position(room_id, 'm-2')).body.position).toBe(2);
  });

  it('join refuses an unknown priority group, bad member ids and oversized metadata with 400', async () => {
    const room_id = await createRoom({ priority_groups: [{ name: 'gold', boost: 5 }] });
    const unknown = await join(room_id, { member_id: 'x', priority_group: 'platinum' });
    expectError(unknown, 400, 'BAD_REQUEST');
    expect(unknown.body.details).toEqual([expect.objectContaining({ field: 'body.priority_group' })]);
    expectError(await join(room_id, { member_id: 'bad\u0001id' }), 400, 'BAD_REQUEST');
    expectError(await join(room_id, { member_id: 42 }), 400, 'BAD_REQUEST');
    expectError(await join(room_id, { member_id: 'x', metadata: { blob: 'x'.repeat(5000) } }), 400, 'BAD_REQUEST');
    expectError(await join(room_id, { member_id: 'x', metadata: 'text' }), 400, 'BAD_REQUEST');
    expectError(await join('missing-room', { member_id: 'x' }), 404, 'not_found');
  });

  it('anti-gaming: join rate limit (429 rate_limited) and rejoin cooldown (429 waiting_room_rejoin_cooldown) with Retry-After', async () => {
    const room_id = await createRoom({ anti_gaming: { join_rate_limit_max_attempts: 2, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 120 } });
    await join(room_id, { member_id: 'spin' });
    await join(room_id, { member_id: 'spin' });
    const limited = await join(room_id, { member_id: 'spin' });
    expectError(limited, 429, 'rate_limited');
    expect(limited.headers.get('retry-after')).toBe('60');

    await join(room_id, { member_id: 'quitter' });
    await call('POST', `${base}/${room_id}/leave`, { member_id: 'quitter' });
    const cooling = await join(room_id, { member_id: 'quitter' });
    expectError(cooling, 429, 'waiting_room_rejoin_cooldown');
    expect(cooling.headers.get('retry-after')).toBe('120');
    clock().advance(120_000);
    expect((await join(room_id, { member_id: 'quitter' })).status).toBe(200);
  });

  it('admit (count, member_ids), group admit, group status, refresh and reject', async () => {
    const room_id = await createRoom({ capacity: 3, session_ttl_seconds: 600, priority_groups: [{ name: 'press', boost: 0 }] });
    for (const member_id of ['a', 'b', 'c', 'd']) await join(room_id, { member_id });
    await join(room_id, { member_id: 'p1', priority_group: 'press' });
    await join(room_id, { member_id: 'p2', priority_group: 'press' });
    clock().advance(5_000);
    const admitted = await call('POST', `${base}/${room_id}/admit`, { count: 1 });
    expect(admitted.status, admitted.text).toBe(200);
    expect(admitted.body).toEqual({
      admitted: [{ admitted_at: new Date(clock().now()).toISOString(), member_id: 'a', wait_time_seconds: 5 }],
      capacity_reached: false,
      failed: [],
    });
    const byId = await call('POST', `${base}/${room_id}/admit`, { member_ids: ['c', 'zz'] });
    expect(byId.body).toMatchObject({ admitted: [{ member_id: 'c' }], failed: [{ member_id: 'zz', reason: 'not_waiting' }], capacity_reached: false });

    const status = await call('GET', `${base}/${room_id}/groups/press/status`);
    expect(status.status).toBe(200);
    expect(status.body).toEqual({
      average_position: 4,
      can_be_admitted: true,
      group_id: 'press',
      members: [
        { joined_at: expect.any(String), member_id: 'p1', position: 3, status: 'waiting' },
        { joined_at: expect.any(String), member_id: 'p2', position: 4, status: 'waiting' },
      ],
      members_active: 0,
      members_waiting: 2,
      total_members: 2,
    });
    const groupAdmit = await call('POST', `${base}/${room_id}/groups/press/admit`);
    expect(groupAdmit.body).toMatchObject({ admitted: [{ member_id: 'p1' }], capacity_reached: true });
    expect((await call('GET', `${base}/${room_id}/groups/press/status`)).body).toMatchObject({ members_active: 1, members_waiting: 1, can_be_admitted: false });
    expectError(await call('GET', `${base}/${room_id}/groups/nope/status`), 404, 'not_found');
    expectError(await call('POST', `${base}/${room_id}/groups/nope/admit`, {}), 404, 'not_found');
    expectError(await call('POST', `${base}/${room_id}/admit`, { count: 0 }), 400, 'BAD_REQUEST');
    expectError(await call('POST', `${base}/${room_id}/admit`, { count: -2 }), 400, 'BAD_REQUEST');

    const refreshed = await call('POST', `${base}/${room_id}/refresh`, { member_id: 'a' });
    expect(refreshed.status, refreshed.text).toBe(200);
    expect(refreshed.body).toEqual({ new_expiry: Math.floor(clock().now() / 1000) + 600, success: true });
    expectError(await call('POST', `${base}/${room_id}/refresh`, { member_id: 'b' }), 409, 'waiting_room_member_not_active');
    expectError(await call('POST', `${base}/${room_id}/refresh`, { member_id: 'nobody' }), 404, 'not_found');

    const rejected = await call('POST', `${base}/${room_id}/reject`, { member_ids: ['b', 'd'], reason: 'duplicate' });
    expect(rejected.status).toBe(204);
    expect((await position(room_id, 'b')).body).toMatchObject({ status: 'rejected', rejection_reason: 'duplicate', position: 0 });
    expect((await position(room_id, 'p2')).body.position).toBe(1);
    expectError(await call('POST', `${base}/${room_id}/reject`, { member_ids: ['b'] }), 400, 'BAD_REQUEST');
    expectError(await call('POST', `${base}/${room_id}/reject`, { member_ids: [], reason: 'x' }), 400, 'BAD_REQUEST');

    const all = await call('GET', `${base}/${room_id}/members`);
    expect(all.body.total).toBe(4);
    expect(all.body.members.map((m: { member_id: string; status: string }) => `${m.member_id}:${m.status}`)).toEqual(['p2:waiting', 'a:active', 'c:active', 'p1:active']);
    expect(all.body.members[1].expires_at).toBe(new Date(clock().now() + 600_000).toISOString());
  });

  it('analytics: hourly stats and summary over a range; bad ranges are 400', async () => {
    const room_id = await createRoom();
    for (const member_id of ['a', 'b', 'c', 'd']) await join(room_id, { member_id });
    const start = clock().now();
    clock().advance(10_000);
    await call('POST', `${base}/${room_id}/admit`, { count: 2 });
    await call('POST', `${base}/${room_id}/reject`, { member_ids: ['c'], reason: 'x' });
    await call('POST', `${base}/${room_id}/leave`, { member_id: 'd' });
    const from = Math.floor(start / 1000) - 3600;
    const to = Math.floor(clock().now() / 1000) + 1;
    const res = await call('GET', `${base}/${room_id}/analytics?start_time=${from}&end_time=${to}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.room_id).toBe(room_id);
    expect(res.body.time_range).toEqual({ start: new Date(from * 1000).toISOString(), end: new Date(to * 1000).toISOString() });
    expect(res.body.summary).toEqual({
      abandonment_rate: 0.25,
      admission_rate: 0.5,
      average_wait_time_seconds: 10,
      max_wait_time_seconds: 10,
      min_wait_time_seconds: 10,
      rejection_rate: 0.25,
      total_abandonments: 1,
      total_admissions: 2,
      total_rejections: 1,
    });
    const busy = res.body.hourly_stats.filter((h: { admissions: number }) => h.admissions > 0);
    expect(busy).toEqual([{ abandonments: 1, admissions: 2, average_wait_time_seconds: 10, hour: expect.any(String), rejections: 1 }]);
    expect((await call('GET', `${base}/${room_id}/analytics`)).body.summary.total_admissions).toBe(2);
    expect((await call('GET', `${base}/${room_id}/analytics?limit=1`)).body.hourly_stats).toHaveLength(1);
    expectError(await call('GET', `${base}/${room_id}/analytics?start_time=${to}&end_time=${from}`), 400, 'BAD_REQUEST');
    expectError(await call('GET', `${base}/${room_id}/analytics?start_time=-1`), 400, 'BAD_REQUEST');
    expectError(await call('GET', `${base}/${room_id}/analytics?end_time=1e300`), 400, 'BAD_REQUEST');
    // A huge range walks only the retained hours up to now.
    const wide = await call('GET', `${base}/${room_id}/analytics?start_time=0&end_time=253402300799`);
    expect(wide.status, wide.text).toBe(200);
    expect(wide.body.summary.total_admissions).toBe(2);
    expect(wide.body.hourly_stats.length).toBeLessThanOrEqual(2161);
    expect(wide.body.time_range).toEqual({ start: '1970-01-01T00:00:00.000Z', end: '9999-12-31T23:59:59.000Z' });
    expect((await call('GET', `${base}/${room_id}`)).body.statistics).toMatchObject({ total_admitted: 2, average_wait_seconds: 10, active_count: 2, waiting_count: 0 });
  });
});

describe('bans', () => {
  it('ban, read, list (include_expired), lift; a banned member cannot join', async () => {
    const room_id = await createRoom();
    await join(room_id, { member_id: 'troll' });
    const now = clock().now();
    const ban = await call('POST', `${base}/${room_id}/bans`, { member_id: 'troll', reason: 'abuse', duration_seconds: 60 });
    expect(ban.status, ban.text).toBe(200);
    expect(ban.body).toEqual({
      banned_at: new Date(now).toISOString(),
      banned_by: alice.user_id,
      banned_until: new Date(now + 60_000).toISOString(),
      member_id: 'troll',
      reason: 'abuse',
      room_id,
      global: false,
      active: true,
    });
    expect((await position(room_id, 'troll')).body.status).toBe('rejected');
    expectError(await join(room_id, { member_id: 'troll' }), 403, 'waiting_room_member_banned');
    expect((await call('GET', `${base}/${room_id}/bans/troll`)).body).toMatchObject({ member_id: 'troll', active: true });
    const none = await call('GET', `${base}/${room_id}/bans/angel`);
    expect(none.status).toBe(200);
    expect(none.body).toBeNull();
    expect((await call('GET', `${base}/${room_id}/bans?include_expired=false`)).body.map((b: { member_id: string }) => b.member_id)).toEqual(['troll']);
    expectError(await call('GET', `${base}/${room_id}/bans`), 400, 'BAD_REQUEST');
    clock().advance(60_000);
    expect((await call('GET', `${base}/${room_id}/bans?include_expired=false`)).body).toEqual([]);
    expect((await call('GET', `${base}/${room_id}/bans?include_expired=true`)).body).toEqual([expect.objectContaining({ member_id: 'troll', active: false })]);

    await call('POST', `${base}/${room_id}/bans`, { member_id: 'spammer', reason: 'spam' });
    expect((await call('GET', `${base}/${room_id}/bans/spammer`)).body.banned_until).toBeNull();
    expect((await call('DELETE', `${base}/${room_id}/bans/spammer`)).status).toBe(204);
    expectError(await call('DELETE', `${base}/${room_id}/bans/spammer`), 404, 'not_found');
    expectError(await call('POST', `${base}/${room_id}/bans`, { member_id: 'x' }), 400, 'BAD_REQUEST');
    expectError(await call('POST', `${base}/${room_id}/bans`, { member_id: 'x', reason: 'r', duration_seconds: -1 }), 400, 'BAD_REQUEST');
  });

  it('a room holds at most 10,000 bans: 409 waiting_room_limit_reached', async () => {
    const room_id = await createRoom();
    const key = JSON.stringify([alice.user_id, room_id]);
    // Filled through the node's runtime (10,000 HTTP requests would only slow the suite down).
    await Promise.all(
      Array.from({ length: 10_000 }, (_, i) => t.node.runtime.ask('waiting-room', key, { op: 'ban', member_id: `filler-${i}`, reason: 'r', by: 'test' })),
    );
    expectError(await call('POST', `${base}/${room_id}/bans`, { member_id: 'one-more', reason: 'r' }), 409, 'waiting_room_limit_reached');
  });

  it('a global ban covers every room of the tenant and is listed under global-bans', async () => {
    const dave = await t.newUser('dave');
    const a = await createRoom({}, dave.token);
    const b = await createRoom({}, dave.token);
    const global = await call('POST', `${base}/${a}/bans`, { member_id: 'fraud', reason: 'chargebacks', global: true }, dave.token);
    expect(global.body.global).toBe(true);
    const bans = () => call('GET', `${base}/global-bans/fraud`, undefined, dave.token);
    await until(async () => (await bans()).body.length === 1, 'the global ban in the directory');
    expect((await bans()).body).toEqual([a]);
    await until(async () => (await join(b, { member_id: 'fraud' }, dave.token)).status === 403, 'the global ban in room b');
    expectError(await join(b, { member_id: 'fraud' }, dave.token), 403, 'waiting_room_member_banned');
    // Another tenant's rooms and global bans are separate.
    expect((await call('GET', `${base}/global-bans/fraud`)).body).toEqual([]);
    await call('DELETE', `${base}/${a}/bans/fraud`, undefined, dave.token);
    await until(async () => (await bans()).body.length === 0, 'the global ban lifted');
    await until(async () => (await join(b, { member_id: 'fraud' }, dave.token)).status === 200, 'room b open again');
  });
});

describe('automatic admission and restart', () => {
  it('admits batch_size members every interval_seconds, and the line and the alarm survive a restart', async () => {
    const restartClock = new ManualClock(Date.UTC(2026, 5, 1));
    let node = await startTestNode({ clock: restartClock, config });
    const user = await node.newUser('erin');
    const send = (method: string, path: string, body?: unknown) => node.request(method, path, { token: user.token, body });
    const room_id = 'auto-room';
    const created = await send('POST', base, { room_id, capacity: 10, admission_rate: { batch_size: 2, interval_seconds: 30 }, session_ttl_seconds: 3600 });
    expect(created.status, created.text).toBe(201);
    for (const member_id of ['m1', 'm2', 'm3', 'm4', 'm5']) await send('POST', `${base}/${room_id}/join`, { member_id });
    const activeCount = async () => (await send('GET', `${base}/${room_id}`)).body.statistics.active_count as number;

    restartClock.advance(30_000);
    await settle();
    await until(async () => (await activeCount()) === 2, 'the first admission tick');
    expect((await send('GET', `${base}/${room_id}/position?member_id=m3`)).body).toMatchObject({ status: 'waiting', position: 1 });

    await node.stop();
    node = await startTestNode({ clock: restartClock, dataDir: node.dataDir, config });
    const after = (method: string, path: string, body?: unknown) => node.request(method, path, { token: user.token, body });
    const line = await after('GET', `${base}/${room_id}/members`);
    expect(line.status, line.text).toBe(200);
    expect(line.body.members.map((m: { member_id: string; status: string }) => `${m.member_id}:${m.status}`)).toEqual([
      'm3:waiting',
      'm4:waiting',
      'm5:waiting',
      'm1:active',
      'm2:active',
    ]);
    // The admission alarm was re-armed from storage: the next tick admits without any request.
    restartClock.advance(30_000);
    await settle();
    await until(async () => (await after('GET', `${base}/${room_id}`)).body.statistics.active_count === 4, 'the tick after the restart');
    expect((await after('GET', `${base}/${room_id}/position?member_id=m5`)).body.position).toBe(1);
    await node.destroy();
  });
});

describe('hostile input and the API document', () => {
  it('random bodies on every waiting-room POST and PUT are answered, never with a 5xx', async () => {
    const room_id = await createRoom({ priority_groups: [{ name: 'vip', boost: 2, match_rules: { tier: 'gold' } }] });
    const targets: [string, string][] = [
      ['POST', base],
      ['PUT', `${base}/${room_id}`],
      ['POST', `${base}/${room_id}/join`],
      ['POST', `${base}/${room_id}/leave`],
      ['POST', `${base}/${room_id}/refresh`],
      ['POST', `${base}/${room_id}/admit`],
      ['POST', `${base}/${room_id}/reject`],
      ['POST', `${base}/${room_id}/bans`],
      ['POST', `${base}/${room_id}/groups/vip/admit`],
    ];
    const field = fc.constantFrom(
      'room_id', 'capacity', 'admission_rate', 'priority_groups', 'anti_gaming', 'metadata', 'status', 'member_id',
      'priority_group', 'count', 'member_ids', 'reason', 'duration_seconds', 'global', 'session_ttl_seconds',
    );
    const body = fc.oneof(fc.jsonValue(), fc.dictionary(field, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), body, async ([method, path], value) => {
        const res = await t.request(method, path, { token: alice.token, rawBody: JSON.stringify(value), headers: { 'content-type': 'application/json' } });
        expect(res.status, `${method} ${path} ${JSON.stringify(value)} -> ${res.text}`).toBeLessThan(500);
        if (res.status >= 400) expect(res.body).toMatchObject({ statusCode: res.status, code: expect.any(String) });
      }),
      { numRuns: 300 },
    );
  });

  it('the OpenAPI document lists every waiting-room endpoint', async () => {
    const doc = await t.request('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    const paths = doc.body.paths as Record<string, Record<string, unknown>>;
    const expected: [string, string][] = [
      ['/api/v1/waiting-rooms', 'get'],
      ['/api/v1/waiting-rooms', 'post'],
      ['/api/v1/waiting-rooms/global-bans/{member_id}', 'get'],
      ['/api/v1/waiting-rooms/{room_id}', 'get'],
      ['/api/v1/waiting-rooms/{room_id}', 'put'],
      ['/api/v1/waiting-rooms/{room_id}', 'delete'],
      ['/api/v1/waiting-rooms/{room_id}/admit', 'post'],
      ['/api/v1/waiting-rooms/{room_id}/analytics', 'get'],
      ['/api/v1/waiting-rooms/{room_id}/bans', 'get'],
      ['/api/v1/waiting-rooms/{room_id}/bans', 'post'],
      ['/api/v1/waiting-rooms/{room_id}/bans/{member_id}', 'get'],
      ['/api/v1/waiting-rooms/{room_id}/bans/{member_id}', 'delete'],
      ['/api/v1/waiting-rooms/{room_id}/groups/{group_id}/admit', 'post'],
      ['/api/v1/waiting-rooms/{room_id}/groups/{group_id}/status', 'get'],
      ['/api/v1/waiting-rooms/{room_id}/join', 'post'],
      ['/api/v1/waiting-rooms/{room_id}/leave', 'post'],
      ['/api/v1/waiting-rooms/{room_id}/members', 'get'],
      ['/api/v1/waiting-rooms/{room_id}/position', 'get'],
      ['/api/v1/waiting-rooms/{room_id}/refresh', 'post'],
      ['/api/v1/waiting-rooms/{room_id}/reject', 'post'],
    ];
    for (const [path, method] of expected) expect(paths[path]?.[method], `${method} ${path}`).toBeDefined();
  });
});
