import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { randomId, ServiceError, serialisedBytes } from '../../runtime/index.js';
import {
  LIST_FILTER_FIELDS,
  LIST_FILTER_OPERATORS,
  WEBHOOK_EVENT_CATALOG,
  WEBHOOK_KIND,
  WEBHOOK_SUBSCRIPTIONS_KIND,
  webhookPolicy as policy,
  webhookSubscriptionsKey,
  type DeliveryView,
  type DlqEntryView,
  type ListFilter,
  type SubscriptionListView,
  type WebhookCaller,
  type WebhookMessage,
  type WebhookView,
} from '../../actors/webhooks/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { blockedAddressReason } from '../webhook-guard.js';
import { webhookSettings } from '../webhook-settings.js';
import { parseListFilters } from '../list-filters.js';

/** Outbound webhooks (spec doc 1 §4.11, §6; docs/api/webhooks.md). */
const tags = ['webhooks'];
const base = '/api/v1/webhooks';

const EpochS = Type.Integer({ description: 'epoch-s' });
const NullableEpochS = Type.Union([Type.Integer({ description: 'epoch-s' }), Type.Null()]);
const Headers = Type.Record(Type.String(), Type.String(), { description: `Custom headers sent with every delivery (at most ${policy.headers_max}).` });
const URL_SCHEMA = Type.String({ minLength: 1, maxLength: policy.url_length_max, description: 'http or https URL the events are POSTed to.' });
const EVENTS = Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 16, description: 'Event types from GET /api/v1/webhooks/events.' });
const Params = Type.Object({ webhook_id: Type.String({ minLength: 1, maxLength: 64 }) });
const DlqParams = Type.Object({ webhook_id: Type.String({ minLength: 1, maxLength: 64 }), event_id: Type.String({ minLength: 1, maxLength: 200 }) });

const Webhook = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(Type.String()),
    headers: Type.Union([Headers, Type.Null()]),
    active: Type.Boolean(),
    consecutive_failures: Type.Integer(),
    created_at: EpochS,
    created_by: Type.String(),
    updated_at: EpochS,
    disabled_at: NullableEpochS,
    disabled_reason: Type.Union([Type.String(), Type.Null()]),
    last_failure_at: NullableEpochS,
    secret: Type.String({ description: 'whsec_ followed by base64 of 32 random bytes. Sensitive.' }),
  },
  { title: 'Webhook' },
);
const WebhookCreated = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(Type.String()),
    headers: Type.Union([Headers, Type.Null()]),
    active: Type.Boolean(),
    created_at: EpochS,
    secret: Type.String(),
  },
  { title: 'WebhookCreated' },
);
const Created = Type.Object({ status: Type.Integer(), msg: Type.String(), data: WebhookCreated });
const Delivery = Type.Object(
  {
    attempt_number: Type.Integer(),
    error: Type.Union([Type.String(), Type.Null()]),
    event_id: Type.String(),
    event_type: Type.String(),
    response_time_ms: Type.Integer(),
    status_code: Type.Union([Type.Integer(), Type.Null()]),
    success: Type.Boolean(),
    timestamp: EpochS,
    webhook_id: Type.String(),
    request: Type.Union([
      Type.Object(
        {
          method: Type.Literal('POST'),
          url: Type.String(),
          headers: Type.Record(Type.String(), Type.String(), { description: 'As the service set them (signature included); the transport adds content-length and user-agent.' }),
          body: Type.String({ description: `The body sent, its first ${policy.logged_request_body_max} characters.` }),
          body_truncated: Type.Boolean(),
        },
        { title: 'DeliveryRequest' },
      ),
      Type.Null(),
    ], { description: 'The request of this attempt; null in entries logged before requests were kept.' }),
    response: Type.Union([
      Type.Object(
        {
          status_code: Type.Integer(),
          headers: Type.Record(Type.String(), Type.String(), { description: `The first ${policy.logged_response_headers_max} headers, values cut at ${policy.logged_header_value_max} characters.` }),
          body: Type.String({ description: `The answer's first ${policy.logged_response_body_max} characters.` }),
          body_truncated: Type.Boolean(),
        },
        { title: 'DeliveryResponse' },
      ),
      Type.Null(),
    ], { description: 'The answer (after redirects); null when none came (time-out, connection failure, refusal, lost attempt).' }),
  },
  { title: 'Delivery' },
);
const DlqEntry = Type.Object(
  {
    attempt_count: Type.Integer(),
    dlq_at: EpochS,
    enqueued_at: EpochS,
    error: Type.String(),
    event_id: Type.String(),
    event_type: Type.String(),
    message_id: Type.String(),
    webhook_id: Type.String(),
  },
  { title: 'WebhookDlqEntry' },
);

const CreateBody = Type.Object({ url: URL_SCHEMA, events: EVENTS, headers: Type.Optional(Headers) });
const UpdateBody = Type.Object({
  url: Type.Optional(URL_SCHEMA),
  events: Type.Optional(EVENTS),
  headers: Type.Optional(Type.Union([Headers, Type.Null()])),
  active: Type.Optional(Type.Boolean()),
});
const TestBody = Type.Object({ data: Type.Optional(Type.Unknown({ description: `The test event's data (any JSON value up to ${policy.test_data_bytes_max} bytes); default {webhook_id, message}.` })) });
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of the URL, or a webhook id.' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('url')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  filter: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 20 })),
});
const LimitQuery = (fallback: number, max: number) =>
  Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 0, maximum: max, description: `Newest first; default ${fallback}, at most ${max}.` })) });

/** Names the service sets itself; a custom header may not override them. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'user-agent',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
  'service-signature',
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function checkUrl(raw: string, allowPrivateTargets: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('body.url', 'must be an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badRequest('body.url', 'must be an http or https URL');
  if (url.username || url.password) throw badRequest('body.url', 'must not carry credentials (use custom headers)');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (!allowPrivateTargets && isIP(host)) {
    const reason = blockedAddressReason(host);
    if (reason) throw badRequest('body.url', `targets a ${reason} address, which deliveries may not reach`);
  }
  return url.toString();
}

function checkHeaders(headers: Record<string, string> | null | undefined): Record<string, string> | null | undefined {
  if (headers === undefined || headers === null) return headers;
  const names = Object.keys(headers);
  if (names.length > policy.headers_max) throw badRequest('body.headers', `may hold at most ${policy.headers_max} headers`);
  for (const name of names) {
    if (!HEADER_NAME.test(name)) throw badRequest('body.headers', `${JSON.stringify(name)} is not a valid header name`);
    if (RESERVED_HEADERS.has(name.toLowerCase())) throw badRequest('body.headers', `${name} is set by the service and cannot be overridden`);
    const value = headers[name];
    if (value.length > policy.header_value_length_max || /[\r\n\0]/.test(value)) {
      throw badRequest('body.headers', `${name} must be at most ${policy.header_value_length_max} characters without line breaks`);
    }
  }
  return names.length === 0 ? null : headers;
}

/** `whsec_` + base64 of 32 random bytes (the conventions ask for at least 24). */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function parseFilters(items: string[] | undefined): ListFilter[] {
  return parseListFilters(items, LIST_FILTER_FIELDS, LIST_FILTER_OPERATORS);
}

const seconds = (ms: number) => Math.floor(ms / 1000);
const secondsOrNull = (ms: number | null) => (ms === null ? null : seconds(ms));

function webhookShape(view: WebhookView) {
  return {
    id: view.id,
    url: view.url,
    events: view.events,
    headers: view.headers,
    active: view.active,
    consecutive_failures: view.consecutive_failures,
    created_at: seconds(view.created_at_ms),
    created_by: view.created_by,
    updated_at: seconds(view.updated_at_ms),
    disabled_at: secondsOrNull(view.disabled_at_ms),
    disabled_reason: view.disabled_reason,
    last_failure_at: secondsOrNull(view.last_failure_at_ms),
    secret: view.secret,
  };
}

function deliveryShape(view: DeliveryView) {
  const { timestamp_ms, request, response, ...rest } = view;
  return { ...rest, timestamp: seconds(timestamp_ms), request: request ?? null, response: response ?? null };
}

function dlqShape(view: DlqEntryView) {
  const { dlq_at_ms, enqueued_at_ms, ...rest } = view;
  return { ...rest, dlq_at: seconds(dlq_at_ms), enqueued_at: seconds(enqueued_at_ms) };
}

function callerOf(principal: Principal): WebhookCaller {
  return { user_id: principal.user_id, admin: principal.role === 'admin', tenant: principal.tenant };
}

/** POSTs whose fields are all optional accept a missing body as {}. */
async function emptyBodyIsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

export function webhookRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const settings = () => webhookSettings(services.config);
  const webhook = <Reply>(webhook_id: string, message: WebhookMessage, readOnly = false) =>
    services.actors.ask<Reply>(WEBHOOK_KIND, webhook_id, message, { readOnly });
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });

  app.get(`${base}/events`, {
    onRequest: authenticate,
    schema: schema('The event catalog: the event types a webhook may subscribe to.', {}, {
      200: Type.Object({ events: Type.Array(Type.Object({ event_type: Type.String(), description: Type.String() })) }),
    }),
  }, async () => ({ events: WEBHOOK_EVENT_CATALOG.map((entry) => ({ ...entry })) }));

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: schema(
      "The caller's webhooks in the tenant (a platform admin: every webhook of the tenant). q on url or id; sort_by created_at|updated_at|url; filter on active, url, created_by, events, created_at, updated_at.",
      { querystring: ListQuery },
      { 200: Type.Object({ pagination: Pagination, webhooks: Type.Array(Webhook) }) },
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(100, query.page_size || 20);
    const filters = parseFilters(query.filter);
    const caller = callerOf(principal);
    const index = await services.actors.ask<SubscriptionListView>(
      WEBHOOK_SUBSCRIPTIONS_KIND,
      webhookSubscriptionsKey(principal.tenant),
      { op: 'list', query: { created_by: caller.admin ? null : caller.user_id, q: query.q, sort_by: query.sort_by, sort_order: query.sort_order, filters, page, page_size } },
      { readOnly: true },
    );
    const views = await Promise.all(
      index.webhook_ids.map((id) =>
        services.actors.ask<WebhookView>(WEBHOOK_KIND, id, { op: 'get', caller } satisfies WebhookMessage, { readOnly: true }).catch((error: unknown) => {
          // Deleted since the index answered: leave it out.
          if (error instanceof ServiceError && error.code === 'not_found') return null;
          throw error;
        }),
      ),
    );
    return {
      pagination: { page, page_size, total: index.total, has_more: page * page_size < index.total },
      webhooks: views.filter((view): view is WebhookView => view !== null).map(webhookShape),
    };
  });

  app.post<{ Body: Static<typeof CreateBody> }>(base, {
    onRequest: authenticate,
    schema: schema(
      'Create a webhook. 201 with the envelope {status, msg, data}; data carries the signing secret. An event type outside the catalog: 400 BAD_REQUEST.',
      { body: CreateBody },
      { 201: Created },
      [409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const url = checkUrl(body.url, services.config.webhookAllowPrivateTargets);
    const headers = checkHeaders(body.headers) ?? null;
    const view = await webhook<WebhookView>(randomId('wh_'), {
      op: 'create',
      tenant: principal.tenant,
      caller: callerOf(principal),
      url,
      events: body.events,
      headers,
      secret: newSecret(),
      settings: settings(),
    });
    const data = { id: view.id, url: view.url, events: view.events, headers: view.headers, active: view.active, created_at: seconds(view.created_at_ms), secret: view.secret };
    return reply.code(201).send({ status: 201, msg: 'Webhook created', data });
  });

  app.get<{ Params: Static<typeof Params> }>(`${base}/:webhook_id`, {
    onRequest: authenticate,
    schema: schema('One webhook. Not its creator and not a platform admin: 403 forbidden.', { params: Params }, { 200: Webhook }, [403, 404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return webhookShape(await webhook<WebhookView>(request.params.webhook_id, { op: 'get', caller: callerOf(principal) }, true));
  });

  app.patch<{ Params: Static<typeof Params>; Body: Static<typeof UpdateBody> }>(`${base}/:webhook_id`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema(
      'Change a webhook: every field given replaces the current one (headers null clears them). active false stops deliveries (pending ones move to the DLQ); active true also clears the disabled state.',
      { params: Params, body: UpdateBody },
      { 200: Webhook },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const message: WebhookMessage = { op: 'update', caller: callerOf(principal), settings: settings() };
    if (body.url !== undefined) message.url = checkUrl(body.url, services.config.webhookAllowPrivateTargets);
    if (body.events !== undefined) message.events = body.events;
    if (body.headers !== undefined) message.headers = checkHeaders(body.headers) ?? null;
    if (body.active !== undefined) message.active = body.active;
    return webhookShape(await webhook<WebhookView>(request.params.webhook_id, message));
  });

  app.delete<{ Params: Static<typeof Params> }>(`${base}/:webhook_id`, {
    onRequest: authenticate,
    schema: schema('Delete a webhook with its pending deliveries, log and DLQ.', { params: Params }, { 204: Type.Null() }, [403, 404]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await webhook(request.params.webhook_id, { op: 'delete', caller: callerOf(principal) });
    return reply.code(204).send();
  });

  app.get<{ Params: Static<typeof Params>; Querystring: { limit?: number } }>(`${base}/:webhook_id/deliveries`, {
    onRequest: authenticate,
    schema: schema(
      `The delivery log, one entry per attempt, newest first (the newest ${policy.deliveries_kept_max} are kept).`,
      { params: Params, querystring: LimitQuery(policy.deliveries_list_limit_default, policy.deliveries_kept_max) },
      { 200: Type.Object({ deliveries: Type.Array(Delivery), total: Type.Integer() }) },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const limit = request.query.limit ?? policy.deliveries_list_limit_default;
    const view = await webhook<{ deliveries: DeliveryView[]; total: number }>(request.params.webhook_id, { op: 'deliveries', caller: callerOf(principal), limit }, true);
    return { deliveries: view.deliveries.map(deliveryShape), total: view.total };
  });

  app.get<{ Params: Static<typeof Params>; Querystring: { limit?: number } }>(`${base}/:webhook_id/dlq`, {
    onRequest: authenticate,
    schema: schema(
      'The dead-letter queue, newest first.',
      { params: Params, querystring: LimitQuery(policy.dlq_list_limit_default, policy.dlq_list_limit_max) },
      { 200: Type.Object({ entries: Type.Array(DlqEntry), total: Type.Integer() }) },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const limit = request.query.limit ?? policy.dlq_list_limit_default;
    const view = await webhook<{ entries: DlqEntryView[]; total: number }>(request.params.webhook_id, { op: 'dlq', caller: callerOf(principal), limit }, true);
    return { entries: view.entries.map(dlqShape), total: view.total };
  });

  app.delete<{ Params: Static<typeof Params> }>(`${base}/:webhook_id/dlq`, {
    onRequest: authenticate,
    schema: schema('Discard every dead-letter entry.', { params: Params }, { 200: Type.Object({ purged: Type.Integer() }) }, [403, 404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return webhook<{ purged: number }>(request.params.webhook_id, { op: 'dlq_purge', caller: callerOf(principal) });
  });

  app.post<{ Params: Static<typeof DlqParams> }>(`${base}/:webhook_id/dlq/:event_id/redrive`, {
    onRequest: authenticate,
    schema: schema(
      'Re-enqueue a dead-lettered event under the new id redrive_<event_id> with its original payload; the entry leaves the DLQ. Unknown id: 404 dlq_entry_not_found; inactive webhook: 400 invalid_configuration.',
      { params: DlqParams },
      { 200: Type.Object({ event_id: Type.String(), redriven: Type.Boolean(), webhook_id: Type.String() }) },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return webhook(request.params.webhook_id, { op: 'redrive', caller: callerOf(principal), event_id: request.params.event_id, settings: settings() });
  });

  app.post<{ Params: Static<typeof Params> }>(`${base}/:webhook_id/enable`, {
    onRequest: authenticate,
    schema: schema('Enable: active again, consecutive_failures 0, disabled_at and disabled_reason cleared.', { params: Params }, { 200: Webhook }, [403, 404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return webhookShape(await webhook<WebhookView>(request.params.webhook_id, { op: 'enable', caller: callerOf(principal), settings: settings() }));
  });

  app.post<{ Params: Static<typeof Params> }>(`${base}/:webhook_id/rotate-secret`, {
    onRequest: authenticate,
    schema: schema(
      'A new secret, in force at once. For 24 hours deliveries also carry a signature with the previous secret.',
      { params: Params },
      { 200: Webhook },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return webhookShape(await webhook<WebhookView>(request.params.webhook_id, { op: 'rotate', caller: callerOf(principal), secret: newSecret(), settings: settings() }));
  });

  app.post<{ Params: Static<typeof Params>; Body: Static<typeof TestBody> }>(`${base}/:webhook_id/test`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema(
      'Emit a test.webhook event: to this webhook and every other active webhook of the tenant subscribed to test.webhook. Inactive webhook: 400 invalid_configuration.',
      { params: Params, body: TestBody },
      { 200: Type.Object({ enqueued: Type.Boolean(), webhook_id: Type.String() }) },
      [403, 404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const data = request.body.data;
    if (data !== undefined && serialisedBytes(data) > policy.test_data_bytes_max) throw badRequest('body.data', `must serialise to at most ${policy.test_data_bytes_max} bytes`);
    return webhook(request.params.webhook_id, { op: 'test', caller: callerOf(principal), data: data ?? null, settings: settings() });
  });
}
