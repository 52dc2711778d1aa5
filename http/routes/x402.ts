import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, randomId } from '../../runtime/index.js';
import {
  AMOUNT_ATOMIC_MAX,
  DESCRIPTION_LENGTH_MAX,
  PATH_LENGTH_MAX,
  SETTLE_MODES,
  SETTLE_MODE_DEFAULT,
  USD_PATTERN,
  X402_BALANCE_KIND,
  X402_PRICING_KEY,
  X402_PRICING_KIND,
  formatUsd,
  normalizeTemplate,
  parseUsd,
  principalFrom,
  concreteSegments,
  pricedPath,
  resolvePrice,
  serviceOf,
  x402BalanceKey,
  x402PayerPrincipal,
  type BalanceView,
  type CreditReply,
  type PriceRule,
  type PricingMessage,
  type PricingView,
  type RuleFields,
} from '../../actors/x402/messages.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { publicBase } from '../public-base.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { x402Edge, type X402Edge } from '../x402-edge.js';
import {
  KNOWN_NETWORKS,
  decodePaymentProof,
  matchingRequirement,
  paymentRequiredBody,
  paymentRequiredHeaderV2,
  requirementsV1,
  requirementsV2,
  v1NetworkName,
  type PricedResource,
} from '../x402-protocol.js';
import { signX402Session } from '../x402-session.js';
import { requireAdmin } from './admin.js';

/** Payment-gated access (spec doc 1 §4.13; docs/api/x402.md). */

const AMOUNT_USD = Type.String({ pattern: USD_PATTERN, maxLength: 17, description: 'USD as a decimal string, at most 6 decimals ("0.01").' });
const SETTLE_MODE = Type.Union([...SETTLE_MODES.map((mode) => Type.Literal(mode)), Type.Null()], {
  description: `How a payment is settled; null: the platform default (${SETTLE_MODE_DEFAULT}).`,
});
const RuleFieldsSchema = {
  amount_usd: AMOUNT_USD,
  description: Type.Optional(Type.String({ maxLength: DESCRIPTION_LENGTH_MAX })),
  discoverable: Type.Optional(Type.Boolean({ description: 'Listed in GET /x402/catalog (default true).' })),
  enabled: Type.Optional(Type.Boolean({ description: 'A disabled rule is ignored by price resolution (default true).' })),
  settle_mode: Type.Optional(SETTLE_MODE),
};
const PutRuleBody = Type.Object(RuleFieldsSchema);
const METHOD = Type.String({ minLength: 1, maxLength: 16, pattern: '^[A-Za-z]+$', description: 'HTTP method, any case: GET, POST, PUT, PATCH, DELETE.' });
const TEMPLATE = Type.String({ minLength: 1, maxLength: PATH_LENGTH_MAX, description: 'Router path template, e.g. /api/v1/things/:id.' });
const SERVICE = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' });
const EndpointBody = Type.Object({ method: METHOD, path: TEMPLATE, ...RuleFieldsSchema });
const ServiceBody = Type.Object({ service: SERVICE, ...RuleFieldsSchema });
const ServiceParams = Type.Object({ service: SERVICE });
const EndpointParams = Type.Object({ method: METHOD, '*': Type.String({ maxLength: PATH_LENGTH_MAX, description: 'The path template, after the method (its leading / optional).' }) });

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);
const PriceRuleSchema = Type.Object(
  {
    id: Type.String(),
    rule_type: Type.String({ description: 'default, service or endpoint' }),
    service: Nullable(Type.String()),
    method: Nullable(Type.String()),
    path: Nullable(Type.String()),
    amount_usd: Type.String(),
    description: Type.String(),
    discoverable: Type.Boolean(),
    enabled: Type.Boolean(),
    settle_mode: Type.String({ description: 'The rule\'s settle mode, or the platform default when it has none.' }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { title: 'PriceRule' },
);
const Deleted = Type.Object({ deleted: Type.Boolean() });
const ListQuery = Type.Object({
  rule_type: Type.Optional(Type.Union([Type.Literal('default'), Type.Literal('service'), Type.Literal('endpoint')])),
  service: Type.Optional(Type.String({ maxLength: 64 })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('amount_usd'), Type.Literal('path')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});
const QuoteQuery = Type.Object({ method: METHOD, path: Type.String({ minLength: 1, maxLength: PATH_LENGTH_MAX, pattern: '^/[^\\s]*$' }) });
const Balance = Type.Object({ balance_atomic: Type.Integer(), balance_usd: Type.String() });
const TopupBody = Type.Object({
  amount_usd: AMOUNT_USD,
  principal: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'Admins only: the principal (tenant) to credit; default the caller.' })),
});
const SessionBody = Type.Object({ amount_usd: Type.Optional(AMOUNT_USD) });
const Opaque = Type.Unknown();
const PAYMENT_HEADERS = Type.Object({
  'x-payment': Type.Optional(Type.String({ description: 'x402 v1 payment proof (base64 PaymentPayload).' })),
  'payment-signature': Type.Optional(Type.String({ description: 'x402 v2 payment proof (base64 PaymentPayload).' })),
});
const PaymentRequired = Type.Object(
  { x402Version: Type.Integer(), error: Type.String(), accepts: Type.Array(Opaque), statusCode: Type.Integer(), code: Type.String(), message: Type.String() },
  { description: 'x402 PaymentRequired (v1 body; v2 in the PAYMENT-REQUIRED header).' },
);

/** A session without an amount asks the payer for this much, credited to its balance. */
const SESSION_TOPUP_USD_DEFAULT = '1';

function ruleShape(rule: PriceRule) {
  return {
    id: rule.id,
    rule_type: rule.rule_type,
    service: rule.service,
    method: rule.method,
    path: rule.path,
    amount_usd: rule.amount_usd,
    description: rule.description,
    discoverable: rule.discoverable,
    enabled: rule.enabled,
    settle_mode: rule.settle_mode ?? SETTLE_MODE_DEFAULT,
    created_at: isoTime(rule.created_at_ms)!,
    updated_at: isoTime(rule.updated_at_ms)!,
  };
}

function fieldsOf(body: Static<typeof PutRuleBody>): RuleFields {
  return { amount_usd: body.amount_usd, description: body.description, discoverable: body.discoverable, enabled: body.enabled, settle_mode: body.settle_mode };
}

function balanceShape(balance_atomic: number) {
  return { balance_atomic, balance_usd: formatUsd(balance_atomic) };
}

/** The amount, or 400 naming the field (the pattern already holds; this refuses amounts above the maximum and zero where it must be positive). */
function amountOf(text: string, field: string, positive: boolean): number {
  const parsed = parseUsd(text);
  if (!parsed.ok) throw new ServiceError('BAD_REQUEST', `${field} ${parsed.reason}.`, { details: [{ field, message: parsed.reason }] });
  if (positive && parsed.atomic === 0) throw new ServiceError('BAD_REQUEST', `${field} must be more than 0.`, { details: [{ field, message: 'must be more than 0' }] });
  return parsed.atomic;
}

function sortRules(rules: PriceRule[], sort_by: string, descending: boolean): PriceRule[] {
  const key = (rule: PriceRule): number | string =>
    sort_by === 'updated_at' ? rule.updated_at_ms : sort_by === 'amount_usd' ? rule.amount_atomic : sort_by === 'path' ? (rule.path ?? rule.service ?? '') : rule.created_at_ms;
  const sorted = [...rules].sort((a, b) => {
    const left = key(a);
    const right = key(b);
    const order = left < right ? -1 : left > right ? 1 : a.id.localeCompare(b.id);
    return descending ? -order : order;
  });
  return sorted;
}

function findEndpoint(rules: PriceRule[], method: string, path: string): PriceRule | undefined {
  const verb = method.toUpperCase();
  const template = normalizeTemplate(path.startsWith('/') ? path : `/${path}`);
  return rules.find((rule) => rule.rule_type === 'endpoint' && rule.method === verb && normalizeTemplate(rule.path!) === template);
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A payment proof for `priced` made good: verified and settled by the facilitator, or a 402 / 503. */
type Settlement = { ok: true; payer: string; network: string; transaction: string } | { ok: false; error: string };

async function settleProof(edge: X402Edge, header: string | undefined, priced: PricedResource): Promise<Settlement> {
  if (header === undefined) return { ok: false, error: 'X-PAYMENT header is required' };
  if (!edge.facilitator) return { ok: false, error: 'This server has no x402 facilitator configured: X-PAYMENT proofs cannot be accepted' };
  const proof = decodePaymentProof(header);
  if (!proof) return { ok: false, error: 'The payment header is not a base64 JSON x402 PaymentPayload' };
  const requirement = proof.version === 1 ? matchingRequirement(proof, requirementsV1(edge.settings, priced)) : matchingRequirement(proof, requirementsV2(edge.settings, priced));
  if (!requirement) return { ok: false, error: `No payment requirement matches scheme ${proof.scheme} on network ${proof.network}` };
  const verified = await edge.facilitator.verify(proof.version, proof.payload, requirement);
  if (!verified.isValid) return { ok: false, error: `The payment was refused by the facilitator: ${verified.invalidReason ?? 'invalid'}` };
  const settled = await edge.facilitator.settle(proof.version, proof.payload, requirement);
  if (!settled.success) return { ok: false, error: `The payment could not be settled: ${settled.errorReason ?? 'unknown reason'}` };
  const payer = settled.payer ?? verified.payer;
  if (!payer || !/^0x[0-9a-fA-F]{40}$/.test(payer) || settled.transaction === '') {
    throw new ServiceError('x402_facilitator_unavailable', 'The x402 facilitator settled without naming the payer and the transaction.', { retryAfterSeconds: 5 });
  }
  return { ok: true, payer, network: v1NetworkName(proof.network), transaction: `${v1NetworkName(proof.network)}:${settled.transaction}` };
}

function sendPaymentRequired(edge: X402Edge, reply: FastifyReply, priced: PricedResource, error: string): FastifyReply {
  return reply
    .code(402)
    .header('payment-required', paymentRequiredHeaderV2(error, priced, requirementsV2(edge.settings, priced)))
    .send(paymentRequiredBody(error, requirementsV1(edge.settings, priced)));
}

export function x402Routes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const edge = x402Edge(services);
  const readRules = async (): Promise<PricingView> => {
    const view = await services.actors.ask<PricingView>(X402_PRICING_KIND, X402_PRICING_KEY, { op: 'list' }, { readOnly: true });
    edge.remember(view);
    return view;
  };
  const writeRules = async (message: PricingMessage): Promise<PricingView> => {
    const view = await services.actors.ask<PricingView>(X402_PRICING_KIND, X402_PRICING_KEY, message);
    // This node prices with the new rules at once; other nodes within X402_PRICE_CACHE_MS.
    edge.remember(view);
    return view;
  };
  const adminSchema = (summary: string, extra: Record<string, unknown>, responses: Record<number, unknown>) => ({
    tags: ['x402'],
    summary,
    security: bearerSecurity,
    ...extra,
    response: { ...responses, ...errorResponses(...bearerErrors, 403) },
  });

  // --- Administration: price rules, cache, preflight --------------------------------------------

  app.get<{ Querystring: Static<typeof ListQuery> }>('/admin/x402/pricing', {
    onRequest: authenticate,
    schema: adminSchema('Price rules, filtered by rule_type and service, sorted and paginated.', { querystring: ListQuery }, {
      200: Type.Object({ pagination: Pagination, rules: Type.Array(PriceRuleSchema) }),
    }),
  }, async (request) => {
    requireAdmin(request);
    const query = request.query;
    const { rules } = await readRules();
    const service = query.service?.toLowerCase();
    const matching = rules.filter((rule) => (query.rule_type === undefined || rule.rule_type === query.rule_type) && (service === undefined || rule.service === service));
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(100, query.page_size || 20);
    const sorted = sortRules(matching, query.sort_by ?? 'created_at', query.sort_order === 'desc');
    return {
      pagination: { page, page_size, total: sorted.length, has_more: page * page_size < sorted.length },
      rules: sorted.slice((page - 1) * page_size, page * page_size).map(ruleShape),
    };
  });

  app.get('/admin/x402/pricing/default', {
    onRequest: authenticate,
    schema: adminSchema('The default price rule; 404 when there is none.', {}, { 200: PriceRuleSchema, 404: Type.Ref('ErrorBody') }),
  }, async (request) => {
    requireAdmin(request);
    const rule = (await readRules()).rules.find((candidate) => candidate.rule_type === 'default');
    if (!rule) throw new ServiceError('not_found', 'There is no default price rule.');
    return ruleShape(rule);
  });

  app.put<{ Body: Static<typeof PutRuleBody> }>('/admin/x402/pricing/default', {
    onRequest: authenticate,
    schema: adminSchema('Sets the default price (every priced path no service or endpoint rule covers). Absent optional fields keep their value.', { body: PutRuleBody }, {
      200: PriceRuleSchema,
      409: Type.Ref('ErrorBody'),
    }),
  }, async (request) => {
    requireAdmin(request);
    const view = await writeRules({ op: 'put_default', fields: fieldsOf(request.body) });
    return ruleShape(view.rule!);
  });

  app.delete('/admin/x402/pricing/default', {
    onRequest: authenticate,
    schema: adminSchema('Deletes the default price rule; deleted is false when there was none.', {}, { 200: Deleted }),
  }, async (request) => {
    requireAdmin(request);
    const view = await writeRules({ op: 'delete', rule_type: 'default' });
    return { deleted: view.rule !== null };
  });

  app.post<{ Body: Static<typeof EndpointBody> }>('/admin/x402/pricing/endpoints', {
    onRequest: authenticate,
    schema: adminSchema('Creates or replaces the price of one method on one router path template; its service is the path\'s first segment (after /api/v<N>).', { body: EndpointBody }, {
      200: PriceRuleSchema,
      409: Type.Ref('ErrorBody'),
    }),
  }, async (request) => {
    requireAdmin(request);
    const { method, path, ...fields } = request.body;
    const view = await writeRules({ op: 'put_endpoint', method, path, fields: fieldsOf(fields) });
    return ruleShape(view.rule!);
  });

  app.get<{ Params: Static<typeof EndpointParams> }>('/admin/x402/pricing/endpoints/:method/*', {
    onRequest: authenticate,
    schema: adminSchema('One endpoint rule, by method and path template (parameter names need not match).', { params: EndpointParams }, {
      200: PriceRuleSchema,
      404: Type.Ref('ErrorBody'),
    }),
  }, async (request) => {
    requireAdmin(request);
    const rule = findEndpoint((await readRules()).rules, request.params.method, request.params['*']);
    if (!rule) throw new ServiceError('not_found', 'There is no price rule for this method and path.');
    return ruleShape(rule);
  });

  app.delete<{ Params: Static<typeof EndpointParams> }>('/admin/x402/pricing/endpoints/:method/*', {
    onRequest: authenticate,
    schema: adminSchema('Deletes one endpoint rule; deleted is false when there was none.', { params: EndpointParams }, { 200: Deleted }),
  }, async (request) => {
    requireAdmin(request);
    const view = await writeRules({ op: 'delete', rule_type: 'endpoint', method: request.params.method, path: request.params['*'] });
    return { deleted: view.rule !== null };
  });

  app.post<{ Body: Static<typeof ServiceBody> }>('/admin/x402/pricing/services', {
    onRequest: authenticate,
    schema: adminSchema('Creates or replaces the price of a service (every route whose first path segment, after /api/v<N>, is the service).', { body: ServiceBody }, {
      200: PriceRuleSchema,
      409: Type.Ref('ErrorBody'),
    }),
  }, async (request) => {
    requireAdmin(request);
    const { service, ...fields } = request.body;
    const view = await writeRules({ op: 'put_service', service, fields: fieldsOf(fields) });
    return ruleShape(view.rule!);
  });

  app.get<{ Params: Static<typeof ServiceParams> }>('/admin/x402/pricing/services/:service', {
    onRequest: authenticate,
    schema: adminSchema('One service rule.', { params: ServiceParams }, { 200: PriceRuleSchema, 404: Type.Ref('ErrorBody') }),
  }, async (request) => {
    requireAdmin(request);
    const name = request.params.service.toLowerCase();
    const rule = (await readRules()).rules.find((candidate) => candidate.rule_type === 'service' && candidate.service === name);
    if (!rule) throw new ServiceError('not_found', 'There is no price rule for this service.');
    return ruleShape(rule);
  });

  app.put<{ Params: Static<typeof ServiceParams>; Body: Static<typeof PutRuleBody> }>('/admin/x402/pricing/services/:service', {
    onRequest: authenticate,
    schema: adminSchema('Creates or replaces a service rule. Absent optional fields keep their value.', { params: ServiceParams, body: PutRuleBody }, {
      200: PriceRuleSchema,
      409: Type.Ref('ErrorBody'),
    }),
  }, async (request) => {
    requireAdmin(request);
    const view = await writeRules({ op: 'put_service', service: request.params.service, fields: fieldsOf(request.body) });
    return ruleShape(view.rule!);
  });

  app.delete<{ Params: Static<typeof ServiceParams> }>('/admin/x402/pricing/services/:service', {
    onRequest: authenticate,
    schema: adminSchema('Deletes a service rule; deleted is false when there was none.', { params: ServiceParams }, { 200: Deleted }),
  }, async (request) => {
    requireAdmin(request);
    const view = await writeRules({ op: 'delete', rule_type: 'service', service: request.params.service });
    return { deleted: view.rule !== null };
  });

  app.post('/admin/x402/cache/clear', {
    onRequest: authenticate,
    schema: adminSchema('Drops this node\'s cached price rules: the next priced request reads them from the pricing actor.', {}, { 204: Type.Null() }),
  }, async (request, reply) => {
    requireAdmin(request);
    edge.clear();
    return reply.code(204).send();
  });

  app.get('/admin/x402/preflight', {
    onRequest: authenticate,
    schema: adminSchema('Checks the x402 configuration: ready is true when every required check passes.', {}, {
      200: Type.Object({
        checks: Type.Array(Type.Object({ check: Type.String(), detail: Type.String(), passed: Type.Boolean(), severity: Type.String({ description: 'required or recommended' }) })),
        enabled: Type.Boolean(),
        facilitator_url: Type.String(),
        mainnet: Type.Boolean(),
        networks: Type.Array(Type.String()),
        ready: Type.Boolean(),
      }),
    }),
  }, async (request) => {
    requireAdmin(request);
    const config = services.config;
    const checks: { check: string; detail: string; passed: boolean; severity: 'required' | 'recommended' }[] = [];
    const add = (check: string, passed: boolean, severity: 'required' | 'recommended', detail: string) => checks.push({ check, detail, passed, severity });
    add('pay_to_configured', config.x402PayTo !== '', 'required', config.x402PayTo !== '' ? `payments go to ${config.x402PayTo}` : 'X402_PAY_TO is not set: payment requirements name no recipient');
    const unknown = config.x402Networks.filter((network) => !KNOWN_NETWORKS[network]);
    add('networks_known', unknown.length === 0, 'required', unknown.length === 0 ? `USDC on ${config.x402Networks.join(', ')}` : `no USDC contract known for ${unknown.join(', ')} (known: ${Object.keys(KNOWN_NETWORKS).join(', ')})`);
    let rules: PriceRule[] = [];
    try {
      rules = (await readRules()).rules;
      add('price_rules_readable', true, 'required', `${rules.length} price rule(s)`);
    } catch (error) {
      add('price_rules_readable', false, 'required', `the pricing actor did not answer: ${(error as Error).message}`);
    }
    const priced = edge.routes.filter((route) => resolvePrice(rules, route.method, route.url).payable).length;
    add('priced_routes', priced > 0, 'recommended', `${priced} of ${edge.routes.length} routes are priced`);
    add('facilitator_configured', edge.facilitator !== null, 'recommended', edge.facilitator ? `X-PAYMENT proofs are verified and settled by ${edge.facilitator.url}` : 'X402_FACILITATOR_URL is not set: only prepaid balances can pay');
    if (edge.facilitator) {
      const reachable = await edge.facilitator.reachable();
      add('facilitator_reachable', reachable.ok, 'recommended', reachable.detail);
    }
    add('public_base_url', config.publicBaseUrl !== '', 'recommended', config.publicBaseUrl !== '' ? `resources are named under ${config.publicBaseUrl}` : 'PUBLIC_BASE_URL is not set: resources are named under the node\'s own address');
    return {
      checks,
      enabled: config.x402Enabled,
      facilitator_url: config.x402FacilitatorUrl,
      mainnet: config.x402Networks.some((network) => KNOWN_NETWORKS[network]?.mainnet === true),
      networks: config.x402Networks,
      ready: checks.every((check) => check.passed || check.severity !== 'required'),
    };
  });

  // --- Callers: status, catalog, quote, balance, top-up, session ---------------------------------

  app.get('/api/v1/x402/status', {
    schema: { tags: ['x402'], summary: 'Whether enforcement is on, the accepted networks and the default settle mode. No credential.', response: { 200: Type.Object({ enabled: Type.Boolean(), networks: Type.Array(Type.String()), settle_mode_default: Type.String() }) } },
  }, async () => ({ enabled: services.config.x402Enabled, networks: services.config.x402Networks, settle_mode_default: SETTLE_MODE_DEFAULT }));

  app.get('/x402/catalog', {
    schema: {
      tags: ['x402'],
      summary: 'Discoverable priced routes with their x402 payment requirements (accepts: v1, accepts_v2: v2). No credential.',
      response: {
        200: Type.Object({
          enabled: Type.Boolean(),
          items: Type.Array(Type.Object({
            accepts: Type.Array(Opaque),
            accepts_v2: Type.Array(Opaque),
            amount_usd: Type.String(),
            description: Type.String(),
            method: Type.String(),
            path: Type.String(),
            resource: Type.String(),
            service: Type.String(),
          })),
        }),
        ...errorResponses(503),
      },
    },
  }, async (request) => {
    const { rules } = await readRules();
    const base = publicBase(request);
    const items = [];
    for (const route of edge.routes) {
      const price = resolvePrice(rules, route.method, route.url);
      if (!price.payable || !price.rule!.discoverable) continue;
      const priced: PricedResource = {
        amount_atomic: price.amount_atomic,
        resource: base + route.url,
        description: price.rule!.description || route.summary || `${route.method} ${route.url}`,
        method: route.method,
        discoverable: true,
      };
      items.push({
        accepts: requirementsV1(edge.settings, priced),
        accepts_v2: requirementsV2(edge.settings, priced),
        amount_usd: formatUsd(price.amount_atomic),
        description: priced.description,
        method: route.method,
        path: route.url,
        resource: priced.resource,
        service: serviceOf(route.url),
      });
    }
    return { enabled: services.config.x402Enabled, items };
  });

  app.get<{ Querystring: Static<typeof QuoteQuery> }>('/api/v1/x402/quote', {
    onRequest: authenticate,
    schema: {
      tags: ['x402'],
      summary: 'The price of a method on a path (router template or concrete path): endpoint rule, else service rule, else default.',
      security: bearerSecurity,
      querystring: QuoteQuery,
      response: {
        200: Type.Object({ amount_usd: Type.String(), payable: Type.Boolean(), rule_id: Nullable(Type.String()), settle_mode: Type.String() }),
        ...errorResponses(...bearerErrors, 403),
      },
    },
  }, async (request) => {
    requirePrincipal(request);
    const method = request.query.method.toUpperCase();
    if (!['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) {
      throw new ServiceError('BAD_REQUEST', 'method must be GET, POST, PUT, PATCH or DELETE.', { details: [{ field: 'querystring.method', message: 'is not an HTTP method' }] });
    }
    // Priced as the request itself is: its path's segments, percent-decoded as the router decodes them.
    const price = resolvePrice((await readRules()).rules, method === 'HEAD' ? 'GET' : method, concreteSegments(pricedPath(request.query.path)));
    return { amount_usd: formatUsd(price.amount_atomic), payable: price.payable, rule_id: price.rule?.id ?? null, settle_mode: price.settle_mode };
  });

  app.get('/api/v1/x402/balance', {
    onRequest: authenticate,
    schema: {
      tags: ['x402'],
      summary: "The caller's prepaid balance (its tenant's; a payment session's payer).",
      security: bearerSecurity,
      response: { 200: Balance, ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await services.actors.ask<BalanceView>(X402_BALANCE_KIND, x402BalanceKey(principal.tenant), { op: 'get' }, { readOnly: true });
    return balanceShape(view.balance_atomic);
  });

  app.post<{ Body: Static<typeof TopupBody> }>('/api/v1/x402/topup', {
    onRequest: authenticate,
    schema: {
      tags: ['x402'],
      summary: 'Credits the prepaid balance: paid with an X-PAYMENT proof for amount_usd (402 with the requirements without one), or credited by a platform admin (optionally to another principal).',
      security: bearerSecurity,
      headers: PAYMENT_HEADERS,
      body: TopupBody,
      response: {
        200: Type.Object({ balance_atomic: Type.Integer(), balance_usd: Type.String(), credited_usd: Type.String(), transaction: Type.String() }),
        402: PaymentRequired,
        ...errorResponses(...bearerErrors, 403, 409),
      },
    },
  }, async (request, reply) => {
    const principal = refuseImpersonation(request);
    const amount_atomic = amountOf(request.body.amount_usd, 'body.amount_usd', true);
    let credit: { principal: string; transaction: string; source: string; paid?: boolean };
    if (principal.role === 'admin') {
      const named = request.body.principal === undefined ? principal.tenant : principalFrom(request.body.principal);
      if (named === undefined) {
        throw new ServiceError('BAD_REQUEST', 'principal must be a user id (usr_…), an organization id (org_…) or a payer, x402:<network>:<0x address>.', {
          details: [{ field: 'body.principal', message: 'is not a principal' }],
        });
      }
      // A transaction id of its own, not request.id (a client's X-Request-Id, reused, would make a second credit a duplicate of the first).
      credit = { principal: named, transaction: `admin:${randomId()}`, source: `admin ${principal.user_id}` };
    } else {
      if (request.body.principal !== undefined && request.body.principal !== principal.tenant) throw new ServiceError('forbidden', 'Only a platform admin may credit another principal.');
      // The balance's maximum is checked before the payment is settled: once settled, the money is the payer's
      // credit whatever happens (the credit below is `paid`), so a top-up past the maximum must be refused here.
      const current = await services.actors.ask<BalanceView>(X402_BALANCE_KIND, x402BalanceKey(principal.tenant), { op: 'get' }, { readOnly: true });
      if (current.balance_atomic + amount_atomic > AMOUNT_ATOMIC_MAX) {
        throw new ServiceError('x402_balance_limit_reached', 'The balance would exceed its maximum of 1,000,000,000 USD; nothing was paid.');
      }
      const priced: PricedResource = { amount_atomic, resource: `${publicBase(request)}/api/v1/x402/topup`, description: `Top-up of ${formatUsd(amount_atomic)} USD`, method: 'POST', discoverable: false };
      const settlement = await settleProof(edge, headerOf(request, 'payment-signature') ?? headerOf(request, 'x-payment'), priced);
      if (!settlement.ok) return sendPaymentRequired(edge, reply, priced, settlement.error);
      credit = { principal: principal.tenant, transaction: settlement.transaction, source: `x402 ${settlement.payer}`, paid: true };
    }
    const answer = await services.actors.ask<CreditReply>(X402_BALANCE_KIND, x402BalanceKey(credit.principal), {
      op: 'credit',
      transaction: credit.transaction,
      amount_atomic,
      source: credit.source,
      paid: credit.paid,
    });
    return { ...balanceShape(answer.balance_atomic), credited_usd: formatUsd(answer.duplicate ? 0 : answer.credited_atomic), transaction: answer.transaction };
  });

  app.post<{ Body: Static<typeof SessionBody> | undefined }>('/x402/session', {
    // The body is optional: a POST without one asks for the default amount.
    preValidation: async (request) => {
      request.body ??= {};
    },
    schema: {
      tags: ['x402'],
      summary: 'A payment session token for a paying principal: an X-PAYMENT payer (the payment, amount_usd, default 1, is credited to its balance) or the bearer\'s user.',
      headers: PAYMENT_HEADERS,
      body: SessionBody,
      response: {
        200: Type.Object({ expires_in: Type.Integer(), principal: Type.String(), token: Type.String(), token_type: Type.String() }),
        402: PaymentRequired,
        ...errorResponses(400, 401, 403, 409, 413, 415, 429, 503),
      },
    },
  }, async (request, reply) => {
    const amount_atomic = amountOf(request.body?.amount_usd ?? SESSION_TOPUP_USD_DEFAULT, 'body.amount_usd', true);
    if (request.headers.authorization !== undefined) {
      await authenticate(request, reply);
      const principal = refuseImpersonation(request);
      const payer = principal.scopes.length === 1 && principal.scopes[0] === 'x402';
      if (principal.session_id === '' && !payer) throw new ServiceError('forbidden', 'A payment session is opened by a signed-in user or an x402 payer; an API key or client token is itself the credential.');
      const session = await signX402Session(services, {
        principal: principal.tenant,
        user: principal.session_id === '' ? undefined : { user_id: principal.user_id, session_id: principal.session_id },
      });
      return { expires_in: session.expires_in, principal: principal.tenant, token: session.token, token_type: 'Bearer' };
    }
    const priced: PricedResource = { amount_atomic, resource: `${publicBase(request)}/x402/session`, description: `Payment session with ${formatUsd(amount_atomic)} USD of prepaid balance`, method: 'POST', discoverable: false };
    const settlement = await settleProof(edge, headerOf(request, 'payment-signature') ?? headerOf(request, 'x-payment'), priced);
    if (!settlement.ok) return sendPaymentRequired(edge, reply, priced, settlement.error);
    const payer = x402PayerPrincipal(settlement.network, settlement.payer);
    // Paid: credited whatever the balance's maximum (the money was taken; refusing now would lose it).
    await services.actors.ask<CreditReply>(X402_BALANCE_KIND, x402BalanceKey(payer), { op: 'credit', transaction: settlement.transaction, amount_atomic, source: `x402 ${settlement.payer}`, paid: true });
    const session = await signX402Session(services, { principal: payer });
    return { expires_in: session.expires_in, principal: payer, token: session.token, token_type: 'Bearer' };
  });
}
