import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Distributed locks over the real socket (spec §4.7 and the conventions "Distributed locks"). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let keyCounter = 0;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
const newKey = () => `key-${++keyCounter}`;
const lockPath = (key: string, namespace = 'jobs') => `/api/v1/distributed-state/${encodeURIComponent(namespace)}/${encodeURIComponent(key)}/lock`;

function acquire(key: string, body: Record<string, unknown>, token = alice.token, namespace?: string) {
  return t.request('POST', lockPath(key, namespace), { token, body });
}
function status(key: string, token = alice.token, namespace?: string) {
  return t.request('GET', lockPath(key, namespace), { token });
}
function extend(key: string, body: Record<string, unknown>, token = alice.token) {
  return t.request('PATCH', lockPath(key), { token, body });
}
function release(key: string, body: Record<string, unknown>, token = alice.token) {
  return t.request('DELETE', lockPath(key), { token, body });
}

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

async function advance(ms: number) {
  clock().advance(ms);
  await settle();
}

describe('acquire, status, extend, release', () => {
  it('acquire returns the acquire shape; status shows it held with the time remaining', async () => {
    const key = newKey();
    const now = clock().now();
    const res = await acquire(key, { owner_id: 'worker-1', ttl_seconds: 60, metadata: { job: 42, tags: ['a', 'b'], nested: { ok: true } } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      lock_id: expect.any(String),
      namespace: 'jobs',
      key,
      owner_id: 'worker-1',
      fence_token: 1,
      acquired_at: new Date(now).toISOString(),
      expires_at: new Date(now + 60_000).toISOString(),
      ttl_seconds: 60,
      metadata: { job: 42, tags: ['a', 'b'], nested: { ok: true } },
    });
    await advance(15_000);
    const read = await status(key);
    expect(read.status).toBe(200);
    expect(read.body).toEqual({
      namespace: 'jobs',
      key,
      is_locked: true,
      lock_id: res.body.lock_id,
      owner_id: 'worker-1',
      fence_token: 1,
      acquired_at: res.body.acquired_at,
      expires_at: res.body.expires_at,
      time_remaining_ms: 45_000,
      metadata: { job: 42, tags: ['a', 'b'], nested: { ok: true } },
    });
  });

  it('ttl_seconds defaults to 30; metadata defaults to null', async () => {
    const key = newKey();
    const res = await acquire(key, { owner_id: 'w' });
    expect(res.status).toBe(200);
    expect(res.body.ttl_seconds).toBe(30);
    expect(Date.parse(res.body.expires_at) - Date.parse(res.body.acquired_at)).toBe(30_000);
    expect(res.body.metadata).toBeNull();
  });

  it('another owner gets 409 lock_held; the holder acquiring again gets the same lock', async () => {
    const key = newKey();
    const first = await acquire(key, { owner_id: 'a', ttl_seconds: 30 });
    expectError(await acquire(key, { owner_id: 'b', ttl_seconds: 30 }), 409, 'lock_held');
    await advance(1000);
    const again = await acquire(key, { owner_id: 'a', ttl_seconds: 30 });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
  });

  it('extend moves the expiry from now (default: the current ttl, acquired or last extended with) and keeps lock_id and fence token', async () => {
    const key = newKey();
    const lock = (await acquire(key, { owner_id: 'a', ttl_seconds: 20 })).body;
    await advance(10_000);
    const extended = await extend(key, { lock_id: lock.lock_id, owner_id: 'a' });
    expect(extended.status, extended.text).toBe(200);
    expect(extended.body).toEqual({
      lock_id: lock.lock_id,
      namespace: 'jobs',
      key,
      owner_id: 'a',
      fence_token: lock.fence_token,
      expires_at: new Date(clock().now() + 20_000).toISOString(),
      ttl_seconds: 20,
    });
    const longer = await extend(key, { lock_id: lock.lock_id, owner_id: 'a', ttl_seconds: 100 });
    expect(longer.body).toMatchObject({ ttl_seconds: 100, expires_at: new Date(clock().now() + 100_000).toISOString() });
    // Past the original expiry, still held: the old expiry alarm must not release it.
    await advance(30_000);
    expect((await status(key)).body).toMatchObject({ is_locked: true, lock_id: lock.lock_id, time_remaining_ms: 70_000 });
    // Without ttl_seconds, the ttl it was last extended with (100), not the one it was acquired with (20).
    const again = await extend(key, { lock_id: lock.lock_id, owner_id: 'a' });
    expect(again.body).toMatchObject({ ttl_seconds: 100, expires_at: new Date(clock().now() + 100_000).toISOString() });
  });

  it('extend and release by the wrong lock_id or owner_id are 409 lock_not_held and change nothing', async () => {
    const key = newKey();
    const lock = (await acquire(key, { owner_id: 'a', ttl_seconds: 30 })).body;
    expectError(await extend(key, { lock_id: lock.lock_id, owner_id: 'b' }), 409, 'lock_not_held');
    expectError(await extend(key, { lock_id: 'lck_other', owner_id: 'a' }), 409, 'lock_not_held');
    expectError(await release(key, { lock_id: lock.lock_id, owner_id: 'b' }), 409, 'lock_not_held');
    expectError(await release(key, { lock_id: 'lck_other', owner_id: 'a' }), 409, 'lock_not_held');
    expect((await status(key)).body).toMatchObject({ is_locked: true, lock_id: lock.lock_id, expires_at: lock.expires_at });
    expectError(await extend(newKey(), { lock_id: lock.lock_id, owner_id: 'a' }), 409, 'lock_not_held');
  });

  it('release answers 204 with no body; the free key reports is_locked false and the last fence token', async () => {
    const key = newKey();
    const lock = (await acquire(key, { owner_id: 'a', metadata: 'm' })).body;
    const released = await release(key, { lock_id: lock.lock_id, owner_id: 'a' });
    expect(released.status).toBe(204);
    expect(released.text).toBe('');
    expect((await status(key)).body).toEqual({
      namespace: 'jobs',
      key,
      is_locked: false,
      lock_id: null,
      owner_id: null,
      fence_token: lock.fence_token,
      acquired_at: null,
      expires_at: null,
      time_remaining_ms: 0,
      metadata: null,
    });
    expectError(await release(key, { lock_id: lock.lock_id, owner_id: 'a' }), 409, 'lock_not_held');
    expectError(await extend(key, { lock_id: lock.lock_id, owner_id: 'a' }), 409, 'lock_not_held');
  });

  it('a key never locked reads is_locked false with fence token 0', async () => {
    const res = await status(newKey());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ is_locked: false, fence_token: 0, lock_id: null, time_remaining_ms: 0 });
  });

  it('namespace and key may hold any printable characters, URL-encoded', async () => {
    const namespace = 'ns with spaces/ü';
    const key = 'a/b?c#d%e';
    const res = await acquire(key, { owner_id: 'a' }, alice.token, namespace);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ namespace, key });
    expect((await status(key, alice.token, namespace)).body).toMatchObject({ namespace, key, is_locked: true });
    expect((await status('a', alice.token, namespace)).body.is_locked).toBe(false);
  });

  it('401 without a token', async () => {
    expectError(await t.request('GET', lockPath('x')), 401, 'unauthorized');
    expectError(await t.request('POST', lockPath('x'), { body: { owner_id: 'a' } }), 401, 'unauthorized');
  });

  it('400 for a bad ttl, a missing owner_id and metadata over 16 KiB', async () => {
    const key = newKey();
    expectError(await acquire(key, { owner_id: 'a', ttl_seconds: 0 }), 400, 'BAD_REQUEST');
    expectError(await acquire(key, { owner_id: 'a', ttl_seconds: 86_401 }), 400, 'BAD_REQUEST');
    expectError(await acquire(key, { owner_id: 'a', ttl_seconds: 1.5 }), 400, 'BAD_REQUEST');
    expectError(await acquire(key, { owner_id: 'a', ttl_seconds: '30' }), 400, 'BAD_REQUEST');
    expectError(await acquire(key, { ttl_seconds: 30 }), 400, 'BAD_REQUEST');
    expectError(await acquire(key, { owner_id: '' }), 400, 'BAD_REQUEST');
    const big = await acquire(key, { owner_id: 'a', metadata: 'x'.repeat(17 * 1024) });
    expectError(big, 400, 'BAD_REQUEST');
    expect(big.body.details).toEqual([expect.objectContaining({ field: 'body.metadata' })]);
    // Counted in UTF-8 bytes: 6,000 euro signs are 6,002 characters serialised, but 18,002 bytes.
    expectError(await acquire(key, { owner_id: 'a', metadata: '\u20ac'.repeat(6_000) }), 400, 'BAD_REQUEST');
    expect((await status(key)).body).toMatchObject({ is_locked: false, fence_token: 0 });
    expectError(await extend(key, { lock_id: 'x', owner_id: 'a', ttl_seconds: -1 }), 400, 'BAD_REQUEST');
    expectError(await release(key, { owner_id: 'a' }), 400, 'BAD_REQUEST');
  });
});

describe('tenancy', () => {
  it('two users with the same namespace and key do not see or touch each other\'s lock', async () => {
    const key = newKey();
    const mine = await acquire(key, { owner_id: 'same-owner' }, alice.token);
    expect(mine.status).toBe(200);
    expect((await status(key, bob.token)).body).toMatchObject({ is_locked: false, fence_token: 0, lock_id: null });
    expectError(await release(key, { lock_id: mine.body.lock_id, owner_id: 'same-owner' }, bob.token), 409, 'lock_not_held');
    expectError(await extend(key, { lock_id: mine.body.lock_id, owner_id: 'same-owner' }, bob.token), 409, 'lock_not_held');
    const theirs = await acquire(key, { owner_id: 'same-owner' }, bob.token);
    expect(theirs.status).toBe(200);
    expect(theirs.body.lock_id).not.toBe(mine.body.lock_id);
    expect(theirs.body.fence_token).toBe(1);
    expect((await status(key, alice.token)).body).toMatchObject({ is_locked: true, lock_id: mine.body.lock_id });
  });
});

describe('expiry', () => {
  it('needs no timer: free at expires_at for every read and write, acquirable with the next token', async () => {
    const runtime = t.node.runtime;
    const alarmsBefore = runtime.pendingAlarmCount();
    const key = newKey();
    const lock = (await acquire(key, { owner_id: 'a', ttl_seconds: 10 })).body;
    // Acquiring writes the lock's one record: no expiry alarm to store, move or cancel.
    expect(runtime.pendingAlarmCount()).toBe(alarmsBefore);
    clock().advance(9_999);
    expect((await status(key)).body).toMatchObject({ is_locked: true, time_remaining_ms: 1 });
    clock().advance(1);
    expect((await status(key)).body).toMatchObject({ is_locked: false, lock_id: null, owner_id: null, fence_token: lock.fence_token, time_remaining_ms: 0 });
    expectError(await extend(key, { lock_id: lock.lock_id, owner_id: 'a' }), 409, 'lock_not_held');
    expectError(await release(key, { lock_id: lock.lock_id, owner_id: 'a' }), 409, 'lock_not_held');
    const next = await acquire(key, { owner_id: 'b', ttl_seconds: 10 });
    expect(next.status).toBe(200);
    expect(next.body.fence_token).toBe(lock.fence_token + 1);
    // The former holder acquiring again gets a new lock too, not its expired one.
    clock().advance(10_000);
    const again = await acquire(key, { owner_id: 'a', ttl_seconds: 10 });
    expect(again.body).toMatchObject({ owner_id: 'a', fence_token: lock.fence_token + 2 });
    expect(again.body.lock_id).not.toBe(lock.lock_id);
    expect(runtime.pendingAlarmCount()).toBe(alarmsBefore);
  });

  it('extend moves the expiry; release frees at once', async () => {
    const key = newKey();
    const lock = (await acquire(key, { owner_id: 'a', ttl_seconds: 5 })).body;
    clock().advance(4_000);
    expect((await extend(key, { lock_id: lock.lock_id, owner_id: 'a', ttl_seconds: 5 })).status).toBe(200);
    clock().advance(4_000);
    expect((await status(key)).body).toMatchObject({ is_locked: true, lock_id: lock.lock_id, time_remaining_ms: 1_000 });
    expect((await release(key, { lock_id: lock.lock_id, owner_id: 'a' })).status).toBe(204);
    expect((await status(key)).body).toMatchObject({ is_locked: false, fence_token: lock.fence_token });
  });
});

describe('fence tokens and contention', () => {
  it('40 concurrent acquirers of one key: exactly one winner and 39 lock_held', async () => {
    const key = newKey();
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => acquire(key, { owner_id: `owner-${i}`, ttl_seconds: 60 })));
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    const losers = results.filter((r) => r.status !== 200);
    expect(losers).toHaveLength(39);
    for (const loser of losers) expectError(loser, 409, 'lock_held');
    const read = await status(key);
    expect(read.body).toMatchObject({ is_locked: true, owner_id: winners[0].body.owner_id, lock_id: winners[0].body.lock_id, fence_token: 1 });
  });

  it('fence tokens strictly increase over acquire/release/expiry cycles', async () => {
    const key = newKey();
    const tokens: number[] = [];
    for (let cycle = 0; cycle < 12; cycle++) {
      const owner_id = `owner-${cycle % 3}`;
      const lock = await acquire(key, { owner_id, ttl_seconds: 2 });
      expect(lock.status, lock.text).toBe(200);
      tokens.push(lock.body.fence_token);
      switch (cycle % 3) {
        case 0:
          expect((await release(key, { lock_id: lock.body.lock_id, owner_id })).status).toBe(204);
          break;
        case 1:
          await advance(2_000); // expired, then the next acquire takes a new token
          break;
        default:
          clock().advance(2_000);
      }
      expect((await status(key)).body).toMatchObject({ is_locked: false, fence_token: lock.body.fence_token });
    }
    await settle();
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
    expect(tokens[0]).toBe(1);
  });
});

describe('across a restart', () => {
  it('held locks and fence counters survive a graceful restart; expiry goes on by the clock', async () => {
    let node = await startTestNode({ clock: 'manual' });
    try {
      const user = await node.newUser('locks');
      const heldKey = lockPath('held');
      const held = await node.request('POST', heldKey, { token: user.token, body: { owner_id: 'a', ttl_seconds: 100, metadata: { v: 1 } } });
      const cycled = lockPath('cycled');
      for (let i = 0; i < 3; i++) {
        const lock = await node.request('POST', cycled, { token: user.token, body: { owner_id: 'a' } });
        await node.request('DELETE', cycled, { token: user.token, body: { lock_id: lock.body.lock_id, owner_id: 'a' } });
      }
      const startedAt = node.clock.now();
      await node.stop();
      node = await startTestNode({ clock: 'manual', dataDir: node.dataDir });
      (node.clock as ManualClock).set(startedAt + 50_000);
      await settle();
      const read = await node.request('GET', heldKey, { token: user.token });
      expect(read.body).toMatchObject({ is_locked: true, lock_id: held.body.lock_id, owner_id: 'a', fence_token: 1, metadata: { v: 1 }, time_remaining_ms: 50_000 });
      const next = await node.request('POST', cycled, { token: user.token, body: { owner_id: 'b' } });
      expect(next.body.fence_token).toBe(4);
      (node.clock as ManualClock).advance(50_000);
      expect((await node.request('GET', heldKey, { token: user.token })).body).toMatchObject({ is_locked: false, fence_token: 1 });
      expect((await node.request('POST', heldKey, { token: user.token, body: { owner_id: 'c' } })).body.fence_token).toBe(2);
    } finally {
      await node.destroy();
    }
  });
});
