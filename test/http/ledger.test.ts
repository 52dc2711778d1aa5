import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';

/**
 * The ledger's routes over the real socket (docs/api/ledger.md): admin
 * credits, the caller's account and holds, the admin's view of any account.
 * Holds placed, captured and released by auctions are tested in
 * test/http/auctions.test.ts.
 */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let dave: User;
let adminToken: string;
let org_id: string;
const keys = { alice: '' };
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };


beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  [alice, dave] = await Promise.all([t.newUser('alice'), t.newUser('dave')]);
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
  const org = await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Ledger Co' } });
  org_id = org.body.org_id;
  const key = await t.request('POST', '/api/v1/auth/api-keys', { token: alice.token, body: { name: 'ledger', scopes: ['*'], org_id } });
  keys.alice = key.body.key;
});
afterAll(async () => {
  await t?.destroy();
});

describe('ledger', () => {
  it('the platform admin credits an account idempotently by reference; others may not', async () => {
    const body = { tenant: org_id, user_id: dave.user_id, currency: 'GOLD', amount: 500, reference: 'grant-1' };
    const first = await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body });
    expect(first.status, first.text).toBe(201);
    expect(first.body).toMatchObject({ reference: 'grant-1', idempotent: false, tenant: org_id, user_id: dave.user_id, balance: { currency: 'GOLD', balance: 500, held: 0, available: 500 } });
    const again = await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ idempotent: true, balance: { balance: 500 } });
    expectError(await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body: { ...body, amount: 501 } }), 409, 'ledger_reference_conflict');
    expectError(await t.request('POST', '/api/v1/ledger/credits', { token: keys.alice, body }), 403, 'forbidden');
    expectError(await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body: { ...body, amount: 1.5 } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body: { ...body, currency: 'usd' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body: { ...body, amount: 0 } }), 400, 'BAD_REQUEST');
    const admin = await t.request('GET', `/api/v1/ledger/accounts/${org_id}/${dave.user_id}`, { token: adminToken });
    expect(admin.body).toEqual({ tenant: org_id, user_id: dave.user_id, balances: [{ currency: 'GOLD', balance: 500, held: 0, available: 500 }], holds: [] });
    expectError(await t.request('GET', `/api/v1/ledger/accounts/${org_id}/${dave.user_id}`, { token: keys.alice }), 403, 'forbidden');
    // Dave's personal token is another tenant: his org balance is not there.
    expect((await t.request('GET', '/api/v1/ledger/me', { token: dave.token })).body.balances).toEqual([]);
  });
});

describe('ledger reads', () => {
  it('the caller reads its own account in the credential\'s tenant, and its holds with pages', async () => {
    await t.request('POST', '/api/v1/ledger/credits', { token: adminToken, body: { tenant: org_id, user_id: alice.user_id, currency: 'USD', amount: 1_050, reference: 'alice-1' } });
    const me = await t.request('GET', '/api/v1/ledger/me', { token: keys.alice });
    expect(me.body).toEqual({ tenant: org_id, user_id: alice.user_id, balances: [{ currency: 'USD', balance: 1_050, held: 0, available: 1_050 }], holds: [] });
    // Her personal token is her own tenant: another account.
    expect((await t.request('GET', '/api/v1/ledger/me', { token: alice.token })).body).toMatchObject({ tenant: alice.user_id, balances: [] });
    const holds = await t.request('GET', '/api/v1/ledger/me/holds?status=held&page=0&page_size=500', { token: keys.alice });
    expect(holds.body).toEqual({ holds: [], pagination: { page: 1, page_size: 100, total: 0, has_more: false } });
    expectError(await t.request('GET', '/api/v1/ledger/me/holds?status=bogus', { token: keys.alice }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/ledger/me'), 401, 'unauthorized');
  });
});
