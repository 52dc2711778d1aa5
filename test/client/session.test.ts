import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { createPlatformClient, type Tokens, type TokenStore } from '../../clients/typescript/src/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The client's session: tokens stored through the pluggable store, one refresh on an expired access token, shared by concurrent requests. */

const TTL_SECONDS = 60;
let t: TestNode;
beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: TTL_SECONDS } });
});
afterAll(() => t?.destroy());

const clock = () => t.clock as ManualClock;

/** A client whose requests are written down as `METHOD path status`, with a store that records every write. */
function recordedClient(username: string) {
  const sent: string[] = [];
  const writes: (Tokens | null)[] = [];
  let saved: Tokens | null = null;
  const store: TokenStore = {
    get: async () => saved,
    set: async (tokens) => {
      saved = tokens;
      writes.push(tokens);
    },
  };
  let sessionEnded = 0;
  const api = createPlatformClient({
    baseUrl: t.url,
    tokens: store,
    fetch: async (request) => {
      const response = await fetch(request);
      sent.push(`${request.method} ${new URL(request.url).pathname} ${response.status}`);
      return response;
    },
    onSessionEnded: () => sessionEnded++,
  });
  const register = () => api.post('/api/v1/auth/register', { body: { email: `${username}@example.com`, username, password: 'correct horse battery' } });
  return { api, sent, writes, register, saved: () => saved, sessionEnded: () => sessionEnded };
}

describe('token refresh', () => {
  it('stores the tokens of a sign-in, and refreshes once when the access token has expired', async () => {
    const { api, sent, writes, register, saved } = recordedClient('refresher');
    const registered = await register();
    expect(writes).toEqual([{ access_token: registered.access_token, refresh_token: registered.refresh_token }]);
    expect((await api.get('/api/v1/auth/me')).username).toBe('refresher');

    clock().advance((TTL_SECONDS + 1) * 1000);
    sent.length = 0;
    expect((await api.get('/api/v1/auth/me')).username).toBe('refresher');
    expect(sent).toEqual(['GET /api/v1/auth/me 401', 'POST /api/v1/auth/refresh 200', 'GET /api/v1/auth/me 200']);
    // The refresh token rotated: the store holds the new pair.
    expect(writes).toHaveLength(2);
    expect(saved()?.access_token).not.toBe(registered.access_token);
    expect(saved()?.refresh_token).not.toBe(registered.refresh_token);
  });

  it('shares one refresh between requests that meet an expired token together', async () => {
    const { api, sent, register } = recordedClient('together');
    await register();
    clock().advance((TTL_SECONDS + 1) * 1000);
    sent.length = 0;
    const answers = await Promise.all(Array.from({ length: 6 }, () => api.get('/api/v1/auth/me')));
    expect(answers.map((me) => me.username)).toEqual(Array(6).fill('together'));
    expect(sent.filter((line) => line.startsWith('POST /api/v1/auth/refresh'))).toEqual(['POST /api/v1/auth/refresh 200']);
    expect(sent.filter((line) => line === 'GET /api/v1/auth/me 200')).toHaveLength(6);
  });

  it('refreshes only once per request: a session that ended clears the store and throws unauthorized', async () => {
    const { api, sent, register, saved, sessionEnded } = recordedClient('ended');
    const registered = await register();
    // The session is ended elsewhere (a sign-out on another device with the same session).
    expect((await t.request('POST', '/api/v1/auth/logout', { token: registered.access_token })).status).toBe(200);
    sent.length = 0;
    await expect(api.get('/api/v1/auth/me')).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    expect(sent).toEqual(['GET /api/v1/auth/me 401', 'POST /api/v1/auth/refresh 401']);
    expect(saved()).toBeNull();
    expect(sessionEnded()).toBe(1);
  });

  it('forgets the tokens on logout', async () => {
    const { api, register, saved } = recordedClient('leaver');
    await register();
    expect(saved()).not.toBeNull();
    await api.post('/api/v1/auth/logout');
    expect(saved()).toBeNull();
    await expect(api.get('/api/v1/auth/me')).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
  });
});
