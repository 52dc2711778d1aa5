import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** Forms over the real socket (spec doc 2 §2 Forms, §3, §4.2; docs/api/forms.md). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const base = '/api/v1/forms';

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}
const post = (path: string, body: unknown, token: string | undefined = alice.token) => t.request('POST', `${base}${path}`, { token, body });
const get = (path: string, token = alice.token) => t.request('GET', `${base}${path}`, { token });
const put = (path: string, body: unknown, token = alice.token) => t.request('PUT', `${base}${path}`, { token, body });

const SCHEMA = {
  type: 'object',
  properties: { email: { type: 'string', format: 'email' }, country: { type: 'string' }, state: { type: 'string' }, age: { type: 'integer', minimum: 0 } },
  required: ['email'],
};

async function createForm(extra: Record<string, unknown> = {}, token = alice.token, activate = true): Promise<string> {
  const res = await post('', { name: 'signup', title: 'Sign up', schema: SCHEMA, ...extra }, token);
  expect(res.status, res.text).toBe(201);
  if (activate) expect((await post(`/${res.body.form_id}/status`, { status: 'active' }, token)).status).toBe(200);
  return res.body.form_id;
}

describe('definitions', () => {
  it('creates, reads, versions and lists a form', async () => {
    const created = await post('', { name: 'contact-us', title: 'Contact us', schema: SCHEMA, conditional_logic: [{ when: 'country == "US"', require: ['state'] }] });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ form_id: expect.stringMatching(/^frm_/), name: 'contact-us', status: 'draft', version: 1, created_at: expect.any(String) });
    const id = created.body.form_id;
    const read = await get(`/${id}`);
    expect(read.body).toMatchObject({ form_id: id, title: 'Contact us', schema: SCHEMA, version: 1, submission_count: 0, created_by: alice.user_id });
    const v2 = await put(`/${id}/schema`, { schema: { ...SCHEMA, required: ['email', 'age'] } });
    expect(v2.status, v2.text).toBe(200);
    expect(v2.body.version).toBe(2);
    expect((await get(`/${id}`)).body.schema.required).toEqual(['email', 'age']);
    // The index hears of the form through the outbox.
    await expect.poll(async () => (await get('?q=contact')).body.forms.map((f: { form_id: string; version: number }) => [f.form_id, f.version])).toEqual([[id, 2]]);
    const list = await get('?q=CONTACT&status=draft&page_size=5');
    expect(list.body.pagination).toEqual({ page: 1, page_size: 5, total: 1, has_more: false });
  });

  it('refuses a schema that is not JSON Schema with 400, storing nothing', async () => {
    expectError(await post('', { name: 'x', title: 'x', schema: { type: 'object', properties: { a: { type: 'strnig' } } } }), 400, 'invalid_json_schema');
    expectError(await post('', { name: 'x', title: 'x', schema: { type: 'array' } }), 400, 'invalid_json_schema');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, conditional_logic: [{ when: 'nope == 1', require: ['email'] }] }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, conditional_logic: [{ when: 'country ==', require: ['email'] }] }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x' }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'job', queue: 'q' }] } }), 400, 'BAD_REQUEST');
    const id = await createForm();
    expectError(await put(`/${id}/schema`, { schema: { type: 'object', required: 'email' } }), 400, 'invalid_json_schema');
    expect((await get(`/${id}`)).body.version).toBe(1);
  });

  it('enforces the status state machine and ownership', async () => {
    const id = await createForm({}, alice.token, false);
    expectError(await post(`/${id}/status`, { status: 'paused' }), 409, 'invalid_status_transition');
    expectError(await post(`/${id}/status`, { status: 'archived' }), 400, 'BAD_REQUEST');
    expectError(await post(`/${id}/status`, { status: 'active' }, bob.token), 404, 'not_found');
    expect((await post(`/${id}/status`, { status: 'active' })).body.status).toBe('active');
    expect((await post(`/${id}/status`, { status: 'paused' })).body.status).toBe('paused');
    expectError(await post(`/${id}/submissions`, { data: { email: 'a@example.com' } }), 409, 'form_not_accepting');
    expect((await post(`/${id}/status`, { status: 'disabled' }, adminToken)).status).toBe(404); // the admin is another tenant
    expect((await post(`/${id}/status`, { status: 'deprecated' })).body.status).toBe('deprecated');
    expect((await post(`/${id}/status`, { status: 'disabled' })).body.status).toBe('disabled');
    expectError(await post(`/${id}/status`, { status: 'active' }), 409, 'invalid_status_transition');
    expectError(await put(`/${id}/schema`, { schema: SCHEMA }), 409, 'form_not_accepting');
  });

  it("another tenant's form is 404, and so is an id that is none", async () => {
    const id = await createForm();
    expectError(await get(`/${id}`, bob.token), 404, 'not_found');
    expectError(await get('/frm_nope'), 404, 'not_found');
    expectError(await get(`/${id}x`), 404, 'not_found');
  });

  it('lists deprecated and disabled forms only when asked', async () => {
    const id = await createForm();
    await post(`/${id}/status`, { status: 'deprecated' });
    await expect.poll(async () => (await get('?status=deprecated')).body.forms.map((f: { form_id: string }) => f.form_id)).toContain(id);
    expect((await get('?page_size=100')).body.forms.map((f: { form_id: string }) => f.form_id)).not.toContain(id);
    expectError(await get('?include_inactive=true'), 403, 'forbidden');
  });
});

describe('settings after creation (PATCH)', () => {
  const patch = (id: string, body: unknown, token = alice.token) => t.request('PATCH', `${base}/${id}`, { token, body });

  it('changes the title and settings: lists replace, groups merge, the schema version stays', async () => {
    const id = await createForm({ fields: [{ name: 'email', label: 'E-mail' }], spam: { allow_anonymous: true, min_submit_ms: 0, rate_limit_per_minute: 7 } });
    const before = (await get(`/${id}`)).body;
    (t.clock as ManualClock).advance(1_000);
    const res = await patch(id, {
      title: 'Sign up (2027)',
      fields: [{ name: 'country', label: 'Country' }],
      spam: { rate_limit_per_minute: 3 },
      approval: { enabled: true },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      form_id: id,
      title: 'Sign up (2027)',
      version: before.version,
      schema: SCHEMA,
      fields: [{ name: 'country', label: 'Country', kind: 'text', encrypted: false }],
      spam: { allow_anonymous: true, honeypot_fields: [], min_submit_ms: 0, rate_limit_per_minute: 3 },
      approval: { enabled: true, approver_role: 'owner', kind: 'single' },
      drafts: before.drafts,
    });
    expect(Date.parse(res.body.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    // Stored, and applied to the next submission.
    expect((await get(`/${id}`)).body).toMatchObject({ title: 'Sign up (2027)', approval: { enabled: true } });
    const ack = await post(`/${id}/submissions`, { data: { email: 'a@example.com' } });
    expect(ack.body.status).toBe('pending_approval');
    // The index hears of it through the outbox.
    await expect.poll(async () => (await get('?q=2027')).body.forms.map((f: { form_id: string }) => f.form_id)).toEqual([id]);
  });

  it('refuses settings the current schema cannot carry, and bad bodies, changing nothing', async () => {
    const id = await createForm();
    const before = (await get(`/${id}`)).body;
    expectError(await patch(id, { fields: [{ name: 'nickname' }] }), 400, 'BAD_REQUEST');
    expectError(await patch(id, { conditional_logic: [{ when: 'country == "US"', require: ['zip'] }] }), 400, 'BAD_REQUEST');
    expectError(await patch(id, { spam: { honeypot_fields: ['email'] } }), 400, 'BAD_REQUEST');
    expectError(await patch(id, { multipart: { enabled: true } }), 400, 'BAD_REQUEST');
    expectError(await patch(id, { fields: [{ name: 'email' }, { name: 'email' }] }), 400, 'BAD_REQUEST');
    expectError(await patch(id, { execution: { on_valid_submission: [{ kind: 'webhook', webhook_id: 'wh_none' }] } }), 400, 'BAD_REQUEST');
    expectError(await patch(id, { drafts: { ttl_seconds: 0 } }), 400, 'BAD_REQUEST');
    expectError(await patch(id, {}), 400, 'BAD_REQUEST');
    // Unknown fields are ignored: a body of only those changes nothing, and is refused as {} is.
    const untouched = (await t.request('GET', `${base}/${id}`, { token: alice.token })).body.updated_at;
    expectError(await patch(id, { a: 1 }), 400, 'BAD_REQUEST');
    expect((await t.request('GET', `${base}/${id}`, { token: alice.token })).body.updated_at).toBe(untouched);
    expect((await get(`/${id}`)).body).toEqual(before);
  });

  it('is for owners and admins, within the tenant, and not on a disabled form', async () => {
    const id = await createForm();
    expectError(await patch(id, { title: 'Mine now' }, bob.token), 404, 'not_found');
    expectError(await patch(id, { title: 'Renamed by an admin' }, adminToken), 404, 'not_found'); // the admin is another tenant
    expectError(await patch('frm_nothing', { title: 'x' }), 404, 'not_found');
    expect((await post(`/${id}/status`, { status: 'disabled' })).status).toBe(200);
    expectError(await patch(id, { title: 'Too late' }), 409, 'form_not_accepting');
  });
});

describe('submissions', () => {
  it('submits, validates, and records the version', async () => {
    const id = await createForm({ conditional_logic: [{ when: 'country == "US"', require: ['state'] }] });
    const ok = await post(`/${id}/submissions`, { data: { email: 'a@example.com', country: 'US', state: 'CA' } }, bob.token === undefined ? undefined : alice.token);
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body).toMatchObject({ submission_id: expect.stringMatching(/^sub_/), form_id: id, form_version: 1, status: 'submitted', execution_status: { approval: null, job: null, webhook: null, fsm: null } });
    const bad = await post(`/${id}/submissions`, { data: { email: 'nope', age: -1 } });
    expectError(bad, 400, 'submission_invalid');
    expect(bad.body.details.errors).toHaveLength(2);
    expectError(await post(`/${id}/submissions`, { data: { email: 'a@example.com', country: 'US' } }), 400, 'submission_invalid');
    expectError(await post(`/${id}/submissions`, { data: 'text' }), 400, 'BAD_REQUEST');
    await put(`/${id}/schema`, { schema: { ...SCHEMA, required: ['email', 'age'] } });
    const v2 = await post(`/${id}/submissions`, { data: { email: 'b@example.com', age: 3 } });
    expect(v2.body.form_version).toBe(2);
    const read = await get(`/${id}/submissions/${ok.body.submission_id}`);
    expect(read.body).toMatchObject({ form_version: 1, data: { email: 'a@example.com' }, validation: { status: 'valid', errors: [], schema_version: 1 }, submitted_by: alice.user_id, anonymous: false });
    expect((await get(`/${id}`)).body.submission_count).toBe(2);
  });

  it('batch: in order, fail-fast, capped', async () => {
    const id = await createForm();
    const res = await post(`/${id}/submissions/batch`, { submissions: [{ data: { email: 'a@example.com' } }, { data: { email: 'b@example.com' } }, { data: { email: 'x' } }, { data: { email: 'c@example.com' } }] });
    expect(res.status, res.text).toBe(200);
    expect(res.body.count).toBe(2);
    expect(res.body.failed).toMatchObject({ index: 2, code: 'submission_invalid' });
    expect((await get(`/${id}/submissions?sort_order=asc`)).body.submissions.map((s: { data: { email: string } }) => s.data.email)).toEqual(['a@example.com', 'b@example.com']);
    const tooMany = Array.from({ length: 101 }, () => ({ data: { email: 'a@example.com' } }));
    expectError(await post(`/${id}/submissions/batch`, { submissions: tooMany }), 400, 'BAD_REQUEST');
    expectError(await post(`/${id}/submissions/batch`, { submissions: [] }), 400, 'BAD_REQUEST');
  });

  it('lists with filters; the submitter filter is for owners and admins', async () => {
    const owner = await t.newUser('owner');
    // An org API key would share a tenant; here the owner and a second user of the same tenant are the owner's own token (one user), so test privacy within a tenant with the same user and the admin tenant elsewhere.
    const id = await createForm({}, owner.token);
    await post(`/${id}/submissions`, { data: { email: 'a@example.com' } }, owner.token);
    const list = await get(`/${id}/submissions?submitter=${owner.user_id}`, owner.token);
    expect(list.body.pagination.total).toBe(1);
    expect(list.body.submissions[0]).toMatchObject({ submitted_by: owner.user_id });
    expect((await get(`/${id}/submissions?submitter=someone-else`, owner.token)).body.pagination.total).toBe(0);
    expect((await get(`/${id}/submissions?status=pending_approval`, owner.token)).body.pagination.total).toBe(0);
    expectError(await get(`/${id}/submissions?status=weird`, owner.token), 400, 'BAD_REQUEST');
    expectError(await get(`/${id}/submissions/sub_nope`, owner.token), 404, 'not_found');
  });

  it('approval: pending until the owner decides, once', async () => {
    const id = await createForm({ approval: { enabled: true } });
    const ack = await post(`/${id}/submissions`, { data: { email: 'a@example.com' } });
    expect(ack.body.status).toBe('pending_approval');
    expect(ack.body.execution_status.approval).toEqual({ status: 'pending_approval' });
    const approved = await post(`/${id}/submissions/${ack.body.submission_id}/approve`, { note: 'fine' });
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', execution_status: { approval: { status: 'approved', decided_by: alice.user_id, note: 'fine' } } });
    expectError(await post(`/${id}/submissions/${ack.body.submission_id}/reject`, {}), 409, 'conflict');
    const plain = await createForm();
    const other = await post(`/${plain}/submissions`, { data: { email: 'a@example.com' } });
    expectError(await post(`/${plain}/submissions/${other.body.submission_id}/approve`, {}), 409, 'conflict');
  });
});

describe('public submissions', () => {
  it('needs allow_anonymous, and is guarded by honeypots, min_submit_ms and a per-address limit', async () => {
    const closed = await createForm();
    expectError(await post(`/${closed}/submissions/public`, { data: { email: 'a@example.com' } }, undefined), 403, 'forbidden');
    const id = await createForm({ spam: { allow_anonymous: true, honeypot_fields: ['website'], min_submit_ms: 3_000, rate_limit_per_minute: 2 } });
    const now = t.clock.now();
    const started_at = new Date(now - 10_000).toISOString();
    expectError(await post(`/${id}/submissions/public`, { data: { email: 'a@example.com', website: 'x' }, started_at }, undefined), 400, 'spam_suspected');
    expectError(await post(`/${id}/submissions/public`, { data: { email: 'a@example.com' }, started_at: new Date(now - 1_000).toISOString() }, undefined), 400, 'spam_suspected');
    expectError(await post(`/${id}/submissions/public`, { data: { email: 'a@example.com' } }, undefined), 400, 'spam_suspected');
    expectError(await post(`/${id}/submissions/public`, { data: { email: 'nope' }, started_at }, undefined), 400, 'submission_invalid');
    const ok = await post(`/${id}/submissions/public`, { data: { email: 'a@example.com' }, started_at }, undefined);
    expect(ok.status, ok.text).toBe(201);
    expect((await post(`/${id}/submissions/public`, { data: { email: 'b@example.com' }, started_at }, undefined)).status).toBe(201);
    const limited = await post(`/${id}/submissions/public`, { data: { email: 'c@example.com' }, started_at }, undefined);
    expectError(limited, 429, 'rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    (t.clock as ManualClock).advance(61_000);
    expect((await post(`/${id}/submissions/public`, { data: { email: 'c@example.com' }, started_at }, undefined)).status).toBe(201);
    const read = await get(`/${id}/submissions/${ok.body.submission_id}`);
    expect(read.body).toMatchObject({ anonymous: true, submitted_by: 'anonymous' });
    expectError(await post('/frm_bad/submissions/public', { data: {} }, undefined), 404, 'not_found');
  });
});

describe('encrypted fields', () => {
  it('are answered in clear to the owner', async () => {
    const id = await createForm({ fields: [{ name: 'state', label: 'State', encrypted: true }] });
    expect((await get(`/${id}`)).body.fields).toEqual([{ name: 'state', label: 'State', kind: 'text', encrypted: true }]);
    const ack = await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: 'CA' } });
    expect((await get(`/${id}/submissions/${ack.body.submission_id}`)).body.data).toEqual({ email: 'a@example.com', state: 'CA' });
    expect((await get(`/${id}/submissions`)).body.submissions[0].data.state).toBe('CA');
  });
});

describe('drafts', () => {
  it('saves a draft that expires after its ttl (alarm)', async () => {
    const id = await createForm({ drafts: { enabled: true, ttl_seconds: 60 } });
    const saved = await post(`/${id}/drafts`, { partial_data: { email: 'half' } });
    expect(saved.status, saved.text).toBe(201);
    expect(saved.body).toMatchObject({ draft_id: expect.any(String), form_id: id, form_version: 1, subject: alice.user_id });
    expect(Date.parse(saved.body.expires_at) - t.clock.now()).toBe(60_000);
    const read = await get(`/${id}/drafts/${saved.body.draft_id}`);
    expect(read.body.partial_data).toEqual({ email: 'half' });
    (t.clock as ManualClock).advance(61_000);
    expectError(await get(`/${id}/drafts/${saved.body.draft_id}`), 404, 'not_found');
    const noDrafts = await createForm();
    expectError(await post(`/${noDrafts}/drafts`, { partial_data: {} }), 409, 'conflict');
    expectError(await post(`/${id}/drafts`, {}), 400, 'BAD_REQUEST');
  });
});

describe('schema patterns (ReDoS)', () => {
  // Lookahead (which RE2 lacks) around a nested repetition: it would run as a backtracking RegExp.
  const REDOS = '^(?=a)(a+)+$';

  it('runs a pattern RE2 reads in linear time: a nested repetition is accepted and a hostile submission answered at once', async () => {
    const id = await createForm({}, alice.token, false);
    const put1 = await put(`/${id}/schema`, { schema: { ...SCHEMA, properties: { ...SCHEMA.properties, state: { type: 'string', pattern: '^(a+)+$' }, name: { type: 'string', pattern: '^(\\w+\\s?)*$' } } } });
    expect(put1.status, put1.text).toBe(200);
    expect((await post(`/${id}/status`, { status: 'active' })).status).toBe(200);
    // With JavaScript's engine, 40 characters already took a minute; this many would never end.
    const hostile = await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: `${'a'.repeat(20_000)}!` } });
    expectError(hostile, 400, 'submission_invalid');
    // Two patterns in one schema: each checks its own field.
    expectError(await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: 'aab', name: 'Ada' } }), 400, 'submission_invalid');
    const fine = await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: 'aaa', name: 'Ada Lovelace' } });
    expect(fine.status, fine.text).toBe(201);
  });

  it('refuses, at create and PUT schema, a pattern RE2 cannot read that can backtrack catastrophically, naming where it is', async () => {
    const refused = async (schema: object, field: string, pattern = REDOS) => {
      const res = await post('', { name: 'x', title: 'x', schema });
      expectError(res, 400, 'BAD_REQUEST');
      expect(res.body.details).toContainEqual({ field, message: expect.stringContaining(JSON.stringify(pattern)) });
      expect(res.body.message).toContain(field);
    };
    await refused({ type: 'object', properties: { a: { type: 'string', pattern: REDOS } } }, 'body.schema.properties.a.pattern');
    await refused({ type: 'object', patternProperties: { [REDOS]: { type: 'string' } } }, `body.schema.patternProperties.${REDOS}`);
    await refused({ type: 'object', propertyNames: { pattern: REDOS } }, 'body.schema.propertyNames.pattern');
    await refused({ type: 'object', properties: { list: { type: 'array', items: { $ref: '#/$defs/word' } } }, $defs: { word: { type: 'string', pattern: REDOS } } }, 'body.schema.$defs.word.pattern');
    await refused({ type: 'object', properties: { a: { anyOf: [{ type: 'string', pattern: '(\\w)\\1(\\w+\\s?)*$' }, { type: 'integer' }] } } }, 'body.schema.properties.a.anyOf.0.pattern', '(\\w)\\1(\\w+\\s?)*$');

    // Ordinary patterns stay accepted, lookbehind and Unicode classes included; a `pattern` key inside `const` is data, not a pattern.
    const fine = await post('', {
      name: 'patterns', title: 'Patterns',
      schema: {
        type: 'object',
        properties: {
          phone: { type: 'string', pattern: '^\\d{3}-\\d{4}$' },
          name: { type: 'string', pattern: "^[\\p{L} '-]+$" },
          price: { type: 'string', pattern: '(?<=\\$)\\d+' },
          shape: { const: { pattern: REDOS } },
        },
        patternProperties: { '^x-[a-z]+$': { type: 'string' } },
      },
    });
    expect(fine.status, fine.text).toBe(201);

    const id = await createForm();
    const put1 = await put(`/${id}/schema`, { schema: { ...SCHEMA, properties: { ...SCHEMA.properties, state: { type: 'string', pattern: '(?!z)(x*)*y' } } } });
    expectError(put1, 400, 'BAD_REQUEST');
    expect(put1.body.details[0].field).toBe('body.schema.properties.state.pattern');
    expect((await get(`/${id}`)).body.version).toBe(1);
  });

  it('finds a pattern a $ref makes out of a data keyword (default, examples), as ajv compiles it', async () => {
    for (const schema of [
      { type: 'object', properties: { code: { $ref: '#/properties/x/default' }, x: { default: { type: 'string', pattern: REDOS } } } },
      { type: 'object', properties: { code: { $ref: '#/examples/0' } }, examples: [{ type: 'string', pattern: REDOS }] },
    ]) {
      const res = await post('', { name: 'ref', title: 'ref', schema });
      expectError(res, 400, 'BAD_REQUEST');
      expect(res.body.details).toContainEqual({ field: 'body.schema', message: expect.stringContaining(`${JSON.stringify(REDOS)} (a pattern the schema reaches through a $ref)`) });
    }
  });

  it('bounds a validation that runs a lookaround pattern the checker passes but that backtracks on the data', async () => {
    const id = await createForm({}, alice.token, false);
    // No nested repetition, so the shape check passes; the alternatives still backtrack exponentially (26 a's took 0.5 s, 30 took 10 s).
    const schema = { ...SCHEMA, properties: { ...SCHEMA.properties, state: { type: 'string', pattern: '^(?=a)(a|a)+$' }, password: { type: 'string', pattern: '^(?=.*[A-Z])(?=.*\\d).{8,}$' } } };
    const put1 = await put(`/${id}/schema`, { schema });
    expect(put1.status, put1.text).toBe(200);
    expect((await post(`/${id}/status`, { status: 'active' })).status).toBe(200);
    const hostile = await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: `${'a'.repeat(40)}!` } });
    expectError(hostile, 400, 'submission_invalid');
    expect(hostile.text).toContain('could not be checked against the schema');
    // Lookaround patterns still do their work within the bound.
    expectError(await post(`/${id}/submissions`, { data: { email: 'a@example.com', password: 'password1' } }), 400, 'submission_invalid');
    const fine = await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: 'aaa', password: 'Password1' } });
    expect(fine.status, fine.text).toBe(201);
  });

  it('counts the 64 KiB data bound in UTF-8 bytes, not characters', async () => {
    const id = await createForm({}, alice.token, false);
    expect((await post(`/${id}/status`, { status: 'active' })).status).toBe(200);
    // 30,000 euro signs: 30,000 characters, 90,000 bytes.
    const res = await post(`/${id}/submissions`, { data: { email: 'a@example.com', name: '\u20ac'.repeat(30_000) } });
    expectError(res, 400, 'submission_invalid');
    expect(res.text).toContain('larger than 65536 bytes');
  });
});

describe('encrypted fields at rest', () => {
  /** Whether `text` is in any LMDB file of the node's data directory. */
  function inStore(text: string): boolean {
    const needle = Buffer.from(text, 'utf8');
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith('.mdb')) files.push(path);
      }
    };
    walk(t.dataDir);
    expect(files.length).toBeGreaterThan(0);
    return files.some((file) => readFileSync(file).includes(needle));
  }

  it("seal a draft's encrypted field as a submission's, and open it for the owner", async () => {
    const id = await createForm({ fields: [{ name: 'state', encrypted: true }], drafts: { enabled: true } });
    const secret = `DRAFT-SECRET-${Date.now()}`;
    const saved = await post(`/${id}/drafts`, { partial_data: { email: 'half', state: secret } });
    expect(saved.status, saved.text).toBe(201);
    expect(saved.body.partial_data).toEqual({ email: 'half', state: secret });
    const submitted = await post(`/${id}/submissions`, { data: { email: 'a@example.com', state: `${secret}-SUB` } });
    expect(submitted.status, submitted.text).toBe(201);
    // Committed before the replies left: neither clear value is in the store, the unencrypted field is.
    expect(inStore('half')).toBe(true);
    expect(inStore(secret)).toBe(false);
    // The owner reads the draft in clear.
    expect((await get(`/${id}/drafts/${saved.body.draft_id}`)).body.partial_data).toEqual({ email: 'half', state: secret });
    // With an Idempotency-Key the answer (the clear value) is not kept for a replay either.
    const keyed = `${secret}-KEYED`;
    const headers = { 'idempotency-key': `draft-${Date.now()}` };
    const first = await t.request('POST', `${base}/${id}/drafts`, { token: alice.token, body: { partial_data: { state: keyed } }, headers });
    expect(first.status, first.text).toBe(201);
    const again = await t.request('POST', `${base}/${id}/drafts`, { token: alice.token, body: { partial_data: { state: keyed } }, headers });
    expectError(again, 409, 'idempotency_replay_withheld');
    expect(inStore(keyed)).toBe(false);
  });

  it('a value that only looks sealed, in a field that is not encrypted, is read as stored', async () => {
    const id = await createForm({ fields: [{ name: 'state', encrypted: true }], drafts: { enabled: true } });
    const lookalike = 'enc:v1:AAAA';
    const ack = await post(`/${id}/submissions`, { data: { email: 'a@example.com', country: lookalike, state: 'CA' } });
    expect(ack.status, ack.text).toBe(201);
    expect((await get(`/${id}/submissions/${ack.body.submission_id}`)).body.data).toEqual({ email: 'a@example.com', country: lookalike, state: 'CA' });
    expect((await get(`/${id}/submissions`)).status).toBe(200);
    const draft = await post(`/${id}/drafts`, { partial_data: { country: lookalike } });
    expect((await get(`/${id}/drafts/${draft.body.draft_id}`)).body.partial_data).toEqual({ country: lookalike });
  });
});

describe('approver_role "admin"', () => {
  it("a personal form's submissions are read and decided by a platform admin; the owner is refused", async () => {
    const owner = await t.newUser('personal');
    const id = await createForm({ approval: { enabled: true, approver_role: 'admin' } }, owner.token);
    const ack = await post(`/${id}/submissions`, { data: { email: 'a@example.com' } }, owner.token);
    expect(ack.body.status).toBe('pending_approval');
    const path = `/${id}/submissions/${ack.body.submission_id}`;
    expectError(await post(`${path}/approve`, {}, owner.token), 403, 'forbidden');
    // The admin is another tenant, and still reaches the form by its id.
    expect((await get(`/${id}`, adminToken)).body.form_id).toBe(id);
    expect((await get(path, adminToken)).body).toMatchObject({ submission_id: ack.body.submission_id, status: 'pending_approval' });
    expect((await get(`/${id}/submissions`, adminToken)).body.pagination.total).toBe(1);
    const approved = await post(`${path}/approve`, { note: 'ok' }, adminToken);
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', execution_status: { approval: { status: 'approved', note: 'ok' } } });
    expect((await get(path, owner.token)).body.status).toBe('approved');
    expectError(await post(`${path}/reject`, {}, adminToken), 409, 'conflict');
    // Anyone else of another tenant still finds no such form.
    expectError(await get(path, bob.token), 404, 'not_found');
    expectError(await post(`${path}/reject`, {}, bob.token), 404, 'not_found');
  });
});

describe('list bounds', () => {
  it('page takes any safe integer (an empty page past the end), page_size above 100 is capped', async () => {
    const id = await createForm();
    await post(`/${id}/submissions`, { data: { email: 'a@example.com' } });
    for (const path of ['', `/${id}/submissions`]) {
      const far = await get(`${path}?page=9007199254740991`);
      expect(far.status, far.text).toBe(200);
      expect(far.body.pagination).toMatchObject({ page: 9007199254740991, page_size: 20, has_more: false });
      expect(far.body[path === '' ? 'forms' : 'submissions']).toEqual([]);
      const big = await get(`${path}?page_size=1000001`);
      expect(big.status, big.text).toBe(200);
      expect(big.body.pagination.page_size).toBe(100);
      expectError(await get(`${path}?page=9007199254740992`), 400, 'BAD_REQUEST');
      expectError(await get(`${path}?page=-1`), 400, 'BAD_REQUEST');
    }
  });
});
