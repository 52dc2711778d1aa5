import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Every operation in /openapi.json that takes a body, sent hostile bodies
 * (malformed JSON, the wrong JSON type, an empty object, fields of the wrong
 * type): the answer is a 2xx or a 4xx with the error shape, never a 5xx.
 * Requests carry a platform admin's token (SCIM routes: an organization's SCIM
 * token), so they get past authentication to validation and the handler.
 */
const HOSTILE = ['{', 'null', '[]', '"text"', '42', 'true', '{}', '{"__proto__":{"x":1}}', '{"email":1,"name":[],"url":{},"events":"x","owner_id":null,"ttl_seconds":"1e999"}'];

let t: TestNode;
let adminToken: string;
let scimToken: string;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: 'root@example.com', adminPassword: 'root-password-1' } });
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: 'root@example.com', password: 'root-password-1' } });
  adminToken = login.body.access_token;
  const org = await t.request('POST', '/api/v1/orgs', { token: adminToken, body: { name: 'Fuzz' } });
  scimToken = (await t.request('POST', `/api/v1/orgs/${org.body.org_id}/scim-tokens`, { token: adminToken, body: { name: 'fuzz' } })).body.token;
});

afterAll(async () => {
  await t?.destroy();
});

describe('bodies never give a 5xx', () => {
  it('sends hostile bodies to every operation with a request body in /openapi.json', async () => {
    const doc = (await t.request('GET', '/openapi.json')).body as { paths: Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } }>> };
    const failures: string[] = [];
    let sent = 0;
    for (const [template, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (!operation.requestBody) continue;
        const path = template.replace(/\{[^}]+\}/g, 'fuzz1');
        const token = path.startsWith('/scim/') ? scimToken : adminToken;
        const type = path.startsWith('/scim/') ? 'application/scim+json' : 'application/json';
        for (const body of HOSTILE) {
          const res = await t.request(method.toUpperCase(), path, { token, rawBody: body, headers: { 'content-type': type } });
          sent++;
          if (res.status >= 500) failures.push(`${method.toUpperCase()} ${path} ${body} -> ${res.status} ${res.text.slice(0, 160)}`);
          else if (res.status >= 400 && !path.startsWith('/scim/') && !path.startsWith('/oauth/') && typeof res.body?.code !== 'string') {
            failures.push(`${method.toUpperCase()} ${path} ${body} -> ${res.status} without the error shape: ${res.text.slice(0, 160)}`);
          }
        }
      }
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(200);
  }, 180_000);
});

describe('names of Object.prototype members never give a 5xx', () => {
  it('sends constructor, toString and __proto__ as every path parameter and every string field of every operation', async () => {
    type Operation = { requestBody?: { content?: Record<string, { schema?: { properties?: Record<string, { type?: unknown }> } }> } };
    const doc = (await t.request('GET', '/openapi.json')).body as { paths: Record<string, Record<string, Operation>> };
    const failures: string[] = [];
    let sent = 0;
    for (const [template, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const json = operation.requestBody?.content?.['application/json'] ?? operation.requestBody?.content?.['application/scim+json'];
        const fields = Object.entries(json?.schema?.properties ?? {}).filter(([, schema]) => schema.type === 'string').map(([name]) => name);
        if (!template.includes('{') && fields.length === 0) continue;
        for (const name of ['constructor', 'toString', '__proto__']) {
          const path = template.replace(/\{[^}]+\}/g, name);
          const token = path.startsWith('/scim/') ? scimToken : adminToken;
          const options = operation.requestBody ? { token, rawBody: JSON.stringify(Object.fromEntries(fields.map((field) => [field, name]))), headers: { 'content-type': path.startsWith('/scim/') ? 'application/scim+json' : 'application/json' } } : { token };
          const res = await t.request(method.toUpperCase(), path, options);
          sent++;
          if (res.status >= 500) failures.push(`${method.toUpperCase()} ${path} -> ${res.status} ${res.text.slice(0, 160)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(300);
  }, 180_000);
});
