import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { CapturingMailTransport } from '../../http/auth/mail.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { eventually } from '../helpers/runtime.js';

/** E-mail verification: send (bearer) and confirm (token, no bearer), through a capturing mail transport. */
const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'admin password 123';

let t: TestNode;
let mail: CapturingMailTransport;
let adminToken: string;
const clock = () => t.clock as ManualClock;


const send = (token: string, body?: unknown) => t.request('POST', '/api/v1/auth/email/verify/send', { token, body });
const confirm = (token: string) => t.request('POST', '/api/v1/auth/email/verify/confirm', { body: { token } });

function lastLinkTo(email: string): URL {
  const message = mail.sent.filter((m) => m.to === email).at(-1);
  expect(message).toBeDefined();
  expect(message!.text).toContain(message!.link);
  return new URL(message!.link!);
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  mail = new CapturingMailTransport();
  t.node.services.mail = mail;
});
beforeEach(async () => {
  adminToken = await t.loginAdmin();
});
afterAll(async () => {
  await t?.destroy();
});

describe('e-mail verification', () => {
  it('send then confirm sets email_verified, visible in /me and the admin list; the token is single-use', async () => {
    const user = await t.newUser('ev');
    const sent = await send(user.token);
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body.message).toEqual(expect.any(String));
    const link = lastLinkTo(user.email);
    expect(link.pathname).toBe('/api/v1/auth/email/verify/confirm');
    const token = link.searchParams.get('token')!;
    expect(token.startsWith('evt.')).toBe(true);
    const ok = await confirm(token);
    expect(ok.status, ok.text).toBe(200);
    const me = await t.request('GET', '/api/v1/auth/me', { token: user.token });
    expect(me.body.email_verified).toBe(true);
    await eventually(async () => {
      const list = await t.request('GET', `/admin/auth/users?q=${encodeURIComponent(user.email)}&email_verified=true`, { token: adminToken });
      expect(list.body.users.map((u: { id: string }) => u.id)).toEqual([user.user_id]);
    });
    expectError(await confirm(token), 400, 'invalid_verification_token');
    expectError(await send(user.token), 409, 'conflict');
  });

  it('the default link also works with GET', async () => {
    const user = await t.newUser('ev');
    expect((await send(user.token)).status).toBe(200);
    const link = lastLinkTo(user.email);
    const res = await t.request('GET', `${link.pathname}${link.search}`);
    expect(res.status, res.text).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).body.email_verified).toBe(true);
  });

  it('one send per minute (429 with Retry-After); a new link replaces the old one', async () => {
    const user = await t.newUser('ev');
    expect((await send(user.token)).status).toBe(200);
    const first = lastLinkTo(user.email).searchParams.get('token')!;
    const again = await send(user.token);
    expectError(again, 429, 'rate_limited');
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
    clock().advance(61_000);
    expect((await send(user.token)).status).toBe(200);
    const second = lastLinkTo(user.email).searchParams.get('token')!;
    expect(second).not.toBe(first);
    expectError(await confirm(first), 400, 'invalid_verification_token');
    expect((await confirm(second)).status).toBe(200);
  });

  it('a link expires after 24 hours', async () => {
    const user = await t.newUser('ev');
    expect((await send(user.token)).status).toBe(200);
    const token = lastLinkTo(user.email).searchParams.get('token')!;
    clock().advance(24 * 3600_000 + 1000);
    expectError(await confirm(token), 400, 'invalid_verification_token');
  });

  it('a link sent to an address the account no longer has is refused', async () => {
    const user = await t.newUser('ev');
    expect((await send(user.token)).status).toBe(200);
    const token = lastLinkTo(user.email).searchParams.get('token')!;
    const patched = await t.request('PATCH', `/admin/auth/users/${user.user_id}`, { token: adminToken, body: { email: `new-${user.email}` } });
    expect(patched.status, patched.text).toBe(200);
    expectError(await confirm(token), 400, 'invalid_verification_token');
  });

  it('redirect_url carries the token; bad URLs are 400', async () => {
    const user = await t.newUser('ev');
    const res = await send(user.token, { redirect_url: 'https://app.example.com/verified?from=mail' });
    expect(res.status, res.text).toBe(200);
    const link = lastLinkTo(user.email);
    expect(link.origin + link.pathname).toBe('https://app.example.com/verified');
    expect(link.searchParams.get('from')).toBe('mail');
    expect(link.searchParams.get('token')).toMatch(/^evt\./);
    clock().advance(61_000);
    expectError(await send(user.token, { redirect_url: 'javascript:alert(1)' }), 400, 'BAD_REQUEST');
    expectError(await send(user.token, { redirect_url: 'not a url' }), 400, 'BAD_REQUEST');
    expectError(await send(user.token, { redirect_url: 42 }), 400, 'BAD_REQUEST');
  });

  it('errors: no bearer 401, malformed or unknown token 400, missing token 400', async () => {
    expectError(await t.request('POST', '/api/v1/auth/email/verify/send', { body: {} }), 401, 'unauthorized');
    expectError(await confirm('garbage'), 400, 'invalid_verification_token');
    expectError(await confirm('evt.usr_nobody.secret'), 400, 'invalid_verification_token');
    expectError(await t.request('POST', '/api/v1/auth/email/verify/confirm', { body: {} }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/auth/email/verify/confirm'), 400, 'BAD_REQUEST');
  });

  it('send works without a body', async () => {
    const user = await t.newUser('ev');
    const res = await t.request('POST', '/api/v1/auth/email/verify/send', { token: user.token });
    expect(res.status, res.text).toBe(200);
    expect(lastLinkTo(user.email).searchParams.get('token')).toMatch(/^evt\./);
  });

  it('the request log does not carry the token of GET .../confirm?token=...', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _encoding, done) { lines.push(String(chunk)); done(); } });
    // A node of its own whose log is kept, at debug level (one line per request).
    const logged = await startTestNode({ logger: pino({ level: 'debug' }, sink) });
    try {
      const captured = new CapturingMailTransport();
      logged.node.services.mail = captured;
      const user = await logged.newUser('evlog');
      expect((await logged.request('POST', '/api/v1/auth/email/verify/send', { token: user.token })).status).toBe(200);
      const link = new URL(captured.sent.at(-1)!.link!);
      const secret = link.searchParams.get('token')!.split('.').at(-1)!;
      const ok = await logged.request('GET', `${link.pathname}${link.search}`);
      expect(ok.status, ok.text).toBe(200);
      const wrong = await logged.request('GET', `${link.pathname}?token=evt.${user.user_id}.not-the-secret-xyz`);
      expect(wrong.status).toBe(400);
      const requests = lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'request' && String(entry.url).startsWith(link.pathname));
      expect(requests.map((entry) => entry.url)).toEqual([`${link.pathname}?[redacted]`, `${link.pathname}?[redacted]`]);
      expect(lines.join('')).not.toContain(secret);
      expect(lines.join('')).not.toContain('not-the-secret-xyz');
      // Other routes keep their query string in the log.
      await logged.request('GET', '/api/v1/auth/api-keys?page=2', { token: user.token });
      expect(lines.join('')).toContain('/api/v1/auth/api-keys?page=2');
    } finally {
      await logged.destroy();
    }
  });
});
