import { describe, expect, it } from 'vitest';
import { SESSION_DEGRADE_MS_MAX, SessionCache, type ApiKeyCheck } from '../../http/auth/session-cache.js';
import { API_KEY_REJECTED, checkApiKey } from '../../http/auth/api-key-check.js';
import { SESSION_CHECK_FALLBACK_DEADLINE_MS } from '../../http/auth/session-check.js';
import { ManualClock, ServiceError, type ActorClient, type AskOptions } from '../../runtime/index.js';

/**
 * The API key path's degrade rule (http/auth/api-key-check.ts): every request
 * asks the key's and the owner's actors; only when one of them cannot be
 * asked (its partition is unavailable) is the answer this node's last
 * positive check of the key, for at most SESSION_DEGRADE_MS_MAX after it.
 */
const KEY = 'k1';
const HASH = 'hash-of-secret-1';
const unavailable = () => new ServiceError('partition_unavailable', 'No node could serve this request in time; retry shortly.');

const check = (over: Partial<ApiKeyCheck> = {}): ApiKeyCheck => ({
  api_key_id: KEY,
  key_hash: HASH,
  user_id: 'u1',
  role: 'user',
  org_id: null,
  scopes: ['locks:read'],
  expires_at_ms: null,
  ...over,
});

describe('SessionCache: the last positive check of an API key', () => {
  it('is usable up to SESSION_DEGRADE_MS_MAX after the check, never past the key\'s expiry, and only for the same secret', () => {
    const cache = new SessionCache();
    cache.putApiKey(check(), cache.apiKeyGeneration(KEY), cache.generation('u1'), 1000);
    expect(cache.lastApiKey(KEY, HASH, 1000 + SESSION_DEGRADE_MS_MAX - 1)).toMatchObject({ user_id: 'u1' });
    expect(cache.lastApiKey(KEY, 'another-hash', 1000)).toBeUndefined();
    expect(cache.lastApiKey(KEY, HASH, 1000 + SESSION_DEGRADE_MS_MAX)).toBeUndefined();
    expect(cache.apiKeySize).toBe(0);
    cache.putApiKey(check({ expires_at_ms: 20_000 }), cache.apiKeyGeneration(KEY), cache.generation('u1'), 1000);
    expect(cache.lastApiKey(KEY, HASH, 19_999)).toBeDefined();
    expect(cache.lastApiKey(KEY, HASH, 20_000)).toBeUndefined();
  });

  it("is deleted by a drop of the key or of its owner, and not stored by a check in flight across either drop", () => {
    const cache = new SessionCache();
    const put = () => cache.putApiKey(check(), cache.apiKeyGeneration(KEY), cache.generation('u1'), 0);
    put();
    cache.dropApiKey(KEY);
    expect(cache.lastApiKey(KEY, HASH, 1)).toBeUndefined();
    put();
    cache.dropUser('u1');
    expect(cache.lastApiKey(KEY, HASH, 1)).toBeUndefined();
    // Checks that started before a drop.
    let keyGeneration = cache.apiKeyGeneration(KEY);
    let userGeneration = cache.generation('u1');
    cache.dropApiKey(KEY);
    cache.putApiKey(check(), keyGeneration, userGeneration, 1);
    expect(cache.lastApiKey(KEY, HASH, 2)).toBeUndefined();
    keyGeneration = cache.apiKeyGeneration(KEY);
    userGeneration = cache.generation('u1');
    cache.dropUser('u1');
    cache.putApiKey(check(), keyGeneration, userGeneration, 1);
    expect(cache.lastApiKey(KEY, HASH, 2)).toBeUndefined();
    // Another user's drop, or another key's, leaves it alone.
    put();
    cache.dropUser('u2');
    cache.dropApiKey('k2');
    expect(cache.lastApiKey(KEY, HASH, 2)).toBeDefined();
  });
});

describe('checkApiKey (the degrade rule)', () => {
  function setup() {
    const clock = new ManualClock(0);
    const cache = new SessionCache();
    const asks: { kind: string; options: AskOptions | undefined }[] = [];
    const reply = {
      'api-key': (): unknown => ({ api_key_id: KEY, user_id: 'u1', org_id: null, scopes: ['locks:read'], expires_at_ms: null }),
      user: (): unknown => ({ id: 'u1', role: 'user', banned: false }),
    };
    let onAsk: (kind: string) => void = () => undefined;
    const actors: ActorClient = {
      ask: async <R>(kind: string, _key: string, _message: unknown, options?: AskOptions) => {
        asks.push({ kind, options });
        onAsk(kind);
        return reply[kind as keyof typeof reply]() as R;
      },
      tell: () => undefined,
    };
    return {
      clock,
      cache,
      asks,
      reply,
      check: (hash = HASH) => checkApiKey(actors, cache, clock, KEY, hash),
      onAsk: (f: (kind: string) => void) => (onAsk = f),
    };
  }
  const fail = (error: () => Error) => () => {
    throw error();
  };

  it('asks both actors on every request, also right after a positive check (no fresh window)', async () => {
    const t = setup();
    expect(await t.check()).toMatchObject({ degraded: false, check: { user_id: 'u1', role: 'user', scopes: ['locks:read'] } });
    expect(t.asks).toEqual([
      { kind: 'api-key', options: { deadlineMs: undefined } },
      { kind: 'user', options: { readOnly: true, deadlineMs: undefined } },
    ]);
    await t.check();
    expect(t.asks).toHaveLength(4);
  });

  it("answers from the last positive check while the key's or the user's partition is unavailable, up to the bound, without extending it", async () => {
    const t = setup();
    await t.check();
    t.reply['api-key'] = fail(unavailable);
    t.clock.advance(10_000);
    expect(await t.check()).toMatchObject({ degraded: true, check: { user_id: 'u1', scopes: ['locks:read'] } });
    // With a fallback at hand each ask waits less for its partition's leader.
    expect(t.asks.at(-1)).toEqual({ kind: 'api-key', options: { deadlineMs: SESSION_CHECK_FALLBACK_DEADLINE_MS } });
    t.reply['api-key'] = () => ({ api_key_id: KEY, user_id: 'u1', org_id: null, scopes: ['locks:read'], expires_at_ms: null });
    t.reply.user = fail(unavailable);
    expect((await t.check()).degraded).toBe(true);
    expect(t.asks.at(-1)).toEqual({ kind: 'user', options: { readOnly: true, deadlineMs: SESSION_CHECK_FALLBACK_DEADLINE_MS } });
    t.clock.set(SESSION_DEGRADE_MS_MAX - 1);
    expect((await t.check()).degraded).toBe(true);
    t.clock.set(SESSION_DEGRADE_MS_MAX);
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
    expect(t.asks.at(-1)).toEqual({ kind: 'user', options: { readOnly: true, deadlineMs: undefined } });
  });

  it('a new positive check restarts the bound', async () => {
    const t = setup();
    await t.check();
    t.clock.set(50_000);
    await t.check();
    t.reply.user = fail(unavailable);
    t.clock.set(50_000 + SESSION_DEGRADE_MS_MAX - 1);
    expect((await t.check()).degraded).toBe(true);
  });

  it('degrades on not_leader too, and on nothing else (a defect, an overloaded actor)', async () => {
    const t = setup();
    await t.check();
    t.reply['api-key'] = fail(() => new ServiceError('not_leader'));
    expect((await t.check()).degraded).toBe(true);
    t.reply['api-key'] = fail(() => new ServiceError('actor_overloaded'));
    await expect(t.check()).rejects.toMatchObject({ code: 'actor_overloaded' });
    t.reply['api-key'] = fail(() => new Error('defect'));
    await expect(t.check()).rejects.toThrow('defect');
    // None of those deleted the fallback.
    t.reply['api-key'] = fail(unavailable);
    expect((await t.check()).degraded).toBe(true);
  });

  it('never serves another secret under the same key id', async () => {
    const t = setup();
    await t.check();
    t.reply['api-key'] = fail(unavailable);
    await expect(t.check('hash-of-a-guess')).rejects.toMatchObject({ code: 'partition_unavailable' });
    expect(t.asks.at(-1)?.options).toEqual({ deadlineMs: undefined });
  });

  it('never serves a key dropped (revoked, deleted) or whose owner was dropped (ban, deletion, role change), before or during the failed ask', async () => {
    for (const drop of [(c: SessionCache) => c.dropApiKey(KEY), (c: SessionCache) => c.dropUser('u1')]) {
      const before = setup();
      await before.check();
      before.reply['api-key'] = fail(unavailable);
      drop(before.cache);
      await expect(before.check()).rejects.toMatchObject({ code: 'partition_unavailable' });

      for (const failing of ['api-key', 'user'] as const) {
        const during = setup();
        await during.check();
        during.reply[failing] = fail(unavailable);
        // The drop arrives while the ask is waiting for the partition.
        during.onAsk((kind) => kind === failing && drop(during.cache));
        await expect(during.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
        during.onAsk(() => undefined);
        await expect(during.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
      }
    }
  });

  it('does not store a positive check that was in flight across a drop', async () => {
    for (const drop of [(c: SessionCache) => c.dropApiKey(KEY), (c: SessionCache) => c.dropUser('u1')]) {
      const t = setup();
      t.onAsk((kind) => kind === 'user' && drop(t.cache));
      expect((await t.check()).degraded).toBe(false);
      t.onAsk(() => undefined);
      t.reply['api-key'] = fail(unavailable);
      await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
    }
  });

  it('forgets the last positive check on a refusal: a 401 or 404 from either actor, or a banned owner', async () => {
    const refusals: [keyof ReturnType<typeof setup>['reply'], () => unknown][] = [
      ['api-key', fail(() => new ServiceError('unauthorized', 'revoked'))],
      ['api-key', fail(() => new ServiceError('not_found'))],
      ['user', fail(() => new ServiceError('not_found'))],
      ['user', () => ({ id: 'u1', role: 'user', banned: true })],
    ];
    for (const [kind, refusal] of refusals) {
      const t = setup();
      await t.check();
      t.reply[kind] = refusal;
      await expect(t.check()).rejects.toMatchObject({ code: 'unauthorized', message: API_KEY_REJECTED });
      t.reply[kind] = fail(unavailable);
      await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
    }
  });

  it('has nothing to fall back on for a key never checked on this node, or a reply that does not say when the key expires', async () => {
    const t = setup();
    t.reply.user = fail(unavailable);
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
    const old = setup();
    old.reply['api-key'] = () => ({ api_key_id: KEY, user_id: 'u1', org_id: null, scopes: ['locks:read'] });
    expect((await old.check()).degraded).toBe(false);
    old.reply.user = fail(unavailable);
    await expect(old.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
  });

  it("never outlives the key's expiry", async () => {
    const t = setup();
    t.reply['api-key'] = () => ({ api_key_id: KEY, user_id: 'u1', org_id: null, scopes: ['locks:read'], expires_at_ms: 30_000 });
    await t.check();
    t.reply['api-key'] = fail(unavailable);
    t.clock.set(29_999);
    expect((await t.check()).degraded).toBe(true);
    t.clock.set(30_000);
    await expect(t.check()).rejects.toMatchObject({ code: 'partition_unavailable' });
  });
});
