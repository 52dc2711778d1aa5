import { describe, expect, it } from 'vitest';
import { SESSION_CACHE_TTL_MS, SESSION_DEGRADE_MS_MAX, SessionCache } from '../../http/auth/session-cache.js';
import { checkSession, SESSION_CHECK_FALLBACK_DEADLINE_MS } from '../../http/auth/session-check.js';
import { RevocationAwareActorClient } from '../../http/auth/revocation-aware-client.js';
import { ManualClock, ServiceError, type ActorClient, type AskOptions } from '../../runtime/index.js';

const principal = (user_id: string, session_id: string, expires_at_ms = 1e15, impersonated_by: string | null = null) =>
  ({ user_id, session_id, role: 'user' as const, expires_at_ms, impersonated_by });

describe('SessionCache', () => {
  it('answers a stored check until its TTL or the session end, whichever comes first', () => {
    const cache = new SessionCache();
    cache.put(principal('u1', 's1'), cache.generation('u1'), 1000);
    expect(cache.get('u1', 's1', 1000 + SESSION_CACHE_TTL_MS - 1)).toMatchObject({ session_id: 's1' });
    expect(cache.get('u1', 's1', 1000 + SESSION_CACHE_TTL_MS)).toBeUndefined();
    cache.put(principal('u1', 's2', 1500), cache.generation('u1'), 1000);
    expect(cache.get('u1', 's2', 1499)).toBeDefined();
    expect(cache.get('u1', 's2', 1500)).toBeUndefined();
  });

  it("drops every session of a user, and no other user's", () => {
    const cache = new SessionCache();
    for (const [u, s] of [['u1', 'a'], ['u1', 'b'], ['u2', 'c']]) cache.put(principal(u, s), cache.generation(u), 0);
    cache.dropUser('u1');
    expect(cache.get('u1', 'a', 1)).toBeUndefined();
    expect(cache.get('u1', 'b', 1)).toBeUndefined();
    expect(cache.get('u2', 'c', 1)).toBeDefined();
  });

  it('does not store a check that was in flight when the user was dropped (the ban raced the check)', () => {
    const cache = new SessionCache();
    const generation = cache.generation('u1');
    cache.dropUser('u1');
    cache.put(principal('u1', 's1'), generation, 0);
    expect(cache.get('u1', 's1', 1)).toBeUndefined();
    cache.put(principal('u1', 's1'), cache.generation('u1'), 0);
    expect(cache.get('u1', 's1', 1)).toBeDefined();
  });
  it('never stores an impersonation session (it also depends on its admin, whose drops name the admin)', () => {
    const cache = new SessionCache();
    cache.put(principal('u1', 's1', 1e15, 'admin1'), cache.generation('u1'), 0);
    expect(cache.get('u1', 's1', 1)).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});

describe('SessionCache: the last positive check, while the user\'s partition is unavailable', () => {
  it('is kept past the TTL, up to SESSION_DEGRADE_MS_MAX after the check, never past the session', () => {
    const cache = new SessionCache();
    cache.put(principal('u1', 's1'), cache.generation('u1'), 1000);
    expect(cache.get('u1', 's1', 1000 + SESSION_CACHE_TTL_MS)).toBeUndefined();
    expect(cache.lastPositive('u1', 's1', 1000 + SESSION_CACHE_TTL_MS)).toMatchObject({ session_id: 's1' });
    expect(cache.lastPositive('u1', 's1', 1000 + SESSION_DEGRADE_MS_MAX - 1)).toBeDefined();
    expect(cache.lastPositive('u1', 's1', 1000 + SESSION_DEGRADE_MS_MAX)).toBeUndefined();
    expect(cache.size).toBe(0);
    cache.put(principal('u1', 's2', 20_000), cache.generation('u1'), 1000);
    expect(cache.lastPositive('u1', 's2', 19_999)).toBeDefined();
    expect(cache.lastPositive('u1', 's2', 20_000)).toBeUndefined();
  });

  it('is deleted by a drop of the user, and a check in flight across the drop does not bring it back', () => {
    const cache = new SessionCache();
    cache.put(principal('u1', 's1'), cache.generation('u1'), 0);
    const inFlight = cache.generation('u1');
    cache.dropUser('u1');
    expect(cache.lastPositive('u1', 's1', 10_000)).toBeUndefined();
    cache.put(principal('u1', 's1'), inFlight, 100);
    expect(cache.lastPositive('u1', 's1', 10_000)).toBeUndefined();
  });

  it('is deleted by a negative answer', () => {
    const cache = new SessionCache();
    cache.put(principal('u1', 's1'), cache.generation('u1'), 0);
    cache.put(principal('u1', 's2'), cache.generation('u1'), 0);
    cache.forgetSession('u1', 's1');
    expect(cache.lastPositive('u1', 's1', 10_000)).toBeUndefined();
    expect(cache.lastPositive('u1', 's2', 10_000)).toBeDefined();
  });
});

describe('checkSession (the degrade rule)', () => {
  const unavailable = () => new ServiceError('partition_unavailable', 'No node could serve this request in time; retry shortly.');
  function setup() {
    const clock = new ManualClock(0);
    const cache = new SessionCache();
    const asks: (AskOptions | undefined)[] = [];
    let answer: (op: string) => unknown = () => principal('u1', 's1');
    let onAsk: () => void = () => undefined;
    const actors: ActorClient = {
      ask: async <R>(_kind: string, _key: string, message: unknown, options?: AskOptions) => {
        asks.push(options);
        onAsk();
        return answer((message as { op: string }).op) as R;
      },
      tell: () => undefined,
    };
    return {
      clock,
      cache,
      asks,
      check: () => checkSession(actors, cache, clock, 'u1', 's1'),
      answer: (f: (op: string) => unknown) => (answer = f),
      onAsk: (f: () => void) => (onAsk = f),
    };
  }

  it('asks the actor when the check is stale, and caches a positive answer', async () => {
    const t = setup();
    expect(await t.check()).toMatchObject({ degraded: false, session: { session_id: 's1' } });
    expect(t.asks).toEqual([{ readOnly: true, deadlineMs: undefined }]);
    t.clock.advance(SESSION_CACHE_TTL_MS - 1);
    await t.check();
    expect(t.asks).toHaveLength(1);
  });

  it('answers from the last positive check while the partition is unavailable, up to the bound, without extending it', async () => {
    const t = setup();
    await t.check();
    t.answer(() => {
      throw unavailable();
    });
    t.clock.advance(SESSION_CACHE_TTL_MS);
    expect(await t.check()).toMatchObject({ degraded: true, session: { session_id: 's1' } });
    // With a fallback at hand the ask waits less for the partition's leader.
    expect(t.asks.at(-1)).toEqual({ readOnly: true, deadlineMs: SESSION_CHECK_FALLBACK_DEADLINE_MS });
    t.clock.set(SESSION_DEGRADE_MS_MAX - 1);
    expect((await t.check()).degraded).toBe(true);
    t.clock.set(SESSION_DEGRADE_MS_MAX);
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
    expect(t.asks.at(-1)).toEqual({ readOnly: true, deadlineMs: undefined });
  });

  it('also degrades on not_leader, and on nothing else (a defect, an overloaded actor)', async () => {
    const t = setup();
    await t.check();
    t.clock.advance(SESSION_CACHE_TTL_MS);
    t.answer(() => {
      throw new ServiceError('not_leader');
    });
    expect((await t.check()).degraded).toBe(true);
    t.answer(() => {
      throw new ServiceError('actor_overloaded');
    });
    await expect(t.check()).rejects.toMatchObject({ code: 'actor_overloaded' });
    t.answer(() => {
      throw new Error('defect');
    });
    await expect(t.check()).rejects.toThrow('defect');
  });

  it('never serves a session dropped (ban, logout, deletion, role change) before or during the failed ask', async () => {
    const t = setup();
    await t.check();
    t.clock.advance(SESSION_CACHE_TTL_MS);
    t.answer(() => {
      throw unavailable();
    });
    t.cache.dropUser('u1');
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });

    const u = setup();
    await u.check();
    u.clock.advance(SESSION_CACHE_TTL_MS);
    u.answer(() => {
      throw unavailable();
    });
    // The drop arrives while the ask is waiting for the partition.
    u.onAsk(() => u.cache.dropUser('u1'));
    await expect(u.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
    u.onAsk(() => undefined);
    await expect(u.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
  });

  it('forgets the last positive check on a negative answer (the session ended without a drop reaching this node)', async () => {
    const t = setup();
    await t.check();
    t.clock.advance(SESSION_CACHE_TTL_MS);
    t.answer(() => {
      throw new ServiceError('unauthorized', 'The session has ended.');
    });
    await expect(t.check()).rejects.toMatchObject({ code: 'unauthorized' });
    t.answer(() => {
      throw unavailable();
    });
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
  });

  it('has nothing to fall back on for a session never checked on this node', async () => {
    const t = setup();
    t.answer(() => {
      throw unavailable();
    });
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
  });
});

describe('RevocationAwareActorClient', () => {
  function client(reply: (message: { op: string }) => unknown) {
    const dropped: string[] = [];
    const droppedKeys: string[] = [];
    const inner: ActorClient = {
      ask: async <R>(_kind: string, _key: string, message: unknown) => reply(message as { op: string }) as R,
      tell: () => undefined,
    };
    return {
      dropped,
      droppedKeys,
      wrapped: new RevocationAwareActorClient(
        inner,
        async (user) => void dropped.push(user),
        async (api_key_id) => void droppedKeys.push(api_key_id),
      ),
    };
  }

  it('drops the user everywhere after a ban, a deletion, a logout, a role change, before answering', async () => {
    const { dropped, wrapped } = client(() => ({ ok: true }));
    for (const op of ['ban', 'admin-delete', 'end-session', 'admin-end-session', 'admin-patch']) await wrapped.ask('user', `u-${op}`, { op });
    expect(dropped).toEqual(['u-ban', 'u-admin-delete', 'u-end-session', 'u-admin-end-session', 'u-admin-patch']);
  });

  it('leaves reads, other kinds and ordinary refreshes alone; a refresh that caught a reused token drops', async () => {
    const { dropped, wrapped } = client((m) => (m.op === 'refresh' ? { reused: false } : {}));
    await wrapped.ask('user', 'u1', { op: 'authenticate' });
    await wrapped.ask('user', 'u1', { op: 'refresh' });
    await wrapped.ask('lock', 'u1', { op: 'ban' });
    expect(dropped).toEqual([]);
    const reused = client(() => ({ reused: true }));
    await reused.wrapped.ask('user', 'u2', { op: 'refresh' });
    expect(reused.dropped).toEqual(['u2']);
  });

  it('drops after an outcome-unknown failure, not after a refusal', async () => {
    const unknown = client(() => {
      throw new ServiceError('partition_unavailable');
    });
    await expect(unknown.wrapped.ask('user', 'u1', { op: 'ban' })).rejects.toThrow();
    expect(unknown.dropped).toEqual(['u1']);
    const refused = client(() => {
      throw new ServiceError('not_found');
    });
    await expect(refused.wrapped.ask('user', 'u1', { op: 'ban' })).rejects.toThrow();
    expect(refused.dropped).toEqual([]);
  });

  it("drops an API key's last check everywhere after its update (revocation, scopes) or deletion, before answering", async () => {
    const { dropped, droppedKeys, wrapped } = client(() => ({ ok: true }));
    let answered = false;
    await wrapped.ask('api-key', 'k1', { op: 'update', user_id: 'u1', revoked: true }).then(() => (answered = true));
    expect(answered).toBe(true);
    await wrapped.ask('api-key', 'k2', { op: 'update', user_id: 'u1', scopes: ['locks:read'] });
    await wrapped.ask('user-api-keys', 'u1', { op: 'delete', api_key_id: 'k3' });
    // Reads, creates and verifies drop nothing.
    await wrapped.ask('api-key', 'k4', { op: 'verify', key_hash: 'h' });
    await wrapped.ask('api-key', 'k4', { op: 'get', user_id: 'u1' });
    await wrapped.ask('user-api-keys', 'u1', { op: 'create', api_key_id: 'k5' });
    await wrapped.ask('user-api-keys', 'u1', { op: 'list', page: 1, page_size: 20 });
    expect(droppedKeys).toEqual(['k1', 'k2', 'k3']);
    expect(dropped).toEqual([]);
  });

  it('drops the API key before the reply is released, and after an outcome-unknown failure, not after a refusal', async () => {
    const order: string[] = [];
    const inner: ActorClient = { ask: async <R>() => (order.push('asked'), {}) as R, tell: () => undefined };
    const wrapped = new RevocationAwareActorClient(inner, async () => undefined, async (id) => void order.push(`dropped ${id}`));
    await wrapped.ask('user-api-keys', 'u1', { op: 'delete', api_key_id: 'k1' });
    order.push('answered');
    expect(order).toEqual(['asked', 'dropped k1', 'answered']);

    const unknown = client(() => {
      throw new ServiceError('partition_unavailable');
    });
    await expect(unknown.wrapped.ask('user-api-keys', 'u1', { op: 'delete', api_key_id: 'k1' })).rejects.toThrow();
    expect(unknown.droppedKeys).toEqual(['k1']);
    const refused = client(() => {
      throw new ServiceError('not_found');
    });
    await expect(refused.wrapped.ask('api-key', 'k1', { op: 'update', user_id: 'u2', revoked: true })).rejects.toThrow();
    expect(refused.droppedKeys).toEqual([]);
  });
});
