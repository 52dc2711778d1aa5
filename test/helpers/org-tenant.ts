import { expect } from 'vitest';
import type { TestNode } from './node.js';

/**
 * One organization whose members act through organization API keys, funded in the ledger: the
 * set-up of the multi-party areas' HTTP tests (auctions, handshake), where every party must be
 * in the same tenant.
 */
type User = Awaited<ReturnType<TestNode['newUser']>>;

/** `member` joins `org_id` on `owner`'s invitation. */
export async function joinOrg(t: TestNode, org_id: string, owner: User, member: User): Promise<void> {
  const invite = await t.request('POST', `/api/v1/orgs/${org_id}/invitations`, { token: owner.token, body: { email: member.email, role: 'member' } });
  expect(invite.status, invite.text).toBe(201);
  const accepted = await t.request('POST', `/api/v1/auth/invitations/${invite.body.id}/accept`, { token: member.token, body: { token: invite.body.token } });
  expect(accepted.status, accepted.text).toBe(200);
}

/** An API key of `user` acting for `org_id`, every scope. */
export async function orgApiKey(t: TestNode, org_id: string, user: User, name: string): Promise<string> {
  const res = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name, scopes: ['*'], org_id } });
  expect(res.status, res.text).toBe(201);
  return res.body.key;
}

let creditCounter = 0;
/** An administrator's USD credit to `user` in the organization's ledger. */
export async function creditUsd(t: TestNode, adminToken: string, org_id: string, user: User, amount: number, reference = `fund-${++creditCounter}`): Promise<void> {
  const res = await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body: { tenant: org_id, user_id: user.user_id, currency: 'USD', amount, reference } });
  expect(res.status, res.text).toBe(201);
}

/** The caller's USD balance (zeros before its first credit). */
export async function usdBalance(t: TestNode, token: string): Promise<{ balance: number; held: number; available: number }> {
  const res = await t.request('GET', '/api/v1/ledger/me', { token });
  expect(res.status, res.text).toBe(200);
  return res.body.balances.find((b: { currency: string }) => b.currency === 'USD') ?? { balance: 0, held: 0, available: 0 };
}

/** A new organization of two users, its owner and a member, each acting through an organization API key. */
export async function orgOfTwo(t: TestNode, name: string): Promise<{ org_id: string; owner: User; member: User; ownerKey: string; memberKey: string }> {
  const prefix = name.toLowerCase().replace(/[^a-z]/g, '').slice(0, 6) || 'org';
  const owner = await t.newUser(`${prefix}own`);
  const member = await t.newUser(`${prefix}mem`);
  const org = await t.request('POST', '/api/v1/orgs', { token: owner.token, body: { name } });
  expect(org.status, org.text).toBe(201);
  await joinOrg(t, org.body.org_id, owner, member);
  return { org_id: org.body.org_id, owner, member, ownerKey: await orgApiKey(t, org.body.org_id, owner, 'owner'), memberKey: await orgApiKey(t, org.body.org_id, member, 'member') };
}
