import { describe, expect, it } from 'vitest';
import { loadForm, stepForm, type FormState } from '../../actors/forms/form-state.js';
import { formKey, type FormMessage, type FormSettings } from '../../actors/forms/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The form actor's step, pure: definitions, versions, status, submissions, drafts, spam guards, approval. */
const KEY = formKey('t1', 'frm_dDE.f1');
const owner = { user_id: 'u-owner', admin: false };
const other = { user_id: 'u-other', admin: false };
const admin = { user_id: 'u-admin', admin: true };
const SCHEMA = { type: 'object', properties: { email: { type: 'string', format: 'email' }, country: { type: 'string' }, state: { type: 'string' } }, required: ['email'] };
const SETTINGS: FormSettings = {
  multipart: { enabled: false, allowed_content_types: [], blob_bucket: 'default', max_file_bytes: 1024, max_files: 1 },
  execution: { on_valid_submission: [] },
  fields: [],
  conditional_logic: [{ when: 'country == "US"', require: ['state'] }],
  drafts: { enabled: true, ttl_seconds: 60 },
  spam: { allow_anonymous: true, honeypot_fields: ['website'], min_submit_ms: 2_000, rate_limit_per_minute: 2 },
  approval: { enabled: false, approver_role: 'owner', kind: 'single' },
};

function fresh(settings: FormSettings = SETTINGS): FormState {
  const state = loadForm(KEY, []);
  step(state, { op: 'create', tenant: 't1', caller: owner, name: 'signup', title: 'Sign up', schema: SCHEMA, settings }, 1_000);
  return state;
}
function step(state: FormState, message: FormMessage | { op: '$alarm'; name: string; due_ms: number }, now = 10_000) {
  return stepForm(state, message, fixedContext(now, 'form', KEY));
}
const activate = (state: FormState) => step(state, { op: 'set_status', caller: owner, status: 'active' });

describe('form actor', () => {
  it('creates a draft form at version 1 and tells the index', () => {
    const state = loadForm(KEY, []);
    const result = step(state, { op: 'create', tenant: 't1', caller: owner, name: 'signup', title: 'Sign up', schema: SCHEMA, settings: SETTINGS });
    expect(result.reply).toMatchObject({ form_id: 'frm_dDE.f1', status: 'draft', version: 1, submission_count: 0 });
    expect(result.writes).toHaveLength(1);
    expect(result.sends?.[0]).toMatchObject({ kind: 'form-index', message: { op: 'upsert' } });
  });

  it('refuses an invalid schema, and rules naming unknown fields, storing nothing', () => {
    const state = loadForm(KEY, []);
    expect(codeOf(() => step(state, { op: 'create', tenant: 't1', caller: owner, name: 'n', title: 't', schema: { type: 'object', properties: { a: { type: 'nope' } } }, settings: SETTINGS }))).toBe('invalid_json_schema');
    expect(codeOf(() => step(state, { op: 'create', tenant: 't1', caller: owner, name: 'n', title: 't', schema: { type: 'object', properties: { a: {} } }, settings: SETTINGS }))).toBe('BAD_REQUEST');
    expect(state.def).toBeNull();
  });

  it('only active forms take submissions', () => {
    const state = fresh();
    expect(codeOf(() => step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }))).toBe('form_not_accepting');
    activate(state);
    expect(step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }).reply).toMatchObject({ status: 'submitted', form_version: 1 });
    step(state, { op: 'set_status', caller: owner, status: 'paused' });
    expect(codeOf(() => step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }))).toBe('form_not_accepting');
  });

  it('enforces the transition table and ownership', () => {
    const state = fresh();
    expect(codeOf(() => step(state, { op: 'set_status', caller: owner, status: 'paused' }))).toBe('invalid_status_transition');
    expect(codeOf(() => step(state, { op: 'set_status', caller: other, status: 'active' }))).toBe('forbidden');
    expect(step(state, { op: 'set_status', caller: admin, status: 'disabled' }).reply).toMatchObject({ status: 'disabled' });
    expect(codeOf(() => step(state, { op: 'set_status', caller: owner, status: 'active' }))).toBe('invalid_status_transition');
  });

  it('update_settings: owners and admins only; merged groups, replaced lists; checked against the current schema', () => {
    const state = fresh();
    expect(codeOf(() => step(state, { op: 'update_settings', caller: other, patch: { title: 'Mine' } }))).toBe('forbidden');
    const result = step(state, { op: 'update_settings', caller: admin, patch: { title: 'Join', spam: { min_submit_ms: 0 }, conditional_logic: [] } }, 20_000);
    expect(result.reply).toMatchObject({ title: 'Join', version: 1, conditional_logic: [], spam: { ...SETTINGS.spam, min_submit_ms: 0 }, updated_at_ms: 20_000 });
    expect(result.writes).toHaveLength(1);
    expect(result.sends?.[0]).toMatchObject({ kind: 'form-index', message: { op: 'upsert' } });
    const revision = state.def!.revision;
    // Refused: nothing changes.
    expect(codeOf(() => step(state, { op: 'update_settings', caller: owner, patch: { fields: [{ name: 'zip', label: 'Zip', kind: 'text', encrypted: false }] } }))).toBe('BAD_REQUEST');
    expect(codeOf(() => step(state, { op: 'update_settings', caller: owner, patch: { multipart: { enabled: true } } }))).toBe('BAD_REQUEST');
    expect(state.def).toMatchObject({ title: 'Join', fields: [], multipart: SETTINGS.multipart, revision });
    step(state, { op: 'set_status', caller: owner, status: 'disabled' });
    expect(codeOf(() => step(state, { op: 'update_settings', caller: owner, patch: { title: 'Late' } }))).toBe('form_not_accepting');
  });

  it('validates against the schema and the conditional logic; submissions keep their version', () => {
    const state = fresh();
    activate(state);
    expect(codeOf(() => step(state, { op: 'submit', caller: other, data: { email: 'nope' } }))).toBe('submission_invalid');
    expect(codeOf(() => step(state, { op: 'submit', caller: other, data: { email: 'a@example.com', country: 'US' } }))).toBe('submission_invalid');
    const first = step(state, { op: 'submit', caller: other, data: { email: 'a@example.com', country: 'US', state: 'CA' } }).reply as { submission_id: string };
    const v2 = step(state, { op: 'put_schema', caller: owner, schema: { ...SCHEMA, required: ['email', 'country'] } });
    expect(v2.reply).toMatchObject({ version: 2 });
    expect(codeOf(() => step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }))).toBe('submission_invalid');
    const second = step(state, { op: 'submit', caller: other, data: { email: 'a@example.com', country: 'FR' } }).reply as { form_version: number };
    expect(second.form_version).toBe(2);
    expect(step(state, { op: 'get_submission', caller: owner, submission_id: first.submission_id }).reply).toMatchObject({ form_version: 1 });
  });

  it('batch is fail-fast and keeps what came before the failure', () => {
    const state = fresh();
    activate(state);
    const result = step(state, { op: 'submit_batch', caller: other, items: [{ email: 'a@example.com' }, { email: 'bad' }, { email: 'c@example.com' }] });
    const reply = result.reply as { results: unknown[]; failed: { index: number; code: string } };
    expect(reply.results).toHaveLength(1);
    expect(reply.failed).toMatchObject({ index: 1, code: 'submission_invalid' });
    expect(result.writes).toHaveLength(1);
    expect(state.submissions.size).toBe(1);
  });

  it('public submissions: honeypot, min_submit_ms, rate limit per address', () => {
    const state = fresh();
    activate(state);
    const now = 100_000;
    const publicSubmit = (data: Record<string, unknown>, address = '1.2.3.4', started_at_ms: number | null = now - 5_000) =>
      step(state, { op: 'submit_public', address, data, started_at_ms }, now);
    expect(codeOf(() => publicSubmit({ email: 'a@example.com', website: 'http://spam' }))).toBe('spam_suspected');
    expect(codeOf(() => publicSubmit({ email: 'a@example.com' }, '1.2.3.4', now - 100))).toBe('spam_suspected');
    expect(codeOf(() => publicSubmit({ email: 'a@example.com' }, '1.2.3.4', null))).toBe('spam_suspected');
    expect(publicSubmit({ email: 'a@example.com', website: '' }).reply).toMatchObject({ status: 'submitted' });
    publicSubmit({ email: 'a@example.com' });
    expect(codeOf(() => publicSubmit({ email: 'a@example.com' }))).toBe('rate_limited');
    expect(publicSubmit({ email: 'a@example.com' }, '5.6.7.8').reply).toBeDefined();
    const stored = [...state.submissions.values()][0];
    expect(stored).toMatchObject({ anonymous: true, submitted_by: 'anonymous' });
    expect(stored.data).not.toHaveProperty('website');
  });

  it('refuses anonymous submissions unless allowed', () => {
    const state = fresh({ ...SETTINGS, spam: { ...SETTINGS.spam, allow_anonymous: false } });
    activate(state);
    expect(codeOf(() => step(state, { op: 'submit_public', address: 'a', data: { email: 'a@example.com' }, started_at_ms: 0 }))).toBe('forbidden');
  });

  it('submissions are private to their submitter and the owners; the submitter filter is for owners', () => {
    const state = fresh();
    activate(state);
    const mine = step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }).reply as { submission_id: string };
    step(state, { op: 'submit', caller: owner, data: { email: 'o@example.com' } });
    const third = { user_id: 'u-third', admin: false };
    expect(codeOf(() => step(state, { op: 'get_submission', caller: third, submission_id: mine.submission_id }))).toBe('not_found');
    const query = { status: null, submitter: null, page: 1, page_size: 20, sort_by: 'created_at', sort_order: 'asc' } as const;
    expect((step(state, { op: 'list_submissions', caller: other, query }).reply as { total: number }).total).toBe(1);
    expect((step(state, { op: 'list_submissions', caller: owner, query }).reply as { total: number }).total).toBe(2);
    expect((step(state, { op: 'list_submissions', caller: admin, query: { ...query, submitter: 'u-other' } }).reply as { total: number }).total).toBe(1);
    expect(codeOf(() => step(state, { op: 'list_submissions', caller: other, query: { ...query, submitter: 'u-owner' } }))).toBe('forbidden');
  });

  it('drafts expire: gone to reads at once, removed by the alarm', () => {
    const state = fresh();
    activate(state);
    const saved = step(state, { op: 'save_draft', caller: other, partial_data: { email: 'half' } }, 20_000);
    const draft = saved.reply as { draft_id: string; expires_at_ms: number };
    expect(draft.expires_at_ms).toBe(80_000);
    expect(saved.alarms).toEqual([{ name: 'draft-expiry', due_ms: 80_000 }]);
    expect(step(state, { op: 'get_draft', caller: other, draft_id: draft.draft_id }, 79_999).reply).toMatchObject({ partial_data: { email: 'half' } });
    expect(codeOf(() => step(state, { op: 'get_draft', caller: { user_id: 'u-third', admin: false }, draft_id: draft.draft_id }, 30_000))).toBe('not_found');
    expect(codeOf(() => step(state, { op: 'get_draft', caller: other, draft_id: draft.draft_id }, 80_000))).toBe('not_found');
    const fired = step(state, { op: '$alarm', name: 'draft-expiry', due_ms: 80_000 }, 80_000);
    expect(fired.writes).toEqual([{ subkey: `d:${draft.draft_id}`, value: undefined }]);
    expect(fired.alarms).toEqual([{ name: 'draft-expiry', due_ms: null }]);
    expect(state.drafts.size).toBe(0);
  });

  it('approval: submissions wait for the approver, who decides once', () => {
    const state = fresh({ ...SETTINGS, approval: { enabled: true, approver_role: 'owner', kind: 'single' } });
    activate(state);
    const ack = step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }).reply as { submission_id: string; status: string };
    expect(ack.status).toBe('pending_approval');
    expect(codeOf(() => step(state, { op: 'decide', caller: other, submission_id: ack.submission_id, decision: 'approved', note: '' }))).toBe('forbidden');
    expect(step(state, { op: 'decide', caller: owner, submission_id: ack.submission_id, decision: 'approved', note: 'ok' }).reply).toMatchObject({ status: 'approved', approval: { decided_by: 'u-owner', note: 'ok' } });
    expect(codeOf(() => step(state, { op: 'decide', caller: owner, submission_id: ack.submission_id, decision: 'rejected', note: '' }))).toBe('conflict');
  });

  it('reloads from its records to the same state', () => {
    const state = fresh();
    const records: [string, unknown][] = [['def', state.def]];
    activate(state);
    records[0] = ['def', state.def];
    const result = step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } });
    for (const write of result.writes ?? []) records.push([write.subkey, write.value]);
    const reloaded = loadForm(KEY, records);
    expect(reloaded.def).toEqual(state.def);
    expect([...reloaded.submissions.values()]).toEqual([...state.submissions.values()]);
  });
});

describe('encrypted fields', () => {
  it('are sealed at rest and opened only for owners and admins (and for hooks)', async () => {
    const { setFieldKey, isSealed } = await import('../../actors/forms/field-crypto.js');
    const { submissionEventData } = await import('../../actors/forms/form-state.js');
    setFieldKey(Buffer.alloc(32, 9));
    try {
      const state = fresh({ ...SETTINGS, fields: [{ name: 'state', label: 'State', kind: 'text', encrypted: true }] });
      activate(state);
      const result = step(state, { op: 'submit', caller: other, data: { email: 'a@example.com', country: 'US', state: 'CA' } });
      const stored = result.writes![0].value as { submission_id: string; data: Record<string, unknown> };
      expect(isSealed(stored.data.state)).toBe(true);
      expect(JSON.stringify(stored)).not.toContain('"CA"');
      expect(stored.data.email).toBe('a@example.com');
      const id = stored.submission_id;
      expect((step(state, { op: 'get_submission', caller: owner, submission_id: id }).reply as { data: { state: string } }).data.state).toBe('CA');
      expect((step(state, { op: 'get_submission', caller: admin, submission_id: id }).reply as { data: { state: string } }).data.state).toBe('CA');
      expect((step(state, { op: 'get_submission', caller: other, submission_id: id }).reply as { data: { state: string } }).data.state).toBe('[encrypted]');
      expect(submissionEventData(state.submissions.get(id)!).data.state).toBe('CA');
      // A sealed value moved to another submission does not open: it is answered as stored (sealed), and the read still works.
      const second = step(state, { op: 'submit', caller: other, data: { email: 'b@example.com', country: 'US', state: 'NY' } }).writes![0].value as { submission_id: string };
      state.submissions.set(second.submission_id, { ...state.submissions.get(second.submission_id)!, data: { ...stored.data } });
      expect((step(state, { op: 'get_submission', caller: owner, submission_id: second.submission_id }).reply as { data: { state: string } }).data.state).toBe(stored.data.state);
    } finally {
      setFieldKey(null);
    }
  });
});

describe('encrypted fields of drafts', () => {
  it("are sealed at rest as a submission's and read as submissions are: in clear for owners and admins, \"[encrypted]\" for others", async () => {
    const { setFieldKey, isSealed } = await import('../../actors/forms/field-crypto.js');
    setFieldKey(Buffer.alloc(32, 9));
    try {
      const state = fresh({ ...SETTINGS, fields: [{ name: 'state', label: 'State', kind: 'text', encrypted: true }] });
      activate(state);
      const result = step(state, { op: 'save_draft', caller: other, partial_data: { email: 'half', state: 'CA' } });
      const stored = result.writes![0].value as { draft_id: string; partial_data: Record<string, unknown> };
      expect(isSealed(stored.partial_data.state)).toBe(true);
      expect(JSON.stringify(stored)).not.toContain('"CA"');
      expect(stored.partial_data.email).toBe('half');
      const read = (caller: typeof owner) => (step(state, { op: 'get_draft', caller, draft_id: stored.draft_id }).reply as { partial_data: Record<string, unknown> }).partial_data;
      expect(read(owner)).toEqual({ email: 'half', state: 'CA' });
      expect(read(admin)).toEqual({ email: 'half', state: 'CA' });
      expect(read(other)).toEqual({ email: 'half', state: '[encrypted]' });
      expect((result.reply as { partial_data: Record<string, unknown> }).partial_data).toEqual({ email: 'half', state: '[encrypted]' });
      // A draft's sealed value does not open as a submission's (the draft id is in its additional data).
      const sub = step(state, { op: 'submit', caller: other, data: { email: 'b@example.com' } }).writes![0].value as { submission_id: string };
      state.submissions.set(sub.submission_id, { ...state.submissions.get(sub.submission_id)!, data: { email: 'b@example.com', state: stored.partial_data.state } });
      expect((step(state, { op: 'get_submission', caller: owner, submission_id: sub.submission_id }).reply as { data: { state: string } }).data.state).toBe(stored.partial_data.state);
    } finally {
      setFieldKey(null);
    }
  });

  it('a draft stored before drafts were sealed reads as it was stored', () => {
    const def = fresh({ ...SETTINGS, fields: [{ name: 'state', label: 'State', kind: 'text', encrypted: true }] }).def!;
    const old = { draft_id: 'drf_old', form_id: def.form_id, form_version: 1, subject: other.user_id, partial_data: { email: 'half', state: 'CA' }, created_at_ms: 5_000, updated_at_ms: 5_000, expires_at_ms: 60_000 };
    const state = loadForm(KEY, [['def', { ...def, status: 'active' }], ['d:drf_old', old]]);
    expect((step(state, { op: 'get_draft', caller: owner, draft_id: 'drf_old' }).reply as { partial_data: unknown }).partial_data).toEqual({ email: 'half', state: 'CA' });
    expect((step(state, { op: 'get_draft', caller: other, draft_id: 'drf_old' }).reply as { partial_data: unknown }).partial_data).toEqual({ email: 'half', state: 'CA' });
  });
});

describe('schema patterns', () => {
  const unsafeSchema = { ...SCHEMA, properties: { ...SCHEMA.properties, state: { type: 'string', pattern: '^(?=a)(a+)+$' } } };

  it('refuses an unsafe pattern at create and PUT schema, storing nothing', () => {
    const created = loadForm(KEY, []);
    expect(codeOf(() => step(created, { op: 'create', tenant: 't1', caller: owner, name: 'n', title: 't', schema: unsafeSchema, settings: SETTINGS }))).toBe('BAD_REQUEST');
    expect(created.def).toBeNull();
    const state = fresh();
    expect(codeOf(() => step(state, { op: 'put_schema', caller: owner, schema: unsafeSchema }))).toBe('BAD_REQUEST');
    expect(state.def!.version).toBe(1);
  });

  it('a version stored before patterns were checked takes no submissions, and a batch stops there with nothing changed', () => {
    const def = fresh().def!;
    const state = loadForm(KEY, [['def', { ...def, status: 'active', schemas: [unsafeSchema] }]]);
    const data = { email: 'a@example.com', state: `${'a'.repeat(40)}!` };
    expect(codeOf(() => step(state, { op: 'submit', caller: other, data }))).toBe('conflict');
    const batch = step(state, { op: 'submit_batch', caller: other, items: [data] });
    expect(batch.reply).toMatchObject({ results: [], failed: { index: 0, code: 'conflict' } });
    expect(state.submissions.size).toBe(0);
    expect(codeOf(() => step(state, { op: 'update_settings', caller: owner, patch: { title: 'x' } }))).toBe('BAD_REQUEST');
    // A new, safe version makes it take submissions again.
    expect(step(state, { op: 'put_schema', caller: owner, schema: SCHEMA }).reply).toMatchObject({ version: 2 });
    expect(step(state, { op: 'submit', caller: other, data: { email: 'a@example.com' } }).reply).toMatchObject({ status: 'submitted' });
  });
});
