import { describe, expect, it } from 'vitest';
import { SESSION_CACHE_TTL_MS, SessionCache } from '../../http/auth/session-cache.js';
import { RevocationAwareActorClient } from '../../http/auth/revocation-aware-client.js';
import { ServiceError, type ActorClient } from '../../runtime/index.js';

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

describe('RevocationAwareActorClient', () => {
  function client(reply: (message: { op: string }) => unknown) {
    const dropped: string[] = [];
    const inner: ActorClient = {
      ask: async <R>(_kind: string, _key: string, message: unknown) => reply(message as { op: string }) as R,
      tell: () => undefined,
    };
    return { dropped, wrapped: new RevocationAwareActorClient(inner, async (user) => void dropped.push(user)) };
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
});
