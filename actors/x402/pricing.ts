import { compareSpecificity, normalizeTemplate, serviceOf, serviceOfSegments, templateMatches, templateMatchesSegments } from './paths.js';
import { SETTLE_MODE_DEFAULT, type PriceRule, type SettleMode } from './rules.js';

/**
 * Price resolution: which rule prices a method on a path (a router template
 * or a concrete path). An endpoint rule beats a service rule, which beats the
 * default; among endpoint rules the most specific template wins. Disabled
 * rules are ignored (resolution falls through to the next level). An amount
 * of 0 resolves to the rule but is not payable: an endpoint rule of "0"
 * makes one route free under a priced service or default.
 */
export interface ResolvedPrice {
  rule: PriceRule | null;
  amount_atomic: number;
  payable: boolean;
  settle_mode: SettleMode;
}

/**
 * Paths no rule prices: the x402 area itself (one must be able to pay), the
 * probes and documents, sign-in, OAuth and its discovery, SCIM provisioning
 * (identity providers cannot pay) and the administrative API.
 */
const EXEMPT_PREFIXES = ['/x402', '/api/v1/x402', '/admin', '/health', '/metrics', '/openapi.json', '/api/v1/auth', '/oauth', '/.well-known', '/scim', '/cluster'];

export function isExemptPath(path: string): boolean {
  return EXEMPT_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

/**
 * The path a URL is priced by: its query string and fragment name no route
 * (a request's URL carries no fragment; a path given to the quote may).
 */
export function pricedPath(url: string): string {
  const end = url.search(/[?#]/);
  return end < 0 ? url : url.slice(0, end);
}

const FREE: ResolvedPrice = { rule: null, amount_atomic: 0, payable: false, settle_mode: SETTLE_MODE_DEFAULT };

/**
 * `path`: a router template (`/api/v1/things/:id`, the routes' listing), or a
 * concrete path as segments of plain text (a request's, routedSegments; a
 * quote's, concreteSegments), never a raw URL: an encoded character or a
 * segment reading `*` must price as the route it reaches.
 */
export function resolvePrice(rules: readonly PriceRule[], method: string, path: string | readonly string[]): ResolvedPrice {
  const concrete = typeof path !== 'string';
  if (isExemptPath(concrete ? `/${path.join('/')}` : path)) return FREE;
  const verb = method.toUpperCase();
  let best: PriceRule | null = null;
  for (const rule of rules) {
    if (!rule.enabled || rule.rule_type !== 'endpoint' || rule.method !== verb) continue;
    if (!(concrete ? templateMatchesSegments(rule.path!, path) : templateMatches(rule.path!, path))) continue;
    if (best === null || compareSpecificity(normalizeTemplate(rule.path!), normalizeTemplate(best.path!)) < 0) best = rule;
  }
  if (best === null) {
    const service = concrete ? serviceOfSegments(path) : serviceOf(path);
    best = rules.find((rule) => rule.enabled && rule.rule_type === 'service' && rule.service === service) ?? null;
  }
  if (best === null) best = rules.find((rule) => rule.enabled && rule.rule_type === 'default') ?? null;
  if (best === null) return FREE;
  return { rule: best, amount_atomic: best.amount_atomic, payable: best.amount_atomic > 0, settle_mode: best.settle_mode ?? SETTLE_MODE_DEFAULT };
}
