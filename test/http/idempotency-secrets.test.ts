import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/**
 * Secrets at rest. An Idempotency-Key on a POST whose answer carries a secret shown once (an
 * API key, a TOTP secret): the store keeps that the request ran, never the
 * answer, so the secret is not on disk; a retry is told so (409
 * idempotency_replay_withheld) and the request does not run twice.
 */
let t: TestNode;
let user: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode();
  user = await t.newUser('idemsecret');
});
afterAll(async () => {
  await t?.destroy();
});

function expectWithheld(res: TestResponse, ranWith: number) {
  expect(res.status, res.text).toBe(409);
  expect(res.body).toMatchObject({ statusCode: 409, code: 'idempotency_replay_withheld', error: 'Conflict' });
  expect(res.body.message).toContain(`already ran (${ranWith})`);
  expect(res.headers.get('idempotent-replayed')).toBe('true');
}

/** The node's LMDB file, as a copy of DATA_DIR would hold it. */
const onDisk = () => readFileSync(join(t.dataDir, 'data.mdb')).toString('latin1');

describe('Idempotency-Key on answers that carry a secret', () => {
  it('an API key: shown once, the retry is withheld, one key exists, the secret is not on disk', async () => {
    const headers = { 'idempotency-key': 'key-create-1' };
    const body = { name: 'ci', scopes: ['locks:read'] };
    const first = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body, headers });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const secret = (first.body.key as string).split('_')[2];
    expectWithheld(await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body, headers }), 201);
    const keys = await t.request('GET', '/api/v1/auth/api-keys', { token: user.token });
    expect(keys.body.api_keys).toHaveLength(1);
    expect(onDisk()).not.toContain(secret);
    // The key still works, and a different body under the same key is still refused as reused.
    expect((await t.request('GET', '/api/v1/distributed-state/idem-secrets/any/lock', { token: first.body.key })).status).toBe(200);
    const reused = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { ...body, name: 'other' }, headers });
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('idempotency_key_reused');
  });

  it('a route found from its response schema (a TOTP secret) is withheld without saying so itself', async () => {
    const headers = { 'idempotency-key': 'totp-setup-1' };
    const first = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token, headers });
    expect(first.status, first.text).toBe(200);
    expect(first.body.secret).toEqual(expect.any(String));
    expectWithheld(await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token, headers }), 200);
  });

  it('an answer without a secret is still replayed (a lock, whose key is a name)', async () => {
    const headers = { 'idempotency-key': 'lock-1' };
    const path = '/api/v1/distributed-state/idem-secrets/k1/lock';
    const first = await t.request('POST', path, { token: user.token, body: { owner_id: 'a' }, headers });
    expect(first.status).toBe(200);
    const retry = await t.request('POST', path, { token: user.token, body: { owner_id: 'a' }, headers });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
  });

  it('an error answer is replayed as it was (it holds no secret)', async () => {
    const headers = { 'idempotency-key': 'key-bad-1' };
    const body = { name: 'x', scopes: ['locks:read'], expires_at: '2000-01-01T00:00:00Z' };
    const first = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body, headers });
    expect(first.status).toBe(400);
    const retry = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body, headers });
    expect(retry.status).toBe(400);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('the data directory', () => {
  it('is created readable by the node\'s user only', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'platform-mode-'));
    const dataDir = join(parent, 'fresh', 'data');
    const node = await startTestNode({ dataDir });
    try {
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    } finally {
      await node.destroy();
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
