import { describe, expect, it } from 'vitest';
import { createPlatformClient, type Tokens } from '../../clients/typescript/src/index.js';
import { retryAfterMs } from '../../clients/typescript/src/retry-policy.js';

/**
 * The transport's decisions with a scripted fetch (no node): the edges the
 * real-node tests in this folder do not reach.
 */

type Script = (request: Request, attempt: number) => Response | Promise<Response>;

function scripted(script: Script, options: { tokens?: Tokens; maxAttempts?: number } = {}) {
  const seen: Request[] = [];
  const sleeps: number[] = [];
  const api = createPlatformClient({
    baseUrl: 'http://node.test/base',
    tokens: options.tokens ?? { access_token: 'at-1', refresh_token: 'rt-1' },
    retry: { maxAttempts: options.maxAttempts, sleep: async (ms) => void sleeps.push(ms) },
    fetch: async (request) => {
      seen.push(request);
      return script(request, seen.length);
    },
  });
  return { api, seen, sleeps };
}

const error = (status: number, code: string, headers: Record<string, string> = {}) =>
  Response.json({ statusCode: status, code, error: 'x', message: `${code} happened` }, { status, headers });

describe('client transport', () => {
  it('gives up after maxAttempts 503s and throws the last one, typed', async () => {
    const { api, seen, sleeps } = scripted(() => error(503, 'actor_overloaded', { 'retry-after': '1' }), { maxAttempts: 3 });
    await expect(api.get('/api/v1/auth/me')).rejects.toMatchObject({ status: 503, code: 'actor_overloaded', message: 'actor_overloaded happened' });
    expect(seen).toHaveLength(3);
    expect(sleeps).toEqual([1000, 1000]);
  });

  it('does not send an unauthenticated POST again after a 503 (its outcome is unknown; the node ignores keys there)', async () => {
    const { api, seen } = scripted(() => error(503, 'server_busy', { 'retry-after': '1' }), { tokens: { access_token: '' } });
    await expect(api.post('/api/v1/auth/login', { body: { login: 'ada', password: 'correct horse' } })).rejects.toMatchObject({ code: 'server_busy' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.get('authorization')).toBeNull();
  });

  it('waits out 409 idempotency_in_progress on a keyed POST, with the same key', async () => {
    const { api, seen, sleeps } = scripted((_request, attempt) =>
      attempt === 1 ? error(409, 'idempotency_in_progress', { 'retry-after': '1' }) : Response.json({ message_id: 'msg_1' }, { status: 201 }),
    );
    const sent = await api.post('/api/v1/mq/queues/{queue_name}/messages', { params: { path: { queue_name: 'q' } }, body: { body: 'hi' } });
    expect(sent).toEqual({ message_id: 'msg_1' });
    expect(sleeps).toEqual([1000]);
    expect(seen[1]!.headers.get('idempotency-key')).toBe(seen[0]!.headers.get('idempotency-key'));
    expect(await seen[1]!.text()).toBe('{"body":"hi"}');
  });

  it('keeps a key the caller chose, and does not retry other 409s', async () => {
    const { api, seen } = scripted(() => error(409, 'lock_held'));
    const call = api.post('/api/v1/distributed-state/{namespace}/{key}/lock', {
      params: { path: { namespace: 'n', key: 'k' } },
      body: { owner_id: 'o' },
      headers: { 'idempotency-key': 'my-key-1' },
    });
    await expect(call).rejects.toMatchObject({ status: 409, code: 'lock_held' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.get('idempotency-key')).toBe('my-key-1');
  });

  it('sends a request with its own Authorization as it is, and does not refresh it', async () => {
    const { api, seen } = scripted(() => error(401, 'unauthorized'));
    await expect(api.get('/api/v1/auth/me', { headers: { authorization: 'Bearer pk_live_key' } })).rejects.toMatchObject({ status: 401 });
    expect(seen.map((r) => [new URL(r.url).pathname, r.headers.get('authorization')])).toEqual([['/base/api/v1/auth/me', 'Bearer pk_live_key']]);
  });

  it('refreshes under the base URL and tells the session ended when the refresh is refused', async () => {
    let ended = 0;
    const seen: string[] = [];
    let stored: Tokens | null = { access_token: 'at-1', refresh_token: 'rt-1' };
    const api = createPlatformClient({
      baseUrl: 'http://node.test/base/',
      tokens: { get: () => stored, set: (tokens) => void (stored = tokens) },
      onSessionEnded: () => ended++,
      fetch: async (request) => {
        seen.push(`${request.method} ${new URL(request.url).pathname} ${request.method === 'POST' ? await request.text() : ''}`);
        return error(401, request.url.endsWith('/refresh') ? 'invalid_refresh_token' : 'unauthorized');
      },
    });
    await expect(api.get('/api/v1/auth/me')).rejects.toMatchObject({ code: 'unauthorized' });
    expect(seen).toEqual(['GET /base/api/v1/auth/me ', 'POST /base/api/v1/auth/refresh {"refresh_token":"rt-1"}']);
    expect(stored).toBeNull();
    expect(ended).toBe(1);
  });

  it('turns a body that is not an error body into http_<status>', async () => {
    const { api } = scripted(() => new Response('<html>bad gateway</html>', { status: 502, headers: { 'content-type': 'text/html' } }));
    await expect(api.get('/api/v1/auth/me')).rejects.toMatchObject({
      status: 502,
      code: 'http_502',
      body: '<html>bad gateway</html>',
      message: 'GET http://node.test/base/api/v1/auth/me answered 502',
      url: 'http://node.test/base/api/v1/auth/me',
    });
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(null)).toBeNull();
    expect(retryAfterMs('soon')).toBeNull();
    const now = Date.parse('2026-11-25T12:00:00Z');
    expect(retryAfterMs('Wed, 25 Nov 2026 12:00:05 GMT', now)).toBe(5000);
    expect(retryAfterMs('Wed, 25 Nov 2026 11:00:00 GMT', now)).toBe(0);
  });
});
