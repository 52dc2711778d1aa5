import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Route schemas are compiled on first use (http/lazy-schemas.ts), so start-up
 * no longer proves that they compile: this does, for every route of the app.
 */
let t: TestNode;

beforeAll(async () => {
  t = await startTestNode();
});

afterAll(async () => {
  await t?.destroy();
});

describe('route schemas', () => {
  it('are not compiled at start-up, and every one of them compiles', async () => {
    const lazy = t.node.app.lazySchemas;
    // Hundreds of routes, each with validators and response serialisers: most wait for their first request.
    expect(lazy.pending).toBeGreaterThan(300);
    lazy.compileAll();
    expect(lazy.pending).toBe(0);
    // Compiled ones still validate and serialise: a bad body is a 400 in the error shape, a good one a 201.
    const bad = await t.request('POST', '/api/v1/auth/register', { body: { email: 7 } });
    expect(bad.status).toBe(400);
    expect(typeof bad.body.code).toBe('string');
    const user = await t.newUser('lazy');
    expect(user.token).toEqual(expect.any(String));
  });
});
