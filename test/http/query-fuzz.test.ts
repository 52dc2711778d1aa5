import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Every query parameter of every operation in /openapi.json, sent with
 * hostile numbers (non-finite, exponent, negative, fractional, huge): the
 * answer is a 2xx or a 4xx with the error shape, never a 5xx. Requests carry
 * a platform admin's token (SCIM routes: an organization's SCIM token), so
 * they get past authentication to validation and the handler.
 */
const HOSTILE = ['Infinity', '-Infinity', 'NaN', '1e999', '-1e999', '1e3', '1e20', '-1', '0', '1.5', '-0.5', '99999999999999999999', '9007199254740993', '0x10', '', ' '];

interface Operation {
  method: string;
  path: string;
  query: { name: string }[];
}

let t: TestNode;
let adminToken: string;
let scimToken: string;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: 'root@example.com', adminPassword: 'root-password-1' } });
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: 'root@example.com', password: 'root-password-1' } });
  adminToken = login.body.access_token;
  const org = await t.request('POST', '/api/v1/orgs', { token: adminToken, body: { name: 'Fuzz' } });
  const minted = await t.request('POST', `/api/v1/orgs/${org.body.org_id}/scim-tokens`, { token: adminToken, body: { name: 'fuzz' } });
  scimToken = minted.body.token;
});

afterAll(async () => {
  await t?.destroy();
});

async function operations(): Promise<Operation[]> {
  const doc = (await t.request('GET', '/openapi.json')).body as { paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>> };
  const found: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const query = (operation.parameters ?? []).filter((p) => p.in === 'query');
      if (query.length > 0) found.push({ method: method.toUpperCase(), path, query });
    }
  }
  return found;
}

describe('query parameters never give a 5xx', () => {
  it('sends hostile numbers to every query parameter in /openapi.json', async () => {
    const ops = await operations();
    expect(ops.length).toBeGreaterThan(10);
    const failures: string[] = [];
    let sent = 0;
    for (const op of ops) {
      const path = op.path.replace(/\{[^}]+\}/g, 'fuzz1');
      const token = path.startsWith('/scim/') ? scimToken : adminToken;
      for (const param of op.query) {
        for (const value of HOSTILE) {
          const url = `${path}?${encodeURIComponent(param.name)}=${encodeURIComponent(value)}`;
          const body = op.method === 'POST' || op.method === 'PUT' || op.method === 'PATCH' ? {} : undefined;
          const res = await t.request(op.method, url, { token, body });
          sent++;
          if (res.status >= 500) failures.push(`${op.method} ${url} -> ${res.status} ${res.text.slice(0, 160)}`);
          else if (res.status >= 400 && path.startsWith('/api/') && typeof res.body?.code !== 'string') failures.push(`${op.method} ${url} -> ${res.status} without code: ${res.text.slice(0, 160)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(100);
  }, 120_000);

  it('answers page=Infinity with 400 naming the parameter, and a huge finite page with an empty page', async () => {
    const bad = await t.request('GET', '/api/v1/auth/api-keys?page=Infinity', { token: adminToken });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('BAD_REQUEST');
    expect(JSON.stringify(bad.body)).toContain('page');
    const huge = await t.request('GET', '/api/v1/auth/api-keys?page=9007199254740991', { token: adminToken });
    expect(huge.status).toBe(200);
    expect(huge.body.pagination.page).toBe(9007199254740991);
    expect(huge.body.pagination.has_more).toBe(false);
  });
});
