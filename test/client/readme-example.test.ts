import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, createPlatformClient, isApiError } from '../../clients/typescript/src/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The README's typed client example, run as written against a real node, and typed errors. */

let t: TestNode;
beforeAll(async () => {
  t = await startTestNode();
});
afterAll(() => t?.destroy());

/** The README's example, without its import line, with its base URL written as `baseUrl: URL`. */
function readmeExample(): string {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Typed client'));
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block
    .split('\n')
    .filter((line) => !line.startsWith('import ') && line.trim() !== '')
    .join('\n')
    .replace(/baseUrl: [^}]+ }/, 'baseUrl: URL }');
}

/** This file's copy of the example, between its markers, the same way. */
function testedExample(): string {
  const source = readFileSync(new URL(import.meta.url), 'utf8');
  // Searched with their indentation, so the strings in this function do not match.
  const begin = source.indexOf('\n    // README example begins\n') + 1;
  const end = source.indexOf('\n    // README example ends\n');
  return source
    .slice(begin, end)
    .split('\n')
    .slice(1)
    .map((line) => line.slice(4))
    .filter((line) => line.trim() !== '')
    .join('\n')
    .replace(/baseUrl: [^}]+ }/, 'baseUrl: URL }');
}

describe('the README example', () => {
  it('is the code this test runs', () => {
    expect(readmeExample()).not.toBe('');
    expect(testedExample()).toBe(readmeExample());
  });

  it('registers, takes a lock and releases it', async () => {
    const logged: string[] = [];
    const console = { log: (line: string) => logged.push(line) };
    // README example begins
    const api = createPlatformClient({ baseUrl: t.url });
    await api.post('/api/v1/auth/register', {
      body: { email: 'ada@example.com', username: 'ada', password: 'correct horse' },
    }); // the client keeps the session's tokens, and refreshes them
    const lock = { params: { path: { namespace: 'jobs', key: 'nightly-report' } } };
    const held = await api.post('/api/v1/distributed-state/{namespace}/{key}/lock', { ...lock, body: { owner_id: 'worker-1', ttl_seconds: 30 } });
    console.log(`holding the lock with fence token ${held.fence_token}`);
    await api.delete('/api/v1/distributed-state/{namespace}/{key}/lock', { ...lock, body: { lock_id: held.lock_id, owner_id: 'worker-1' } });
    // README example ends

    expect(logged).toEqual(['holding the lock with fence token 1']);
    const me = await api.get('/api/v1/auth/me');
    expect(me.username).toBe('ada');
    const status = await api.get('/api/v1/distributed-state/{namespace}/{key}/lock', lock);
    expect(status).toMatchObject({ is_locked: false, fence_token: 1 });
  });
});

describe('typed errors', () => {
  it('throws ApiError carrying the code, status and message of the error body', async () => {
    const owner = createPlatformClient({ baseUrl: t.url });
    const other = createPlatformClient({ baseUrl: t.url });
    for (const [client, name] of [[owner, 'errors-a'], [other, 'errors-b']] as const) {
      await client.post('/api/v1/auth/register', { body: { email: `${name}@example.com`, username: name, password: 'correct horse' } });
    }
    const path = { params: { path: { namespace: 'errors', key: 'k' } } };
    // Locks are per tenant: both users may take "errors/k"; the second acquirer of one tenant's lock is refused.
    await owner.post('/api/v1/distributed-state/{namespace}/{key}/lock', { ...path, body: { owner_id: 'one' } });
    const held = await owner.post('/api/v1/distributed-state/{namespace}/{key}/lock', { ...path, body: { owner_id: 'two' } }).catch((error: unknown) => error);
    expect(held).toBeInstanceOf(ApiError);
    expect(isApiError(held, 'lock_held')).toBe(true);
    expect(held).toMatchObject({ status: 409, code: 'lock_held', method: 'POST' });
    expect((held as ApiError).message).not.toBe('');

    const invalid = await owner
      .post('/api/v1/distributed-state/{namespace}/{key}/lock', { ...path, body: { owner_id: 'one', ttl_seconds: 0 } })
      .catch((error: unknown) => error);
    expect(invalid).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    expect((invalid as ApiError).details).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'body.ttl_seconds' })]));

    const missing = await other.get('/api/v1/ecs/{index}/coordinator', { params: { path: { index: 'x'.repeat(129) } } }).catch((error: unknown) => error);
    expect(missing).toMatchObject({ status: 400, code: 'BAD_REQUEST' });

    const anonymous = createPlatformClient({ baseUrl: t.url });
    await expect(anonymous.get('/api/v1/auth/me')).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    await expect(anonymous.post('/api/v1/auth/login', { body: { login: 'errors-a', password: 'wrong password' } })).rejects.toMatchObject({
      status: 401,
      code: 'invalid_credentials',
    });
  });
});
