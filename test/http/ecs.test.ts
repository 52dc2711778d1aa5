import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** ECS coordinator REST endpoints: start, stop, mutations, status and their errors. */

let t: TestNode;
let alice: string;
let bob: string;
const clock = () => t.clock as ManualClock;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  alice = (await t.newUser('ecsa')).token;
  bob = (await t.newUser('ecsb')).token;
});
afterAll(() => t.destroy());

const base = (index: string) => `/api/v1/ecs/${index}/coordinator`;
const get = (index: string, token = alice) => t.request('GET', base(index), { token });
const post = (index: string, path: string, body?: unknown, token = alice) => t.request('POST', `${base(index)}${path}`, { token, body });

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

async function waitForTick(index: string, tick: number) {
  for (let polls = 0; polls < 200; polls++) {
    await settle();
    if ((await get(index)).body.tick >= tick) return;
  }
  throw new Error(`index ${index} never reached tick ${tick}`);
}

describe('ECS coordinator', () => {
  it('an index never started reads as stopped at tick 0', async () => {
    const res = await get('fresh');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ index: 'fresh', running: false, tick: 0, tick_rate_ms: 50, last_tick_at: null, connected_systems: 0, entities: 0, oldest_tick: 0 });
  });

  it('start runs the tick loop on durable alarms at tick_rate_ms; stop halts it; both are idempotent', async () => {
    const started = await post('loop', '/start', { tick_rate_ms: 200 });
    expect(started.status, started.text).toBe(200);
    expect(started.body).toMatchObject({ running: true, tick: 0, tick_rate_ms: 200 });
    expect((await post('loop', '/start', { tick_rate_ms: 200 })).body).toMatchObject({ running: true, tick: 0 });
    clock().advance(200);
    await waitForTick('loop', 1);
    clock().advance(200);
    await waitForTick('loop', 2);
    const status = (await get('loop')).body;
    expect(status).toMatchObject({ running: true, tick: 2 });
    expect(Date.parse(status.last_tick_at)).toBe(clock().now());
    expect((await post('loop', '/stop')).body).toMatchObject({ running: false, tick: 2 });
    expect((await post('loop', '/stop')).body).toMatchObject({ running: false, tick: 2 });
    clock().advance(1_000);
    await settle();
    expect((await get('loop')).body.tick).toBe(2);
    // Start without a body keeps the index's rate.
    const restarted = await t.request('POST', `${base('loop')}/start`, { token: alice });
    expect(restarted.status, restarted.text).toBe(200);
    expect(restarted.body).toMatchObject({ running: true, tick_rate_ms: 200 });
    await post('loop', '/stop');
  });

  it('mutations: each entity succeeds or fails on its own with optimistic versions', async () => {
    const created = await post('world', '/mutations', {
      mutations: [
        { entity_id: 'p1', op: 'create', components: { pos: [0, 0] } },
        { entity_id: 'p2', op: 'create', components: { pos: [1, 1] } },
        { entity_id: 'p1', op: 'create' },
      ],
    });
    expect(created.status, created.text).toBe(200);
    expect(created.body).toEqual({
      succeeded: 2,
      failed: 1,
      tick: 1,
      results: [
        { entity_id: 'p1', success: true, new_version: 1, current_version: 0, error: null },
        { entity_id: 'p2', success: true, new_version: 1, current_version: 0, error: null },
        { entity_id: 'p1', success: false, new_version: null, current_version: 1, error: 'entity_exists' },
      ],
    });
    const mixed = await post('world', '/mutations', {
      mutations: [
        { entity_id: 'p1', expected_version: 1, components: { pos: [2, 2] } },
        { entity_id: 'p2', expected_version: 7, components: { pos: [9, 9] } },
        { entity_id: 'ghost', expected_version: 1, components: {} },
        { entity_id: 'p1', op: 'update', expected_version: 2, components: { hp: 5 } },
        { entity_id: 'p2', op: 'delete', expected_version: 1 },
      ],
    });
    expect(mixed.body.results.map((r: any) => [r.entity_id, r.success, r.new_version, r.error])).toEqual([
      ['p1', true, 2, null],
      ['p2', false, null, 'version_conflict'],
      ['ghost', false, null, 'entity_not_found'],
      ['p1', true, 3, null],
      ['p2', true, 2, null],
    ]);
    expect(mixed.body).toMatchObject({ succeeded: 3, failed: 2 });
    expect((await get('world')).body.entities).toBe(1);
    // Another tenant's index of the same name is its own.
    expect((await get('world', bob)).body.entities).toBe(0);
    const bobs = await post('world', '/mutations', { mutations: [{ entity_id: 'p1', expected_version: 3, components: {} }] }, bob);
    expect(bobs.body.results[0].error).toBe('entity_not_found');
  });

  it('bad input is a 400 and changes nothing', async () => {
    expectError(await post('bad', '/start', { tick_rate_ms: 5 }), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/start', { tick_rate_ms: 10_001 }), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/start', { tick_rate_ms: 50.5 }), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/mutations', { mutations: [] }), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/mutations', {}), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/mutations', { mutations: [{ op: 'create' }] }), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/mutations', { mutations: [{ entity_id: 'a', op: 'explode' }] }), 400, 'BAD_REQUEST');
    expectError(await post('bad', '/mutations', { mutations: Array.from({ length: 501 }, (_, i) => ({ entity_id: `e${i}`, op: 'create' })) }), 400, 'BAD_REQUEST');
    const missingVersion = await post('bad', '/mutations', { mutations: [{ entity_id: 'a', op: 'create' }, { entity_id: 'a', components: { x: 1 } }] });
    expectError(missingVersion, 400, 'BAD_REQUEST');
    expect(missingVersion.body.details).toEqual([{ field: 'body.mutations.1.expected_version', message: 'is required for update' }]);
    const big = await post('bad', '/mutations', { mutations: [{ entity_id: 'a', op: 'create', components: { blob: 'x'.repeat(3_000) } }] });
    expect(big.body.results[0].error).toBe('components_too_large');
    expectError(await t.request('GET', base('bad%20name')), 401, 'unauthorized');
    expectError(await get('bad name'), 400, 'BAD_REQUEST');
    expect((await get('bad')).body).toMatchObject({ running: false, entities: 0, tick: 0 });
  });

  it('needs a credential', async () => {
    expectError(await t.request('GET', base('x')), 401, 'unauthorized');
    expectError(await t.request('POST', `${base('x')}/start`, { body: {} }), 401, 'unauthorized');
  });
});
