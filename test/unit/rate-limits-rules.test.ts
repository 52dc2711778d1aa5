import { describe, expect, it } from 'vitest';
import { canonicalEndpoint, type RulesMessage, type RuleSetView } from '../../actors/rate-limits/messages.js';
import { emptyRulesState, loadRulesState, ruleSetOf, stepRules, type RulesState } from '../../actors/rate-limits/rules-state.js';
import type { RecordWrite } from '../../runtime/index.js';
import { callerOf, canonicalRoute, isExempt, LeaseRefs, localKeyOf, moduleOf, resolveLimit } from '../../http/rate-limits/resolve.js';
import { decimal, policyHeader, rateLimitHeader } from '../../http/rate-limits/headers.js';
import type { Principal } from '../../http/auth/principal.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Rule precedence, path templates, and the rules actor (pure). */

describe('endpoint path templates', () => {
  it('one canonical form for parameter names, router syntax and trailing slashes', () => {
    expect(canonicalEndpoint('/api/v1/jobs/{job_id}')).toBe('/api/v1/jobs/{}');
    expect(canonicalEndpoint('/api/v1/jobs/{id}/')).toBe('/api/v1/jobs/{}');
    expect(canonicalEndpoint('/api/v1/jobs/:job_id')).toBe('/api/v1/jobs/{}');
    expect(canonicalEndpoint('//api//v1/auth/me')).toBe('/api/v1/auth/me');
    expect(canonicalEndpoint('/')).toBe('/');
  });

  it('refuses what is not a template', () => {
    for (const bad of ['api/v1', '/a?b=1', '/a#b', '/a b', '/a/{b', '/a/b}', '/a/x{b}', '/a\u0000', `/${'x'.repeat(600)}`]) expect(canonicalEndpoint(bad), bad).toBeNull();
  });

  it('a Fastify route maps to the same canonical form as the admin\'s template', () => {
    expect(canonicalRoute('/api/v1/distributed-state/:namespace/:key/lock')).toBe(canonicalEndpoint('/api/v1/distributed-state/{ns}/{key}/lock'));
  });

  it('the module is the first segment after the version', () => {
    expect(moduleOf('/api/v1/presence/{}/heartbeat')).toBe('presence');
    expect(moduleOf('/api/v2/jobs')).toBe('jobs');
    expect(moduleOf('/admin/rate-limits')).toBe('admin');
    expect(moduleOf('/scim/v2/Users')).toBe('scim');
    expect(moduleOf('/api/v1')).toBe('api');
    expect(moduleOf('/')).toBe('');
  });
});

describe('precedence: user custom > user tier > endpoint > module > default', () => {
  const fallback = { max_requests: 1000, window_seconds: 60 };
  const rules: RuleSetView = {
    version: 1,
    cache_epoch: 0,
    default_tier: null,
    endpoints: { '/api/v1/jobs/{}': { max_requests: 30, window_seconds: 60 } },
    modules: { jobs: { max_requests: 40, window_seconds: 60 }, presence: { max_requests: 50, window_seconds: 60 } },
    support_tiers: { gold: { max_requests: 20, window_seconds: 60 } },
    users: {
      custom: { tier: 'gold', bypass: false, custom_limits: { '/api/v1/jobs/{}': { max_requests: 10, window_seconds: 60 } } },
      golden: { tier: 'gold', bypass: false, custom_limits: {} },
      plain: { tier: 'default', bypass: false, custom_limits: {} },
      vip: { tier: 'gold', bypass: true, custom_limits: { '/api/v1/jobs/{}': { max_requests: 1, window_seconds: 1 } } },
      stale: { tier: 'deleted-tier', bypass: false, custom_limits: {} },
    },
  };
  const job = '/api/v1/jobs/{}';

  it('picks the most specific rule', () => {
    expect(resolveLimit(rules, fallback, job, 'custom')).toEqual({ scope: `custom:${job}`, policy: 'custom', limit: { max_requests: 10, window_seconds: 60 } });
    expect(resolveLimit(rules, fallback, '/api/v1/jobs', 'custom')).toEqual({ scope: 'tier:gold', policy: 'tier', limit: { max_requests: 20, window_seconds: 60 } });
    expect(resolveLimit(rules, fallback, job, 'golden')).toMatchObject({ policy: 'tier' });
    expect(resolveLimit(rules, fallback, job, 'plain')).toEqual({ scope: `endpoint:${job}`, policy: 'endpoint', limit: { max_requests: 30, window_seconds: 60 } });
    expect(resolveLimit(rules, fallback, job, null)).toMatchObject({ policy: 'endpoint' });
    expect(resolveLimit(rules, fallback, '/api/v1/jobs/{}/logs', null)).toEqual({ scope: 'module:jobs', policy: 'module', limit: { max_requests: 40, window_seconds: 60 } });
    expect(resolveLimit(rules, fallback, '/api/v1/locks', null)).toEqual({ scope: 'default', policy: 'default', limit: fallback });
    expect(resolveLimit({ ...rules, default_tier: { max_requests: 5, window_seconds: 5 } }, fallback, '/api/v1/locks', null)).toMatchObject({ limit: { max_requests: 5, window_seconds: 5 } });
  });

  it('never takes an inherited property for a rule', () => {
    expect(resolveLimit(rules, fallback, '/constructor', 'constructor')).toMatchObject({ policy: 'default' });
    expect(resolveLimit(rules, fallback, '/api/v1/toString', '__proto__')).toMatchObject({ policy: 'default' });
  });

  it('bypass lifts every limit; a tier that no longer exists falls through', () => {
    expect(resolveLimit(rules, fallback, job, 'vip')).toBe('bypass');
    expect(resolveLimit(rules, fallback, job, 'stale')).toMatchObject({ policy: 'endpoint' });
  });
});

describe('caller and exemptions', () => {
  const principal = (over: Partial<Principal>): Principal => ({
    user_id: 'u1',
    session_id: 's',
    role: 'user',
    org_id: null,
    tenant: 'u1',
    credential: 'access_token',
    scopes: ['*'],
    api_key_id: null,
    impersonated_by: null,
    ...over,
  });

  it('counts the user, an API key\'s tenant, or the address', () => {
    expect(callerOf(principal({}), '10.0.0.1')).toEqual({ id: 'user:u1', tenant: 'u1', user_id: 'u1' });
    expect(callerOf(principal({ credential: 'api_key', org_id: 'org1', tenant: 'org1', api_key_id: 'k' }), '10.0.0.1')).toEqual({ id: 'tenant:org1', tenant: 'org1', user_id: 'u1' });
    expect(callerOf(null, '10.0.0.1')).toEqual({ id: 'address:10.0.0.1', tenant: null, user_id: null });
  });

  it("keys a lease by the caller's id and the scope, the same whether the caller object is made or not", () => {
    const applied = { scope: 'endpoint:/api/v1/x', policy: 'endpoint' as const, limit: { max_requests: 3, window_seconds: 60 } };
    for (const who of [principal({}), principal({ credential: 'api_key', org_id: 'org1', tenant: 'org1', api_key_id: 'k' }), null]) {
      expect(localKeyOf(who, '10.0.0.1', applied)).toBe(`${callerOf(who, '10.0.0.1').id}\u0000${applied.scope}`);
    }
  });

  it('remembers lease refs: keyed as localKeyOf keys them, never shared by a user and a tenant of one id, and right again past its bound', () => {
    const refs = new LeaseRefs();
    const applied = { scope: 'default', policy: 'default' as const, limit: { max_requests: 3, window_seconds: 60 } };
    const endpoint = { scope: 'endpoint:/api/v1/x', policy: 'endpoint' as const, limit: { max_requests: 3, window_seconds: 60 } };
    const user = principal({ user_id: 'same', tenant: 'same' });
    const apiKey = principal({ credential: 'api_key', user_id: 'other', org_id: 'same', tenant: 'same', api_key_id: 'k' });
    for (const who of [user, apiKey, null]) {
      for (const limit of [applied, endpoint]) {
        expect(refs.refOf(who, '10.0.0.1', limit).key).toBe(localKeyOf(who, '10.0.0.1', limit));
        expect(refs.refOf(who, '10.0.0.1', limit)).toBe(refs.refOf(who, '10.0.0.1', limit));
      }
    }
    expect(refs.refOf(user, '', applied)).not.toBe(refs.refOf(apiKey, '', applied));
    expect(refs.refOf(user, '', applied).key).not.toBe(refs.refOf(apiKey, '', applied).key);
    expect(refs.refOf(null, '10.0.0.2', applied).key).toBe('address:10.0.0.2\u0000default');
    // Past its bound the cache starts again, and still answers right.
    const before = refs.refOf(user, '', endpoint);
    for (let i = 0; i < 100_001; i++) refs.refOf(null, `10.1.${i}`, applied);
    expect(refs.refOf(user, '', endpoint)).not.toBe(before);
    expect(refs.refOf(user, '', endpoint).key).toBe(localKeyOf(user, '', endpoint));
    expect(refs.refOf(null, '10.1.7', applied).key).toBe('address:10.1.7\u0000default');
  });

  it('exempts probes, and the rate-limit admin API for a platform admin only', () => {
    for (const path of ['/health', '/health/ready', '/health/job_queue', '/metrics', '/openapi.json', '/cluster/status']) expect(isExempt(path, null), path).toBe(true);
    expect(isExempt('/admin/rate-limits/users', principal({ role: 'admin' }))).toBe(true);
    expect(isExempt('/admin/rate-limits/users', principal({}))).toBe(false);
    expect(isExempt('/admin/rate-limits/users', principal({ role: 'admin', impersonated_by: 'a' }))).toBe(false);
    expect(isExempt('/admin/auth/users', principal({ role: 'admin' }))).toBe(false);
    expect(isExempt('/api/v1/auth/me', null)).toBe(false);
  });

  it('renders the draft-10/11 header syntax', () => {
    expect(policyHeader('endpoint', { max_requests: 3, window_seconds: 60 })).toBe('"endpoint";q=3;w=60');
    expect(rateLimitHeader('endpoint', 2, 59)).toBe('"endpoint";r=2;t=59');
    expect(rateLimitHeader('endpoint', -1, -5)).toBe('"endpoint";r=0;t=0');
    // Its parts made once (the policy's prefix, t below 1024) and made each time give the same text.
    for (const t of [0, 1, 65, 1023, 1024, 3630]) expect(rateLimitHeader('custom', 999_999_999, t)).toBe(`"custom";r=999999999;t=${t}`);
    expect(rateLimitHeader('default', 0, 60)).toBe('"default";r=0;t=60');
  });

  it('writes r\'s digits as String does, at every group boundary', () => {
    const samples = [0, 7, 10, 99, 100, 999, 1000, 1001, 1010, 1100, 9999, 10_000, 100_005, 999_999, 1_000_000, 1_000_001, 1_002_003, 999_999_999, 1_000_000_000, 2 ** 31, Number.MAX_SAFE_INTEGER];
    for (let n = 0; n < 3000; n++) samples.push(n, n * 997, n * 1_000_003);
    for (const n of samples) expect(decimal(n)).toBe(String(n));
    // Not a non-negative safe integer: String's form.
    for (const n of [-1, 1.5, 2 ** 60, Number.NaN]) expect(decimal(n)).toBe(String(n));
  });
});

describe('rules actor', () => {
  const limit = { max_requests: 10, window_seconds: 60 };
  /** Runs a message, keeping the records written, as the runtime would. */
  function run(state: RulesState, message: RulesMessage, records: Map<string, unknown>, now = 1_000) {
    const result = stepRules(state, message, fixedContext(now, 'rate-limit-rules', 'platform'));
    for (const write of (result.writes ?? []) as RecordWrite[]) {
      if (write.value === undefined) records.delete(write.subkey);
      else records.set(write.subkey, write.value);
    }
    return result.reply as any;
  }
  const query = { filters: [], page: 1, page_size: 20 };

  it('every change bumps the version; `rules` answers null while the caller is current', () => {
    const state = emptyRulesState();
    const records = new Map<string, unknown>();
    expect(run(state, { op: 'rules', known_version: null }, records)).toMatchObject({ version: 0, default_tier: null });
    expect(run(state, { op: 'rules', known_version: 0 }, records)).toBeNull();
    expect(run(state, { op: 'put_default', limit }, records).version).toBe(1);
    expect(run(state, { op: 'rules', known_version: 0 }, records)).toMatchObject({ version: 1, default_tier: limit });
    expect(run(state, { op: 'clear_cache' }, records).version).toBe(2);
    expect(run(state, { op: 'rules', known_version: 1 }, records)).toMatchObject({ cache_epoch: 1 });
  });

  it('reloads from its records to the same rule set', () => {
    const state = emptyRulesState();
    const records = new Map<string, unknown>();
    run(state, { op: 'put_default', limit }, records);
    run(state, { op: 'create_tier', tier_type: 'endpoint', name: '/api/v1/jobs/{job_id}', limit }, records);
    run(state, { op: 'create_tier', tier_type: 'module', name: 'presence', limit }, records);
    run(state, { op: 'create_support_tier', name: 'gold', description: 'g', limit }, records);
    run(state, { op: 'create_user', user_id: 'u1', tier: 'gold', bypass: false, custom_limits: { '/api/v1/x/:id': limit } }, records);
    run(state, { op: 'clear_cache' }, records);
    const reloaded = loadRulesState('platform', [...records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
    expect(ruleSetOf(reloaded)).toEqual(ruleSetOf(state));
    expect(ruleSetOf(reloaded).users.u1!.custom_limits).toEqual({ '/api/v1/x/{}': limit });
    expect(ruleSetOf(reloaded).endpoints).toEqual({ '/api/v1/jobs/{}': limit });
  });

  it('rejects before changing anything', () => {
    const state = emptyRulesState();
    const records = new Map<string, unknown>();
    run(state, { op: 'create_support_tier', name: 'gold', description: '', limit }, records);
    run(state, { op: 'create_user', user_id: 'u1', tier: 'gold', bypass: false, custom_limits: {} }, records);
    const version = state.version;
    const context = fixedContext(2_000);
    expect(codeOf(() => stepRules(state, { op: 'delete_support_tier', name: 'gold' }, context))).toBe('rate_limit_tier_in_use');
    expect(codeOf(() => stepRules(state, { op: 'create_user', user_id: 'u1', tier: 'gold', bypass: false, custom_limits: {} }, context))).toBe('rate_limit_user_exists');
    expect(codeOf(() => stepRules(state, { op: 'create_user', user_id: 'u2', tier: 'nope', bypass: false, custom_limits: {} }, context))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepRules(state, { op: 'create_support_tier', name: 'default', description: '', limit }, context))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepRules(state, { op: 'put_default', limit: { max_requests: 0, window_seconds: 1 } }, context))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepRules(state, { op: 'create_tier', tier_type: 'endpoint', name: 'x', limit }, context))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepRules(state, { op: 'get_tier', tier_type: 'module', name: 'none' }, context))).toBe('not_found');
    expect(state.version).toBe(version);
    expect(state.users.has('u2')).toBe(false);
  });

  it('lists with q, filters, sort and pages', () => {
    const state = emptyRulesState();
    const records = new Map<string, unknown>();
    for (let i = 1; i <= 7; i++) run(state, { op: 'create_support_tier', name: `t${i}`, description: i % 2 ? 'odd' : 'even', limit: { max_requests: i, window_seconds: 60 } }, records, 1_000 + i);
    const odd = run(state, { op: 'list_support_tiers', query: { ...query, q: 'odd', sort_by: 'max_requests', sort_order: 'desc' } }, records);
    expect(odd.total).toBe(4);
    expect(odd.items.map((tier: { name: string }) => tier.name)).toEqual(['t7', 't5', 't3', 't1']);
    const page = run(state, { op: 'list_support_tiers', query: { ...query, page: 2, page_size: 3 } }, records);
    expect(page.items.map((tier: { name: string }) => tier.name)).toEqual(['t4', 't5', 't6']);
    const recent = run(state, { op: 'list_support_tiers', query: { ...query, filters: [{ field: 'created_at', operator: 'gt', value: new Date(1_005).toISOString() }] } }, records);
    expect(recent.items.map((tier: { name: string }) => tier.name)).toEqual(['t6', 't7']);
    expect(codeOf(() => stepRules(state, { op: 'list_support_tiers', query: { ...query, filters: [{ field: 'created_at', operator: 'gt', value: 'yesterday' }] } }, fixedContext(0)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepRules(state, { op: 'list_support_tiers', query: { ...query, filters: [{ field: 'max_requests', operator: 'contains', value: '1' }] } }, fixedContext(0)))).toBe('BAD_REQUEST');
  });
});
