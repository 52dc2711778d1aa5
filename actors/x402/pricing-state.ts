import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { formatUsd, parseUsd } from './money.js';
import { isPathTemplate, normalizeTemplate, serviceOf } from './paths.js';
import type { PricingMessage, PricingView, RuleFields } from './messages.js';
import { DESCRIPTION_LENGTH_MAX, HTTP_METHODS, PRICE_RULES_MAX, SETTLE_MODES, type PriceRule, type RuleType } from './rules.js';

/**
 * The platform's price rules (one `x402-pricing` actor, a snapshot): the
 * default rule, one rule per service, one per (method, path template).
 * Writing a rule that exists replaces it in place (same id and created_at);
 * every write bumps `version`, which the edge's price cache compares.
 */
export interface PricingState {
  /** By identity: `default`, `service <name>`, `endpoint <METHOD> <normalized template>`. */
  rules: Record<string, PriceRule>;
  version: number;
}

export function initialPricingState(): PricingState {
  return { rules: {}, version: 0 };
}

const SERVICE_SYNTAX = /^[a-z0-9][a-z0-9._-]{0,63}$/;

function identityOf(rule_type: RuleType, service?: string | null, method?: string | null, path?: string | null): string {
  if (rule_type === 'default') return 'default';
  if (rule_type === 'service') return `service ${service}`;
  return `endpoint ${method} ${normalizeTemplate(path!)}`;
}

function bad(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}.`, { details: [{ field, message }] });
}

function checkedMethod(method: string): string {
  const verb = method.toUpperCase();
  if (!(HTTP_METHODS as readonly string[]).includes(verb)) throw bad('method', `must be one of ${HTTP_METHODS.join(', ')}`);
  return verb;
}

function checkedPath(path: string): string {
  const withSlash = path.startsWith('/') ? path : `/${path}`;
  if (!isPathTemplate(withSlash)) throw bad('path', 'must be a router path template such as /api/v1/things/:id');
  return withSlash;
}

function checkedService(service: string): string {
  const name = service.toLowerCase();
  if (!SERVICE_SYNTAX.test(name)) throw bad('service', 'must be 1 to 64 letters, digits, dot, dash or underscore');
  return name;
}

/** A new or replaced rule from the request's fields (validated here as well as at the edge: the actor's rule is the one that holds). */
function ruleFrom(existing: PriceRule | undefined, base: Pick<PriceRule, 'rule_type' | 'service' | 'method' | 'path'>, fields: RuleFields, context: TurnContext): PriceRule {
  const amount = parseUsd(fields.amount_usd);
  if (!amount.ok) throw bad('amount_usd', amount.reason);
  const description = fields.description ?? existing?.description ?? '';
  if (description.length > DESCRIPTION_LENGTH_MAX) throw bad('description', `must be at most ${DESCRIPTION_LENGTH_MAX} characters`);
  const settle_mode = fields.settle_mode === undefined ? (existing?.settle_mode ?? null) : fields.settle_mode;
  if (settle_mode !== null && !(SETTLE_MODES as readonly string[]).includes(settle_mode)) throw bad('settle_mode', `must be one of ${SETTLE_MODES.join(', ')}`);
  return {
    id: existing?.id ?? context.newId('pr_'),
    ...base,
    amount_usd: formatUsd(amount.atomic),
    amount_atomic: amount.atomic,
    description,
    discoverable: fields.discoverable ?? existing?.discoverable ?? true,
    enabled: fields.enabled ?? existing?.enabled ?? true,
    settle_mode,
    created_at_ms: existing?.created_at_ms ?? context.now,
    updated_at_ms: context.now,
  };
}

function view(state: PricingState, rule?: PriceRule | null): PricingView {
  const rules = Object.values(state.rules).sort((a, b) => a.created_at_ms - b.created_at_ms || a.id.localeCompare(b.id));
  return rule === undefined ? { rules, version: state.version } : { rules, version: state.version, rule };
}

function put(state: PricingState, identity: string, base: Pick<PriceRule, 'rule_type' | 'service' | 'method' | 'path'>, fields: RuleFields, context: TurnContext): TurnResult<PricingState, PricingView> {
  const existing = state.rules[identity];
  if (!existing && Object.keys(state.rules).length >= PRICE_RULES_MAX) {
    throw new ServiceError('x402_rule_limit_reached', `The platform already holds ${PRICE_RULES_MAX} price rules; delete one first.`);
  }
  const rule = ruleFrom(existing, base, fields, context);
  const next = { rules: { ...state.rules, [identity]: rule }, version: state.version + 1 };
  return { state: next, reply: view(next, rule) };
}

export function stepPricing(state: PricingState, message: PricingMessage | AlarmMessage, context: TurnContext): TurnResult<PricingState, PricingView> {
  switch (message.op) {
    case 'list':
      return { state, reply: view(state) };
    case 'put_default':
      return put(state, 'default', { rule_type: 'default', service: null, method: null, path: null }, message.fields, context);
    case 'put_service': {
      const service = checkedService(message.service);
      return put(state, identityOf('service', service), { rule_type: 'service', service, method: null, path: null }, message.fields, context);
    }
    case 'put_endpoint': {
      const method = checkedMethod(message.method);
      const path = checkedPath(message.path);
      return put(state, identityOf('endpoint', null, method, path), { rule_type: 'endpoint', service: serviceOf(path), method, path }, message.fields, context);
    }
    case 'delete': {
      const identity =
        message.rule_type === 'default'
          ? 'default'
          : message.rule_type === 'service'
            ? identityOf('service', checkedService(message.service ?? ''))
            : identityOf('endpoint', null, checkedMethod(message.method ?? ''), checkedPath(message.path ?? ''));
      const existing = state.rules[identity];
      if (!existing) return { state, reply: view(state, null) };
      const rules = { ...state.rules };
      delete rules[identity];
      const next = { rules, version: state.version + 1 };
      return { state: next, reply: view(next, existing) };
    }
    case '$alarm':
      return { state };
  }
}
