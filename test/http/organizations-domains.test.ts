import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import type { DomainResolver } from '../../http/domain-resolver.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** Verified domains of an organization over the real socket (docs/api/organizations.md, "Verified domains"), with DNS from a table. */
const ADMIN_EMAIL = 'domains-root@example.com';
const ADMIN_PASSWORD = 'admin password 123';

/** TXT records by name; a name that is absent is NXDOMAIN (the resolver's answer: []). */
class TableResolver implements DomainResolver {
  readonly records = new Map<string, string[][]>();
  readonly lookups: string[] = [];
  async resolveTxt(name: string): Promise<string[][]> {
    this.lookups.push(name);
    return this.records.get(name) ?? [];
  }
  publish(name: string, value: string): void {
    this.records.set(name, [...(this.records.get(name) ?? []), [value]]);
  }
}

let t: TestNode;
let dns: TableResolver;
let adminToken: string;

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, message: expect.any(String) });
}

beforeAll(async () => {
  dns = new TableResolver();
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD }, domainResolver: dns });
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  expect(res.status, res.text).toBe(200);
  adminToken = res.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

const as = (token: string) => (method: string, path: string, body?: unknown) => t.request(method, path, { token, body });

async function newOrg(token: string, name: string) {
  const res = await t.request('POST', '/api/v1/orgs', { token, body: { name } });
  expect(res.status, res.text).toBe(201);
  return res.body.org_id as string;
}

let domainCounter = 0;
const freshDomain = () => `d${process.pid}-${++domainCounter}.example.com`;

describe('verified domains', () => {
  it('add (201, pending, the TXT record), add again (200, same record), list for members', async () => {
    const owner = await t.newUser('dom');
    const member = await t.newUser('dom');
    const org_id = await newOrg(owner.token, 'Domains One');
    const added = await as(adminToken)('POST', `/admin/auth/org/${org_id}/members`, { user_id: member.user_id, role: 'member' });
    expect(added.status, added.text).toBe(201);

    const domain = freshDomain();
    const res = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain: domain.toUpperCase() });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      domain,
      status: 'pending',
      verification: { method: 'dns_txt', record_name: `_platform-verification.${domain}`, record_value: expect.stringMatching(/^platform-verification=[0-9a-f]{32}$/) },
      created_at: expect.any(String),
      verified_at: null,
    });
    const again = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain });
    expect(again.status, again.text).toBe(200);
    expect(again.body).toEqual(res.body);

    const listed = await as(member.token)('GET', `/api/v1/orgs/${org_id}/domains`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body).toEqual({ domains: [res.body] });
    // Members do not manage domains; strangers do not see the organization.
    expectError(await as(member.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain: freshDomain() }), 403, 'forbidden');
    expectError(await as(member.token)('POST', `/api/v1/orgs/${org_id}/domains/${domain}/verify`), 403, 'forbidden');
    expectError(await as(member.token)('DELETE', `/api/v1/orgs/${org_id}/domains/${domain}`), 403, 'forbidden');
    const stranger = await t.newUser('dom');
    expectError(await as(stranger.token)('GET', `/api/v1/orgs/${org_id}/domains`), 404, 'not_found');
    expectError(await as(stranger.token)('POST', `/api/v1/orgs/${org_id}/domains/${domain}/verify`), 404, 'not_found');
    // Neither made a DNS query.
    expect(dns.lookups).not.toContain(`_platform-verification.${domain}`);
  });

  it('refuses what is not a domain with 400', async () => {
    const owner = await t.newUser('dom');
    const org_id = await newOrg(owner.token, 'Domains Two');
    for (const domain of ['localhost', 'example.com.', '192.168.0.1', '2001:db8::1', 'bücher.example', 'a_b.example', `${'a'.repeat(64)}.com`, '']) {
      const res = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain });
      expectError(res, 400, 'BAD_REQUEST');
    }
    const ok = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain: 'xn--bcher-kva.example' });
    expect(ok.status, ok.text).toBe(201);
  });

  it('verify: no record is 409 domain_not_verified naming the record; the record makes it verified', async () => {
    const owner = await t.newUser('dom');
    const org_id = await newOrg(owner.token, 'Domains Three');
    const domain = freshDomain();
    const added = (await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain })).body;
    const { record_name, record_value } = added.verification;

    const missing = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains/${domain}/verify`);
    expectError(missing, 409, 'domain_not_verified');
    expect(missing.body.details).toEqual({ method: 'dns_txt', record_name, record_value, found: [] });
    expect(dns.lookups).toContain(record_name);

    dns.publish(record_name, 'platform-verification=something-else');
    const wrong = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains/${domain}/verify`);
    expectError(wrong, 409, 'domain_not_verified');
    expect(wrong.body.details.found).toEqual(['platform-verification=something-else']);
    expect((await as(owner.token)('GET', `/api/v1/orgs/${org_id}/domains`)).body.domains[0].status).toBe('pending');

    dns.publish(record_name, record_value);
    const ok = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains/${domain.toUpperCase()}/verify`);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toMatchObject({ domain, status: 'verified', verified_at: expect.any(String) });
    expect((await as(owner.token)('GET', `/api/v1/orgs/${org_id}/domains`)).body.domains).toEqual([ok.body]);
    // The op other areas use.
    expect(await t.node.services.actors.ask(ORGANIZATION_KIND, org_id, { op: 'domain_verified', domain }, { readOnly: true })).toEqual({ verified: true });
    // Verifying again is a no-op answer.
    const again = await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains/${domain}/verify`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(ok.body);
    // An unknown domain is 404.
    expectError(await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains/unknown.example/verify`), 404, 'not_found');
  });

  it('one organization per domain: 409 domain_taken, then free again after the first removes it', async () => {
    const first = await t.newUser('dom');
    const second = await t.newUser('dom');
    const org1 = await newOrg(first.token, 'Domains Four');
    const org2 = await newOrg(second.token, 'Domains Five');
    const domain = freshDomain();
    const a = (await as(first.token)('POST', `/api/v1/orgs/${org1}/domains`, { domain })).body;
    const b = (await as(second.token)('POST', `/api/v1/orgs/${org2}/domains`, { domain })).body;
    expect(a.verification.record_value).not.toBe(b.verification.record_value);
    dns.publish(a.verification.record_name, a.verification.record_value);
    dns.publish(b.verification.record_name, b.verification.record_value);

    expect((await as(first.token)('POST', `/api/v1/orgs/${org1}/domains/${domain}/verify`)).status).toBe(200);
    expectError(await as(second.token)('POST', `/api/v1/orgs/${org2}/domains/${domain}/verify`), 409, 'domain_taken');

    const removed = await as(first.token)('DELETE', `/api/v1/orgs/${org1}/domains/${domain}`);
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body).toEqual({ message: expect.any(String) });
    expect((await as(first.token)('GET', `/api/v1/orgs/${org1}/domains`)).body.domains).toEqual([]);
    expectError(await as(first.token)('DELETE', `/api/v1/orgs/${org1}/domains/${domain}`), 404, 'not_found');

    const now = await as(second.token)('POST', `/api/v1/orgs/${org2}/domains/${domain}/verify`);
    expect(now.status, now.text).toBe(200);
    expect(now.body.status).toBe('verified');
  });

  it('deleting the organization releases its domains', async () => {
    const first = await t.newUser('dom');
    const second = await t.newUser('dom');
    const org1 = await newOrg(first.token, 'Domains Six');
    const org2 = await newOrg(second.token, 'Domains Seven');
    const domain = freshDomain();
    const a = (await as(first.token)('POST', `/api/v1/orgs/${org1}/domains`, { domain })).body;
    dns.publish(a.verification.record_name, a.verification.record_value);
    expect((await as(first.token)('POST', `/api/v1/orgs/${org1}/domains/${domain}/verify`)).status).toBe(200);
    expect((await as(first.token)('DELETE', `/api/v1/orgs/${org1}`)).status).toBe(200);

    const b = (await as(second.token)('POST', `/api/v1/orgs/${org2}/domains`, { domain })).body;
    dns.publish(b.verification.record_name, b.verification.record_value);
    const ok = await as(second.token)('POST', `/api/v1/orgs/${org2}/domains/${domain}/verify`);
    expect(ok.status, ok.text).toBe(200);
    expect(await t.node.services.actors.ask(ORGANIZATION_KIND, org1, { op: 'domain_verified', domain }, { readOnly: true })).toEqual({ verified: false });
  });

  it('at most 20 domains (409 conflict); platform admins manage through /admin/auth/org/{id}/domains', async () => {
    const owner = await t.newUser('dom');
    const org_id = await newOrg(owner.token, 'Domains Eight');
    for (let i = 0; i < 20; i++) {
      const res = await as(adminToken)('POST', `/admin/auth/org/${org_id}/domains`, { domain: `n${i}.${freshDomain()}` });
      expect(res.status, res.text).toBe(201);
    }
    expectError(await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain: freshDomain() }), 409, 'conflict');
    const listed = await as(adminToken)('GET', `/admin/auth/org/${org_id}/domains`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.domains).toHaveLength(20);
    const domain = listed.body.domains[0].domain;
    dns.publish(listed.body.domains[0].verification.record_name, listed.body.domains[0].verification.record_value);
    const verified = await as(adminToken)('POST', `/admin/auth/org/${org_id}/domains/${domain}/verify`);
    expect(verified.status, verified.text).toBe(200);
    expect(verified.body.status).toBe('verified');
    expect((await as(adminToken)('DELETE', `/admin/auth/org/${org_id}/domains/${domain}`)).status).toBe(200);
    expect((await as(owner.token)('POST', `/api/v1/orgs/${org_id}/domains`, { domain: freshDomain() })).status).toBe(201);
    // Not for users without the platform role.
    expectError(await as(owner.token)('GET', `/admin/auth/org/${org_id}/domains`), 403, 'forbidden');
  });
});
