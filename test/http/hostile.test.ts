import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorCodes } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Hostile bodies at the edge: every answer is a 4xx with the error shape
 * {statusCode, code, error, message}, never a 5xx and never a crash.
 */
let t: TestNode;
let user: Awaited<ReturnType<TestNode['newUser']>>;
const lockPath = '/api/v1/distributed-state/hostile/key/lock';

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  user = await t.newUser('hostile');
});
afterAll(async () => {
  await t?.destroy();
});

interface Raw {
  status: number;
  body: any;
  text: string;
}

/** Sends bytes exactly as given (fetch adds no content type for a byte body). */
async function raw(method: string, path: string, body: string | Uint8Array | undefined, headers: Record<string, string> = {}): Promise<Raw> {
  const response = await fetch(t.url + path, { method, headers, body: typeof body === 'string' ? new TextEncoder().encode(body) : body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, body: parsed, text };
}

/** node:http, for what fetch refuses to send (a GET with a body). */
function rawHttp(method: string, path: string, body: string, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(t.url + path, { method, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = { 'content-type': 'application/json' };
const authed = () => ({ ...json, authorization: `Bearer ${user.token}` });

function expect4xx(res: Raw, status?: number, code?: string) {
  expect(res.status, res.text).toBeGreaterThanOrEqual(400);
  expect(res.status, res.text).toBeLessThan(500);
  if (status !== undefined) expect(res.status, res.text).toBe(status);
  expect(res.body, res.text).toEqual(
    expect.objectContaining({ statusCode: res.status, code: expect.any(String), error: expect.any(String), message: expect.any(String) }),
  );
  // Always a code from the registry (docs/errors.md), never a framework-internal one.
  expect(Object.keys(errorCodes), res.text).toContain(res.body.code);
  expect(errorCodes[res.body.code as keyof typeof errorCodes].status).toBe(res.status);
  if (code !== undefined) expect(res.body.code).toBe(code);
}

/** Each JSON route with a body, with the headers it needs. */
const routes = () => [
  { method: 'POST', path: '/api/v1/auth/register', headers: json },
  { method: 'POST', path: '/api/v1/auth/login', headers: json },
  { method: 'POST', path: '/api/v1/auth/refresh', headers: json },
  { method: 'POST', path: lockPath, headers: authed() },
  { method: 'PATCH', path: lockPath, headers: authed() },
  { method: 'DELETE', path: lockPath, headers: authed() },
];

describe('malformed and mistyped bodies', () => {
  const malformed = ['{', '{"email":', "{'login':'a'}", '{"a":1,}', 'NaN', 'undefined', '{"a":01}', '[1,2', '\u0000', '{"a":"\\x41"}', '{"a" 1}'];

  it('malformed JSON is a 400 on every route', async () => {
    for (const route of routes()) {
      for (const body of malformed) expect4xx(await raw(route.method, route.path, body, route.headers), 400, 'BAD_REQUEST');
    }
  });

  it('null, arrays, strings, numbers and booleans instead of an object are 400', async () => {
    for (const route of routes()) {
      for (const body of ['null', '[]', '[{"login":"a","password":"b"}]', '"text"', '42', 'true', '{}']) {
        expect4xx(await raw(route.method, route.path, body, route.headers), 400, 'BAD_REQUEST');
      }
    }
  });

  it('wrong field types are 400 with details naming the field (no coercion)', async () => {
    const cases: [string, string, unknown][] = [
      ['POST', '/api/v1/auth/register', { email: 123, username: 'abcdef', password: 'long enough' }],
      ['POST', '/api/v1/auth/register', { email: 'a@example.com', username: ['abc'], password: 'long enough' }],
      ['POST', '/api/v1/auth/register', { email: 'a@example.com', username: 'abcdef', password: 12345678 }],
      ['POST', '/api/v1/auth/register', { email: 'a@example.com', username: 'abcdef', password: 'long enough', display_name: null }],
      ['POST', '/api/v1/auth/login', { login: { $ne: null }, password: 'x' }],
      ['POST', '/api/v1/auth/login', { login: 'someone', password: true }],
      ['POST', '/api/v1/auth/refresh', { refresh_token: 42 }],
      ['POST', lockPath, { owner_id: 7 }],
      ['POST', lockPath, { owner_id: 'a', ttl_seconds: '30' }],
      ['POST', lockPath, { owner_id: 'a', ttl_seconds: 1e400 }],
      ['POST', lockPath, { owner_id: 'a', ttl_seconds: null }],
      ['PATCH', lockPath, { lock_id: 1, owner_id: 'a' }],
      ['DELETE', lockPath, { lock_id: 'x', owner_id: false }],
    ];
    for (const [method, path, body] of cases) {
      const headers = path === lockPath ? authed() : json;
      const res = await raw(method, path, JSON.stringify(body).replace('"1e400"', '1e400'), headers);
      expect4xx(res, 400, 'BAD_REQUEST');
      expect(res.body.details, res.text).toEqual([expect.objectContaining({ field: expect.stringMatching(/^body/), message: expect.any(String) })]);
    }
  });

  it('an empty body with a JSON content type is a 400; no body at all is a 400', async () => {
    for (const route of routes()) {
      expect4xx(await raw(route.method, route.path, '', route.headers), 400, 'BAD_REQUEST');
      const { ['content-type']: _, ...noType } = route.headers as Record<string, string>;
      expect4xx(await raw(route.method, route.path, undefined, noType), 400, 'BAD_REQUEST');
    }
  });
});

describe('sizes and shapes', () => {
  it('strings over the schema limit are 400', async () => {
    const long = 'x'.repeat(10_000);
    expect4xx(await raw('POST', '/api/v1/auth/register', JSON.stringify({ email: `${long}@example.com`, username: 'abcdef', password: 'long enough' }), json), 400);
    expect4xx(await raw('POST', '/api/v1/auth/register', JSON.stringify({ email: 'a@example.com', username: 'abcdef', password: long }), json), 400);
    expect4xx(await raw('POST', '/api/v1/auth/login', JSON.stringify({ login: long, password: long }), json), 400);
    expect4xx(await raw('POST', lockPath, JSON.stringify({ owner_id: long }), authed()), 400);
    expect4xx(await raw('POST', lockPath, JSON.stringify({ owner_id: 'a', metadata: long.repeat(2) }), authed()), 400);
  });

  it('a body over the body limit is 413 on every route, whatever it contains', async () => {
    const huge = JSON.stringify({ owner_id: 'a', login: 'a', password: 'b', metadata: 'x'.repeat(1_100_000) });
    for (const route of routes()) expect4xx(await raw(route.method, route.path, huge, route.headers), 413, 'payload_too_large');
    expect4xx(await raw('POST', '/api/v1/auth/login', 'x'.repeat(1_100_000), json), 413, 'payload_too_large');
  });

  it('nesting deeper than 100 levels is a 400 wherever it is; 100 levels are accepted and round-trip', async () => {
    const nest = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    for (const depth of [101, 10_000, 150_000]) {
      const deepObject = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
      for (const body of [nest(depth), `{"owner_id":"a","metadata":${nest(depth)}}`, `{"owner_id":"a","metadata":${deepObject}}`, `{"owner_id":"a","extra":${nest(depth)}}`]) {
        expect4xx(await raw('POST', lockPath.replace('key', 'deep'), body, authed()), 400, 'BAD_REQUEST');
      }
      const register = `{"email":"deep@example.com","username":"deepuser","password":"long enough","x":${nest(depth)}}`;
      expect4xx(await raw('POST', '/api/v1/auth/register', register, json), 400, 'BAD_REQUEST');
    }
    // Brackets inside strings do not count.
    const inString = JSON.stringify({ owner_id: 'a', metadata: '['.repeat(5_000) + '\\"{{{' });
    const stringy = await raw('POST', lockPath.replace('key', 'deep-string'), inString, authed());
    expect(stringy.status, stringy.text).toBe(200);
    // 99 levels of metadata inside the body object: 100 in all, the limit.
    const ok = await raw('POST', lockPath.replace('key', 'deep-ok'), `{"owner_id":"a","metadata":${nest(99)}}`, authed());
    expect(ok.status, ok.text).toBe(200);
    const read = await raw('GET', lockPath.replace('key', 'deep-ok'), undefined, { authorization: `Bearer ${user.token}` });
    expect(JSON.stringify(read.body.metadata)).toBe(nest(99));
    expect((await raw('GET', '/health', undefined)).status).toBe(200);
  });

  it('deep nesting with an Idempotency-Key is not a 5xx', async () => {
    const nested = '['.repeat(200_000) + ']'.repeat(200_000);
    const res = await raw('POST', lockPath.replace('key', 'deep-idem'), `{"owner_id":"a","extra":${nested}}`, { ...authed(), 'idempotency-key': 'deep-1' });
    expect4xx(res, 400, 'BAD_REQUEST');
  });
});

describe('prototype poisoning', () => {
  it('__proto__ and constructor.prototype keys are refused with a 400 and change nothing', async () => {
    const bodies = [
      '{"email":"p1@example.com","username":"proto1","password":"long enough","__proto__":{"role":"admin"}}',
      '{"email":"p2@example.com","username":"proto2","password":"long enough","constructor":{"prototype":{"role":"admin"}}}',
      '{"login":"x","password":"y","a":{"__proto__":{"polluted":true}}}',
    ];
    for (const body of bodies) {
      for (const path of ['/api/v1/auth/register', '/api/v1/auth/login']) expect4xx(await raw('POST', path, body, json), 400, 'BAD_REQUEST');
    }
    const poisoned = await raw('POST', lockPath, '{"owner_id":"a","metadata":{"__proto__":{"x":1}}}', authed());
    expect4xx(poisoned, 400, 'BAD_REQUEST');
    expect(poisoned.body.message).toContain('__proto__ or constructor.prototype');
    // Malformed JSON still says so.
    expect((await raw('POST', lockPath, '{"owner_id":', authed())).body.message).toContain('not valid JSON');
    expect4xx(await raw('POST', lockPath, '{"owner_id":"a","metadata":{"constructor":{"prototype":{"x":1}}}}', authed()), 400, 'BAD_REQUEST');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // Neither proto user exists.
    const login = await raw('POST', '/api/v1/auth/login', JSON.stringify({ login: 'proto1', password: 'long enough' }), json);
    expect4xx(login, 401, 'invalid_credentials');
  });

  it('a key named "constructor" on its own is just data', async () => {
    const res = await raw('POST', lockPath.replace('key', 'ctor'), '{"owner_id":"a","metadata":{"constructor":"fine"}}', authed());
    expect(res.status, res.text).toBe(200);
    expect(res.body.metadata).toEqual({ constructor: 'fine' });
  });
});

describe('content types and encodings', () => {
  it('a body of another content type is 415', async () => {
    const body = JSON.stringify({ login: 'a', password: 'b', owner_id: 'a' });
    for (const route of routes()) {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/octet-stream']) {
        const headers = { ...route.headers, 'content-type': type };
        expect4xx(await raw(route.method, route.path, body, headers), 415, 'unsupported_media_type');
      }
    }
    // A body with no content type at all is refused the same way.
    expect4xx(await raw('POST', '/api/v1/auth/login', body, {}), 415, 'unsupported_media_type');
  });

  it('application/json with a charset parameter is accepted', async () => {
    const res = await raw('POST', '/api/v1/auth/login', JSON.stringify({ login: user.username, password: user.password }), { 'content-type': 'application/json; charset=utf-8' });
    expect(res.status, res.text).toBe(200);
  });

  it('invalid UTF-8 is a 400, not silently replaced (two different byte strings must not become one owner)', async () => {
    const prefix = new TextEncoder().encode('{"owner_id":"a');
    const suffix = new TextEncoder().encode('"}');
    for (const bad of [[0xff], [0xc3, 0x28], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
      const body = new Uint8Array([...prefix, ...bad, ...suffix]);
      expect4xx(await raw('POST', lockPath.replace('key', 'utf8'), body, authed()), 400, 'BAD_REQUEST');
    }
    expect4xx(await raw('POST', '/api/v1/auth/login', new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), json), 400, 'BAD_REQUEST');
    expect((await raw('GET', lockPath.replace('key', 'utf8'), undefined, { authorization: `Bearer ${user.token}` })).body.is_locked).toBe(false);
    // Valid multi-byte UTF-8 is fine.
    const ok = await raw('POST', lockPath.replace('key', 'utf8'), JSON.stringify({ owner_id: 'ä€😀' }), authed());
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.owner_id).toBe('ä€😀');
  });
  it('unpaired surrogate escapes are a 400 (storage is UTF-8 and would change them); escaped pairs are fine', async () => {
    for (const body of ['{"owner_id":"a\\ud800"}', '{"owner_id":"\\udc00b"}', '{"owner_id":"a","metadata":{"k":["\\udbff"]}}', '{"owner_id":"a","metadata":{"\\ud800":1}}']) {
      expect4xx(await raw('POST', lockPath.replace('key', 'surrogate'), body, authed()), 400, 'BAD_REQUEST');
    }
    expect((await raw('GET', lockPath.replace('key', 'surrogate'), undefined, { authorization: `Bearer ${user.token}` })).body.is_locked).toBe(false);
    // An escaped backslash followed by "ud800" is not an escape at all.
    const literal = await raw('POST', lockPath.replace('key', 'surrogate'), '{"owner_id":"a\\\\ud800"}', authed());
    expect(literal.status, literal.text).toBe(200);
    expect(literal.body.owner_id).toBe('a\\ud800');
    const pair = await raw('POST', lockPath.replace('key', 'surrogate-pair'), '{"owner_id":"\\ud83d\\ude00"}', authed());
    expect(pair.status, pair.text).toBe(200);
    expect(pair.body.owner_id).toBe('😀');
  });

  it('a GET with a body is served or refused with a 4xx, never a 5xx', async () => {
    const auth = { authorization: `Bearer ${user.token}` };
    for (const body of ['{"x":', '[[[[', '{}']) {
      const res = await rawHttp('GET', lockPath.replace('key', 'get-body'), body, { ...auth, 'content-type': 'application/json' });
      expect(res.status, res.text).toBeLessThan(500);
      if (res.status >= 400) expect4xx(res);
    }
  });
});

describe('unknown fields and odd paths', () => {
  it('unknown fields are ignored, never used: registering with role admin makes a plain user', async () => {
    const res = await raw('POST', '/api/v1/auth/register', JSON.stringify({
      email: 'unknown-fields@example.com',
      username: 'unknownfields',
      password: 'long enough',
      role: 'admin',
      id: 'usr_chosen',
      banned: false,
      email_verified: true,
      nested: { deep: [1, 2, 3] },
    }), json);
    expect(res.status, res.text).toBe(201);
    expect(res.body.user.role).toBe('user');
    expect(res.body.user.id).not.toBe('usr_chosen');
    expect(res.body.user.email_verified).toBe(false);
    const lock = await raw('POST', lockPath.replace('key', 'unknown'), JSON.stringify({ owner_id: 'a', fence_token: 999, lock_id: 'mine', extra: true }), authed());
    expect(lock.status, lock.text).toBe(200);
    expect(lock.body.fence_token).toBe(1);
    expect(lock.body.lock_id).not.toBe('mine');
  });

  it('bad path parameters are 4xx with the error shape', async () => {
    const auth = { authorization: `Bearer ${user.token}` };
    expect4xx(await raw('GET', `/api/v1/distributed-state/ns/${'k'.repeat(300)}/lock`, undefined, auth), 400);
    expect4xx(await raw('GET', '/api/v1/distributed-state/ns/a%00b/lock', undefined, auth), 400);
    expect4xx(await raw('GET', '/api/v1/distributed-state/ns/a%0Ab/lock', undefined, auth), 400);
    expect4xx(await raw('GET', '/api/v1/distributed-state/ns/%E0%A4%A/lock', undefined, auth), 400, 'BAD_REQUEST');
    expect4xx(await raw('GET', `/api/v1/distributed-state/ns/${'k'.repeat(2000)}/lock`, undefined, auth), 400, 'BAD_REQUEST');
    expect4xx(await raw('GET', '/%', undefined, auth), 400, 'BAD_REQUEST');
    expect4xx(await raw('POST', '/api/v1/auth/lo%gin', '{}', json), 400, 'BAD_REQUEST');
    expect4xx(await raw('GET', '/api/v1/distributed-state/ns//lock', undefined, auth));
  });
});

describe('fuzz: random JSON never gives a 5xx', () => {
  // Bounded: about 300 requests in all, seeded so a failure replays.
  const jsonish = fc.jsonValue({ maxDepth: 4 });
  const fieldValue = fc.oneof(jsonish, fc.string({ maxLength: 40 }), fc.integer(), fc.constant(null));

  async function check(method: string, path: string, body: unknown, headers: Record<string, string>) {
    const res = await raw(method, path, JSON.stringify(body) ?? 'null', headers);
    expect(res.status, `${method} ${path} ${JSON.stringify(body)?.slice(0, 300)} -> ${res.text.slice(0, 300)}`).toBeLessThan(500);
    if (res.status >= 400) expect4xx(res);
  }

  it('register and login', async () => {
    const registerBody = fc.record(
      { email: fc.oneof(fc.emailAddress(), fieldValue), username: fc.oneof(fc.stringMatching(/^[a-z0-9_.-]{3,12}$/), fieldValue), password: fieldValue, display_name: fieldValue, role: fieldValue },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(registerBody, jsonish), async (body) => check('POST', '/api/v1/auth/register', body, json)),
      { numRuns: 80, seed: 4242 },
    );
    const loginBody = fc.record({ login: fieldValue, password: fieldValue }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(fc.oneof(loginBody, jsonish), async (body) => check('POST', '/api/v1/auth/login', body, json)),
      { numRuns: 70, seed: 4243 },
    );
  });

  it('lock routes', async () => {
    const key = fc.stringMatching(/^[a-z0-9]{1,8}$/);
    const lockBody = fc.record(
      { owner_id: fc.oneof(fc.constantFrom('a', 'b'), fieldValue), lock_id: fieldValue, ttl_seconds: fc.oneof(fc.integer({ min: -5, max: 100_000 }), fieldValue), metadata: jsonish },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('POST', 'PATCH', 'DELETE'), key, fc.oneof(lockBody, jsonish), async (method, k, body) =>
        check(method, `/api/v1/distributed-state/fuzz/${k}/lock`, body, authed()),
      ),
      { numRuns: 150, seed: 4244 },
    );
  });
});
