import { describe, expect, it } from 'vitest';
import { subjectProblem, type PlanFields, type PlanListView, type PlanReply, type PlansMessage } from '../../actors/throttle/messages.js';
import { loadPlans, stepPlans, type PlansState } from '../../actors/throttle/plans-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The tenant's plan directory (actors/throttle/plans-state.ts) and the subject validator. */
const T0 = 1_750_000_000_000;
const fields = (overrides: Partial<PlanFields> = {}): PlanFields => ({
  limits: { max_requests: 10, window_seconds: 60 },
  actions: {},
  default_enforcement: 'soft',
  description: '',
  headers_mode: 'none',
  refund_window_seconds: 60,
  subject_namespaces: [],
  tags: [],
  ...overrides,
});

function step(state: PlansState, message: PlansMessage, now = T0) {
  return stepPlans(state, message, fixedContext(now, 'throttle-plans', '["t"]'));
}

describe('throttle plans directory', () => {
  it('creates, reads, updates and deletes, with versions and generations from one sequence', () => {
    const state = loadPlans('["t"]', []);
    const created = step(state, { op: 'create', plan_id: 'api', owner_id: 'u1', fields: fields({ tags: ['a', 'a', 'b'] }) });
    const plan = (created.reply as PlanReply).plan!;
    expect(plan).toMatchObject({ plan_id: 'api', owner_id: 'u1', generation: 1, version: 1, tags: ['a', 'b'], created_at_ms: T0 });
    expect(created.writes!.map((w) => w.subkey)).toEqual(['p:api', 'seq']);
    expect(codeOf(() => step(state, { op: 'create', plan_id: 'api', owner_id: 'u1', fields: fields() }))).toBe('throttle_plan_exists');

    const updated = step(state, { op: 'update', plan_id: 'api', changes: { limits: { max_requests: 20 }, description: 'public API' } }, T0 + 5);
    expect((updated.reply as PlanReply).plan).toMatchObject({ limits: { max_requests: 20, window_seconds: 60 }, description: 'public API', version: 2, generation: 1, updated_at_ms: T0 + 5 });

    // Reloaded from its records, the directory is the same.
    const reloaded = loadPlans('["t"]', [...created.writes!, ...updated.writes!].map((w) => [w.subkey, w.value] as [string, unknown]));
    expect(reloaded.seq).toBe(2);
    expect(reloaded.plans.get('api')).toEqual((updated.reply as PlanReply).plan);

    const deleted = step(state, { op: 'delete', plan_id: 'api' });
    expect(deleted.reply).toEqual({ plan: null, seq: 3 });
    expect((step(state, { op: 'get', plan_id: 'api' }).reply as PlanReply).plan).toBeNull();
    expect(codeOf(() => step(state, { op: 'delete', plan_id: 'api' }))).toBe('not_found');
    expect(codeOf(() => step(state, { op: 'update', plan_id: 'api', changes: {} }))).toBe('not_found');
    // Created again: a new generation, so its subjects and totals start afresh.
    const again = step(state, { op: 'create', plan_id: 'api', owner_id: 'u1', fields: fields() });
    expect((again.reply as PlanReply).plan).toMatchObject({ generation: 4, version: 4 });
  });

  it('refuses an action whose cost exceeds max_requests, on create and on update, without changing anything', () => {
    const state = loadPlans('["t"]', []);
    expect(codeOf(() => step(state, { op: 'create', plan_id: 'p', owner_id: 'u', fields: fields({ actions: { big: { cost: 11 } } }) }))).toBe('BAD_REQUEST');
    expect(state.seq).toBe(0);
    step(state, { op: 'create', plan_id: 'p', owner_id: 'u', fields: fields({ actions: { big: { cost: 10 } } }) });
    expect(codeOf(() => step(state, { op: 'update', plan_id: 'p', changes: { limits: { max_requests: 5 } } }))).toBe('BAD_REQUEST');
    expect(state.plans.get('p')!.limits.max_requests).toBe(10);
    expect(state.seq).toBe(1);
  });

  it('lists with q on the description, one tag, sort and pages', () => {
    const state = loadPlans('["t"]', []);
    step(state, { op: 'create', plan_id: 'a', owner_id: 'u', fields: fields({ description: 'Login attempts', tags: ['auth'] }) }, T0 + 3);
    step(state, { op: 'create', plan_id: 'b', owner_id: 'u', fields: fields({ description: 'Search API', tags: ['api', 'search'] }) }, T0 + 1);
    step(state, { op: 'create', plan_id: 'c', owner_id: 'u', fields: fields({ description: 'Export API', tags: ['api'] }) }, T0 + 2);
    step(state, { op: 'update', plan_id: 'b', changes: { description: 'Search API v2' } }, T0 + 10);
    const list = (query: Partial<Extract<PlansMessage, { op: 'list' }>['query']>) =>
      (step(state, { op: 'list', query: { page: 1, page_size: 20, ...query } }).reply as PlanListView);
    expect(list({}).plans.map((p) => p.plan_id)).toEqual(['b', 'c', 'a']);
    expect(list({ sort_order: 'desc' }).plans.map((p) => p.plan_id)).toEqual(['a', 'c', 'b']);
    expect(list({ sort_by: 'updated_at', sort_order: 'desc' }).plans.map((p) => p.plan_id)).toEqual(['b', 'a', 'c']);
    expect(list({ q: 'api' }).plans.map((p) => p.plan_id)).toEqual(['b', 'c']);
    expect(list({ tag: 'api' }).plans.map((p) => p.plan_id)).toEqual(['b', 'c']);
    expect(list({ tag: 'auth', q: 'api' }).total).toBe(0);
    const page2 = list({ page: 2, page_size: 2 });
    expect(page2).toMatchObject({ total: 3 });
    expect(page2.plans.map((p) => p.plan_id)).toEqual(['a']);
  });
});

describe('throttle subject identifiers', () => {
  it('accepts internal ids', () => {
    for (const subject of ['user:8f3a', 'usr_91', '42', '123456789', 'org.acme:team-7', '550e8400-e29b-41d4-a716-446655440000', 'ip:10.0.0.1']) {
      expect(subjectProblem(subject, []), subject).toBeNull();
    }
  });

  it('refuses e-mail addresses and phone numbers (personal data), and other characters', () => {
    for (const subject of ['alice@example.com', 'user:alice@example.com', '+14155552671', 'user:+14155552671', '4155552671', '(415) 555-2671', '415-555-2671', '415.555.2671', '+44 20 7946 0958']) {
      expect(subjectProblem(subject, []), subject).toMatch(/e-mail|phone/);
    }
    for (const subject of ['a b', 'semi;colon', 'slash/x', '', 'x'.repeat(257)]) expect(subjectProblem(subject, []), subject).not.toBeNull();
  });

  it('requires a namespace of the plan when it names some', () => {
    expect(subjectProblem('user:1', ['user', 'org'])).toBeNull();
    expect(subjectProblem('device:1', ['user', 'org'])).toMatch(/namespace/);
    expect(subjectProblem('1', ['user'])).toMatch(/namespace/);
    expect(subjectProblem('user:', ['user'])).toMatch(/namespace/);
  });
});
