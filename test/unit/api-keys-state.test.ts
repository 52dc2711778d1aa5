import { describe, expect, it } from 'vitest';
import { loadUserApiKeys, stepUserApiKeys, type UserApiKeysState } from '../../actors/api-keys/index-state.js';
import {
  LAST_USED_WRITE_INTERVAL_MS,
  USER_API_KEYS_KIND,
  type ApiKeyMessage,
  type ApiKeyView,
  type IndexPage,
  type VerifiedKey,
} from '../../actors/api-keys/messages.js';
import { initialApiKeyState, stepApiKey, type ApiKeyState } from '../../actors/api-keys/state.js';
import type { FlowCall } from '../../actors/flow-call.js';
import { parseApiKey, newApiKey, requiredScope, scopeAllows } from '../../http/auth/api-keys.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests of the api-key actor and its per-user index: fixed context, no runtime. */
const T0 = Date.UTC(2026, 0, 1);
const KEY_ID = 'a'.repeat(32);
const ctx = (now: number) => fixedContext(now, 'api-key', KEY_ID);
const step = (state: ApiKeyState, message: ApiKeyMessage, now = T0) => stepApiKey(state, message, ctx(now));

const createMessage = (over: Partial<Extract<ApiKeyMessage, { op: 'create' }>> = {}): ApiKeyMessage => ({
  op: 'create',
  user_id: 'u1',
  org_id: null,
  name: 'ci',
  scopes: ['locks:read'],
  key_hash: 'hash-1',
  key_prefix: 'pk_aaaaaaaaa',
  expires_at_ms: null,
  ...over,
});

function created(over: Partial<Extract<ApiKeyMessage, { op: 'create' }>> = {}): ApiKeyState {
  return step(initialApiKeyState(), createMessage(over)).state;
}

describe('api-key step', () => {
  it('creates a key whose view never carries the hash', () => {
    const result = step(initialApiKeyState(), createMessage());
    expect(result.state).toMatchObject({ api_key_id: KEY_ID, user_id: 'u1', key_hash: 'hash-1', revoked: false, last_used_at_ms: null, created_at_ms: T0 });
    expect(result.reply).toEqual(expect.objectContaining({ api_key_id: KEY_ID, key_prefix: 'pk_aaaaaaaaa', scopes: ['locks:read'] }));
    expect(result.reply as object).not.toHaveProperty('key_hash');
  });

  it('keeps the organization a key was made for, in its view and its verification; old keys read as null', () => {
    const state = created({ org_id: 'org_a' });
    expect((step(state, { op: 'get', user_id: 'u1' }).reply as ApiKeyView).org_id).toBe('org_a');
    expect(step(state, { op: 'verify', key_hash: 'hash-1' }).reply).toMatchObject({ org_id: 'org_a' });
    // An update cannot move a key to another organization.
    const renamed = step(state, { op: 'update', user_id: 'u1', name: 'renamed', org_id: 'org_b' } as ApiKeyMessage).state;
    expect(renamed).toMatchObject({ name: 'renamed', org_id: 'org_a' });
    const { org_id: _dropped, ...legacy } = created() as NonNullable<ApiKeyState>;
    expect(step(legacy, { op: 'verify', key_hash: 'hash-1' }).reply).toMatchObject({ org_id: null });
  });

  it('answers a retried create again, and refuses a different one on the same id', () => {
    const state = created();
    expect(step(state, createMessage()).state).toBe(state);
    expect(codeOf(() => step(state, createMessage({ key_hash: 'other' })))).toBe('conflict');
    expect(codeOf(() => step(state, createMessage({ user_id: 'u2' })))).toBe('conflict');
  });

  it('hides a key from every user but its owner', () => {
    const state = created();
    expect(codeOf(() => step(state, { op: 'get', user_id: 'u2' }))).toBe('not_found');
    expect(codeOf(() => step(state, { op: 'update', user_id: 'u2', revoked: true }))).toBe('not_found');
    expect(codeOf(() => step(state, { op: 'delete', user_id: 'u2' }))).toBe('not_found');
    expect(codeOf(() => step(null, { op: 'get', user_id: 'u1' }))).toBe('not_found');
    expect((step(state, { op: 'get', user_id: 'u1' }).reply as ApiKeyView).name).toBe('ci');
  });

  it('verifies the right hash only, and never a revoked or expired key', () => {
    const state = created({ expires_at_ms: T0 + 10_000 });
    const ok = step(state, { op: 'verify', key_hash: 'hash-1' }, T0 + 1);
    expect(ok.reply).toEqual({ api_key_id: KEY_ID, user_id: 'u1', org_id: null, scopes: ['locks:read'], expires_at_ms: T0 + 10_000 } satisfies VerifiedKey);
    expect(codeOf(() => step(state, { op: 'verify', key_hash: 'hash-2' }))).toBe('unauthorized');
    expect(codeOf(() => step(state, { op: 'verify', key_hash: 'hash-' }))).toBe('unauthorized');
    expect(codeOf(() => step(state, { op: 'verify', key_hash: 'hash-1' }, T0 + 10_000))).toBe('unauthorized');
    expect(codeOf(() => step(null, { op: 'verify', key_hash: 'hash-1' }))).toBe('unauthorized');
    const revoked = step(state, { op: 'update', user_id: 'u1', revoked: true }).state;
    expect(codeOf(() => step(revoked, { op: 'verify', key_hash: 'hash-1' }))).toBe('unauthorized');
  });

  it('writes last_used_at at most once per interval', () => {
    const state = created();
    const first = step(state, { op: 'verify', key_hash: 'hash-1' }, T0 + 5);
    expect(first.state!.last_used_at_ms).toBe(T0 + 5);
    const soon = step(first.state, { op: 'verify', key_hash: 'hash-1' }, T0 + 5 + LAST_USED_WRITE_INTERVAL_MS - 1);
    expect(soon.state).toBe(first.state);
    const later = step(first.state, { op: 'verify', key_hash: 'hash-1' }, T0 + 5 + LAST_USED_WRITE_INTERVAL_MS);
    expect(later.state!.last_used_at_ms).toBe(T0 + 5 + LAST_USED_WRITE_INTERVAL_MS);
  });

  it('revoking is one-way; renaming and rescoping keep the rest', () => {
    const state = created();
    const renamed = step(state, { op: 'update', user_id: 'u1', name: 'deploy', scopes: ['*'] }, T0 + 1).state!;
    expect(renamed).toMatchObject({ name: 'deploy', scopes: ['*'], revoked: false, key_hash: 'hash-1', updated_at_ms: T0 + 1 });
    expect(step(renamed, { op: 'update', user_id: 'u1', revoked: false }).state!.revoked).toBe(false);
    const revoked = step(renamed, { op: 'update', user_id: 'u1', revoked: true }).state!;
    expect(revoked.revoked).toBe(true);
    expect(codeOf(() => step(revoked, { op: 'update', user_id: 'u1', revoked: false }))).toBe('conflict');
    expect(step(revoked, { op: 'update', user_id: 'u1', name: 'x' }).state!.revoked).toBe(true);
  });

  it("delete removes the record and answers its view; another user's key is not found", () => {
    const result = step(created(), { op: 'delete', user_id: 'u1' });
    expect(result.state).toBeNull();
    expect(result.reply).toMatchObject({ api_key_id: KEY_ID, user_id: 'u1' });
    // The index drops its entry when the flow-answer comes back: nothing else is sent.
    expect(result.sends).toBeUndefined();
    expect(codeOf(() => step(created(), { op: 'delete', user_id: 'u2' }))).toBe('not_found');
  });
});

describe('user-api-keys index step', () => {
  const ictx = fixedContext(T0, USER_API_KEYS_KIND, 'u1');
  /** An index holding keys k1..kn, created at 1..n (one record per key). */
  const holding = (n: number): UserApiKeysState =>
    loadUserApiKeys('u1', Array.from({ length: n }, (_, i) => [`k${i + 1}`, { created_at_ms: i + 1 }] as [string, unknown]));

  it('lists newest first with a total, and reloads the same from its records', () => {
    const state = holding(5);
    const page = (s: UserApiKeysState, p: number) => stepUserApiKeys(s, { op: 'list', page: p, page_size: 2 }, ictx).reply as IndexPage;
    expect(page(state, 1)).toEqual({ api_key_ids: ['k5', 'k4'], total: 5 });
    expect(page(state, 3)).toEqual({ api_key_ids: ['k1'], total: 5 });
    const reloaded = loadUserApiKeys('u1', [...state.entries.values()].map((e) => [e.api_key_id, { created_at_ms: e.created_at_ms }] as [string, unknown]));
    expect(page(reloaded, 1)).toEqual(page(state, 1));
    expect(stepUserApiKeys(reloaded, { op: 'count' }, ictx).reply).toEqual({ total: 5 });
  });
});

describe('key format and scopes', () => {
  it('formats pk_<32 hex>_<43 base64url>, prefix = first 12 characters, and parses back', () => {
    const key = newApiKey();
    expect(key.key).toMatch(/^pk_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(key.key_prefix).toBe(key.key.slice(0, 12));
    expect(key.key).not.toContain(key.key_hash);
    expect(parseApiKey(key.key)).toEqual({ api_key_id: key.api_key_id, key_hash: key.key_hash });
    for (const bad of ['pk_', `pk_${key.api_key_id}`, `${key.key}x`, key.key.slice(0, -1), `pk_${'g'.repeat(32)}_${'a'.repeat(43)}`]) {
      expect(parseApiKey(bad)).toBeNull();
    }
  });

  it('maps routes to scopes: read for GET, write otherwise; credential routes refuse keys', () => {
    expect(requiredScope('/api/v1/distributed-state/:namespace/:key/lock', 'GET')).toEqual({ kind: 'scope', scope: 'locks:read' });
    expect(requiredScope('/api/v1/distributed-state/:namespace/:key/lock', 'POST')).toEqual({ kind: 'scope', scope: 'locks:write' });
    expect(requiredScope('/api/v1/waiting-rooms/:room_id/join', 'POST')).toEqual({ kind: 'scope', scope: 'waiting_rooms:write' });
    expect(requiredScope('/api/v1/presence/:context_id/list', 'GET')).toEqual({ kind: 'scope', scope: 'presence:read' });
    expect(requiredScope('/api/v1/liveness', 'GET')).toEqual({ kind: 'scope', scope: 'liveness:read' });
    expect(requiredScope('/api/v1/auth/me', 'GET')).toEqual({ kind: 'scope', scope: 'auth:read' });
    expect(requiredScope('/api/v1/auth/api-keys', 'GET')).toEqual({ kind: 'refused' });
    expect(requiredScope('/api/v1/auth/logout', 'POST')).toEqual({ kind: 'refused' });
    expect(requiredScope('/api/v1/liveness-other', 'GET')).toEqual({ kind: 'wildcard' });
    expect(requiredScope('/admin/auth/users', 'GET')).toEqual({ kind: 'wildcard' });
    expect(scopeAllows(['*'], { kind: 'refused' })).toBe(false);
    expect(scopeAllows(['*'], { kind: 'wildcard' })).toBe(true);
    expect(scopeAllows(['locks:read'], { kind: 'wildcard' })).toBe(false);
    expect(scopeAllows(['locks:read'], { kind: 'scope', scope: 'locks:write' })).toBe(false);
    expect(scopeAllows(['*'], { kind: 'scope', scope: 'locks:write' })).toBe(true);
  });
});

describe('create and delete flows of the index', () => {
  const USER = 'usr_1';
  const indexAsk = (state: UserApiKeysState, message: Parameters<typeof stepUserApiKeys>[1], request_id: string | null = null, now = T0) =>
    stepUserApiKeys(state, message, { ...fixedContext(now, USER_API_KEYS_KIND, USER), request_id });
  const keyStep = (state: ApiKeyState, message: ApiKeyMessage, key = KEY_ID) => stepApiKey(state, message, fixedContext(T0, 'api-key', key));
  const newKey = { org_id: null, name: 'ci', scopes: ['*'], key_hash: 'h', key_prefix: 'pk_aaaaaaaaa', expires_at_ms: null };
  const id = (n: number) => n.toString(16).padStart(32, '0');

  it('create: the cap is checked and the place taken in one turn, the key created through the outbox, the ask answered with its view', () => {
    const index = loadUserApiKeys(USER, []);
    const started = indexAsk(index, { op: 'create', api_key_id: KEY_ID, limit: 2, key: newKey }, 'req_1');
    expect(started.defer).toBe(true);
    expect(index.entries.has(KEY_ID)).toBe(true);
    const [send] = started.sends!;
    expect(send).toMatchObject({
      kind: 'api-key',
      key: KEY_ID,
      message: { op: 'flow-call', call: { op: 'create', user_id: USER, name: 'ci' }, reply_to: { kind: USER_API_KEYS_KIND, key: USER, step: 'create' } },
    });
    const made = keyStep(null, send.message as ApiKeyMessage);
    expect(made.reply).toMatchObject({ api_key_id: KEY_ID });
    expect(made.state).toMatchObject({ user_id: USER, key_hash: 'h' });
    const [answer] = made.sends!;
    expect(answer).toMatchObject({ kind: USER_API_KEYS_KIND, key: USER, message: { op: 'flow-answer', step: 'create', ok: true, reply: { api_key_id: KEY_ID } } });
    const done = indexAsk(index, answer.message as Parameters<typeof stepUserApiKeys>[1]);
    expect(done.replies).toEqual([{ request_id: 'req_1', reply: expect.objectContaining({ api_key_id: KEY_ID, name: 'ci' }) }]);
    expect(done.writes).toEqual([{ subkey: expect.stringMatching(/^f:/), value: undefined }]);
    // Restart: the entry is stored, no flow is left.
    const stored = new Map<string, unknown>();
    for (const w of [...(started.writes ?? []), ...(done.writes ?? [])]) (w.value === undefined ? stored.delete(w.subkey) : stored.set(w.subkey, w.value));
    const reloaded = loadUserApiKeys(USER, stored.entries());
    expect([...reloaded.entries.keys()]).toEqual([KEY_ID]);
    expect(reloaded.flows!.size).toBe(0);
  });

  it('create: a burst cannot pass the cap (places in flight count), and a refusing key gives the place back', () => {
    let index = loadUserApiKeys(USER, []);
    const first = indexAsk(index, { op: 'create', api_key_id: id(1), limit: 2, key: newKey }, 'r1');
    index = first.state;
    indexAsk(index, { op: 'create', api_key_id: id(2), limit: 2, key: newKey }, 'r2');
    expect(codeOf(() => indexAsk(index, { op: 'create', api_key_id: id(3), limit: 2, key: newKey }, 'r3'))).toBe('api_key_limit_reached');
    // The key actor refuses (an id clash): compensation removes the entry.
    const flow_id = (first.sends![0].message as FlowCall).reply_to.flow_id;
    const refused = indexAsk(index, { op: 'flow-answer', flow_id, step: 'create', ok: false, error: { code: 'conflict', message: 'API key id already in use.' } });
    expect(refused.replies).toEqual([{ request_id: 'r1', error: { code: 'conflict', message: 'API key id already in use.' } }]);
    expect(index.entries.has(id(1))).toBe(false);
    expect(indexAsk(index, { op: 'create', api_key_id: id(3), limit: 2, key: newKey }, 'r4').defer).toBe(true);
  });

  it('delete: the key checks its owner and deletes itself, then the index drops the entry and answers', () => {
    const index = loadUserApiKeys(USER, [[KEY_ID, { created_at_ms: T0 }]]);
    const key = created({ user_id: USER });
    const started = indexAsk(index, { op: 'delete', api_key_id: KEY_ID }, 'req_d');
    expect(started.defer).toBe(true);
    const deleted = keyStep(key, started.sends![0].message as ApiKeyMessage);
    expect(deleted.state).toBeNull();
    expect(deleted.sends).toHaveLength(1);
    const done = indexAsk(index, deleted.sends![0].message as Parameters<typeof stepUserApiKeys>[1]);
    expect(done.replies![0]).toMatchObject({ request_id: 'req_d', reply: { api_key_id: KEY_ID } });
    expect(index.entries.has(KEY_ID)).toBe(false);
  });

  it("delete: another user's key is answered 404 and stays", () => {
    const index = loadUserApiKeys(USER, []);
    const key = created({ user_id: 'usr_other' });
    const started = indexAsk(index, { op: 'delete', api_key_id: KEY_ID }, 'req_x');
    const refused = keyStep(key, started.sends![0].message as ApiKeyMessage);
    expect(refused.state).toBe(key);
    const done = indexAsk(index, refused.sends![0].message as Parameters<typeof stepUserApiKeys>[1]);
    expect(done.replies).toEqual([{ request_id: 'req_x', error: { code: 'not_found', message: 'No such API key.' } }]);
  });
});
