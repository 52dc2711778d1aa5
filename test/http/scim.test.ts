import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomId } from '../../runtime/index.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { UNUSABLE_PASSWORD_HASH } from '../../http/auth/passwords.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/**
 * SCIM 2.0 driven as Okta and Azure AD drive it: discovery, create, read,
 * filter, paging, PATCH (deactivate, displayName), PUT, DELETE, with an
 * organization-scoped provisioning token.
 */
const ADMIN_EMAIL = 'scim-admin@example.com';
const ADMIN_PASSWORD = 'admin password 123';
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
const PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

let t: TestNode;
let adminToken: string;
let owner: Awaited<ReturnType<TestNode['newUser']>>;
let orgA: string;
let orgB: string;
let tokenA: string;
let tokenB: string;

async function createOrg(name: string, created_by: string): Promise<string> {
  const org_id = randomId('org_');
  await t.node.services.actors.ask(ORGANIZATION_KIND, org_id, { op: 'create', org_id, name, slug: `${name}-${org_id.slice(4, 12)}`.toLowerCase().replace(/[^a-z0-9-]/g, ''), created_by });
  return org_id;
}

/** A SCIM request with the SCIM media type. */
function scim(method: string, path: string, token: string | undefined, body?: unknown): Promise<TestResponse> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/scim+json';
  return t.request(method, `/scim/v2${path}`, { token, headers, rawBody: body === undefined ? undefined : JSON.stringify(body) });
}

function expectScimError(res: TestResponse, status: number, scimType?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/scim\+json/);
  expect(res.body.schemas).toEqual([ERROR_SCHEMA]);
  expect(res.body.status).toBe(String(status));
  expect(typeof res.body.detail).toBe('string');
  if (scimType) expect(res.body.scimType).toBe(scimType);
}

let counter = 0;
function oktaUser(overrides: Record<string, unknown> = {}) {
  const n = `${Date.now().toString(36)}${++counter}`;
  return {
    schemas: [USER_SCHEMA],
    userName: `user${n}@acme.example`,
    name: { givenName: 'Ada', familyName: `Lovelace${n}` },
    emails: [{ primary: true, value: `user${n}@acme.example`, type: 'work' }],
    displayName: `Ada Lovelace ${n}`,
    locale: 'en-US',
    externalId: `00u${n}`,
    groups: [],
    password: 'ignored-Secret-1',
    active: true,
    'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { department: 'R&D' },
    ...overrides,
  };
}

/** Admin-only view of the platform user behind a SCIM user (found by e-mail). */
async function platformUser(email: string) {
  const res = await t.request('GET', `/admin/auth/users?q=${encodeURIComponent(email)}`, { token: adminToken });
  expect(res.status).toBe(200);
  return res.body.users.find((u: { email: string }) => u.email === email) ?? null;
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  adminToken = await t.loginAdmin();
  owner = await t.newUser('scimowner');
  orgA = await createOrg('Acme', owner.user_id);
  orgB = await createOrg('Globex', owner.user_id);
  const a = await t.request('POST', `/api/v1/orgs/${orgA}/scim-tokens`, { token: owner.token, body: { name: 'Okta' } });
  expect(a.status).toBe(201);
  tokenA = a.body.token;
  const b = await t.request('POST', `/api/v1/orgs/${orgB}/scim-tokens`, { token: owner.token, body: {} });
  expect(b.status).toBe(201);
  tokenB = b.body.token;
});
afterAll(async () => t.destroy());

describe('SCIM provisioning tokens', () => {
  it('are issued once by an org owner or admin, listed without secrets, and revoked at once', async () => {
    const created = await t.request('POST', `/api/v1/orgs/${orgA}/scim-tokens`, { token: owner.token, body: { name: 'Azure AD', expires_in_days: 30 } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: expect.any(String), name: 'Azure AD', org_id: orgA, created_by: owner.user_id, token: expect.stringMatching(/^scim_/) });
    expect(new Date(created.body.expires_at).getTime() - new Date(created.body.created_at).getTime()).toBe(30 * 86_400_000);

    const listed = await t.request('GET', `/api/v1/orgs/${orgA}/scim-tokens`, { token: owner.token });
    expect(listed.status).toBe(200);
    expect(listed.body.tokens.map((x: { id: string }) => x.id)).toContain(created.body.id);
    expect(listed.text).not.toContain(created.body.token);
    // Every token expires: without expires_in_days, after 90 days (test/http/scim-hardening.test.ts has the rules).
    const okta = listed.body.tokens.find((x: { name: string }) => x.name === 'Okta');
    expect(new Date(okta.expires_at).getTime() - new Date(okta.created_at).getTime()).toBe(90 * 86_400_000);
    expect(okta.minted_with).toBe('session');

    expect((await scim('GET', '/Users', created.body.token)).status).toBe(200);
    const revoked = await t.request('DELETE', `/api/v1/orgs/${orgA}/scim-tokens/${created.body.id}`, { token: owner.token });
    expect(revoked.status).toBe(200);
    expectScimError(await scim('GET', '/Users', created.body.token), 401);
    expect((await t.request('DELETE', `/api/v1/orgs/${orgA}/scim-tokens/${created.body.id}`, { token: owner.token })).status).toBe(404);
  });

  it('refuse members (403), strangers and unknown orgs (404); platform admins may issue', async () => {
    const member = await t.newUser('scimmember');
    await t.node.services.actors.ask(ORGANIZATION_KIND, orgA, { op: 'add_member', user_id: member.user_id, role: 'member' });
    const asMember = await t.request('POST', `/api/v1/orgs/${orgA}/scim-tokens`, { token: member.token, body: {} });
    expect(asMember.status).toBe(403);
    expect(asMember.body.code).toBe('forbidden');
    const stranger = await t.newUser('scimstranger');
    expect((await t.request('GET', `/api/v1/orgs/${orgA}/scim-tokens`, { token: stranger.token })).status).toBe(404);
    expect((await t.request('POST', '/api/v1/orgs/org_nope/scim-tokens', { token: owner.token, body: {} })).status).toBe(404);
    expect((await t.request('GET', `/api/v1/orgs/${orgA}/scim-tokens`)).status).toBe(401);
    const byAdmin = await t.request('POST', `/api/v1/orgs/${orgB}/scim-tokens`, { token: adminToken, body: { name: 'by admin' } });
    expect(byAdmin.status).toBe(201);
    const bad = await t.request('POST', `/api/v1/orgs/${orgA}/scim-tokens`, { token: owner.token, body: { expires_in_days: 0 } });
    expect(bad.status).toBe(400);
  });
});

describe('SCIM discovery', () => {
  it('declares only what is built, without a bearer', async () => {
    const spc = await scim('GET', '/ServiceProviderConfig', undefined);
    expect(spc.status).toBe(200);
    expect(spc.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    expect(spc.body).toMatchObject({
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
      patch: { supported: true },
      bulk: { supported: false },
      filter: { supported: true, maxResults: 200 },
      changePassword: { supported: false },
      sort: { supported: false },
      etag: { supported: false },
      authenticationSchemes: [expect.objectContaining({ type: 'oauthbearertoken' })],
    });

    const types = await scim('GET', '/ResourceTypes', undefined);
    expect(types.status).toBe(200);
    expect(types.body.totalResults).toBe(1);
    expect(types.body.Resources[0]).toMatchObject({ id: 'User', endpoint: '/Users', schema: USER_SCHEMA });
    expect((await scim('GET', '/ResourceTypes/User', undefined)).body.id).toBe('User');
    expectScimError(await scim('GET', '/ResourceTypes/Group', undefined), 404);

    const schemas = await scim('GET', '/Schemas', undefined);
    expect(schemas.status).toBe(200);
    expect(schemas.body.Resources).toHaveLength(1);
    const names = schemas.body.Resources[0].attributes.map((a: { name: string }) => a.name);
    expect(names.sort()).toEqual(['active', 'displayName', 'emails', 'externalId', 'name', 'userName']);
    expect((await scim('GET', `/Schemas/${USER_SCHEMA}`, undefined)).body.id).toBe(USER_SCHEMA);
  });

  it('answers an unknown SCIM path with a plain-text 404', async () => {
    const res = await scim('GET', '/Groups', tokenA);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe('Not Found');
  });
});

describe('SCIM Users', () => {
  it('provisions a user as Okta does: platform account, org membership, unknown attributes ignored', async () => {
    const body = oktaUser();
    const created = await scim('POST', '/Users', tokenA, body);
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    expect(created.body).toEqual({
      schemas: [USER_SCHEMA],
      id: expect.stringMatching(/^scim_/),
      externalId: body.externalId,
      userName: body.userName,
      displayName: body.displayName,
      name: body.name,
      emails: body.emails,
      active: true,
      meta: { resourceType: 'User', created: expect.any(String), lastModified: expect.any(String), location: `${t.url}/scim/v2/Users/${created.body.id}` },
    });
    expect(created.headers.get('location')).toBe(created.body.meta.location);
    expect(created.text).not.toContain('ignored-Secret-1');

    const platform = await platformUser(body.emails[0].value);
    expect(platform).toMatchObject({ display_name: body.displayName, banned: false, role: 'user' });
    const member = await t.node.services.actors.ask<{ role: string }>(ORGANIZATION_KIND, orgA, { op: 'get_member', user_id: platform.id });
    expect(member.role).toBe('member');
    // The IdP's password is not used: the account has no usable password (a marker, no KDF run at
    // provisioning), and a login against it is the same 401 as for an unknown login.
    const credentials = await t.node.services.actors.ask<{ password_hash: string }>(USER_KIND, platform.id, { op: 'credentials' });
    expect(credentials.password_hash).toBe(UNUSABLE_PASSWORD_HASH);
    for (const password of [body.password, UNUSABLE_PASSWORD_HASH]) {
      const login = await t.request('POST', '/api/v1/auth/login', { body: { login: body.userName, password } });
      expect(login.status).toBe(401);
      const unknown = await t.request('POST', '/api/v1/auth/login', { body: { login: `nobody-${randomId()}@acme.example`, password } });
      expect(login.body).toEqual(unknown.body);
    }

    const got = await scim('GET', `/Users/${created.body.id}`, tokenA);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created.body);
  });

  it('accepts application/json too, and needs only userName (an e-mail address)', async () => {
    const res = await t.request('POST', '/scim/v2/Users', { token: tokenA, body: { userName: `plain${Date.now()}@acme.example` } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.emails).toEqual([]);
    expect(res.body).not.toHaveProperty('displayName');
    expect(res.body.active).toBe(true);
  });

  it('refuses a duplicate userName (case-insensitively) and an e-mail that has a platform account with 409 uniqueness', async () => {
    const body = oktaUser();
    expect((await scim('POST', '/Users', tokenA, body)).status).toBe(201);
    expectScimError(await scim('POST', '/Users', tokenA, oktaUser({ userName: body.userName.toUpperCase() })), 409, 'uniqueness');
    const existing = await t.newUser('scimexisting');
    expectScimError(await scim('POST', '/Users', tokenA, oktaUser({ emails: [{ value: existing.email, primary: true }] })), 409, 'uniqueness');
    // Nothing half-made stays behind: the userName of the refused create is free.
    const retry = oktaUser();
    const blocked = oktaUser({ userName: retry.userName, emails: [{ value: existing.email, primary: true }] });
    expectScimError(await scim('POST', '/Users', tokenA, blocked), 409, 'uniqueness');
    expect((await scim('POST', '/Users', tokenA, retry)).status).toBe(201);
  });

  it('refuses invalid bodies with SCIM errors', async () => {
    expectScimError(await scim('POST', '/Users', tokenA, { name: { givenName: 'x' } }), 400, 'invalidValue');
    expectScimError(await scim('POST', '/Users', tokenA, { userName: 42 }), 400, 'invalidValue');
    expectScimError(await scim('POST', '/Users', tokenA, { userName: 'no-email-here' }), 400, 'invalidValue');
    expectScimError(await scim('POST', '/Users', tokenA, { userName: 'x@acme.example', emails: 'x' }), 400, 'invalidValue');
    expectScimError(await scim('POST', '/Users', tokenA, { userName: 'y@acme.example', active: 'maybe' }), 400, 'invalidValue');
    const malformed = await t.request('POST', '/scim/v2/Users', { token: tokenA, rawBody: '{"userName":', headers: { 'content-type': 'application/scim+json' } });
    expectScimError(malformed, 400);
    const wrongType = await t.request('POST', '/scim/v2/Users', { token: tokenA, rawBody: 'userName=x', headers: { 'content-type': 'text/plain' } });
    expectScimError(wrongType, 415);
  });

  it('filters with userName eq (case-insensitive), co, sw, and/or, and refuses invalid filters', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const q = (filter: string) => scim('GET', `/Users?filter=${encodeURIComponent(filter)}`, tokenA);

    const eq = await q(`userName eq "${body.userName.toUpperCase()}"`);
    expect(eq.status).toBe(200);
    expect(eq.body).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'], totalResults: 1, startIndex: 1, itemsPerPage: 1 });
    expect(eq.body.Resources[0]).toEqual(created);
    // Okta's existence check for a user that is not there.
    expect((await q('userName eq "nobody@acme.example"')).body).toMatchObject({ totalResults: 0, Resources: [] });
    expect((await q(`externalId eq "${body.externalId}"`)).body.totalResults).toBe(1);
    expect((await q(`emails.value eq "${body.emails[0].value}"`)).body.totalResults).toBe(1);
    expect((await q(`userName sw "${body.userName.split('@')[0]}@" and active eq true`)).body.totalResults).toBe(1);
    expect((await q(`userName eq "nobody" or externalId eq "${body.externalId}"`)).body.totalResults).toBe(1);
    expect((await q(`displayName co "${body.displayName.slice(-6)}" and not (active eq true)`)).body.totalResults).toBe(0);

    expectScimError(await q('userName eq'), 400, 'invalidFilter');
    expectScimError(await q('nickName eq "x"'), 400, 'invalidFilter');
    expectScimError(await q('emails[type eq "work"]'), 400, 'invalidFilter');
    // Past the parser's 1,000 characters: a filter problem, as RFC 7644 names it.
    expectScimError(await q(`userName eq "${'x'.repeat(1_000)}"`), 400, 'invalidFilter');
  });

  it('pages with startIndex and count', async () => {
    const page = async (query: string) => (await scim('GET', `/Users?filter=${encodeURIComponent('userName sw "page"')}&${query}`, tokenA)).body;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await scim('POST', '/Users', tokenA, oktaUser({ userName: `page${i}-${Date.now()}@acme.example` }))).body.id);
    expect(await page('startIndex=2&count=2')).toMatchObject({ totalResults: 4, startIndex: 2, itemsPerPage: 2 });
    expect((await page('startIndex=2&count=2')).Resources.map((r: { id: string }) => r.id)).toEqual(ids.slice(1, 3));
    expect((await page('startIndex=4&count=10')).Resources.map((r: { id: string }) => r.id)).toEqual([ids[3]]);
    expect(await page('startIndex=9')).toMatchObject({ totalResults: 4, itemsPerPage: 0, Resources: [] });
    expect(await page('count=0')).toMatchObject({ totalResults: 4, itemsPerPage: 0, Resources: [] });
    expect(await page('startIndex=0&count=1')).toMatchObject({ startIndex: 1, itemsPerPage: 1 });
    expect(await page('startIndex=-5&count=-1')).toMatchObject({ startIndex: 1, itemsPerPage: 0, totalResults: 4 });
    expect((await page('count=1000')).itemsPerPage).toBe(4);
    expectScimError(await scim('GET', '/Users?count=abc', tokenA), 400);
  });

  it('PATCH deactivate (Okta form) cuts off the user at once; reactivation is refused', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const platform = await platformUser(body.emails[0].value);
    // A live access token of the user (an admin impersonation gives one).
    const session = await t.request('POST', `/admin/auth/users/${platform.id}/impersonate`, { token: adminToken });
    expect(session.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: session.body.access_token })).status).toBe(200);

    const patched = await scim('PATCH', `/Users/${created.id}`, tokenA, { schemas: [PATCH_SCHEMA], Operations: [{ op: 'replace', value: { active: false } }] });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.active).toBe(false);
    expect(new Date(patched.body.meta.lastModified).getTime()).toBeGreaterThanOrEqual(new Date(created.meta.lastModified).getTime());

    expect((await t.request('GET', '/api/v1/auth/me', { token: session.body.access_token })).status).toBe(401);
    expect((await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: session.body.refresh_token } })).status).toBe(401);
    const detail = await t.request('GET', `/admin/auth/users/${platform.id}`, { token: adminToken });
    expect(detail.body.user.banned).toBe(true);
    expect(detail.body.ban.reason).toBe('deactivated by SCIM');
    expect((await scim('GET', `/Users/${created.id}`, tokenA)).body.active).toBe(false);
    expect((await scim('GET', `/Users?filter=${encodeURIComponent(`userName eq "${body.userName}" and active eq false`)}`, tokenA)).body.totalResults).toBe(1);

    // Deactivating again is harmless; reactivating is refused.
    expect((await scim('PATCH', `/Users/${created.id}`, tokenA, { Operations: [{ op: 'replace', path: 'active', value: false }] })).status).toBe(200);
    expectScimError(await scim('PATCH', `/Users/${created.id}`, tokenA, { Operations: [{ op: 'replace', path: 'active', value: true }] }), 400, 'mutability');
  });

  it('PATCH deactivate and displayName the Azure AD way (Replace, string booleans, path)', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const renamed = await scim('PATCH', `/Users/${created.id}`, tokenA, {
      schemas: [PATCH_SCHEMA],
      Operations: [{ op: 'Replace', path: 'displayName', value: 'Countess of Lovelace' }],
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.displayName).toBe('Countess of Lovelace');
    expect((await platformUser(body.emails[0].value)).display_name).toBe('Countess of Lovelace');

    const off = await scim('PATCH', `/Users/${created.id}`, tokenA, { schemas: [PATCH_SCHEMA], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] });
    expect(off.status).toBe(200);
    expect(off.body.active).toBe(false);
    expect((await platformUser(body.emails[0].value)).banned).toBe(true);

    // Created inactive: provisioned, but cut off from the start.
    const inactive = oktaUser({ active: 'False' });
    const createdOff = await scim('POST', '/Users', tokenA, inactive);
    expect(createdOff.status).toBe(201);
    expect(createdOff.body.active).toBe(false);
    expect((await platformUser(inactive.emails[0].value)).banned).toBe(true);
  });

  it('PATCH refuses every other operation and applies nothing', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const patch = (ops: unknown[]) => scim('PATCH', `/Users/${created.id}`, tokenA, { schemas: [PATCH_SCHEMA], Operations: ops });
    expectScimError(await patch([{ op: 'replace', path: 'displayName', value: 'Changed' }, { op: 'replace', path: 'userName', value: 'x@y.z' }]), 400, 'mutability');
    expectScimError(await patch([{ op: 'remove', path: 'displayName' }]), 400, 'mutability');
    expectScimError(await patch([{ op: 'add', path: 'emails', value: [{ value: 'a@b.c' }] }]), 400, 'mutability');
    expectScimError(await patch([{ op: 'replace', path: 'nickName', value: 'x' }]), 400, 'invalidPath');
    expectScimError(await patch([{ op: 'replace', value: { active: false, title: 'x' } }]), 400, 'invalidPath');
    expectScimError(await patch([{ op: 'move', path: 'displayName', value: 'x' }]), 400, 'invalidSyntax');
    expectScimError(await patch([]), 400, 'invalidSyntax');
    expectScimError(await scim('PATCH', `/Users/${created.id}`, tokenA, { schemas: ['urn:wrong'], Operations: [{ op: 'replace', path: 'active', value: false }] }), 400, 'invalidSyntax');
    expectScimError(await patch([{ op: 'replace', path: 'displayName', value: '' }]), 400, 'invalidValue');
    const after = await scim('GET', `/Users/${created.id}`, tokenA);
    expect(after.body).toEqual(created);
    expect((await platformUser(body.emails[0].value)).banned).toBe(false);
    expectScimError(await scim('PATCH', '/Users/scim_missing', tokenA, { Operations: [{ op: 'replace', path: 'active', value: false }] }), 404);
  });

  it('PUT applies displayName and active=false, ignores other attributes, refuses a new userName', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const same = await scim('PUT', `/Users/${created.id}`, tokenA, { ...body, name: { givenName: 'Other' }, externalId: 'changed' });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(created); // a replace that leaves the user active has nothing to do

    const renamed = await scim('PUT', `/Users/${created.id}`, tokenA, { ...body, displayName: 'Ada King' });
    expect(renamed.status).toBe(200);
    expect(renamed.body.displayName).toBe('Ada King');
    expect(renamed.body.externalId).toBe(body.externalId);

    expectScimError(await scim('PUT', `/Users/${created.id}`, tokenA, { ...body, userName: 'someone-else@acme.example' }), 400, 'mutability');
    expectScimError(await scim('PUT', `/Users/${created.id}`, tokenA, { displayName: 'x' }), 400, 'invalidValue');

    const off = await scim('PUT', `/Users/${created.id}`, tokenA, { ...body, userName: body.userName.toUpperCase(), active: false });
    expect(off.status).toBe(200);
    expect(off.body.active).toBe(false);
    expect((await platformUser(body.emails[0].value)).banned).toBe(true);
    expectScimError(await scim('PUT', `/Users/${created.id}`, tokenA, { ...body, active: true }), 400, 'mutability');
    expectScimError(await scim('PUT', '/Users/scim_missing', tokenA, body), 404);
  });

  it('DELETE removes the user from the org, deletes the platform account, and frees the userName', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const platform = await platformUser(body.emails[0].value);
    const deleted = await scim('DELETE', `/Users/${created.id}`, tokenA);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expectScimError(await scim('GET', `/Users/${created.id}`, tokenA), 404);
    expectScimError(await scim('DELETE', `/Users/${created.id}`, tokenA), 404);
    expect((await t.request('GET', `/admin/auth/users/${platform.id}`, { token: adminToken })).status).toBe(404);
    await expect(t.node.services.actors.ask(ORGANIZATION_KIND, orgA, { op: 'get_member', user_id: platform.id })).rejects.toMatchObject({ code: 'not_found' });
    // Provisioned again: a new user with the same userName and e-mail.
    const again = await scim('POST', '/Users', tokenA, body);
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(created.id);
  });

  it("keeps organizations apart: another org's token sees and changes none of its users", async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    const listB = await scim('GET', '/Users', tokenB);
    expect(listB.status).toBe(200);
    expect(listB.body.Resources.map((r: { id: string }) => r.id)).not.toContain(created.id);
    expect((await scim('GET', `/Users?filter=${encodeURIComponent(`userName eq "${body.userName}"`)}`, tokenB)).body.totalResults).toBe(0);
    expectScimError(await scim('GET', `/Users/${created.id}`, tokenB), 404);
    expectScimError(await scim('PATCH', `/Users/${created.id}`, tokenB, { Operations: [{ op: 'replace', path: 'active', value: false }] }), 404);
    expectScimError(await scim('DELETE', `/Users/${created.id}`, tokenB), 404);
    // The same userName may exist in another organization's directory... but the e-mail has a platform account now.
    expectScimError(await scim('POST', '/Users', tokenB, body), 409, 'uniqueness');
    expect((await scim('POST', '/Users', tokenB, { ...body, emails: [{ value: `b-${body.emails[0].value}`, primary: true }] })).status).toBe(201);
    expect((await scim('GET', `/Users/${created.id}`, tokenA)).body.active).toBe(true);
  });

  it('refuses anything but a valid SCIM token with a 401 SCIM error', async () => {
    expectScimError(await scim('GET', '/Users', undefined), 401);
    expect((await scim('GET', '/Users', undefined)).headers.get('www-authenticate')).toMatch(/^Bearer/);
    expectScimError(await scim('GET', '/Users', 'scim_bogus'), 401);
    expectScimError(await scim('GET', '/Users', owner.token), 401);
    const [prefix, id] = tokenA.split('.');
    expectScimError(await scim('GET', '/Users', `${prefix}.${id}.${'A'.repeat(43)}`), 401);
    // A token naming another org with this org's secret fails too.
    const otherOrg = `scim_${Buffer.from(orgB).toString('base64url')}.${tokenA.split('.').slice(1).join('.')}`;
    expectScimError(await scim('GET', '/Users', otherOrg), 401);
    expectScimError(await scim('POST', '/Users', 'nope', oktaUser()), 401);
  });

  it('keeps users, tokens and deactivations across a restart', async () => {
    const body = oktaUser();
    const created = (await scim('POST', '/Users', tokenA, body)).body;
    expect((await scim('PATCH', `/Users/${created.id}`, tokenA, { Operations: [{ op: 'replace', path: 'active', value: false }] })).status).toBe(200);
    const dataDir = t.dataDir;
    await t.stop();
    t = await startTestNode({ clock: 'manual', dataDir, config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
    const got = await scim('GET', `/Users/${created.id}`, tokenA);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ userName: body.userName, active: false });
    expectScimError(await scim('POST', '/Users', tokenA, oktaUser({ userName: body.userName })), 409, 'uniqueness');
    // A user created after the restart lists after the ones before it.
    const later = (await scim('POST', '/Users', tokenA, oktaUser())).body;
    const all = (await scim('GET', '/Users?count=200', tokenA)).body.Resources.map((r: { id: string }) => r.id);
    expect(all.indexOf(later.id)).toBe(all.length - 1);
    expect(all).toContain(created.id);
  });

  it('is described in the OpenAPI document', async () => {
    const doc = (await t.request('GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([
      '/scim/v2/Users', '/scim/v2/Users/{id}', '/scim/v2/ServiceProviderConfig', '/scim/v2/ResourceTypes', '/scim/v2/Schemas',
      '/api/v1/orgs/{org_id}/scim-tokens', '/api/v1/orgs/{org_id}/scim-tokens/{token_id}',
    ]));
  });
});
