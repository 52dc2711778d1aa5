import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Presence over the real socket (spec doc 1 §4.9; docs/api/presence.md). */
let t: TestNode;
let token: string;
let otherToken: string;
let counter = 0;
const S = 1000;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  token = (await t.newUser('pres')).token;
  otherToken = (await t.newUser('presother')).token;
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
const freshId = (prefix = 'ctx') => `${prefix}-${process.pid}-${++counter}`;
const post = (path: string, body?: unknown, as = token) => t.request('POST', path, { token: as, body });
const get = (path: string, as = token) => t.request('GET', path, { token: as });

async function advance(ms: number) {
  clock().advance(ms);
  await settle();
}

/** Moves the clock to `offset_ms` past the next whole second (alarms are rounded up to whole seconds). */
async function alignClock(offset_ms = 0) {
  const now = clock().now();
  await advance(1000 - (now % 1000) + offset_ms);
}

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

async function createContext(body: Record<string, unknown> = {}) {
  const id = freshId();
  const res = await post('/api/v1/presence/contexts', { id, kind: 'room', ...body });
  expect(res.status, res.text).toBe(201);
  return id;
}

async function open(context_id: string, body: Record<string, unknown>) {
  const res = await post(`/api/v1/presence/${context_id}/heartbeat`, body);
  expect(res.status, res.text).toBe(200);
  return res.body as { session_id: string; [key: string]: any };
}

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe('contexts', () => {
  it('needs a bearer token', async () => {
    expectError(await t.request('POST', '/api/v1/presence/contexts', { body: { id: 'x', kind: 'room' } }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/presence/x/list'), 401, 'unauthorized');
  });

  it('create answers 201 with the context and defaults; GET adds the occupancy', async () => {
    const id = freshId();
    const res = await post('/api/v1/presence/contexts', { id, kind: 'room', capacity: { max_active: 50 }, geo: { enabled: true }, metadata_schema: { allowed_keys: ['role'] } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id,
      kind: 'room',
      resource_id: id,
      heartbeat: { ttl_seconds: 90, idle_after_seconds: 30, stale_after_seconds: 60 },
      capacity: { max_active: 50, soft_limit: 40, overflow_policy: 'reject' },
      geo: { enabled: true, precision: 'exact' },
      metadata_schema: { allowed_keys: ['role'] },
      created_at: new Date(t.clock.now()).toISOString(),
      updated_at: new Date(t.clock.now()).toISOString(),
      version: 1,
    });
    const read = await get(`/api/v1/presence/contexts/${id}`);
    expect(read.status).toBe(200);
    expect(read.body.context).toEqual(res.body);
    expect(read.body.occupancy).toEqual({
      active: 0, idle: 0, stale: 0, observers: 0, total: 0, available_agents: 0,
      capacity_remaining: 50, occupancy_state: 'open', max_active: 50, soft_limit: 40,
    });
  });

  it('create of an existing id: 409 presence_context_exists; bad settings: 400', async () => {
    const id = await createContext();
    expectError(await post('/api/v1/presence/contexts', { id, kind: 'room' }), 409, 'presence_context_exists');
    const crossed = await post('/api/v1/presence/contexts', { id: freshId(), kind: 'room', heartbeat: { idle_after_seconds: 60, stale_after_seconds: 30 } });
    expectError(crossed, 400, 'BAD_REQUEST');
    expect(crossed.body.details[0].field).toBe('body.heartbeat.idle_after_seconds');
    expectError(await post('/api/v1/presence/contexts', { id: freshId(), kind: 'room', capacity: { max_active: 0 } }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { id: freshId(), kind: 'room', capacity: { max_active: 5, soft_limit: 9 } }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { id: freshId(), kind: 'room', capacity: { overflow_policy: 'queue' } }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { id: freshId(), kind: 'room', geo: { precision: 'nanometre' } }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { id: 'has space', kind: 'room' }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { id: 'contexts', kind: 'room' }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { kind: 'room' }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/contexts', { id: freshId(), kind: 'room', heartbeat: { ttl_seconds: '90' } }), 400, 'BAD_REQUEST');
  });

  it('another tenant sees 404 and can use the same id for its own context', async () => {
    const id = await createContext();
    expectError(await get(`/api/v1/presence/contexts/${id}`, otherToken), 404, 'not_found');
    expectError(await post(`/api/v1/presence/${id}/heartbeat`, { subject: { id: 'u', kind: 'user' } }, otherToken), 404, 'not_found');
    expect((await post('/api/v1/presence/contexts', { id, kind: 'other' }, otherToken)).status).toBe(201);
    expect((await get(`/api/v1/presence/contexts/${id}`)).body.context.kind).toBe('room');
    expectError(await get(`/api/v1/presence/contexts/${freshId('missing')}`), 404, 'not_found');
  });

  it('PATCH changes settings and increments version only on a change', async () => {
    const id = await createContext();
    await advance(5 * S);
    const res = await t.request('PATCH', `/api/v1/presence/contexts/${id}`, { token, body: { capacity: { max_active: 3, soft_limit: 2 }, kind: 'lobby' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.context).toMatchObject({ kind: 'lobby', version: 2, capacity: { max_active: 3, soft_limit: 2, overflow_policy: 'reject' }, updated_at: new Date(t.clock.now()).toISOString() });
    expect(res.body.context.created_at).not.toBe(res.body.context.updated_at);
    const again = await t.request('PATCH', `/api/v1/presence/contexts/${id}`, { token, body: { kind: 'lobby' } });
    expect(again.body.context.version).toBe(2);
    expectError(await t.request('PATCH', `/api/v1/presence/contexts/${id}`, { token, body: { capacity: { soft_limit: 4 } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('PATCH', `/api/v1/presence/contexts/${freshId('missing')}`, { token, body: { kind: 'x' } }), 404, 'not_found');
  });
});

describe('heartbeat, state, leave', () => {
  it('opens a session, refreshes it, and answers HeartbeatResult', async () => {
    const id = await createContext({ metadata_schema: { allowed_keys: ['role'] } });
    const opened = await open(id, { subject: { id: 'alice', kind: 'user' }, device_id: 'laptop', connection_id: 'c1', metadata: { role: 'host' } });
    expect(opened).toEqual({
      session_id: expect.stringMatching(/^ps_[A-Za-z0-9_-]+$/),
      context_id: id,
      opened: true,
      admission: 'admitted',
      activity: 'active',
      state: 'available',
      observer: false,
      last_heartbeat_at: new Date(t.clock.now()).toISOString(),
      expires_at: new Date(t.clock.now() + 90 * S).toISOString(),
      occupancy: expect.objectContaining({ active: 1, total: 1, occupancy_state: 'open' }),
    });
    await advance(10 * S);
    const refreshed = await open(id, { session_id: opened.session_id, state: 'busy' });
    expect(refreshed).toMatchObject({ session_id: opened.session_id, opened: false, state: 'busy', expires_at: new Date(t.clock.now() + 90 * S).toISOString() });
    const listed = await get(`/api/v1/presence/${id}/list`);
    expect(listed.body).toEqual({
      context_id: id,
      count: 1,
      total: 1,
      sessions: [{
        session_id: opened.session_id,
        context_id: id,
        subject: { id: 'alice', kind: 'user' },
        device_id: 'laptop',
        connection_id: 'c1',
        state: 'busy',
        activity: 'active',
        observer: false,
        metadata: { role: 'host' },
        geo: null,
        opened_at: ISO,
        last_heartbeat_at: new Date(t.clock.now()).toISOString(),
        expires_at: ISO,
      }],
    });
  });

  it('rejects bad heartbeats with 400, unknown sessions with 404, another subject with 409', async () => {
    const id = await createContext({ metadata_schema: { allowed_keys: ['role'] } });
    const hb = (body: unknown) => post(`/api/v1/presence/${id}/heartbeat`, body);
    expectError(await hb({}), 400, 'BAD_REQUEST');
    expectError(await hb({ subject: { id: 'a', kind: 'robot' } }), 400, 'BAD_REQUEST');
    expectError(await hb({ subject: { id: 'a', kind: 'user' }, state: 'sleeping' }), 400, 'BAD_REQUEST');
    expectError(await hb({ subject: { id: 'a', kind: 'user' }, geo: { lat: 91, lon: 0 } }), 400, 'BAD_REQUEST');
    expectError(await hb({ subject: { id: 'a', kind: 'user' }, geo: { lat: 0, lon: -180.5 } }), 400, 'BAD_REQUEST');
    // Geo is off for this context.
    expectError(await hb({ subject: { id: 'a', kind: 'user' }, geo: { lat: 1, lon: 1 } }), 400, 'BAD_REQUEST');
    const meta = await hb({ subject: { id: 'a', kind: 'user' }, metadata: { role: 'x', color: 'red' } });
    expectError(meta, 400, 'BAD_REQUEST');
    expect(meta.body.details).toEqual([{ field: 'body.metadata.color', message: expect.any(String) }]);
    expectError(await hb({ subject: { id: 'a', kind: 'user' }, observer: 'yes' }), 400, 'BAD_REQUEST');
    expectError(await hb({ session_id: 'ps_nope' }), 404, 'presence_session_not_found');
    const mine = await open(id, { subject: { id: 'a', kind: 'user' } });
    expectError(await hb({ session_id: mine.session_id, subject: { id: 'b', kind: 'user' } }), 409, 'conflict');
    expectError(await post(`/api/v1/presence/${freshId('missing')}/heartbeat`, { subject: { id: 'a', kind: 'user' } }), 404, 'not_found');
  });

  it('state answers previous_state; unknown values 400, unknown session 404', async () => {
    const id = await createContext();
    const s = await open(id, { subject: { id: 'bot', kind: 'agent' } });
    const res = await post(`/api/v1/presence/${id}/state`, { session_id: s.session_id, state: 'thinking' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ context_id: id, session_id: s.session_id, state: 'thinking', previous_state: 'available' });
    const again = await post(`/api/v1/presence/${id}/state`, { session_id: s.session_id, state: 'offline' });
    expect(again.body.previous_state).toBe('thinking');
    expectError(await post(`/api/v1/presence/${id}/state`, { session_id: s.session_id, state: 'napping' }), 400, 'BAD_REQUEST');
    expectError(await post(`/api/v1/presence/${id}/state`, { session_id: s.session_id }), 400, 'BAD_REQUEST');
    expectError(await post(`/api/v1/presence/${id}/state`, { session_id: 'ps_gone', state: 'busy' }), 404, 'presence_session_not_found');
  });

  it('leave ends one session or all of a subject\'s; exactly one of the two is required', async () => {
    const id = await createContext();
    const a1 = await open(id, { subject: { id: 'alice', kind: 'user' } });
    await open(id, { subject: { id: 'alice', kind: 'user' } });
    const b = await open(id, { subject: { id: 'bob', kind: 'user' } });
    const one = await post(`/api/v1/presence/${id}/leave`, { session_id: a1.session_id });
    expect(one.status, one.text).toBe(200);
    expect(one.body).toEqual({ context_id: id, removed_sessions: 1, message: '1 session removed' });
    expect((await post(`/api/v1/presence/${id}/leave`, { session_id: a1.session_id })).body.removed_sessions).toBe(0);
    expect((await post(`/api/v1/presence/${id}/leave`, { subject_id: 'alice' })).body).toMatchObject({ removed_sessions: 1 });
    const remaining = await get(`/api/v1/presence/${id}/list`);
    expect(remaining.body.sessions.map((s: any) => s.session_id)).toEqual([b.session_id]);
    expectError(await post(`/api/v1/presence/${id}/leave`, {}), 400, 'BAD_REQUEST');
    expectError(await post(`/api/v1/presence/${id}/leave`, { session_id: b.session_id, subject_id: 'bob' }), 400, 'BAD_REQUEST');
    expectError(await post(`/api/v1/presence/${freshId('missing')}/leave`, { subject_id: 'bob' }), 404, 'not_found');
  });
});

describe('capacity, observers, count', () => {
  it('soft_limit -> busy, max_active -> full, reject -> 409 presence_capacity_full; observers are not active', async () => {
    const id = await createContext({ capacity: { max_active: 2, soft_limit: 1 } });
    expect((await open(id, { subject: { id: 'a', kind: 'user' } })).occupancy.occupancy_state).toBe('busy');
    expect((await open(id, { subject: { id: 'b', kind: 'agent' } })).occupancy).toMatchObject({ occupancy_state: 'full', capacity_remaining: 0 });
    const rejected = await post(`/api/v1/presence/${id}/heartbeat`, { subject: { id: 'c', kind: 'user' } });
    expectError(rejected, 409, 'presence_capacity_full');
    expect(rejected.body.details).toMatchObject({ admission: 'rejected', occupancy: { active: 2, occupancy_state: 'full' } });
    const watcher = await open(id, { subject: { id: 'w', kind: 'device' }, observer: true });
    expect(watcher).toMatchObject({ observer: true, admission: 'admitted' });
    expect(watcher.occupancy).toMatchObject({ active: 2, observers: 1, total: 3, available_agents: 1 });
    const counted = await get(`/api/v1/presence/${id}/count`);
    expect(counted.status).toBe(200);
    expect(counted.body).toEqual({
      context_id: id,
      by_state: { available: 2, thinking: 0, busy: 0, offline: 0 },
      occupancy: expect.objectContaining({ active: 2, observers: 1, total: 3 }),
    });
    expectError(await get(`/api/v1/presence/${freshId('missing')}/count`), 404, 'not_found');
  });

  it('overflow_policy observe admits overflow as an observer (admission downgraded)', async () => {
    const id = await createContext({ capacity: { max_active: 1, overflow_policy: 'observe' } });
    await open(id, { subject: { id: 'a', kind: 'user' } });
    expect(await open(id, { subject: { id: 'b', kind: 'user' } })).toMatchObject({ admission: 'downgraded', observer: true });
  });
});

describe('list', () => {
  it('filters by state, activity and kind, aggregates by subject, pages with limit and offset', async () => {
    const id = await createContext({ heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    const a1 = await open(id, { subject: { id: 'alice', kind: 'user' } });
    await advance(12 * S);
    const a2 = await open(id, { subject: { id: 'alice', kind: 'user' }, state: 'busy' });
    const bot = await open(id, { subject: { id: 'bot', kind: 'agent' }, state: 'thinking' });
    const ids = async (query: string) => (await get(`/api/v1/presence/${id}/list${query}`)).body.sessions.map((s: any) => s.session_id);
    expect(await ids('')).toEqual([a1.session_id, a2.session_id, bot.session_id]);
    expect(await ids('?activity=idle')).toEqual([a1.session_id]);
    expect(await ids('?activity=active&kind=user')).toEqual([a2.session_id]);
    expect(await ids('?state=thinking')).toEqual([bot.session_id]);
    expect(await ids('?kind=agent')).toEqual([bot.session_id]);
    expect(await ids('?limit=1&offset=1')).toEqual([a2.session_id]);
    const aggregated = await get(`/api/v1/presence/${id}/list?aggregate_by_subject=true`);
    expect(aggregated.body).toMatchObject({ count: 2, total: 2 });
    expect(aggregated.body.sessions.map((s: any) => [s.subject.id, s.session_id, s.session_count])).toEqual([
      ['alice', a2.session_id, 2],
      ['bot', bot.session_id, 1],
    ]);
    const paged = await get(`/api/v1/presence/${id}/list?limit=2`);
    expect(paged.body).toMatchObject({ count: 2, total: 3 });
    expectError(await get(`/api/v1/presence/${id}/list?activity=sleeping`), 400, 'BAD_REQUEST');
    expectError(await get(`/api/v1/presence/${id}/list?state=napping`), 400, 'BAD_REQUEST');
    expectError(await get(`/api/v1/presence/${id}/list?kind=robot`), 400, 'BAD_REQUEST');
    expectError(await get(`/api/v1/presence/${id}/list?limit=-1`), 400, 'BAD_REQUEST');
    expectError(await get(`/api/v1/presence/${freshId('missing')}/list`), 404, 'not_found');
  });
});

describe('nearby', () => {
  it('finds sessions within the radius, nearest first, with great-circle distances', async () => {
    const id = await createContext({ geo: { enabled: true } });
    const louvre = await open(id, { subject: { id: 'l', kind: 'user' }, geo: { lat: 48.8606, lon: 2.3376 } });
    const eiffel = await open(id, { subject: { id: 'e', kind: 'user' }, geo: { lat: 48.8584, lon: 2.2945 } });
    await open(id, { subject: { id: 'london', kind: 'user' }, geo: { lat: 51.5074, lon: -0.1278 } });
    const res = await get(`/api/v1/presence/${id}/nearby?lat=48.8566&lon=2.3522&radius_meters=6000`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ context_id: id, count: 2, total: 2 });
    expect(res.body.sessions.map((s: any) => s.session_id)).toEqual([louvre.session_id, eiffel.session_id]);
    expect(res.body.sessions[0]).toEqual({
      session_id: louvre.session_id,
      subject: { id: 'l', kind: 'user' },
      geo: { lat: 48.8606, lon: 2.3376 },
      distance_meters: expect.any(Number),
      observer: false,
      activity: 'active',
      state: 'available',
    });
    expect(res.body.sessions[0].distance_meters).toBeGreaterThan(1100);
    expect(res.body.sessions[0].distance_meters).toBeLessThan(1200);
    expect(res.body.sessions[1].distance_meters).toBeGreaterThan(4000);
    const limited = await get(`/api/v1/presence/${id}/nearby?lat=48.8566&lon=2.3522&radius_meters=500000&limit=1`);
    expect(limited.body).toMatchObject({ count: 1, total: 3 });
  });

  it('rejects out-of-range coordinates, a negative radius, missing parameters, and a context without geo', async () => {
    const id = await createContext({ geo: { enabled: true } });
    const nearby = (query: string) => get(`/api/v1/presence/${id}/nearby?${query}`);
    expectError(await nearby('lat=91&lon=0&radius_meters=10'), 400, 'BAD_REQUEST');
    expectError(await nearby('lat=0&lon=181&radius_meters=10'), 400, 'BAD_REQUEST');
    expectError(await nearby('lat=0&lon=0&radius_meters=-5'), 400, 'BAD_REQUEST');
    expectError(await nearby('lat=0&lon=0&radius_meters=30000000'), 400, 'BAD_REQUEST');
    expectError(await nearby('lat=abc&lon=0&radius_meters=10'), 400, 'BAD_REQUEST');
    expectError(await nearby('lat=0&lon=0'), 400, 'BAD_REQUEST');
    const plain = await createContext();
    expectError(await get(`/api/v1/presence/${plain}/nearby?lat=0&lon=0&radius_meters=10`), 400, 'BAD_REQUEST');
  });
});

describe('activity over time: sweep and the durable alarm', () => {
  it('sweep records transitions due before the alarm; the alarm does the rest on its own', async () => {
    const id = await createContext({ heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    await alignClock(250);
    const a = await open(id, { subject: { id: 'alice', kind: 'user' } });
    // a is idle at +10 s; the alarm is rounded up to +10.75 s. In between, reads are exact and sweep does the work.
    await advance(10 * S);
    expect((await get(`/api/v1/presence/${id}/count`)).body.occupancy).toMatchObject({ active: 0, idle: 1 });
    const sweep = await post(`/api/v1/presence/${id}/sweep`);
    expect(sweep.status, sweep.text).toBe(200);
    expect(sweep.body).toEqual({ context_id: id, reconciled: 1, transitions: { [a.session_id]: 'idle' }, expired: [], remaining: false });
    expect((await post(`/api/v1/presence/${id}/sweep`)).body).toMatchObject({ reconciled: 0, transitions: {} });

    // Nobody sweeps from here: the alarm makes a stale, then removes it after its ttl.
    await advance(11 * S);
    expect((await post(`/api/v1/presence/${id}/sweep`)).body.reconciled).toBe(0);
    expect((await get(`/api/v1/presence/${id}/list`)).body.sessions[0].activity).toBe('stale');
    await advance(10 * S);
    expect((await post(`/api/v1/presence/${id}/sweep`)).body).toMatchObject({ reconciled: 0, expired: [] });
    expect((await get(`/api/v1/presence/${id}/list`)).body).toMatchObject({ count: 0, total: 0 });
    expectError(await post(`/api/v1/presence/${id}/heartbeat`, { session_id: a.session_id }), 404, 'presence_session_not_found');
    expectError(await post(`/api/v1/presence/${freshId('missing')}/sweep`), 404, 'not_found');
  });
});

describe('multiplex', () => {
  it('routes each item to its context and reports per item; failures do not fail the others', async () => {
    const one = await createContext();
    const two = await createContext({ capacity: { max_active: 1 } });
    await open(two, { subject: { id: 'occupant', kind: 'user' } });
    const res = await post('/api/v1/presence/multiplex', {
      items: [
        { context_id: one, heartbeat: { subject: { id: 'mx', kind: 'user' } } },
        { context_id: two, heartbeat: { subject: { id: 'mx', kind: 'user' } } },
        { context_id: freshId('missing'), heartbeat: { subject: { id: 'mx', kind: 'user' } } },
        { context_id: one, heartbeat: { subject: { id: 'mx', kind: 'user' }, state: 'dreaming' } },
        { context_id: 'bad id!', heartbeat: { subject: { id: 'mx', kind: 'user' } } },
        { context_id: one, heartbeat: 'not an object' },
      ],
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.succeeded).toBe(1);
    expect(res.body.failed).toBe(5);
    const [ok, full, missing, badState, badId, notObject] = res.body.results;
    expect(ok).toMatchObject({ context_id: one, success: true, error: null, message: null, status: 200, heartbeat: { context_id: one, opened: true, admission: 'admitted' } });
    expect(full).toMatchObject({ context_id: two, success: false, heartbeat: null, error: 'presence_capacity_full', status: 409, message: expect.any(String) });
    expect(missing).toMatchObject({ success: false, error: 'not_found', status: 404 });
    expect(badState).toMatchObject({ success: false, error: 'BAD_REQUEST', status: 400 });
    expect(badId).toMatchObject({ success: false, error: 'BAD_REQUEST', status: 400 });
    expect(notObject).toMatchObject({ success: false, error: 'BAD_REQUEST', status: 400 });
    // The successful item really opened a session.
    const listed = await get(`/api/v1/presence/${one}/list`);
    expect(listed.body.sessions.map((s: any) => s.session_id)).toEqual([ok.heartbeat.session_id]);
    // Refresh through multiplex.
    const again = await post('/api/v1/presence/multiplex', { items: [{ context_id: one, heartbeat: { session_id: ok.heartbeat.session_id, state: 'busy' } }] });
    expect(again.body).toMatchObject({ succeeded: 1, failed: 0, results: [{ success: true, heartbeat: { session_id: ok.heartbeat.session_id, opened: false, state: 'busy' } }] });
  });

  it('rejects an empty, oversized or malformed batch as a whole', async () => {
    expectError(await post('/api/v1/presence/multiplex', { items: [] }), 400, 'BAD_REQUEST');
    expectError(await post('/api/v1/presence/multiplex', {}), 400, 'BAD_REQUEST');
    const many = Array.from({ length: 101 }, () => ({ context_id: 'x', heartbeat: {} }));
    expectError(await post('/api/v1/presence/multiplex', { items: many }), 400, 'BAD_REQUEST');
  });
});

describe('last seen', () => {
  it('tracks a subject across contexts, exactly while online and after it leaves or expires', async () => {
    const subject = `sub-${process.pid}-${++counter}`;
    const room = await createContext({ heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    const doc = await post('/api/v1/presence/contexts', { id: freshId('doc'), kind: 'document' });
    const docId = doc.body.id;
    expectError(await get(`/api/v1/presence/subjects/${subject}/last-seen`), 404, 'not_found');

    const inRoom = await open(room, { subject: { id: subject, kind: 'agent' } });
    const roomOpened = t.clock.now();
    await advance(5 * S);
    const inDoc = await open(docId, { subject: { id: subject, kind: 'agent' }, state: 'thinking' });
    const docOpened = t.clock.now();
    await advance(2 * S);
    // A heartbeat 2 s later is not yet reported to the index (30 s resolution), but the read asks the live context.
    await open(docId, { session_id: inDoc.session_id });
    await settle();
    const live = await get(`/api/v1/presence/subjects/${subject}/last-seen`);
    expect(live.status, live.text).toBe(200);
    expect(live.body).toEqual({
      subject_id: subject,
      subject_kind: 'agent',
      last_seen_at: new Date(docOpened + 2 * S).toISOString(),
      online: true,
      contexts: [
        { context_id: docId, context_kind: 'document', last_seen_at: new Date(docOpened + 2 * S).toISOString(), last_state: 'thinking', online: true },
        { context_id: room, context_kind: 'room', last_seen_at: new Date(roomOpened).toISOString(), last_state: 'available', online: true },
      ],
    });

    // Leaving the document: last seen = the moment it left.
    await advance(S);
    const left = t.clock.now();
    await post(`/api/v1/presence/${docId}/leave`, { subject_id: subject });
    // The room session expires (the alarm removes it and tells the index).
    await advance(30 * S);
    await settle();
    const after = await get(`/api/v1/presence/subjects/${subject}/last-seen`);
    expect(after.body).toMatchObject({
      online: false,
      last_seen_at: new Date(left).toISOString(),
      contexts: [
        { context_id: docId, last_seen_at: new Date(left).toISOString(), online: false },
        { context_id: room, last_seen_at: new Date(roomOpened).toISOString(), online: false },
      ],
    });
    expect(inRoom.session_id).toBeTruthy();
    // Another tenant knows nothing about this subject.
    expectError(await get(`/api/v1/presence/subjects/${subject}/last-seen`, otherToken), 404, 'not_found');
  });
});

describe('openapi', () => {
  it('documents the presence routes', async () => {
    const res = await t.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    for (const path of [
      '/api/v1/presence/contexts',
      '/api/v1/presence/contexts/{context_id}',
      '/api/v1/presence/multiplex',
      '/api/v1/presence/subjects/{subject_id}/last-seen',
      '/api/v1/presence/{context_id}/count',
      '/api/v1/presence/{context_id}/heartbeat',
      '/api/v1/presence/{context_id}/leave',
      '/api/v1/presence/{context_id}/list',
      '/api/v1/presence/{context_id}/nearby',
      '/api/v1/presence/{context_id}/state',
      '/api/v1/presence/{context_id}/sweep',
    ]) {
      expect(res.body.paths[path], path).toBeDefined();
    }
  });
});
