import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** CLI login, device style: create (no bearer), complete (bearer), poll (poll_token) -> tokens once. */
let t: TestNode;
const clock = () => t.clock as ManualClock;


const create = () => t.request('POST', '/api/v1/auth/cli/session');
const complete = (id: string, token?: string) => t.request('POST', `/api/v1/auth/cli/session/${id}/complete`, { token });
const poll = (id: string, poll_token: string) => t.request('POST', `/api/v1/auth/cli/session/${id}/poll`, { body: { poll_token } });

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
});
afterAll(async () => {
  await t?.destroy();
});

describe('CLI login', () => {
  it('end to end: pending, completed by a signed-in user, tokens delivered once', async () => {
    const user = await t.newUser('cli');
    const created = await create();
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ id: expect.stringMatching(/^cli_/), user_code: expect.stringMatching(/^[A-Z]{4}-[A-Z]{4}$/), poll_token: expect.any(String), expires_in: 600, interval: 5 });
    expect(created.body.verification_uri).toContain(`/api/v1/auth/cli/session/${created.body.id}/complete`);
    const { id, poll_token } = created.body;

    const pending = await poll(id, poll_token);
    expect(pending.status, pending.text).toBe(200);
    expect(pending.body).toEqual({ status: 'pending', interval: 5 });
    const tooFast = await poll(id, poll_token);
    expectError(tooFast, 429, 'rate_limited');
    expect(Number(tooFast.headers.get('retry-after'))).toBeGreaterThan(0);

    const info = await t.request('GET', `/api/v1/auth/cli/session/${id}`, { token: user.token });
    expect(info.status, info.text).toBe(200);
    expect(info.body).toMatchObject({ id, user_code: created.body.user_code, status: 'pending', expires_at: expect.any(String) });
    expectError(await t.request('GET', `/api/v1/auth/cli/session/${id}`), 401, 'unauthorized');

    const done = await complete(id, user.token);
    expect(done.status, done.text).toBe(204);
    expect(done.text).toBe('');
    expectError(await complete(id, user.token), 409, 'conflict');
    expect((await t.request('GET', `/api/v1/auth/cli/session/${id}`, { token: user.token })).body.status).toBe('completed');

    clock().advance(5000);
    const tokens = await poll(id, poll_token);
    expect(tokens.status, tokens.text).toBe(200);
    expect(tokens.body).toMatchObject({ status: 'complete', token_type: 'Bearer', user: { id: user.user_id } });
    const me = await t.request('GET', '/api/v1/auth/me', { token: tokens.body.access_token });
    expect(me.body.id).toBe(user.user_id);
    const refreshed = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: tokens.body.refresh_token } });
    expect(refreshed.status).toBe(200);

    clock().advance(5000);
    expectError(await poll(id, poll_token), 409, 'conflict');
  });

  it('an approval whose session has ended since (signed out, password changed) delivers no tokens', async () => {
    const user = await t.newUser('cliend');
    const created = await create();
    const { id, poll_token } = created.body;
    expect((await complete(id, user.token)).status).toBe(204);
    // The approving session signs out (as a password change or a ban would end it).
    expect((await t.request('POST', '/api/v1/auth/logout', { token: user.token })).status).toBeLessThan(300);
    clock().advance(5000);
    const refused = await poll(id, poll_token);
    expectError(refused, 409, 'conflict');
    expect(refused.body.message).toContain('start a new CLI login');
  });

  it('a wrong poll token or an unknown id is 404; complete needs a bearer', async () => {
    const user = await t.newUser('cli');
    const { id, poll_token } = (await create()).body;
    expectError(await poll(id, 'not-the-token'), 404, 'not_found');
    expectError(await poll('cli_unknown', poll_token), 404, 'not_found');
    expectError(await complete('cli_unknown', user.token), 404, 'not_found');
    expectError(await complete(id), 401, 'unauthorized');
    expectError(await t.request('POST', `/api/v1/auth/cli/session/${id}/poll`, { body: {} }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `/api/v1/auth/cli/session/${id}/poll`, { body: { poll_token: 7 } }), 400, 'BAD_REQUEST');
  });

  it('expires after 10 minutes', async () => {
    const user = await t.newUser('cli');
    const { id, poll_token } = (await create()).body;
    clock().advance(10 * 60_000);
    await settle();
    expectError(await complete(id, user.token), 404, 'not_found');
    expectError(await poll(id, poll_token), 404, 'not_found');
    expectError(await t.request('GET', `/api/v1/auth/cli/session/${id}`, { token: user.token }), 404, 'not_found');
  });

  it('a session survives a restart', async () => {
    const { id, poll_token } = (await create()).body;
    const manual = clock();
    const dataDir = t.dataDir;
    await t.stop();
    t = await startTestNode({ clock: manual, dataDir });
    const user = await t.newUser('cli');
    expect((await complete(id, user.token)).status).toBe(204);
    const tokens = await poll(id, poll_token);
    expect(tokens.body).toMatchObject({ status: 'complete', user: { id: user.user_id } });
  });
});
