import { describe, expect, it } from 'vitest';
import type { ActorEvent, TurnContext } from '../../runtime/index.js';
import { webhookPolicy, type AttemptResult, type SubscriptionsMessage, type WebhookAttempt, type WebhookMessage, type WebhookSettings } from '../../actors/webhooks/messages.js';
import { DELIVER_ALARM, emptyWebhook, loadWebhook, stepWebhook, type WebhookState } from '../../actors/webhooks/webhook-state.js';
import { loadSubscriptions, stepSubscriptions } from '../../actors/webhooks/subscriptions-state.js';
import { codeOf } from '../helpers/step.js';

const settings: WebhookSettings = { attempt_timeout_ms: 1_000, disable_after_failures: 3, retry_base_ms: 1_000 };
const owner = { user_id: 'u1', admin: false, tenant: 't1' };
const secret = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;

let ids = 0;
function context(now: number, request_id: string | null = null): TurnContext {
  return { now, kind: 'webhook', key: 'wh_1', request_id, newId: (prefix = '') => `${prefix}${++ids}` };
}

/** A webhook actor driven by hand: every turn's writes are applied to a record map, so reloads can be checked. */
function driver() {
  let state: WebhookState = emptyWebhook('wh_1');
  const records = new Map<string, unknown>();
  const step = (message: WebhookMessage | { op: '$alarm'; name: string; due_ms: number }, now: number, request_id: string | null = null) => {
    const result = stepWebhook(state, message as WebhookMessage, context(now, request_id));
    state = result.state;
    for (const write of result.writes ?? []) {
      if (write.value === undefined) records.delete(write.subkey);
      else records.set(write.subkey, structuredClone(write.value));
    }
    return result;
  };
  return {
    step,
    get state() {
      return state;
    },
    reload() {
      state = loadWebhook('wh_1', [...records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
    },
    records,
  };
}

function attempts(events: ActorEvent[] | undefined): WebhookAttempt[] {
  return (events ?? []).filter((e) => e.type === 'webhook.attempt').map((e) => e.data as WebhookAttempt);
}

function result(event_id: string, attempt: number, status_code: number | null, error_kind: AttemptResult['error_kind'] = null): AttemptResult {
  return { op: 'attempt_result', event_id, attempt, status_code, error: status_code === null ? 'boom' : null, error_kind, duration_ms: 5, response_excerpt: null, settings };
}

function created(now = 1_000_000) {
  const d = driver();
  const out = d.step({ op: 'create', tenant: 't1', caller: owner, url: 'https://example.com/hook', events: ['test.webhook'], headers: { 'x-a': '1' }, secret, settings }, now, 'r1');
  return { d, out };
}

const event = (id: string) => ({ id, type: 'entity.status_changed', timestamp_ms: 1_000_000, data: { entity_id: 'e1' } });

describe('webhook actor', () => {
  it('create defers until the index acknowledges, then answers the view', () => {
    const { d, out } = created();
    expect(out.defer).toBe(true);
    const call = out.sends![0].message as Extract<SubscriptionsMessage, { op: 'flow-call' }>;
    expect(call.op).toBe('flow-call');
    const answer = d.step({ op: 'flow-answer', flow_id: call.reply_to.flow_id, step: 'ack', ok: true, reply: { applied: true } }, 1_000_001);
    expect(answer.replies).toEqual([{ request_id: 'r1', reply: expect.objectContaining({ id: 'wh_1', active: true, secret }) }]);
  });

  it('refuses unknown event types with BAD_REQUEST, and a non-owner with forbidden (an admin may)', () => {
    const d = driver();
    expect(codeOf(() => d.step({ op: 'create', tenant: 't1', caller: owner, url: 'https://x', events: ['nope'], headers: null, secret, settings }, 1))).toBe('BAD_REQUEST');
    const { d: w } = created();
    expect(codeOf(() => w.step({ op: 'get', caller: { user_id: 'u2', admin: false, tenant: 't1' } }, 2))).toBe('forbidden');
    expect(codeOf(() => w.step({ op: 'get', caller: { user_id: 'u2', admin: true, tenant: 't9' } }, 2))).toBeUndefined();
    // Its creator from another tenant (a personal token, or after leaving the organization): not found.
    expect(codeOf(() => w.step({ op: 'get', caller: { ...owner, tenant: 'u1' } }, 2))).toBe('not_found');
    expect(codeOf(() => w.step({ op: 'test', caller: { ...owner, tenant: 'u1' }, data: null, settings }, 2))).toBe('not_found');
    expect(codeOf(() => driver().step({ op: 'get', caller: owner }, 2))).toBe('not_found');
  });

  it('delivers at once: a signed attempt with custom headers and an in-flight deadline alarm; success logs and resets the count', () => {
    const { d } = created();
    const out = d.step({ op: 'deliver', event: event('evt_a') }, 1_000_100);
    const [attempt] = attempts(out.events);
    expect(attempt).toMatchObject({ webhook_id: 'wh_1', event_id: 'evt_a', attempt: 1, url: 'https://example.com/hook', timeout_ms: 1_000 });
    expect(attempt.headers).toMatchObject({ 'x-a': '1', 'webhook-id': 'evt_a', 'webhook-timestamp': '1000' });
    expect(attempt.headers['webhook-signature']).toBe(attempt.headers['Service-Signature']);
    expect(JSON.parse(attempt.body)).toMatchObject({ id: 'evt_a', type: 'entity.status_changed', data: { entity_id: 'e1' } });
    expect(out.alarms).toEqual([{ name: DELIVER_ALARM, due_ms: 1_000_100 + 2 * 1_000 + webhookPolicy.attempt_deadline_margin_ms }]);
    d.state.config!.consecutive_failures = 2;
    const done = d.step(result('evt_a', 1, 204), 1_000_200);
    expect(d.state.pending.size).toBe(0);
    expect(d.state.config!.consecutive_failures).toBe(0);
    expect(done.alarms).toEqual([{ name: DELIVER_ALARM, due_ms: null }]);
    expect(d.state.log.map((l) => l.entry)).toEqual([expect.objectContaining({ event_id: 'evt_a', attempt_number: 1, status_code: 204, success: true })]);
  });

  it('dead-letters a 4xx other than 429 at once; retries 5xx, 429, time-outs and connection errors with backoff up to 5 attempts', () => {
    const { d } = created();
    d.step({ op: 'deliver', event: event('evt_4') }, 1_000_000);
    d.step(result('evt_4', 1, 404), 1_000_010);
    expect(d.state.dlq.get('evt_4')).toMatchObject({ attempt_count: 1, error: 'HTTP 404' });

    let now = 2_000_000;
    d.step({ op: 'deliver', event: event('evt_5') }, now);
    const outcomes: AttemptResult[] = [result('evt_5', 1, 500), result('evt_5', 2, 429), result('evt_5', 3, null, 'timeout'), result('evt_5', 4, null, 'connection'), result('evt_5', 5, 503)];
    let previousWait = 0;
    for (const [i, outcome] of outcomes.entries()) {
      const out = d.step(outcome, now);
      if (i === 4) break;
      const pending = d.state.pending.get('evt_5')!;
      const wait = pending.next_attempt_ms - now;
      expect(wait).toBeGreaterThanOrEqual(1_000 * 2 ** i * 0.5);
      expect(wait).toBeLessThan(1_000 * 2 ** i);
      if (i > 0) expect(wait).toBeGreaterThan(previousWait * 0.9);
      previousWait = wait;
      expect(out.alarms).toEqual([{ name: DELIVER_ALARM, due_ms: pending.next_attempt_ms }]);
      now = pending.next_attempt_ms;
      const fired = d.step({ op: '$alarm', name: DELIVER_ALARM, due_ms: now }, now);
      expect(attempts(fired.events).map((a) => a.attempt)).toEqual([i + 2]);
    }
    expect(d.state.pending.has('evt_5')).toBe(false);
    expect(d.state.dlq.get('evt_5')).toMatchObject({ attempt_count: 5, event_type: 'entity.status_changed' });
    expect(d.state.config!.consecutive_failures).toBe(2);
  });

  it('logs each attempt with its request and response, bounded, and keeps them across a reload', () => {
    const { d } = created();
    const [attempt] = attempts(d.step({ op: 'deliver', event: event('evt_log') }, 1_000_100).events);
    const long = 'y'.repeat(webhookPolicy.logged_response_body_max + 10);
    const headers: Record<string, string> = {};
    for (let i = 0; i < webhookPolicy.logged_response_headers_max + 5; i++) headers[`x-h${i}`] = 'v'.repeat(webhookPolicy.logged_header_value_max + 1);
    d.step({ ...result('evt_log', 1, 500), response: { status_code: 500, headers, body: long, body_truncated: false } }, 1_000_200);
    d.reload();
    const [entry] = (d.step({ op: 'deliveries', caller: owner, limit: 10 }, 1_000_300).reply as { deliveries: any[] }).deliveries;
    expect(entry.request).toEqual({ method: 'POST', url: 'https://example.com/hook', headers: attempt.headers, body: attempt.body, body_truncated: false });
    expect(entry.response.status_code).toBe(500);
    expect(entry.response.body).toHaveLength(webhookPolicy.logged_response_body_max);
    expect(entry.response.body_truncated).toBe(true);
    expect(Object.keys(entry.response.headers)).toHaveLength(webhookPolicy.logged_response_headers_max);
    expect(entry.response.headers['x-h0']).toHaveLength(webhookPolicy.logged_header_value_max);
    // No answer (a connection error): no response, the request still logged.
    const [retry] = attempts(d.step({ op: '$alarm', name: DELIVER_ALARM, due_ms: 2_000_000 }, 2_000_000).events);
    d.step(result('evt_log', retry.attempt, null, 'connection'), 2_000_100);
    const [second] = (d.step({ op: 'deliveries', caller: owner, limit: 10 }, 2_000_200).reply as { deliveries: any[] }).deliveries;
    expect(second).toMatchObject({ attempt_number: 2, response: null, request: { headers: retry.headers } });
  });

  it('ignores a late or repeated result, and retries an attempt whose result never came (same event id)', () => {
    const { d } = created();
    d.step({ op: 'deliver', event: event('evt_l') }, 1_000_000);
    const deadline = d.state.pending.get('evt_l')!.in_flight!.deadline_ms;
    // The node died mid-attempt: after a reload the deadline alarm counts it failed.
    d.reload();
    d.step({ op: '$alarm', name: DELIVER_ALARM, due_ms: deadline }, deadline);
    const pending = d.state.pending.get('evt_l')!;
    expect(pending).toMatchObject({ attempts: 1, in_flight: null });
    expect(d.step(result('evt_l', 1, 200), deadline + 1).writes).toBeUndefined();
    expect(d.state.pending.has('evt_l')).toBe(true);
    const retried = d.step({ op: '$alarm', name: DELIVER_ALARM, due_ms: pending.next_attempt_ms }, pending.next_attempt_ms);
    expect(attempts(retried.events)).toEqual([expect.objectContaining({ event_id: 'evt_l', attempt: 2, headers: expect.objectContaining({ 'webhook-id': 'evt_l' }) })]);
    d.step(result('evt_l', 2, 200), pending.next_attempt_ms + 5);
    expect(d.step(result('evt_l', 2, 200), pending.next_attempt_ms + 6).writes).toBeUndefined();
    expect(d.state.log.filter((l) => l.entry.success)).toHaveLength(1);
  });

  it('disables after N consecutive exhausted events, moving pending ones to the DLQ; enable clears it', () => {
    const { d } = created();
    d.step({ op: 'deliver', event: event('evt_p') }, 1_000_000);
    for (const id of ['e1', 'e2']) {
      d.step({ op: 'deliver', event: event(id) }, 1_000_000);
      d.step(result(id, 1, 400), 1_000_001);
    }
    expect(d.state.config!.active).toBe(true);
    d.step({ op: 'deliver', event: event('e3') }, 1_000_000);
    const out = d.step(result('e3', 1, 410), 1_000_002);
    const config = d.state.config!;
    expect(config).toMatchObject({ active: false, consecutive_failures: 3, disabled_at_ms: 1_000_002 });
    expect(config.disabled_reason).toMatch(/3 consecutive events/);
    expect(d.state.dlq.get('evt_p')!.error).toMatch(/disabled/);
    expect(out.sends).toEqual([expect.objectContaining({ kind: 'webhook-subscriptions', message: expect.objectContaining({ op: 'upsert', entry: expect.objectContaining({ active: false }) }) })]);
    // Disabled: deliveries stop (a late deliver is dead-lettered), tests are refused.
    expect(attempts(d.step({ op: 'deliver', event: event('e4') }, 1_000_003).events)).toEqual([]);
    expect(codeOf(() => d.step({ op: 'test', caller: owner, data: null, settings }, 1_000_004))).toBe('invalid_configuration');
    d.step({ op: 'enable', caller: owner, settings }, 1_000_005, 'r9');
    expect(d.state.config).toMatchObject({ active: true, consecutive_failures: 0, disabled_at_ms: null, disabled_reason: null });
  });

  it('redrives a DLQ entry under redrive_<id> with the original payload; unknown id: dlq_entry_not_found', () => {
    const { d } = created();
    d.step({ op: 'deliver', event: event('evt_r') }, 1_000_000);
    d.step(result('evt_r', 1, 400), 1_000_001);
    expect(codeOf(() => d.step({ op: 'redrive', caller: owner, event_id: 'nope', settings }, 1_000_002))).toBe('dlq_entry_not_found');
    const out = d.step({ op: 'redrive', caller: owner, event_id: 'evt_r', settings }, 1_000_002);
    expect(out.reply).toEqual({ event_id: 'redrive_evt_r', redriven: true, webhook_id: 'wh_1' });
    const [attempt] = attempts(out.events);
    expect(attempt.headers['webhook-id']).toBe('redrive_evt_r');
    expect(JSON.parse(attempt.body)).toMatchObject({ id: 'redrive_evt_r', type: 'entity.status_changed', data: { entity_id: 'e1' }, timestamp: new Date(1_000_000).toISOString() });
    expect(d.state.dlq.size).toBe(0);
    expect(d.step({ op: 'dlq_purge', caller: owner }, 1_000_003).reply).toEqual({ purged: 0 });
  });

  it('signs with the new secret at once after a rotation, and with the previous one too for a day', () => {
    const { d } = created();
    const next = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
    d.step({ op: 'rotate', caller: owner, secret: next, settings }, 1_000_000);
    const [attempt] = attempts(d.step({ op: 'deliver', event: event('evt_s') }, 1_000_001).events);
    expect(attempt.headers['webhook-signature'].split(' ')).toHaveLength(2);
    d.step(result('evt_s', 1, 200), 1_000_002);
    const later = 1_000_000 + webhookPolicy.previous_secret_ms + 1;
    const [after] = attempts(d.step({ op: 'deliver', event: event('evt_t') }, later).events);
    expect(after.headers['webhook-signature'].split(' ')).toHaveLength(1);
  });

  it('test publishes one test.webhook event to the tenant index (also to this webhook)', () => {
    const { d } = created();
    const out = d.step({ op: 'test', caller: owner, data: null, settings }, 1_000_000);
    expect(out.reply).toEqual({ enqueued: true, webhook_id: 'wh_1' });
    expect(out.sends).toEqual([{ kind: 'webhook-subscriptions', key: '["t1"]', message: expect.objectContaining({ op: 'publish', also: 'wh_1', event: expect.objectContaining({ type: 'test.webhook' }) }) }]);
  });
});

describe('webhook subscriptions index', () => {
  const entry = (webhook_id: string, events: string[], active = true, seq = 1) => ({ webhook_id, created_by: 'u1', url: `https://x/${webhook_id}`, events, active, created_at_ms: seq, updated_at_ms: seq, seq });
  const ctx = context(1);

  it('fans an event out to every active webhook subscribed to it, plus the named one', () => {
    let state = loadSubscriptions('["t1"]', []);
    for (const e of [entry('a', ['test.webhook']), entry('b', ['entity.status_changed']), entry('c', ['test.webhook'], false), entry('d', ['test.webhook', 'entity.status_changed'])]) {
      state = stepSubscriptions(state, { op: 'upsert', entry: e }, ctx).state;
    }
    const test = stepSubscriptions(state, { op: 'publish', event: { id: 'evt_1', type: 'test.webhook', timestamp_ms: 1, data: null }, also: 'b' }, ctx);
    expect(test.sends!.map((s) => s.key).sort()).toEqual(['a', 'b', 'd']);
    const status = stepSubscriptions(state, { op: 'publish', event: { id: 'evt_2', type: 'entity.status_changed', timestamp_ms: 1, data: null } }, ctx);
    expect(status.sends!.map((s) => s.key).sort()).toEqual(['b', 'd']);
    expect(status.sends![0].message).toEqual({ op: 'deliver', event: expect.objectContaining({ id: 'evt_2' }) });
  });

  it('ignores an older upsert, filters and pages the list, and holds the cap', () => {
    let state = loadSubscriptions('["t1"]', []);
    state = stepSubscriptions(state, { op: 'upsert', entry: entry('a', ['test.webhook'], true, 2) }, ctx).state;
    expect(stepSubscriptions(state, { op: 'upsert', entry: entry('a', ['test.webhook'], false, 1) }, ctx).reply).toEqual({ applied: false });
    state = stepSubscriptions(state, { op: 'upsert', entry: entry('b', ['entity.status_changed'], false, 3) }, ctx).state;
    const list = (filters: { field: string; operator: string; value: string }[]) =>
      stepSubscriptions(state, { op: 'list', query: { created_by: 'u1', filters: filters as never, page: 1, page_size: 20 } }, ctx).reply;
    expect(list([{ field: 'active', operator: 'eq', value: 'false' }])).toEqual({ total: 1, webhook_ids: ['b'] });
    expect(list([{ field: 'events', operator: 'contains', value: 'test.webhook' }])).toEqual({ total: 1, webhook_ids: ['a'] });
    expect(list([])).toEqual({ total: 2, webhook_ids: ['a', 'b'] });
    expect(codeOf(() => list([{ field: 'active', operator: 'eq', value: 'maybe' }]))).toBe('BAD_REQUEST');
    for (let i = 0; i < webhookPolicy.webhooks_per_tenant_max - 2; i++) state = stepSubscriptions(state, { op: 'upsert', entry: entry(`n${i}`, ['test.webhook']) }, ctx).state;
    expect(codeOf(() => stepSubscriptions(state, { op: 'upsert', entry: entry('over', ['test.webhook']) }, ctx))).toBe('webhook_limit_reached');
  });
});
