import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { orgOfTwo } from '../helpers/org-tenant.js';

/** Execution hooks of forms over the real socket: fsm moves, webhook deliveries, retry, approval (docs/api/forms.md, "Execution hooks"). */
let t: TestNode;
let receiver: Receiver;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
const base = '/api/v1/forms';

beforeAll(async () => {
  t = await startTestNode({ config: { accessTokenTtlSeconds: 86_400 } });
  receiver = await startReceiver();
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await receiver?.close();
  await t?.destroy();
});

const post = (path: string, body: unknown, token = alice.token) => t.request('POST', `${base}${path}`, { token, body });
const get = (path: string, token = alice.token) => t.request('GET', `${base}${path}`, { token });
const put = (path: string, body: unknown, token = alice.token) => t.request('PUT', `${base}${path}`, { token, body });
const SCHEMA = { type: 'object', properties: { email: { type: 'string' } }, required: ['email'] };

async function activeForm(extra: Record<string, unknown>): Promise<string> {
  const res = await post('', { name: 'hooked', title: 'Hooked', schema: SCHEMA, ...extra });
  expect(res.status, res.text).toBe(201);
  expect((await post(`/${res.body.form_id}/status`, { status: 'active' })).status).toBe(200);
  return res.body.form_id;
}

describe('state machines', () => {
  it('are created, read, moved by hand along their transitions only', async () => {
    const created = await put('/state-machines/order', { states: ['new', 'paid', 'shipped'], initial: 'new', transitions: [{ from: 'new', to: 'paid' }, { from: 'paid', to: 'shipped' }] });
    expect(created.status, created.text).toBe(200);
    expect(created.body).toMatchObject({ name: 'order', state: 'new', moves: 0, history: [] });
    expectError(await post('/state-machines/order/move', { target_state: 'shipped' }), 409, 'invalid_status_transition');
    const moved = await post('/state-machines/order/move', { target_state: 'paid' });
    expect(moved.body).toMatchObject({ state: 'paid', moves: 1, history: [{ from: 'new', to: 'paid', cause: { user_id: alice.user_id } }] });
    expectError(await put('/state-machines/order', { states: ['new'], initial: 'new', transitions: [] }), 409, 'conflict');
    expectError(await put('/state-machines/bad', { states: ['a'], initial: 'b', transitions: [] }), 400, 'BAD_REQUEST');
    expectError(await get('/state-machines/order', bob.token), 404, 'not_found');
    expectError(await get('/state-machines/none'), 404, 'not_found');
  });
});

describe('hooks', () => {
  it('an fsm hook moves the machine once per submission; a failed one is retried', async () => {
    await put('/state-machines/lead', { states: ['open', 'contacted', 'closed'], initial: 'open', transitions: [{ from: 'open', to: 'contacted' }] });
    const id = await activeForm({ execution: { on_valid_submission: [{ kind: 'fsm', fsm_name: 'lead', target_state: 'contacted' }] } });
    const ack = await post(`/${id}/submissions`, { data: { email: 'a@example.com' } });
    expect(ack.status, ack.text).toBe(201);
    expect(ack.body.execution_status.fsm).toEqual([expect.objectContaining({ index: 0, fsm_name: 'lead', status: 'running', attempts: 1 })]);
    await expect.poll(async () => (await get(`/${id}/submissions/${ack.body.submission_id}`)).body.execution_status.fsm[0].status).toBe('succeeded');
    const machine = await get('/state-machines/lead');
    expect(machine.body).toMatchObject({ state: 'contacted', moves: 1, history: [{ to: 'contacted', cause: { form_id: id, submission_id: ack.body.submission_id } }] });

    // A move the machine refuses fails the hook; redefine the machine and retry.
    const closing = await activeForm({ execution: { on_valid_submission: [{ kind: 'fsm', fsm_name: 'lead', target_state: 'closed' }] } });
    const second = await post(`/${closing}/submissions`, { data: { email: 'b@example.com' } });
    await expect.poll(async () => (await get(`/${closing}/submissions/${second.body.submission_id}`)).body.execution_status.fsm[0].status).toBe('failed');
    const failed = await get(`/${closing}/submissions/${second.body.submission_id}`);
    expect(failed.body.execution_status.fsm[0].error).toMatchObject({ code: 'invalid_status_transition' });
    expectError(await post(`/${id}/submissions/${ack.body.submission_id}/retry`, {}), 409, 'conflict');
    await put('/state-machines/lead', { states: ['open', 'contacted', 'closed'], initial: 'open', transitions: [{ from: 'open', to: 'contacted' }, { from: 'contacted', to: 'closed' }] });
    const retried = await post(`/${closing}/submissions/${second.body.submission_id}/retry`, {});
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body.execution_status.fsm[0]).toMatchObject({ status: 'running', attempts: 2 });
    await expect.poll(async () => (await get(`/${closing}/submissions/${second.body.submission_id}`)).body.execution_status.fsm[0].status).toBe('succeeded');
    expect((await get('/state-machines/lead')).body).toMatchObject({ state: 'closed', moves: 2 });
  });

  it('a webhook hook delivers the submission to the named webhook, signed', async () => {
    const hook = await t.request('POST', '/api/v1/webhooks', { token: alice.token, body: { url: `${receiver.url}/forms`, events: ['test.webhook'] } });
    expect(hook.status, hook.text).toBe(201);
    const webhook_id = hook.body.data.id;
    const id = await activeForm({ execution: { on_valid_submission: [{ kind: 'webhook', webhook_id }] } });
    const ack = await post(`/${id}/submissions`, { data: { email: 'w@example.com' } });
    expect(ack.body.execution_status.webhook).toEqual([expect.objectContaining({ webhook_id, status: 'dispatched', attempts: 1, event_id: `${ack.body.submission_id}.0.1` })]);
    await expect.poll(() => receiver.received.filter((d) => d.path === '/forms').length, { timeout: 10_000 }).toBe(1);
    const delivery = receiver.received.find((d) => d.path === '/forms')!;
    expect(delivery.headers['webhook-id']).toBe(`${ack.body.submission_id}.0.1`);
    expect(delivery.headers['webhook-signature']).toBeTruthy();
    expect(JSON.stringify(delivery.json)).toContain('w@example.com');
    expect(JSON.stringify(delivery.json)).toContain('form.submission');
  });

  it('a job hook enqueues one job on the named queue, its payload filled from the submission', async () => {
    const id = await activeForm({
      execution: { on_valid_submission: [{ kind: 'job', queue: 'form-jobs', payload_template: { to: '{{data.email}}', line: 'from {{submitted_by}} on v{{form_version}}', submission: '{{submission_id}}' }, target: { url: `${receiver.url}/jobs`, secret: 'a-secret-of-16-chars-or-more' } }] },
    });
    const form = await get(`/${id}`);
    expect(form.body.execution.on_valid_submission[0]).toEqual({ kind: 'job', queue: 'form-jobs', payload_template: expect.any(Object), target: { url: `${receiver.url}/jobs`, headers: {} } });
    const ack = await post(`/${id}/submissions`, { data: { email: 'j@example.com' } });
    expect(ack.body.execution_status.job).toEqual([expect.objectContaining({ queue: 'form-jobs', status: 'running', attempts: 1, job_id: expect.stringMatching(/^job_/) })]);
    await expect.poll(async () => (await get(`/${id}/submissions/${ack.body.submission_id}`)).body.execution_status.job[0].status).toBe('succeeded');
    const job_id = ack.body.execution_status.job[0].job_id;
    await expect.poll(() => receiver.received.filter((d) => d.path === '/jobs').length, { timeout: 15_000 }).toBe(1);
    expect(receiver.received.find((d) => d.path === '/jobs')!.json).toEqual({
      job_id, queue: 'form-jobs', attempt: 1,
      payload: { to: 'j@example.com', line: `from ${alice.user_id} on v1`, submission: ack.body.submission_id },
    });
    const job = await t.request('GET', `/api/v1/jobs/${job_id}`, { token: alice.token });
    expect(job.status, job.text).toBe(200);
  });

  it("refuses a webhook hook naming another user's webhook, and incomplete hooks", async () => {
    const hook = await t.request('POST', '/api/v1/webhooks', { token: bob.token, body: { url: `${receiver.url}/bob`, events: ['test.webhook'] } });
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'webhook', webhook_id: hook.body.data.id }] } }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'webhook', webhook_id: 'wh_none' }] } }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'job', queue: 'q' }] } }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'job', queue: 'q', target: { url: 'ftp://x', secret: 'a-secret-of-16-chars-or-more' } }] } }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'job', queue: 'bad queue', target: { url: 'https://example.com', secret: 'a-secret-of-16-chars-or-more' } }] } }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'fsm', fsm_name: 'lead' }] } }), 400, 'BAD_REQUEST');
  });

  it('with approval, hooks wait for the decision: approved runs them, rejected skips them', async () => {
    await put('/state-machines/review', { states: ['a', 'b'], initial: 'a', transitions: [{ from: 'a', to: 'b' }] });
    const id = await activeForm({ approval: { enabled: true }, execution: { on_valid_submission: [{ kind: 'fsm', fsm_name: 'review', target_state: 'b' }] } });
    const first = await post(`/${id}/submissions`, { data: { email: 'a@example.com' } });
    expect(first.body.execution_status.fsm[0]).toMatchObject({ status: 'waiting_approval', attempts: 0 });
    const second = await post(`/${id}/submissions`, { data: { email: 'b@example.com' } });
    const rejected = await post(`/${id}/submissions/${second.body.submission_id}/reject`, {});
    expect(rejected.body.execution_status.fsm[0]).toMatchObject({ status: 'skipped' });
    expect((await get('/state-machines/review')).body.state).toBe('a');
    await post(`/${id}/submissions/${first.body.submission_id}/approve`, {});
    await expect.poll(async () => (await get(`/${id}/submissions/${first.body.submission_id}`)).body.execution_status.fsm[0].status).toBe('succeeded');
    expect((await get('/state-machines/review')).body.state).toBe('b');
  });
});

describe('fsm hooks and who may move the machine', () => {
  it("refuses a hook naming a machine the form's author may not move by hand, and moves with the author's authority", async () => {
    const { ownerKey, memberKey } = await orgOfTwo(t, 'Fsm Org');
    expect((await put('/state-machines/deal', { states: ['open', 'closed'], initial: 'open', transitions: [{ from: 'open', to: 'closed' }] }, ownerKey)).status).toBe(200);
    // The member may not move it by hand, nor through a form of theirs.
    expectError(await post('/state-machines/deal/move', { target_state: 'closed' }, memberKey), 403, 'forbidden');
    const hook = { on_valid_submission: [{ kind: 'fsm', fsm_name: 'deal', target_state: 'closed' }] };
    const refused = await post('', { name: 'x', title: 'x', schema: SCHEMA, execution: hook }, memberKey);
    expectError(refused, 400, 'BAD_REQUEST');
    expect(refused.body.details).toEqual([{ field: 'body.execution.on_valid_submission.0.fsm_name', message: 'names no state machine you may move' }]);
    // Nor by PATCHing the hook into a form of theirs; a machine that does not exist yet is refused as well.
    const plain = await post('', { name: 'y', title: 'y', schema: SCHEMA }, memberKey);
    expect(plain.status, plain.text).toBe(201);
    expectError(await t.request('PATCH', `${base}/${plain.body.form_id}`, { token: memberKey, body: { execution: hook } }), 400, 'BAD_REQUEST');
    expectError(await post('', { name: 'z', title: 'z', schema: SCHEMA, execution: { on_valid_submission: [{ kind: 'fsm', fsm_name: 'later', target_state: 'b' }] } }, ownerKey), 400, 'BAD_REQUEST');
    expect((await get('/state-machines/deal', ownerKey)).body).toMatchObject({ state: 'open', moves: 0 });
    // The machine's creator names it, and a member's submission to that form moves it.
    const form = await post('', { name: 'deals', title: 'Deals', schema: SCHEMA, execution: hook }, ownerKey);
    expect(form.status, form.text).toBe(201);
    expect((await post(`/${form.body.form_id}/status`, { status: 'active' }, ownerKey)).status).toBe(200);
    const ack = await post(`/${form.body.form_id}/submissions`, { data: { email: 'm@example.com' } }, memberKey);
    expect(ack.status, ack.text).toBe(201);
    await expect.poll(async () => (await get('/state-machines/deal', ownerKey)).body.state).toBe('closed');
  });
});
