import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { SCIM_CREATE_BURST, SCIM_DIRECTORY_KIND } from '../../actors/scim/messages.js';
import type { DomainResolver } from '../../http/domain-resolver.js';
import { newScimToken } from '../../http/scim/tokens.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/**
 * The identity hardening of SCIM over the real socket (docs/api/scim.md):
 * provisioning only in the organization's verified domains (the rule on, as
 * in production), the per-organization creation rate, token expiry, and
 * tokens that die with the session or API key that minted them.
 */
const ADMIN_EMAIL = 'scim-hardening-root@example.com';
const ADMIN_PASSWORD = 'admin password 123';
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
const DAY_MS = 86_400_000;

/** TXT records by name (absent: nothing found). */
class TableResolver implements DomainResolver {
  readonly records = new Map<string, string[][]>();
  async resolveTxt(name: string): Promise<string[][]> {
    return this.records.get(name) ?? [];
  }
}

let t: TestNode;
let dns: TableResolver;
let adminToken: string;

beforeAll(async () => {
  dns = new TableResolver();
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, scimVerifiedDomainsOnly: true }, domainResolver: dns });
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  expect(login.status, login.text).toBe(200);
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

function scim(method: string, path: string, token: string, body?: unknown): Promise<TestResponse> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/scim+json';
  return t.request(method, `/scim/v2${path}`, { token, headers, rawBody: body === undefined ? undefined : JSON.stringify(body) });
}

function expectScimError(res: TestResponse, status: number) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/scim\+json/);
  expect(res.body).toMatchObject({ schemas: [ERROR_SCHEMA], status: String(status), detail: expect.any(String) });
}

const user = (email: string) => ({ schemas: [USER_SCHEMA], userName: email, emails: [{ value: email, primary: true }] });

async function newOrg(token: string, name: string): Promise<string> {
  const res = await t.request('POST', '/api/v1/orgs', { token, body: { name } });
  expect(res.status, res.text).toBe(201);
  return res.body.org_id as string;
}

async function verifyDomain(token: string, org_id: string, domain: string): Promise<void> {
  const added = await t.request('POST', `/api/v1/orgs/${org_id}/domains`, { token, body: { domain } });
  expect(added.status, added.text).toBe(201);
  dns.records.set(added.body.verification.record_name, [[added.body.verification.record_value]]);
  const verified = await t.request('POST', `/api/v1/orgs/${org_id}/domains/${domain}/verify`, { token });
  expect(verified.status, verified.text).toBe(200);
}

async function mintToken(token: string, org_id: string, body: Record<string, unknown> = {}): Promise<TestResponse> {
  return t.request('POST', `/api/v1/orgs/${org_id}/scim-tokens`, { token, body });
}

async function scimToken(token: string, org_id: string): Promise<string> {
  const res = await mintToken(token, org_id);
  expect(res.status, res.text).toBe(201);
  return res.body.token as string;
}

let domainCounter = 0;
const freshDomain = (name: string) => `${name}${process.pid}x${++domainCounter}.example`;

describe('provisioning only in verified domains (SCIM_VERIFIED_DOMAINS_ONLY on)', () => {
  it('refuses to squat an address of an unverified domain (403, nothing created), so its owner can register; verified, it provisions', async () => {
    const bigcorp = freshDomain('bigcorp');
    const squatter = await t.newUser('squat');
    const org_id = await newOrg(squatter.token, 'Squatters');
    const token = await scimToken(squatter.token, org_id);

    const squat = await scim('POST', '/Users', token, user(`admin@${bigcorp}`));
    expectScimError(squat, 403);
    expect(squat.body.detail).toContain(bigcorp);
    expect((await scim('GET', '/Users', token)).body.totalResults).toBe(0);

    // The real owner of the address registers: nothing was created in their way.
    const owner = await t.request('POST', '/api/v1/auth/register', {
      body: { email: `admin@${bigcorp}`, username: `bigadmin${domainCounter}`, password: 'owner password 123', display_name: 'Big Admin' },
    });
    expect(owner.status, owner.text).toBe(201);

    // BigCorp's own organization verifies its domain and provisions its people.
    const bigOwner = await t.newUser('bigowner');
    const bigOrg = await newOrg(bigOwner.token, 'BigCorp');
    const bigToken = await scimToken(bigOwner.token, bigOrg);
    expectScimError(await scim('POST', '/Users', bigToken, user(`ops@${bigcorp}`)), 403);
    await verifyDomain(bigOwner.token, bigOrg, bigcorp);
    const created = await scim('POST', '/Users', bigToken, user(`Ops@${bigcorp.toUpperCase()}`));
    expect(created.status, created.text).toBe(201);
    // A subdomain is a domain of its own.
    expectScimError(await scim('POST', '/Users', bigToken, user(`eu@mail.${bigcorp}`)), 403);
    // The address that already has an account is still not taken over.
    const taken = await scim('POST', '/Users', bigToken, user(`admin@${bigcorp}`));
    expectScimError(taken, 409);
    expect(taken.body.scimType).toBe('uniqueness');
    // The squatter's organization still may not, now that another organization holds the domain.
    expectScimError(await scim('POST', '/Users', token, user(`ceo@${bigcorp}`)), 403);
  });
});

describe('the per-organization creation rate', () => {
  it(`lets a burst of ${SCIM_CREATE_BURST} creations through, then 429 with Retry-After in SCIM's format; reads go on`, async () => {
    const domain = freshDomain('burst');
    const owner = await t.newUser('burst');
    const org_id = await newOrg(owner.token, 'Burst');
    await verifyDomain(owner.token, org_id, domain);
    const token = await scimToken(owner.token, org_id);
    // The manual clock stands still: no token comes back during the burst.
    for (let batch = 0; batch < SCIM_CREATE_BURST; batch += 10) {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => scim('POST', '/Users', token, user(`u${batch + i}@${domain}`))));
      for (const res of results) expect(res.status, res.text).toBe(201);
    }
    const limited = await scim('POST', '/Users', token, user(`late@${domain}`));
    expectScimError(limited, 429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await scim('GET', '/Users?count=0', token)).body.totalResults).toBe(SCIM_CREATE_BURST);
    // Another organization is not slowed down.
    const otherDomain = freshDomain('other');
    const other = await t.newUser('other');
    const otherOrg = await newOrg(other.token, 'Other');
    await verifyDomain(other.token, otherOrg, otherDomain);
    expect((await scim('POST', '/Users', await scimToken(other.token, otherOrg), user(`a@${otherDomain}`))).status).toBe(201);
    // Once the bucket refills, creations go on.
    (t.clock as ManualClock).advance(Number(limited.headers.get('retry-after')) * 1000);
    expect((await scim('POST', '/Users', token, user(`late@${domain}`))).status).toBe(201);
  });
});

describe('SCIM tokens die with the credential that minted them', () => {
  it('a token minted by an API key stops when the key is deleted (and when it is revoked)', async () => {
    const owner = await t.newUser('keyowner');
    const org_id = await newOrg(owner.token, 'Keyed');
    const keys = await Promise.all([1, 2].map(async (n) => {
      const res = await t.request('POST', '/api/v1/auth/api-keys', { token: owner.token, body: { name: `k${n}`, scopes: ['*'] } });
      expect(res.status, res.text).toBe(201);
      return res.body as { api_key_id: string; key: string };
    }));
    const minted = await mintToken(keys[0].key, org_id);
    expect(minted.status, minted.text).toBe(201);
    expect(minted.body.minted_with).toBe('api_key');
    const revokedLater = await scimToken(keys[1].key, org_id);
    expect((await scim('GET', '/Users', minted.body.token)).status).toBe(200);
    expect((await scim('GET', '/Users', revokedLater)).status).toBe(200);

    expect((await t.request('DELETE', `/api/v1/auth/api-keys/${keys[0].api_key_id}`, { token: owner.token })).status).toBe(200);
    expectScimError(await scim('GET', '/Users', minted.body.token), 401);
    expectScimError(await scim('POST', '/Users', minted.body.token, user('x@example.com')), 401);

    expect((await t.request('PATCH', `/api/v1/auth/api-keys/${keys[1].api_key_id}`, { token: owner.token, body: { revoked: true } })).status).toBe(200);
    expectScimError(await scim('GET', '/Users', revokedLater), 401);
    // Still listed (the list does not check credentials): revoke it to tidy up.
    const listed = await t.request('GET', `/api/v1/orgs/${org_id}/scim-tokens`, { token: owner.token });
    expect(listed.body.tokens.map((x: { id: string }) => x.id)).toContain(minted.body.id);
  });

  it('a token minted by a session stops when that session logs out; other sessions do not matter', async () => {
    const owner = await t.newUser('sesowner');
    const org_id = await newOrg(owner.token, 'Sessions');
    const second = await t.request('POST', '/api/v1/auth/login', { body: { login: owner.username, password: owner.password } });
    expect(second.status, second.text).toBe(200);
    const minted = await mintToken(second.body.access_token, org_id);
    expect(minted.body.minted_with).toBe('session');
    const fromFirst = await scimToken(owner.token, org_id);
    // Twice: the second check comes from this node's session cache.
    expect((await scim('GET', '/Users', minted.body.token)).status).toBe(200);
    expect((await scim('GET', '/Users', minted.body.token)).status).toBe(200);
    expect((await t.request('POST', '/api/v1/auth/logout', { token: second.body.access_token })).status).toBe(200);
    const refused = await scim('GET', '/Users', minted.body.token);
    expectScimError(refused, 401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="scim"');
    expect((await scim('GET', '/Users', fromFirst)).status).toBe(200);
  });

  it('every token of a banned owner stops at once, whatever minted it', async () => {
    const owner = await t.newUser('banowner');
    const org_id = await newOrg(owner.token, 'Banned');
    const key = await t.request('POST', '/api/v1/auth/api-keys', { token: owner.token, body: { name: 'k', scopes: ['*'] } });
    const bySession = await scimToken(owner.token, org_id);
    const byKey = await scimToken(key.body.key, org_id);
    expect((await scim('GET', '/Users', bySession)).status).toBe(200);
    expect((await scim('GET', '/Users', byKey)).status).toBe(200);
    const banned = await t.request('POST', `/admin/auth/users/${owner.user_id}/ban`, { token: adminToken, body: { reason: 'squatting' } });
    expect(banned.status, banned.text).toBe(200);
    expectScimError(await scim('GET', '/Users', bySession), 401);
    expectScimError(await scim('GET', '/Users', byKey), 401);
  });

  it('a token issued before tokens recorded their credential (no expiry) is refused', async () => {
    const owner = await t.newUser('legacy');
    const org_id = await newOrg(owner.token, 'Legacy');
    const fresh = newScimToken(org_id);
    // As stored before this change: no minted_by, no expiry.
    await t.node.services.actors.ask(SCIM_DIRECTORY_KIND, org_id, {
      op: 'token-create', token_id: fresh.token_id, name: 'Old', secret_hash: fresh.secret_hash, created_by: owner.user_id, expires_at_ms: null,
    } as never);
    const listed = await t.request('GET', `/api/v1/orgs/${org_id}/scim-tokens`, { token: owner.token });
    expect(listed.body.tokens).toEqual([expect.objectContaining({ id: fresh.token_id, expires_at: null, minted_with: null })]);
    const refused = await scim('GET', '/Users', fresh.token);
    expectScimError(refused, 401);
    expect(refused.body.detail).toMatch(/issue a new one/);
  });
});

describe('SCIM token expiry', () => {
  it(`defaults to 90 days (absent or null), allows 1 to 365, refuses more; an expired token is 401`, async () => {
    const owner = await t.newUser('expiry');
    const org_id = await newOrg(owner.token, 'Expiry');
    const lifetime = (res: TestResponse) => new Date(res.body.expires_at).getTime() - new Date(res.body.created_at).getTime();
    const absent = await mintToken(owner.token, org_id);
    expect(absent.status, absent.text).toBe(201);
    expect(lifetime(absent)).toBe(90 * DAY_MS);
    const nulled = await mintToken(owner.token, org_id, { expires_in_days: null });
    expect(nulled.status, nulled.text).toBe(201);
    expect(lifetime(nulled)).toBe(90 * DAY_MS);
    const longest = await mintToken(owner.token, org_id, { expires_in_days: 365 });
    expect(longest.status, longest.text).toBe(201);
    expect(lifetime(longest)).toBe(365 * DAY_MS);
    const tooLong = await mintToken(owner.token, org_id, { expires_in_days: 366 });
    expect(tooLong.status, tooLong.text).toBe(400);
    expect(tooLong.body.code).toBe('BAD_REQUEST');
    const short = await mintToken(owner.token, org_id, { expires_in_days: 1 });
    expect((await scim('GET', '/Users', short.body.token)).status).toBe(200);

    // A day later (the session that minted them is still live: the refresh-token session lasts 30 days).
    (t.clock as ManualClock).advance(DAY_MS);
    expectScimError(await scim('GET', '/Users', short.body.token), 401);
    expect((await scim('GET', '/Users', absent.body.token)).status).toBe(200);
  });
});
