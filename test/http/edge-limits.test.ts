import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Edge hardening (identity hardening issue): errors Node raises before
 * Fastify (oversized headers, unframed bodies) come in the error shape, and
 * slow or idle sockets are closed by the configured deadlines. Short
 * deadlines here so the test waits about a second, not the defaults.
 */
let t: TestNode;
let host: string;
let port: number;

beforeAll(async () => {
  t = await startTestNode({ config: { httpHeadersTimeoutMs: 600, httpRequestTimeoutMs: 1_500, httpKeepAliveTimeoutMs: 1_000 } });
  const url = new URL(t.url);
  host = url.hostname;
  port = Number(url.port);
});

afterAll(async () => {
  await t?.destroy();
});

/** Sends raw bytes; resolves with everything the server wrote until it closed the socket, and how long that took. */
function raw(bytes: string | null, waitMs = 5_000): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket: Socket = connect(port, host);
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`socket still open after ${waitMs} ms; received: ${text.slice(0, 200)}`));
    }, waitMs);
    socket.on('connect', () => {
      if (bytes !== null) socket.write(bytes);
    });
    socket.on('data', (chunk) => (text += chunk.toString('utf8')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
  });
}

function bodyOf(response: string): Record<string, unknown> {
  return JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4));
}

describe('errors before routing have the error shape', () => {
  it('a 70 KB Authorization header answers 431 headers_too_large', async () => {
    const res = await fetch(`${t.url}/api/v1/auth/me`, { headers: { authorization: `Bearer ${'a'.repeat(70_000)}` } });
    expect(res.status).toBe(431);
    const body = await res.json();
    expect(body).toMatchObject({ statusCode: 431, code: 'headers_too_large' });
  });

  it('a DELETE with a body but no framing: the bytes after it answer 400 BAD_REQUEST with code, and the connection closes', async () => {
    // Without Content-Length or Transfer-Encoding the DELETE has no body (RFC 9112 6.3): it may be answered
    // on its own (here 401: no bearer) before its parser reaches the stray bytes, which are no request.
    const { text } = await raw(`DELETE /api/v1/distributed-state/a/b/lock HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n{"lock_id":"x","owner_id":"y"}\r\n\r\n`);
    const responses = text.split(/(?=HTTP\/1\.1 \d{3} )/);
    const last = responses.at(-1)!;
    expect(last, text).toMatch(/^HTTP\/1\.1 400/);
    expect(last).toMatch(/\r\nConnection: close\r\n/i);
    expect(bodyOf(last)).toMatchObject({ statusCode: 400, code: 'BAD_REQUEST' });
    for (const response of responses.slice(0, -1)) expect(bodyOf(response)).toMatchObject({ statusCode: 401, code: 'unauthorized' });
  });
});

describe('slow and idle sockets are closed', () => {
  it('an idle new connection is closed after the headers deadline', async () => {
    const { closedAfterMs } = await raw(null);
    expect(closedAfterMs).toBeLessThan(4_000);
  });

  it('slow headers (slowloris) get 408 request_timeout and the connection closes', async () => {
    const { text, closedAfterMs } = await raw('GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    expect(closedAfterMs).toBeLessThan(4_000);
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(bodyOf(text)).toMatchObject({ statusCode: 408, code: 'request_timeout' });
  });

  it('an idle keep-alive connection is closed after its timeout', async () => {
    const { text, closedAfterMs } = await raw('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 200/);
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(closedAfterMs).toBeLessThan(4_000);
  });
});

describe('connection cap', () => {
  it('connections past HTTP_CONNECTIONS_MAX are closed at once; the held ones still work', async () => {
    const capped = await startTestNode({ config: { httpConnectionsMax: 16, httpHeadersTimeoutMs: 5_000, httpRequestTimeoutMs: 10_000 } });
    const url = new URL(capped.url);
    const held: Socket[] = [];
    try {
      for (let i = 0; i < 16; i++) {
        const socket = connect(Number(url.port), url.hostname);
        socket.on('error', () => undefined);
        await new Promise((resolve) => socket.once('connect', resolve));
        held.push(socket);
      }
      // Give the server a moment to accept all 16 before the 17th arrives.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      const extra = connect(Number(url.port), url.hostname);
      extra.on('error', () => undefined);
      await new Promise((resolve) => extra.once('close', resolve));
      expect(Date.now() - started).toBeLessThan(1_000);
      // A held connection is served normally.
      const answer = new Promise<string>((resolve) => held[0].once('data', (chunk) => resolve(chunk.toString())));
      held[0].write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(await answer).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      for (const socket of held) socket.destroy();
      await capped.destroy();
    }
  });
});

describe('TRUST_PROXY', () => {
  const registerAndReadAddress = async (node: TestNode, adminToken: string, forwardedFor: string) => {
    const n = Math.floor(Math.random() * 1e9);
    const registered = await node.request('POST', '/api/v1/auth/register', {
      body: { email: `proxy${n}@example.com`, username: `proxy${n}`, password: 'correct horse battery' },
      headers: { 'x-forwarded-for': forwardedFor },
    });
    expect(registered.status).toBe(201);
    const sessions = await node.request('GET', `/admin/auth/sessions?user_id=${registered.body.user.id}`, { token: adminToken });
    expect(sessions.status).toBe(200);
    return sessions.body.sessions[0].ip_address as string;
  };
  const admin = { adminEmail: 'root@example.com', adminPassword: 'root-password-1' };
  const adminLogin = async (node: TestNode) =>
    (await node.request('POST', '/api/v1/auth/login', { body: { login: admin.adminEmail, password: admin.adminPassword } })).body.access_token as string;

  it('unset: X-Forwarded-For is ignored, the socket peer is the client', async () => {
    const node = await startTestNode({ config: admin });
    try {
      expect(await registerAndReadAddress(node, await adminLogin(node), '203.0.113.7')).toBe('127.0.0.1');
    } finally {
      await node.destroy();
    }
  });

  it('naming the proxy: the forwarded client address is used', async () => {
    const node = await startTestNode({ config: { ...admin, trustProxy: ['127.0.0.1'] } });
    try {
      expect(await registerAndReadAddress(node, await adminLogin(node), '198.51.100.4, 203.0.113.7')).toBe('203.0.113.7');
    } finally {
      await node.destroy();
    }
  });
});

describe('the Host header is never reflected (PUBLIC_BASE_URL unset)', () => {
  it('OAuth metadata and the CLI login verification_uri use the node\'s own URL, whatever Host says', async () => {
    const { text } = await raw('GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 200/);
    const metadata = bodyOf(text);
    expect(metadata.issuer).toBe(t.url);
    expect(JSON.stringify(metadata)).not.toContain('evil.example');
    const body = '{}';
    const cli = await raw(`POST /api/v1/auth/cli/session HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    expect(cli.text).toMatch(/^HTTP\/1\.1 20/);
    expect(String(bodyOf(cli.text).verification_uri)).toMatch(new RegExp(`^${t.url}/`));
  });
});
