import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';

/** Agent definitions over the real socket (spec doc 2 §4.7; docs/api/agents.md). */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let carol: User;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const base = '/api/v1/agents';

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  [alice, bob, carol] = await Promise.all([t.newUser('alice'), t.newUser('bob'), t.newUser('carol')]);
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

let keyCounter = 0;
const newKey = (name = 'bot') => `${name}-${++keyCounter}`;
async function create(body: Record<string, unknown>, token = alice.token) {
  const res = await t.request('POST', base, { token, body: { display_name: 'Bot', ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as { agent_id: string; key: string; created_at: string; display_name: string };
}

describe('create, read, update, delete', () => {
  it('creates with the spec body and reads the full and summary views', async () => {
    const key = newKey('support');
    const created = await create({ key, display_name: 'Support', description: 'Answers tickets', prompt_text: 'Be kind.', agent_toml: '[agent]\nmodel = "small"\n' });
    expect(created).toMatchObject({ key, display_name: 'Support' });
    expect(created.agent_id).toMatch(/^agt_/);
    expect(Date.parse(created.created_at)).not.toBeNaN();

    const full = await t.request('GET', `${base}/${created.agent_id}`, { token: alice.token });
    expect(full.status, full.text).toBe(200);
    expect(full.body).toMatchObject({
      agent_id: created.agent_id, key, status: 'active', visibility: 'private', owner_id: alice.user_id, org_id: null, version: 1,
      prompt_text: 'Be kind.', agent_toml: '[agent]\nmodel = "small"\n', rag_toml: '', procedures: null,
    });
    const summary = await t.request('GET', `${base}/${created.agent_id}?view=summary`, { token: alice.token });
    expect(summary.body.key).toBe(key);
    expect(summary.body).not.toHaveProperty('prompt_text');
    expect(summary.body).not.toHaveProperty('agent_toml');
    expectError(await t.request('GET', `${base}/${created.agent_id}?view=everything`, { token: alice.token }), 400, 'BAD_REQUEST');
  });

  it('refuses invalid TOML naming the field and line, and stores nothing', async () => {
    const key = newKey();
    const res = await t.request('POST', base, { token: alice.token, body: { key, display_name: 'X', memory_toml: 'a = 1\nb = [1,\nc =' } });
    expectError(res, 400, 'invalid_toml');
    expect(res.body.message).toContain('memory_toml');
    expect(res.body.message).toContain('line 3');
    expect(res.body.details[0]).toMatchObject({ field: 'body.memory_toml', line: 3 });
    expectError(await t.request('GET', `${base}/resolve/${key}`, { token: alice.token }), 404, 'not_found');
  });

  it('refuses bad keys, statuses and visibilities', async () => {
    expectError(await t.request('POST', base, { token: alice.token, body: { key: 'Has Spaces', display_name: 'X' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { key: newKey(), display_name: 'X', status: 'paused' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { key: newKey(), display_name: 'X', visibility: 'public' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { key: newKey(), display_name: 'X', profile_url: 'javascript:alert(1)' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { display_name: 'X' } }), 400, 'BAD_REQUEST');
  });

  it('keys are unique per tenant: 409 for a second agent, free for another tenant, free again after delete', async () => {
    const key = newKey('unique');
    const first = await create({ key });
    expectError(await t.request('POST', base, { token: alice.token, body: { key, display_name: 'Again' } }), 409, 'agent_key_taken');
    const other = await create({ key }, bob.token);
    expect(other.agent_id).not.toBe(first.agent_id);
    const del = await t.request('DELETE', `${base}/${first.agent_id}`, { token: alice.token });
    expect(del.status, del.text).toBe(204);
    expectError(await t.request('GET', `${base}/${first.agent_id}`, { token: alice.token }), 404, 'not_found');
    await create({ key });
  });

  it('PUT bumps version and updated_at, keeps the previous definitions for audit, and may move the key', async () => {
    const key = newKey('audit');
    const { agent_id } = await create({ key, prompt_text: 'v1' });
    const before = (await t.request('GET', `${base}/${agent_id}`, { token: alice.token })).body;
    const put = await t.request('PUT', `${base}/${agent_id}`, { token: alice.token, body: { prompt_text: 'v2', shield_toml: 'deny = ["pii"]' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ version: 2, prompt_text: 'v2', shield_toml: 'deny = ["pii"]', key });
    expect(Date.parse(put.body.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    const renamed = newKey('renamed');
    const put2 = await t.request('PUT', `${base}/${agent_id}`, { token: alice.token, body: { key: renamed } });
    expect(put2.body).toMatchObject({ version: 3, key: renamed });
    expectError(await t.request('GET', `${base}/resolve/${key}`, { token: alice.token }), 404, 'not_found');
    expect((await t.request('GET', `${base}/resolve/${renamed}`, { token: alice.token })).body.agent_id).toBe(agent_id);

    const trail = await t.request('GET', `${base}/${agent_id}/versions`, { token: alice.token });
    expect(trail.status, trail.text).toBe(200);
    expect(trail.body).toMatchObject({ agent_id, current_version: 3 });
    expect(trail.body.versions.map((v: { version: number }) => v.version)).toEqual([3, 2, 1]);

    const v1 = await t.request('GET', `${base}/${agent_id}/versions/1`, { token: alice.token });
    expect(v1.body).toMatchObject({ version: 1, prompt_text: 'v1', key, updated_by: alice.user_id });
    expectError(await t.request('GET', `${base}/${agent_id}/versions/9`, { token: alice.token }), 404, 'not_found');

    // Another agent's key cannot be taken by a rename; invalid TOML in a PUT changes nothing.
    const other = await create({ key: newKey() });
    expectError(await t.request('PUT', `${base}/${agent_id}`, { token: alice.token, body: { key: other.key } }), 409, 'agent_key_taken');
    expectError(await t.request('PUT', `${base}/${agent_id}`, { token: alice.token, body: { intent_toml: '= broken' } }), 400, 'invalid_toml');
    expect((await t.request('GET', `${base}/${agent_id}`, { token: alice.token })).body).toMatchObject({ version: 3, key: renamed, intent_toml: '' });

    // Fields outside the body's schema change nothing: not the id, the tenant, the owner or the version.
    const smuggled = await t.request('PUT', `${base}/${agent_id}`, {
      token: alice.token,
      body: { description: 'v4', agent_id: 'agt_other', tenant: 'usr_someone_else', owner_id: 'usr_someone_else', org_id: 'org_x', version: 99, created_at_ms: 0 },
    });
    expect(smuggled.status, smuggled.text).toBe(200);
    expect(smuggled.body).toMatchObject({ agent_id, description: 'v4', version: 4, owner_id: alice.user_id });
    expect((await t.request('GET', `${base}/${agent_id}`, { token: alice.token })).body).toMatchObject({ agent_id, version: 4, owner_id: alice.user_id, created_at: before.created_at });
  });

  it('private agents are invisible to others; organization agents are readable in the tenant but changed by the owner or an admin only', async () => {
    const priv = await create({ key: newKey() });
    expectError(await t.request('GET', `${base}/${priv.agent_id}`, { token: bob.token }), 404, 'not_found');
    expectError(await t.request('PUT', `${base}/${priv.agent_id}`, { token: bob.token, body: { description: 'mine now' } }), 404, 'not_found');
    expectError(await t.request('DELETE', `${base}/${priv.agent_id}`, { token: bob.token }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/${priv.agent_id}/versions`, { token: bob.token }), 404, 'not_found');
    // A platform admin reads and changes across tenants.
    expect((await t.request('GET', `${base}/${priv.agent_id}`, { token: adminToken })).status).toBe(200);
    const adminPut = await t.request('PUT', `${base}/${priv.agent_id}`, { token: adminToken, body: { status: 'disabled' } });
    expect(adminPut.body).toMatchObject({ status: 'disabled', owner_id: alice.user_id });
  });
});

describe('organizations', () => {
  it('members of the organization read its organization agents; strangers do not; the key is unique in the organization', async () => {
    const org = await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Agents Co' } });
    expect(org.status, org.text).toBe(201);
    const org_id = org.body.org_id as string;
    const invite = await t.request('POST', `/api/v1/orgs/${org_id}/invitations`, { token: alice.token, body: { email: bob.email, role: 'member' } });
    expect(invite.status, invite.text).toBe(201);
    const accepted = await t.request('POST', `/api/v1/auth/invitations/${invite.body.id}/accept`, { token: bob.token, body: { token: invite.body.token } });
    expect(accepted.status, accepted.text).toBe(200);

    const key = newKey('team');
    const shared = await create({ key, org_id, visibility: 'organization', prompt_text: 'team prompt' });
    const hidden = await create({ key: newKey('secret'), org_id, visibility: 'private' });
    const full = await t.request('GET', `${base}/${shared.agent_id}`, { token: bob.token });
    expect(full.status, full.text).toBe(200);
    expect(full.body).toMatchObject({ org_id, owner_id: alice.user_id, prompt_text: 'team prompt' });
    expectError(await t.request('GET', `${base}/${hidden.agent_id}`, { token: bob.token }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/${shared.agent_id}`, { token: carol.token }), 404, 'not_found');

    // Bob lists and resolves in the organization; carol, not a member, gets 404 for the organization.
    const list = await t.request('GET', `${base}?org_id=${org_id}`, { token: bob.token });
    expect(list.status, list.text).toBe(200);
    expect(list.body.agents.map((a: { agent_id: string }) => a.agent_id)).toEqual([shared.agent_id]);
    const resolved = await t.request('GET', `${base}/resolve/${key}?org_id=${org_id}`, { token: bob.token });
    expect(resolved.body.agent_id).toBe(shared.agent_id);
    expectError(await t.request('GET', `${base}?org_id=${org_id}`, { token: carol.token }), 404, 'not_found');
    // Bob may not create an agent with the organization's taken key, nor change alice's agent.
    expectError(await t.request('POST', base, { token: bob.token, body: { key, display_name: 'Dup', org_id } }), 409, 'agent_key_taken');
    expectError(await t.request('PUT', `${base}/${shared.agent_id}`, { token: bob.token, body: { description: 'x' } }), 404, 'not_found');
    // An API key of the organization acts in it.
    const apiKey = await t.request('POST', '/api/v1/auth/api-keys', { token: bob.token, body: { name: 'agents', scopes: ['*'], org_id } });
    expect(apiKey.status, apiKey.text).toBe(201);
    const viaKey = await t.request('GET', `${base}/resolve/${key}`, { token: apiKey.body.key });
    expect(viaKey.status, viaKey.text).toBe(200);
    expect(viaKey.body.agent_id).toBe(shared.agent_id);
  });
});

describe('resolve and list', () => {
  it('resolves keys in order, leaving unknown, disabled and unreadable ones in missing', async () => {
    const a = await create({ key: newKey('ra') }, carol.token);
    const b = await create({ key: newKey('rb') }, carol.token);
    const off = await create({ key: newKey('off'), status: 'disabled' }, carol.token);
    const res = await t.request('POST', `${base}/resolve`, { token: carol.token, body: { keys: [b.key, 'nope', a.key, off.key, b.key] } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.resolved.map((r: { agent_id: string }) => r.agent_id)).toEqual([b.agent_id, a.agent_id]);
    expect(res.body.resolved[0]).toHaveProperty('prompt_text');
    expect(res.body.missing).toEqual(['nope', off.key]);
    expectError(await t.request('POST', `${base}/resolve`, { token: carol.token, body: { keys: [] } }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', `${base}/resolve/${off.key}`, { token: carol.token }), 404, 'not_found');
  });

  it('lists with q, status, visibility, filter, sort and page_size capped at 100', async () => {
    const dave = await t.newUser('dave');
    await create({ key: 'zeta', display_name: 'Zeta helper', description: 'refunds' }, dave.token);
    await create({ key: 'alpha', display_name: 'Alpha', description: 'billing helper', visibility: 'organization' }, dave.token);
    await create({ key: 'mid', display_name: 'Mid', status: 'disabled' }, dave.token);
    const get = (query: string) => t.request('GET', `${base}?${query}`, { token: dave.token });
    expect((await get('sort_by=key')).body.agents.map((a: { key: string }) => a.key)).toEqual(['alpha', 'mid', 'zeta']);
    expect((await get('sort_by=display_name&sort_order=desc')).body.agents.map((a: { key: string }) => a.key)).toEqual(['zeta', 'mid', 'alpha']);
    expect((await get('q=helper&sort_by=key')).body.agents.map((a: { key: string }) => a.key)).toEqual(['alpha', 'zeta']);
    expect((await get('status=disabled')).body.agents.map((a: { key: string }) => a.key)).toEqual(['mid']);
    expect((await get('visibility=organization')).body.agents.map((a: { key: string }) => a.key)).toEqual(['alpha']);
    expect((await get('filter=key:in:zeta|mid&sort_by=key')).body.agents.map((a: { key: string }) => a.key)).toEqual(['mid', 'zeta']);
    const paged = await get('page_size=500&page=1');
    expect(paged.body.pagination).toMatchObject({ page: 1, page_size: 100, total: 3, has_more: false });
    const page2 = await get('page_size=2&page=2&sort_by=key');
    expect(page2.body.pagination).toMatchObject({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(page2.body.agents.map((a: { key: string }) => a.key)).toEqual(['zeta']);
    expectError(await get('filter=colour:eq:red'), 400, 'BAD_REQUEST');
    expectError(await get('sort_by=prompt_text'), 400, 'BAD_REQUEST');
  });

  it('requires a bearer token', async () => {
    expectError(await t.request('GET', base), 401, 'unauthorized');
  });
});
