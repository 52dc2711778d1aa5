import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { base32Decode, totp } from '../../actors/accounts/messages.js';
import { CapturingMailTransport } from '../../http/auth/mail.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Organizations, SSO policy and invitations over the real socket (docs/api/organizations.md). */
const ADMIN_EMAIL = 'org-root@example.com';
const ADMIN_PASSWORD = 'admin password 123';
const DAY_MS = 24 * 3600 * 1000;

let t: TestNode;
let mail: CapturingMailTransport;
let adminToken: string;
let adminId: string;

async function startNode(dataDir?: string): Promise<TestNode> {
  return startTestNode({ clock: 'manual', dataDir, config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
}

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, message: expect.any(String) });
}

beforeAll(async () => {
  t = await startNode();
  mail = new CapturingMailTransport();
  t.node.services.mail = mail;
  await adminLogin();
});
afterAll(async () => {
  await t?.destroy();
});

async function adminLogin() {
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  expect(res.status, res.text).toBe(200);
  adminToken = res.body.access_token;
  adminId = res.body.user.id;
}

/** As the admin; a token expired by a clock advance is renewed once. */
async function admin(method: string, path: string, body?: unknown): Promise<TestResponse> {
  const res = await t.request(method, path, { token: adminToken, body });
  if (res.status !== 401) return res;
  await adminLogin();
  return t.request(method, path, { token: adminToken, body });
}

const as = (token: string) => (method: string, path: string, body?: unknown) => t.request(method, path, { token, body });

async function newOrg(token: string, name = 'Acme Corp', extra: Record<string, unknown> = {}) {
  const res = await t.request('POST', '/api/v1/orgs', { token, body: { name, ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

async function invite(token: string, org_id: string, email: string, role = 'member', extra: Record<string, unknown> = {}) {
  const res = await t.request('POST', `/api/v1/orgs/${org_id}/invitations`, { token, body: { email, role, ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

async function verifyEmail(user_id: string) {
  const res = await admin('PATCH', `/admin/auth/users/${user_id}`, { email_verified: true });
  expect(res.status, res.text).toBe(200);
}

/** Adds `user` to the org through an invitation accepted with the mailed token. */
async function join(ownerToken: string, org_id: string, user: { token: string; email: string }, role = 'member') {
  (t.clock as ManualClock).advance(1000); // distinct joined_at, so member order is joining order
  const inv = await invite(ownerToken, org_id, user.email, role);
  const res = await t.request('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: user.token, body: { token: inv.token } });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

describe('organizations (members)', () => {
  it('creates an organization with the caller as owner, slug derived and unique', async () => {
    const owner = await t.newUser('own');
    const org = await newOrg(owner.token, 'Acme Corp', { metadata: { plan: 'pro' }, logo_url: 'https://example.com/logo.png' });
    expect(org).toMatchObject({
      name: 'Acme Corp',
      created_by: owner.user_id,
      member_count: 1,
      sso_enforced: false,
      sso_exempt_user_ids: [],
      metadata: { plan: 'pro' },
      logo_url: 'https://example.com/logo.png',
    });
    expect(org.org_id).toMatch(/^org_/);
    expect(org.slug).toMatch(/^acme-corp/);
    expect(Date.parse(org.created_at)).not.toBeNaN();
    // The same name again gets another derived slug; an explicit taken slug is 409.
    const second = await newOrg(owner.token, 'Acme Corp');
    expect(second.slug).not.toBe(org.slug);
    expectError(await as(owner.token)('POST', '/api/v1/orgs', { name: 'X', slug: org.slug.toUpperCase() }), 409, 'org_slug_taken');
    const mine = await as(owner.token)('GET', '/api/v1/orgs');
    expect(mine.status).toBe(200);
    expect(mine.body.organizations.map((o: { org_id: string; role: string }) => [o.org_id, o.role]).sort()).toEqual([[org.org_id, 'owner'], [second.org_id, 'owner']].sort());
    expect(mine.body.pagination).toMatchObject({ page: 1, total: 2, has_more: false });
    const one = await as(owner.token)('GET', `/api/v1/orgs/${org.org_id}`);
    expect(one.body).toMatchObject({ org_id: org.org_id, role: 'owner' });
  });

  it('rejects bad input with 400', async () => {
    const owner = await t.newUser('bad');
    expectError(await as(owner.token)('POST', '/api/v1/orgs', {}), 400, 'BAD_REQUEST');
    expectError(await as(owner.token)('POST', '/api/v1/orgs', { name: 'x', slug: '-bad-' }), 400, 'BAD_REQUEST');
    expectError(await as(owner.token)('POST', '/api/v1/orgs', { name: '   ' }), 400, 'BAD_REQUEST');
    expectError(await as(owner.token)('POST', '/api/v1/orgs', { name: 'x', metadata: { big: 'x'.repeat(5000) } }), 400, 'BAD_REQUEST');
    expectError(await as(owner.token)('POST', '/api/v1/orgs', { name: 'x', logo_url: 'javascript:alert(1)' }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/orgs', { body: { name: 'x' } }), 401, 'unauthorized');
  });

  it('members, roles and the last owner', async () => {
    const owner = await t.newUser('own');
    const adm = await t.newUser('adm');
    const mem = await t.newUser('mem');
    const stranger = await t.newUser('str');
    const org = await newOrg(owner.token, 'Roles Inc');
    await join(owner.token, org.org_id, adm, 'admin');
    await join(owner.token, org.org_id, mem);

    const list = await as(mem.token)('GET', `/api/v1/orgs/${org.org_id}/members`);
    expect(list.status).toBe(200);
    expect(list.body.members.map((m: { user_id: string; role: string }) => [m.user_id, m.role])).toEqual([
      [owner.user_id, 'owner'],
      [adm.user_id, 'admin'],
      [mem.user_id, 'member'],
    ]);
    expect(list.body.members[2].user).toMatchObject({ email: mem.email, username: mem.username });
    expect(list.body.pagination.total).toBe(3);

    // A stranger does not see it; a member cannot manage.
    expectError(await as(stranger.token)('GET', `/api/v1/orgs/${org.org_id}`), 404, 'not_found');
    expectError(await as(stranger.token)('GET', `/api/v1/orgs/${org.org_id}/members`), 404, 'not_found');
    expectError(await as(mem.token)('PATCH', `/api/v1/orgs/${org.org_id}`, { name: 'Nope' }), 403, 'forbidden');
    expectError(await as(mem.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${adm.user_id}`, { role: 'member' }), 403, 'forbidden');
    expectError(await as(mem.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: 'x@example.com' }), 403, 'forbidden');
    // An admin manages members, not owners.
    expectError(await as(adm.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${mem.user_id}`, { role: 'owner' }), 403, 'forbidden');
    expectError(await as(adm.token)('DELETE', `/api/v1/orgs/${org.org_id}/members/${owner.user_id}`), 403, 'forbidden');
    expectError(await as(adm.token)('DELETE', `/api/v1/orgs/${org.org_id}`), 403, 'forbidden');
    // Nor an owner's invitation to the owner role: neither replaced by another invitation nor revoked.
    const ownerInvite = await as(owner.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: 'future-owner@example.com', role: 'owner' });
    expect(ownerInvite.status, ownerInvite.text).toBe(201);
    expectError(await as(adm.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: 'future-owner@example.com', role: 'member' }), 403, 'forbidden');
    expectError(await as(adm.token)('DELETE', `/api/v1/orgs/${org.org_id}/invitations/${ownerInvite.body.id}`), 403, 'forbidden');
    expect((await as(owner.token)('DELETE', `/api/v1/orgs/${org.org_id}/invitations/${ownerInvite.body.id}`)).status).toBe(200);
    const promoted = await as(adm.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${mem.user_id}`, { role: 'admin' });
    expect(promoted.status, promoted.text).toBe(200);
    expect(promoted.body).toMatchObject({ user_id: mem.user_id, role: 'admin' });
    const renamed = await as(adm.token)('PATCH', `/api/v1/orgs/${org.org_id}`, { name: 'Roles Ltd' });
    expect(renamed.body).toMatchObject({ name: 'Roles Ltd', slug: org.slug });
    expectError(await as(owner.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${stranger.user_id}`, { role: 'admin' }), 404, 'not_found');
    expectError(await as(owner.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${mem.user_id}`, { role: 'boss' }), 400, 'BAD_REQUEST');

    // The last owner cannot leave or be demoted; with a second owner they can.
    expectError(await as(owner.token)('POST', `/api/v1/orgs/${org.org_id}/leave`), 409, 'last_owner');
    expectError(await as(owner.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${owner.user_id}`, { role: 'admin' }), 409, 'last_owner');
    expect((await as(owner.token)('PATCH', `/api/v1/orgs/${org.org_id}/members/${adm.user_id}`, { role: 'owner' })).status).toBe(200);
    const left = await as(owner.token)('POST', `/api/v1/orgs/${org.org_id}/leave`);
    expect(left.status, left.text).toBe(200);
    expectError(await as(owner.token)('GET', `/api/v1/orgs/${org.org_id}`), 404, 'not_found');
    expect((await as(owner.token)('GET', '/api/v1/orgs')).body.organizations.map((o: { org_id: string }) => o.org_id)).not.toContain(org.org_id);
    // The new owner removes a member; the member's list follows at once.
    expect((await as(adm.token)('DELETE', `/api/v1/orgs/${org.org_id}/members/${mem.user_id}`)).status).toBe(200);
    expect((await as(mem.token)('GET', '/api/v1/orgs')).body.organizations).toEqual([]);
    expectError(await as(adm.token)('DELETE', `/api/v1/orgs/${org.org_id}/members/${mem.user_id}`), 404, 'not_found');
    expect((await as(adm.token)('GET', `/api/v1/orgs/${org.org_id}`)).body.member_count).toBe(1);
  });

  it('deleting an organization ends every membership', async () => {
    const owner = await t.newUser('own');
    const mem = await t.newUser('mem');
    const org = await newOrg(owner.token, 'Gone Soon');
    await join(owner.token, org.org_id, mem);
    expect((await as(owner.token)('DELETE', `/api/v1/orgs/${org.org_id}`)).status).toBe(200);
    expectError(await as(owner.token)('GET', `/api/v1/orgs/${org.org_id}`), 404, 'not_found');
    expect((await as(mem.token)('GET', '/api/v1/orgs')).body.organizations).toEqual([]);
    expectError(await admin('GET', `/admin/auth/org/${org.org_id}`), 404, 'not_found');
    expect((await admin('GET', `/admin/auth/users/${mem.user_id}`)).body.org_memberships).toEqual([]);
    // The slug is free again.
    const reused = await newOrg(owner.token, 'Again', { slug: org.slug });
    expect(reused.slug).toBe(org.slug);
  });
});

describe('invitations', () => {
  it('full flow: invite, mail, list, accept; single use; another user cannot accept', async () => {
    const owner = await t.newUser('own');
    const bob = await t.newUser('bob');
    const eve = await t.newUser('eve');
    const org = await newOrg(owner.token, 'Invite Co');
    const sentBefore = mail.sent.length;
    const inv = await invite(owner.token, org.org_id, bob.email.toUpperCase(), 'admin');
    expect(inv).toMatchObject({ org_id: org.org_id, org_name: 'Invite Co', email: bob.email, role: 'admin', invited_by: owner.user_id });
    expect(inv.token).toMatch(/^oit_/);
    expect(Date.parse(inv.expires_at) - Date.parse(inv.created_at)).toBe(7 * DAY_MS);
    const message = mail.sent.slice(sentBefore).find((m) => m.to === bob.email);
    expect(message?.link).toContain(inv.token);
    expect(message?.text).toContain('Invite Co');

    const mine = await as(bob.token)('GET', '/api/v1/auth/invitations');
    expect(mine.status).toBe(200);
    expect(mine.body.invitations).toEqual([expect.objectContaining({ id: inv.id, org_name: 'Invite Co', role: 'admin' })]);
    expect((await as(eve.token)('GET', '/api/v1/auth/invitations')).body.invitations).toEqual([]);
    const pending = await as(owner.token)('GET', `/api/v1/orgs/${org.org_id}/invitations`);
    expect(pending.body.invitations.map((i: { id: string }) => i.id)).toEqual([inv.id]);

    // Another user, even with the token, cannot accept it; bob without verified e-mail or token cannot either.
    expectError(await as(eve.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: inv.token }), 404, 'invitation_not_found');
    expectError(await as(bob.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`), 403, 'forbidden');
    expectError(await as(bob.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: 'oit_wrong' }), 403, 'forbidden');
    const accepted = await as(bob.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: inv.token });
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.body).toMatchObject({ organization: { org_id: org.org_id, member_count: 2 }, membership: { user_id: bob.user_id, role: 'admin' } });
    expectError(await as(bob.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: inv.token }), 404, 'invitation_not_found');
    expect((await as(bob.token)('GET', '/api/v1/auth/invitations')).body.invitations).toEqual([]);
    expect((await as(bob.token)('GET', '/api/v1/orgs')).body.organizations).toEqual([expect.objectContaining({ org_id: org.org_id, role: 'admin' })]);
    // A member needs no invitation.
    expectError(await as(owner.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: bob.email }), 409, 'conflict');
  });

  it('a verified e-mail accepts without the token; decline and revoke', async () => {
    const owner = await t.newUser('own');
    const carol = await t.newUser('car');
    const dave = await t.newUser('dav');
    const org = await newOrg(owner.token, 'Verify Co');
    await verifyEmail(carol.user_id);
    const forCarol = await invite(owner.token, org.org_id, carol.email);
    const ok = await as(carol.token)('POST', `/api/v1/auth/invitations/${forCarol.id}/accept`);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.membership.role).toBe('member');

    const forDave = await invite(owner.token, org.org_id, dave.email);
    const declined = await as(dave.token)('POST', `/api/v1/auth/invitations/${forDave.id}/decline`, { token: forDave.token });
    expect(declined.status, declined.text).toBe(200);
    expect((await as(dave.token)('GET', '/api/v1/auth/invitations')).body.invitations).toEqual([]);

    const again = await invite(owner.token, org.org_id, dave.email);
    // Re-inviting replaces the pending one: the first token stops working.
    const third = await invite(owner.token, org.org_id, dave.email);
    expectError(await as(dave.token)('POST', `/api/v1/auth/invitations/${again.id}/accept`, { token: again.token }), 404, 'invitation_not_found');
    expect((await as(dave.token)('GET', '/api/v1/auth/invitations')).body.invitations.map((i: { id: string }) => i.id)).toEqual([third.id]);
    expectError(await as(carol.token)('DELETE', `/api/v1/orgs/${org.org_id}/invitations/${third.id}`), 403, 'forbidden');
    expect((await as(owner.token)('DELETE', `/api/v1/orgs/${org.org_id}/invitations/${third.id}`)).status).toBe(200);
    expectError(await as(owner.token)('DELETE', `/api/v1/orgs/${org.org_id}/invitations/${third.id}`), 404, 'invitation_not_found');
    expectError(await as(dave.token)('POST', `/api/v1/auth/invitations/${third.id}/accept`, { token: third.token }), 404, 'invitation_not_found');
    expect((await as(dave.token)('GET', '/api/v1/auth/invitations')).body.invitations).toEqual([]);
    // Only an owner invites an owner.
    expectError(await as(carol.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: 'x@example.com' }), 403, 'forbidden');
    expectError(await as(owner.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: 'not-an-email' }), 400, 'BAD_REQUEST');
  });

  it('invitations expire (ttl_sec; ManualClock)', async () => {
    const owner = await t.newUser('own');
    const erin = await t.newUser('eri');
    const org = await newOrg(owner.token, 'Expiry Co');
    expectError(await as(owner.token)('POST', `/api/v1/orgs/${org.org_id}/invitations`, { email: erin.email, ttl_sec: 31 * 24 * 3600 }), 400, 'BAD_REQUEST');
    const inv = await invite(owner.token, org.org_id, erin.email, 'member', { ttl_sec: 600 });
    expect(Date.parse(inv.expires_at) - Date.parse(inv.created_at)).toBe(600_000);
    (t.clock as ManualClock).advance(599_000);
    await settle();
    expect((await as(erin.token)('GET', '/api/v1/auth/invitations')).body.invitations).toHaveLength(1);
    (t.clock as ManualClock).advance(2000);
    await settle();
    expect((await as(erin.token)('GET', '/api/v1/auth/invitations')).body.invitations).toEqual([]);
    expect((await as(owner.token)('GET', `/api/v1/orgs/${org.org_id}/invitations`)).body.invitations).toEqual([]);
    expectError(await as(erin.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: inv.token }), 409, 'invitation_expired');
    expectError(await as(erin.token)('GET', `/api/v1/orgs/${org.org_id}`), 404, 'not_found');
  });
});

describe('admin organization routes', () => {
  it('needs the admin role', async () => {
    const user = await t.newUser('plain');
    const org = await newOrg(user.token, 'Mine');
    const calls: [string, string, unknown?][] = [
      ['POST', '/admin/auth/orgs', { name: 'x' }],
      ['GET', '/admin/auth/orgs'],
      ['GET', `/admin/auth/org/${org.org_id}`],
      ['PATCH', `/admin/auth/org/${org.org_id}`, {}],
      ['DELETE', `/admin/auth/org/${org.org_id}`],
      ['PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true }],
      ['GET', `/admin/auth/org/${org.org_id}/members`],
      ['POST', `/admin/auth/org/${org.org_id}/members`, { user_id: user.user_id }],
      ['PATCH', `/admin/auth/org/${org.org_id}/members/${user.user_id}`, { role: 'admin' }],
      ['DELETE', `/admin/auth/org/${org.org_id}/members/${user.user_id}`],
    ];
    for (const [method, path, body] of calls) {
      expectError(await t.request(method, path, { token: user.token, body }), 403, 'forbidden');
      expectError(await t.request(method, path, { body }), 401, 'unauthorized');
    }
  });

  it('create, list, get, patch, members and UserDetail.org_memberships', async () => {
    const alice = await t.newUser('ali');
    const bob = await t.newUser('bob');
    const created = await admin('POST', '/admin/auth/orgs', { name: 'Admin Made', slug: 'admin-made-org', owner_user_id: alice.user_id });
    expect(created.status, created.text).toBe(201);
    const org = created.body;
    expect(org).toMatchObject({ slug: 'admin-made-org', created_by: adminId, member_count: 1 });
    expectError(await admin('POST', '/admin/auth/orgs', { name: 'x', owner_user_id: 'usr_nobody' }), 404, 'not_found');

    const listed = await admin('GET', '/admin/auth/orgs?q=ADMIN-MADE&page_size=5');
    expect(listed.status).toBe(200);
    expect(listed.body.organizations.map((o: { org_id: string }) => o.org_id)).toEqual([org.org_id]);
    expect(listed.body.pagination).toMatchObject({ page: 1, page_size: 5, total: 1, has_more: false });
    const capped = await admin('GET', '/admin/auth/orgs?page=0&page_size=1000');
    expect(capped.body.pagination).toMatchObject({ page: 1, page_size: 100 });
    expect((await admin('GET', `/admin/auth/org/${org.org_id}`)).body).toMatchObject({ org_id: org.org_id, name: 'Admin Made' });
    expectError(await admin('GET', '/admin/auth/org/org_unknown'), 404, 'not_found');
    const patched = await admin('PATCH', `/admin/auth/org/${org.org_id}`, { name: 'Admin Renamed', metadata: { tier: 1 } });
    expect(patched.body).toMatchObject({ name: 'Admin Renamed', metadata: { tier: 1 } });
    expect((await admin('GET', '/admin/auth/orgs?q=renamed')).body.pagination.total).toBe(1);

    (t.clock as ManualClock).advance(1000); // bob joins after alice
    const added = await admin('POST', `/admin/auth/org/${org.org_id}/members`, { user_id: bob.user_id, role: 'admin' });
    expect(added.status, added.text).toBe(201);
    expect(added.body).toMatchObject({ user_id: bob.user_id, role: 'admin' });
    expectError(await admin('POST', `/admin/auth/org/${org.org_id}/members`, { user_id: 'usr_nobody' }), 404, 'not_found');
    const members = await admin('GET', `/admin/auth/org/${org.org_id}/members?page_size=1`);
    expect(members.body.pagination).toMatchObject({ total: 2, page_size: 1, has_more: true });
    expect(members.body.members[0]).toMatchObject({ user_id: alice.user_id, role: 'owner' });
    expectError(await admin('PATCH', `/admin/auth/org/${org.org_id}/members/${alice.user_id}`, { role: 'member' }), 409, 'last_owner');
    expectError(await admin('DELETE', `/admin/auth/org/${org.org_id}/members/${alice.user_id}`), 409, 'last_owner');
    expect((await admin('PATCH', `/admin/auth/org/${org.org_id}/members/${bob.user_id}`, { role: 'owner' })).body.role).toBe('owner');

    const detail = await admin('GET', `/admin/auth/users/${bob.user_id}`);
    expect(detail.status).toBe(200);
    expect(detail.body.org_memberships).toEqual([{ org_id: org.org_id, org_name: 'Admin Renamed', role: 'owner' }]);
    expect((await admin('DELETE', `/admin/auth/org/${org.org_id}/members/${bob.user_id}`)).status).toBe(200);
    expect((await admin('GET', `/admin/auth/users/${bob.user_id}`)).body.org_memberships).toEqual([]);

    expect((await admin('DELETE', `/admin/auth/org/${org.org_id}`)).status).toBe(200);
    expect((await admin('GET', '/admin/auth/orgs?q=renamed')).body.pagination.total).toBe(0);
    expectError(await admin('DELETE', `/admin/auth/org/${org.org_id}`), 404, 'not_found');
  });
});

describe('Idempotency-Key in an organization', () => {
  it('is scoped to the member: another member sending the same key, path and body runs its own request', async () => {
    const alice = await t.newUser('idemali');
    const bob = await t.newUser('idembob');
    const org = (await admin('POST', '/admin/auth/orgs', { name: 'Idem Org', owner_user_id: alice.user_id })).body;
    expect((await admin('POST', `/admin/auth/org/${org.org_id}/members`, { user_id: bob.user_id })).status).toBe(201);
    // Org API keys: both callers act in the organization's tenant.
    const keyOf = async (token: string) => {
      const res = await t.request('POST', '/api/v1/auth/api-keys', { token, body: { name: 'org', scopes: ['*'], org_id: org.org_id } });
      expect(res.status, res.text).toBe(201);
      return res.body.key as string;
    };
    const [aliceKey, bobKey] = [await keyOf(alice.token), await keyOf(bob.token)];
    const path = '/api/v1/distributed-state/idem-org/shared/lock';
    const headers = { 'idempotency-key': 'same-key' };
    const first = await t.request('POST', path, { token: aliceKey, body: { owner_id: 'worker' }, headers });
    expect(first.status, first.text).toBe(200);
    // Bob's identical request runs: not alice's answer replayed (the same owner_id re-acquires the lock).
    const twin = await t.request('POST', path, { token: bobKey, body: { owner_id: 'worker' }, headers });
    expect(twin.status, twin.text).toBe(200);
    expect(twin.headers.get('idempotent-replayed')).toBeNull();
    // And his own key is his: a different body under it is refused as reused.
    expectError(await t.request('POST', path, { token: bobKey, body: { owner_id: 'worker-2' }, headers }), 409, 'idempotency_key_reused');
    // Alice's retry still replays her own answer.
    const retry = await t.request('POST', path, { token: aliceKey, body: { owner_id: 'worker' }, headers });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
  });
});

describe('SSO enforcement', () => {
  it('blocks password login for non-exempt members; exempt users and existing sessions keep working', async () => {
    const owner = await t.newUser('sso');
    const member = await t.newUser('ssm');
    const outsider = await t.newUser('sso');
    const org = await newOrg(owner.token, 'Strict SSO');
    await join(owner.token, org.org_id, member);
    const login = (u: { email: string; password: string }) => t.request('POST', '/api/v1/auth/login', { body: { login: u.email, password: u.password } });
    expect((await login(member)).status).toBe(200);

    expectError(await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, {}), 400, 'BAD_REQUEST');
    expectError(await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: 'yes' }), 400, 'BAD_REQUEST');
    expectError(await admin('PUT', '/admin/auth/org/org_unknown/sso', { sso_enforced: true }), 404, 'not_found');
    const put = await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true, sso_exempt_user_ids: [owner.user_id] });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ org_id: org.org_id, sso_enforced: true, sso_exempt_user_ids: [owner.user_id] });
    expect((await admin('GET', '/admin/auth/orgs?sso_enforced=true&q=strict')).body.pagination.total).toBe(1);

    const blocked = await login(member);
    expectError(blocked, 403, 'sso_required');
    expect(blocked.body.message).toContain('Strict SSO');
    // A wrong password is still the plain 401 (the policy is not revealed without the password).
    expectError(await t.request('POST', '/api/v1/auth/login', { body: { login: member.email, password: 'wrong password!' } }), 401, 'invalid_credentials');
    expect((await login(owner)).status).toBe(200);
    expect((await login(outsider)).status).toBe(200);
    // Existing sessions keep working (access and refresh).
    expect((await as(member.token)('GET', '/api/v1/auth/me')).status).toBe(200);
    expect((await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: member.refresh_token } })).status).toBe(200);

    // Exempting the member, leaving the organization, or turning enforcement off lets them in again.
    await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true, sso_exempt_user_ids: [owner.user_id, member.user_id] });
    expect((await login(member)).status).toBe(200);
    await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true, sso_exempt_user_ids: [] });
    expectError(await login(owner), 403, 'sso_required');
    await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: false });
    expect((await login(owner)).status).toBe(200);
    await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true });
    expect((await as(member.token)('POST', `/api/v1/orgs/${org.org_id}/leave`)).status).toBe(200);
    expect((await login(member)).status).toBe(200);
  });

  it('is checked again at the two-factor step: enforcement switched on after the password step refuses the code (impersonation is not gated)', async () => {
    const owner = await t.newUser('sso');
    const member = await t.newUser('ss2');
    const org = await newOrg(owner.token, 'Late SSO');
    await join(owner.token, org.org_id, member);
    const setup = await as(member.token)('POST', '/api/v1/auth/2fa/totp/setup');
    const code = () => totp(base32Decode(setup.body.secret)!, t.clock.now());
    expect((await as(member.token)('POST', '/api/v1/auth/2fa/totp/verify-setup', { code: code() })).status).toBe(200);
    const nextStep = () => (t.clock as ManualClock).advance(30_000);
    const verify = (two_factor_token: string) => t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token, code: code() } });

    const step = await t.request('POST', '/api/v1/auth/login', { body: { login: member.email, password: member.password } });
    expect(step.body.requires_2fa, step.text).toBe(true);
    expect((await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true })).status).toBe(200);
    nextStep();
    const refused = await verify(step.body.two_factor_token);
    expectError(refused, 403, 'sso_required');
    expect(refused.body.message).toContain('Late SSO');

    // An admin's impersonation challenge is not gated by the policy.
    const impersonation = await admin('POST', `/admin/auth/users/${member.user_id}/impersonate`);
    expect(impersonation.body.requires_2fa, impersonation.text).toBe(true);
    const impersonated = await verify(impersonation.body.two_factor_token);
    expect(impersonated.status, impersonated.text).toBe(200);

    // Nothing was used up by the refusal: with enforcement off again, the same challenge works.
    await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: false });
    nextStep();
    const done = await verify(step.body.two_factor_token);
    expect(done.status, done.text).toBe(200);
    expect(done.body.access_token).toBeTypeOf('string');
  });
});

describe('hostile bodies', () => {
  it('never give a 5xx on the organization routes', async () => {
    const owner = await t.newUser('hst');
    const org = await newOrg(owner.token, 'Hostile Co');
    const inv = await invite(owner.token, org.org_id, 'hostile-invitee@example.com');
    const routes: [string, string, string][] = [
      ['POST', '/api/v1/orgs', owner.token],
      ['PATCH', `/api/v1/orgs/${org.org_id}`, owner.token],
      ['POST', `/api/v1/orgs/${org.org_id}/invitations`, owner.token],
      ['PATCH', `/api/v1/orgs/${org.org_id}/members/${owner.user_id}`, owner.token],
      ['POST', `/api/v1/auth/invitations/${inv.id}/accept`, owner.token],
      ['PUT', `/admin/auth/org/${org.org_id}/sso`, adminToken],
      ['POST', `/admin/auth/org/${org.org_id}/members`, adminToken],
      ['POST', '/admin/auth/orgs', adminToken],
    ];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), fc.jsonValue({ maxDepth: 3 }), async ([method, path, token], body) => {
        const res = await t.request(method, path, { token, body });
        expect(res.status, `${method} ${path} ${JSON.stringify(body)} -> ${res.text}`).toBeLessThan(500);
      }),
      { numRuns: 60 },
    );
  });
});

describe('restart', () => {
  it('organization, members, SSO policy and a pending invitation (with its expiry) survive a restart', async () => {
    const owner = await t.newUser('rst');
    const mem = await t.newUser('rsm');
    const invitee = await t.newUser('rsi');
    const org = await newOrg(owner.token, 'Durable Org');
    await join(owner.token, org.org_id, mem, 'admin');
    const inv = await invite(owner.token, org.org_id, invitee.email, 'member', { ttl_sec: 300 });
    await admin('PUT', `/admin/auth/org/${org.org_id}/sso`, { sso_enforced: true, sso_exempt_user_ids: [owner.user_id] });

    const now = t.clock.now();
    await t.stop();
    const clock = new (await import('../../runtime/index.js')).ManualClock(now);
    t = await startTestNode({ clock, dataDir: t.dataDir, config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
    t.node.services.mail = mail;
    await adminLogin();

    const got = await as(owner.token)('GET', `/api/v1/orgs/${org.org_id}`);
    expect(got.status, got.text).toBe(200);
    expect(got.body).toMatchObject({ name: 'Durable Org', member_count: 2, sso_enforced: true, sso_exempt_user_ids: [owner.user_id], role: 'owner' });
    expect((await as(mem.token)('GET', '/api/v1/orgs')).body.organizations).toEqual([expect.objectContaining({ org_id: org.org_id, role: 'admin' })]);
    expectError(await t.request('POST', '/api/v1/auth/login', { body: { login: mem.email, password: mem.password } }), 403, 'sso_required');
    expect((await admin('GET', '/admin/auth/orgs?q=durable')).body.pagination.total).toBe(1);
    expect((await as(invitee.token)('GET', '/api/v1/auth/invitations')).body.invitations.map((i: { id: string }) => i.id)).toEqual([inv.id]);

    // The expiry is still enforced after the restart.
    clock.advance(301_000);
    await settle();
    expect((await as(invitee.token)('GET', '/api/v1/auth/invitations')).body.invitations).toEqual([]);
    expectError(await as(invitee.token)('POST', `/api/v1/auth/invitations/${inv.id}/accept`, { token: inv.token }), 409, 'invitation_expired');
  });
});
