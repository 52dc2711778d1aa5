import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  PRICE_RULES_MAX,
  compareSpecificity,
  concreteSegments,
  isPathTemplate,
  normalizeTemplate,
  pricedPath,
  resolvePrice,
  routedSegments,
  serviceOf,
  templateMatches,
  type PriceRule,
  type PricingView,
} from '../../actors/x402/messages.js';
import { initialPricingState, stepPricing, type PricingState } from '../../actors/x402/pricing-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

function rule(partial: Partial<PriceRule> & Pick<PriceRule, 'rule_type' | 'amount_atomic'>): PriceRule {
  return {
    id: partial.id ?? `${partial.rule_type}-${partial.service ?? ''}-${partial.method ?? ''}-${partial.path ?? ''}`,
    service: null,
    method: null,
    path: null,
    amount_usd: String(partial.amount_atomic),
    description: '',
    discoverable: true,
    enabled: true,
    settle_mode: null,
    created_at_ms: 0,
    updated_at_ms: 0,
    ...partial,
  };
}

describe('x402 path templates', () => {
  it('matches templates and concrete paths segment by segment', () => {
    expect(templateMatches('/api/v1/things/:id', '/api/v1/things/42')).toBe(true);
    expect(templateMatches('/api/v1/things/:id', '/api/v1/things/:thing_id')).toBe(true);
    expect(templateMatches('/api/v1/things/:id', '/api/v1/things')).toBe(false);
    expect(templateMatches('/api/v1/things/:id', '/api/v1/things/42/parts')).toBe(false);
    expect(templateMatches('/api/v1/things/special', '/api/v1/things/:id')).toBe(false);
    expect(templateMatches('/api/v1/things/special', '/api/v1/things/special/')).toBe(true);
    expect(templateMatches('/files/*', '/files/a/b/c')).toBe(true);
    expect(templateMatches('/files/*', '/other/a')).toBe(false);
    expect(templateMatches('/', '/')).toBe(true);
  });

  it('erases parameter names when normalising', () => {
    expect(normalizeTemplate('/a/:id/b/:x/')).toBe('/a/:/b/:');
    expect(normalizeTemplate('/a/:name/b/:y')).toBe('/a/:/b/:');
    expect(normalizeTemplate('/')).toBe('/');
  });

  it('accepts router templates and refuses anything else', () => {
    for (const ok of ['/', '/a', '/api/v1/things/:id', '/files/*', '/a-b_c.d~e/:x1']) expect(isPathTemplate(ok), ok).toBe(true);
    for (const bad of ['', 'a', '//', '/a//b', '/a/*/b', '/a b', '/a/:1x', `/${'a'.repeat(600)}`]) expect(isPathTemplate(bad), bad).toBe(false);
  });

  it('orders specificity as the router does: static, then parameter, then wildcard', () => {
    expect(compareSpecificity('/a/b', '/a/:x')).toBeLessThan(0);
    expect(compareSpecificity('/a/:x', '/a/*')).toBeLessThan(0);
    expect(compareSpecificity('/a/:x/c', '/a/:y/:z')).toBeLessThan(0);
    expect(compareSpecificity('/a/:x', '/a/:y')).toBe(0);
  });

  it('names the service after the version prefix', () => {
    expect(serviceOf('/api/v1/distributed-state/:ns/:key/lock')).toBe('distributed-state');
    expect(serviceOf('/x402/catalog')).toBe('x402');
    expect(serviceOf('/Files/a')).toBe('files');
    expect(serviceOf('/api')).toBe('api');
    expect(serviceOf('/')).toBe('');
  });

  it('a template matches every concrete path made by filling its parameters', () => {
    const segment = fc.stringMatching(/^[a-z0-9]{1,8}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), segment), { minLength: 1, maxLength: 6 }), fc.array(segment, { minLength: 6, maxLength: 6 }), (parts, values) => {
        const template = '/' + parts.map(([param, text], index) => (param ? `:p${index}` : text)).join('/');
        const concrete = '/' + parts.map(([param, text], index) => (param ? values[index] : text)).join('/');
        expect(templateMatches(template, concrete)).toBe(true);
        expect(templateMatches(template, `${concrete}/extra`)).toBe(false);
      }),
    );
  });
});

describe('x402 price resolution', () => {
  const rules = [
    rule({ rule_type: 'default', amount_atomic: 1_000 }),
    rule({ rule_type: 'service', service: 'things', amount_atomic: 2_000 }),
    rule({ rule_type: 'endpoint', service: 'things', method: 'GET', path: '/api/v1/things/:id', amount_atomic: 3_000 }),
    rule({ rule_type: 'endpoint', service: 'things', method: 'GET', path: '/api/v1/things/special', amount_atomic: 4_000 }),
    rule({ rule_type: 'endpoint', service: 'things', method: 'DELETE', path: '/api/v1/things/:id', amount_atomic: 0 }),
  ];

  it('endpoint beats service beats default', () => {
    expect(resolvePrice(rules, 'GET', '/api/v1/things/42').amount_atomic).toBe(3_000);
    expect(resolvePrice(rules, 'get', '/api/v1/things/:thing').amount_atomic).toBe(3_000);
    expect(resolvePrice(rules, 'POST', '/api/v1/things/42').amount_atomic).toBe(2_000);
    expect(resolvePrice(rules, 'GET', '/api/v1/other').amount_atomic).toBe(1_000);
  });

  it('a concrete path is read as the router reads it: segments of text, percent-decoded', () => {
    // As the edge builds it: the route's template, its parameters as the router decoded them.
    expect(routedSegments('/api/v1/things/:id', { id: '*' })).toEqual(['api', 'v1', 'things', '*']);
    expect(routedSegments('/api/v1/files/*', { '*': 'a/b' })).toEqual(['api', 'v1', 'files', 'a', 'b']);
    expect(resolvePrice(rules, 'GET', routedSegments('/api/v1/things/:id', { id: '*' })).amount_atomic).toBe(3_000);
    expect(resolvePrice(rules, 'GET', routedSegments('/api/v1/things/:id', { id: 'special' })).amount_atomic).toBe(4_000);
    // As the quote reads a path it is given.
    expect(concreteSegments('/api/v1/thing%73/speci%61l')).toEqual(['api', 'v1', 'things', 'special']);
    expect(concreteSegments('/api/v1/things/%E0%A4%A')).toEqual(['api', 'v1', 'things', '%E0%A4%A']);
    expect(resolvePrice(rules, 'GET', concreteSegments('/api/v1/thing%73/speci%61l')).amount_atomic).toBe(4_000);
    expect(resolvePrice(rules, 'GET', concreteSegments('/api/v1/things/:id')).amount_atomic).toBe(3_000);
    expect(resolvePrice(rules, 'POST', concreteSegments('/api/v1/thing%73/1')).amount_atomic).toBe(2_000);
    expect(resolvePrice(rules, 'GET', concreteSegments('/x402/quote')).payable).toBe(false);
  });

  it('the most specific endpoint template wins, whatever the order of the rules', () => {
    expect(resolvePrice(rules, 'GET', '/api/v1/things/special').amount_atomic).toBe(4_000);
    expect(resolvePrice([...rules].reverse(), 'GET', '/api/v1/things/special').amount_atomic).toBe(4_000);
  });

  it('an endpoint rule of 0 makes one route free under a priced service', () => {
    const price = resolvePrice(rules, 'DELETE', '/api/v1/things/1');
    expect(price).toMatchObject({ amount_atomic: 0, payable: false });
    expect(price.rule?.rule_type).toBe('endpoint');
  });

  it('ignores disabled rules, falling through to the next level', () => {
    const disabled = rules.map((r) => (r.rule_type === 'endpoint' ? { ...r, enabled: false } : r));
    expect(resolvePrice(disabled, 'GET', '/api/v1/things/42').amount_atomic).toBe(2_000);
    const none = disabled.map((r) => ({ ...r, enabled: false }));
    expect(resolvePrice(none, 'GET', '/api/v1/things/42')).toMatchObject({ rule: null, payable: false, settle_mode: 'verify_then_settle_after' });
  });

  it('never prices the x402 area, probes, sign-in or the admin API', () => {
    for (const path of ['/x402/session', '/api/v1/x402/topup', '/admin/x402/pricing', '/health', '/metrics', '/openapi.json', '/api/v1/auth/login', '/oauth/token', '/scim/v2/Users', '/.well-known/jwks.json']) {
      expect(resolvePrice(rules, 'POST', path).payable, path).toBe(false);
    }
  });

  it('uses the rule\'s settle mode, else the default', () => {
    const modes = [rule({ rule_type: 'default', amount_atomic: 1, settle_mode: 'settle_before' })];
    expect(resolvePrice(modes, 'GET', '/a').settle_mode).toBe('settle_before');
  });
});

describe('x402 priced path', () => {
  it('is the URL up to its query string or fragment, whichever comes first', () => {
    expect(pricedPath('/api/v1/things/special')).toBe('/api/v1/things/special');
    expect(pricedPath('/api/v1/things/special?x=1#y')).toBe('/api/v1/things/special');
    expect(pricedPath('/api/v1/things/special#y?x=1')).toBe('/api/v1/things/special');
    expect(pricedPath('/api/v1/things/a\nb?x')).toBe('/api/v1/things/a\nb');
    expect(pricedPath('?only')).toBe('');
  });
});

describe('x402 pricing actor', () => {
  const at = (now: number) => fixedContext(now, 'x402-pricing', 'platform');
  const run = (state: PricingState, message: Parameters<typeof stepPricing>[1], now = 1_000) => {
    const result = stepPricing(state, message, at(now));
    return { state: result.state, view: result.reply as PricingView };
  };

  it('creates, replaces in place (same id, created_at) and deletes an endpoint rule', () => {
    let { state, view } = run(initialPricingState(), { op: 'put_endpoint', method: 'get', path: '/api/v1/things/:id', fields: { amount_usd: '0.010' } });
    expect(view.rule).toMatchObject({ rule_type: 'endpoint', method: 'GET', path: '/api/v1/things/:id', service: 'things', amount_usd: '0.01', amount_atomic: 10_000, enabled: true, discoverable: true });
    const id = view.rule!.id;
    ({ state, view } = run(state, { op: 'put_endpoint', method: 'GET', path: 'api/v1/things/:other', fields: { amount_usd: '2', description: 'two' } }, 2_000));
    expect(view.rules).toHaveLength(1);
    expect(view.rule).toMatchObject({ id, amount_usd: '2', description: 'two', created_at_ms: 1_000, updated_at_ms: 2_000 });
    ({ state, view } = run(state, { op: 'delete', rule_type: 'endpoint', method: 'get', path: '/api/v1/things/:x' }));
    expect(view.rule?.id).toBe(id);
    expect(view.rules).toHaveLength(0);
    ({ view } = run(state, { op: 'delete', rule_type: 'endpoint', method: 'get', path: '/api/v1/things/:x' }));
    expect(view.rule).toBeNull();
  });

  it('keeps absent optional fields on replace and bumps the version on every write', () => {
    let { state, view } = run(initialPricingState(), { op: 'put_service', service: 'Things', fields: { amount_usd: '1', discoverable: false, settle_mode: 'settle_before' } });
    expect(view.rule).toMatchObject({ service: 'things', discoverable: false, settle_mode: 'settle_before' });
    ({ state, view } = run(state, { op: 'put_service', service: 'things', fields: { amount_usd: '3' } }));
    expect(view.rule).toMatchObject({ amount_usd: '3', discoverable: false, settle_mode: 'settle_before' });
    expect(view.version).toBe(2);
    ({ view } = run(state, { op: 'put_default', fields: { amount_usd: '0' } }));
    expect(view.version).toBe(3);
    expect(view.rules.map((r) => r.rule_type)).toEqual(['service', 'default']);
  });

  it('refuses bad fields before changing anything', () => {
    const state = initialPricingState();
    expect(codeOf(() => stepPricing(state, { op: 'put_default', fields: { amount_usd: '0.0000001' } }, at(1)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepPricing(state, { op: 'put_default', fields: { amount_usd: '-1' } }, at(1)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepPricing(state, { op: 'put_endpoint', method: 'TRACE', path: '/a', fields: { amount_usd: '1' } }, at(1)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepPricing(state, { op: 'put_endpoint', method: 'GET', path: '/a//b', fields: { amount_usd: '1' } }, at(1)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepPricing(state, { op: 'put_service', service: '-x', fields: { amount_usd: '1' } }, at(1)))).toBe('BAD_REQUEST');
    expect(codeOf(() => stepPricing(state, { op: 'put_default', fields: { amount_usd: '1', settle_mode: 'later' as never } }, at(1)))).toBe('BAD_REQUEST');
    expect(state).toEqual(initialPricingState());
  });

  it('holds at most PRICE_RULES_MAX rules, but a replacement at the cap is fine', () => {
    let state = initialPricingState();
    for (let index = 0; index < PRICE_RULES_MAX; index++) state = run(state, { op: 'put_service', service: `s${index}`, fields: { amount_usd: '1' } }).state;
    expect(codeOf(() => stepPricing(state, { op: 'put_service', service: 'one-more', fields: { amount_usd: '1' } }, at(1)))).toBe('x402_rule_limit_reached');
    expect(run(state, { op: 'put_service', service: 's0', fields: { amount_usd: '2' } }).view.rule?.amount_usd).toBe('2');
  });
});
