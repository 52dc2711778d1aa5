import {
  ServiceError,
  type ActorEvent,
  type ActorSend,
  type AlarmMessage,
  type DeferredReply,
  type RecordWrite,
  type TurnContext,
  type TurnResult,
} from '../../runtime/index.js';
import { flowCall, type FlowAnswer } from '../flow-call.js';
import {
  isCatalogEvent,
  TEST_EVENT_TYPE,
  WEBHOOK_ATTEMPT_EVENT,
  WEBHOOK_KIND,
  WEBHOOK_SUBSCRIPTIONS_KIND,
  webhookPolicy as policy,
  webhookSubscriptionsKey,
  type AttemptResult,
  type DeliveryView,
  type DlqEntryView,
  type LoggedRequest,
  type LoggedResponse,
  type SubscriptionEntry,
  type SubscriptionsMessage,
  type WebhookAttempt,
  type WebhookCaller,
  type WebhookEvent,
  type WebhookMessage,
  type WebhookReply,
  type WebhookSettings,
  type WebhookView,
} from './messages.js';
import { backoffMs, signatureHeader } from './signing.js';

/**
 * One outbound webhook: pure domain logic of the `webhook` actor (storage
 * `records`, key = webhook id).
 *
 * Records: `config` (settings, secrets, counters), `p:<event_id>` one pending
 * delivery each (attempts made, next attempt time, the attempt in flight),
 * `q:<event_id>` dead-letter entries, `d:<seq>` the delivery log (newest
 * deliveries_kept_max).
 *
 * Delivery is I/O, so it happens outside the turn: when an attempt is due the
 * turn records it as in flight (with a deadline), and emits a
 * `webhook.attempt` event carrying the signed request; the node's delivery
 * worker performs it and tells the `attempt_result` back. One `deliver` alarm
 * is kept at the earliest due time (a retry, or an in-flight deadline: an
 * attempt whose node died mid-flight is counted failed and retried, under the
 * same event id). A result for an attempt no longer in flight is ignored.
 *
 * Changes the tenant's subscription index must know (create, update, enable,
 * delete) are flow-calls of step `ack`: the reply waits for the index's
 * answer, so a list or a test fan-out right after sees the change.
 */
export const CONFIG_SUBKEY = 'config';
export const PENDING_PREFIX = 'p:';
export const DLQ_PREFIX = 'q:';
export const LOG_PREFIX = 'd:';
export const DELIVER_ALARM = 'deliver';

/** What the webhook actor stores: its view plus what stays inside. */
export interface WebhookConfig extends WebhookView {
  /** The secret before the last rotation, signed with too until `until_ms`. */
  previous_secret: { secret: string; until_ms: number } | null;
  settings: WebhookSettings;
  /** Change counter of what the index holds. */
  index_seq: number;
  /** Sequence of the last delivery log entry. */
  log_seq: number;
}

export interface PendingDelivery {
  event_id: string;
  event_type: string;
  body: string;
  enqueued_at_ms: number;
  /** Attempts started so far. */
  attempts: number;
  next_attempt_ms: number;
  in_flight: InFlight | null;
  last_error: string | null;
}

export interface InFlight {
  attempt: number;
  deadline_ms: number;
  /** Where the attempt went and with which headers, for its delivery log entry (the body is the pending body). */
  url?: string;
  headers?: Record<string, string>;
}

export interface DlqRecord extends DlqEntryView {
  body: string;
}

interface PendingAck {
  request_id: string | null;
  /** What to answer once the index acknowledged. */
  answer: 'view' | 'deleted' | 'create';
}

export interface WebhookState {
  readonly id: string;
  config: WebhookConfig | null;
  pending: Map<string, PendingDelivery>;
  /** Insertion order = dead-letter order. */
  dlq: Map<string, DlqRecord>;
  /** Oldest first. */
  log: { seq: number; entry: DeliveryView }[];
  // In memory only.
  alarm_ms: number | null;
  acks: Map<string, PendingAck>;
}

type Result = TurnResult<WebhookState, WebhookReply | undefined>;

export function emptyWebhook(id: string): WebhookState {
  return { id, config: null, pending: new Map(), dlq: new Map(), log: [], alarm_ms: null, acks: new Map() };
}

export function loadWebhook(key: string, records: Iterable<[string, unknown]>): WebhookState {
  const state = emptyWebhook(key);
  const dlq: DlqRecord[] = [];
  for (const [subkey, value] of records) {
    if (subkey === CONFIG_SUBKEY) state.config = value as WebhookConfig;
    else if (subkey.startsWith(PENDING_PREFIX)) {
      const pending = value as PendingDelivery;
      state.pending.set(pending.event_id, pending);
    } else if (subkey.startsWith(DLQ_PREFIX)) dlq.push(value as DlqRecord);
    else if (subkey.startsWith(LOG_PREFIX)) state.log.push({ seq: parseInt(subkey.slice(LOG_PREFIX.length), 36), entry: value as DeliveryView });
  }
  dlq.sort((a, b) => a.dlq_at_ms - b.dlq_at_ms);
  for (const entry of dlq) state.dlq.set(entry.event_id, entry);
  return state;
}

const logSubkey = (seq: number) => LOG_PREFIX + seq.toString(36).padStart(11, '0');

export function stepWebhook(state: WebhookState, message: WebhookMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'create':
      return create(state, message, context);
    case 'deliver':
      return deliver(state, message.event, context);
    case 'attempt_result':
      return attemptResult(state, message, context);
    case 'flow-answer':
      return indexAnswered(state, message, context);
    case '$alarm':
      if (message.name !== DELIVER_ALARM) return { state };
      state.alarm_ms = null;
      return withSchedule(state, context, { state, writes: [], events: [] });
    default:
      break;
  }
  const config = owned(state, message.caller);
  switch (message.op) {
    case 'get':
      return { state, reply: view(config) };
    case 'update':
      return update(state, config, message, context);
    case 'delete':
      return remove(state, config, context);
    case 'enable':
      return enable(state, config, message.settings, context);
    case 'rotate':
      return rotate(state, config, message, context);
    case 'test':
      return test(state, config, message, context);
    case 'deliveries': {
      const entries = state.log.slice(-Math.min(message.limit, policy.deliveries_kept_max)).reverse().map((item) => item.entry);
      return { state, reply: { deliveries: message.limit === 0 ? [] : entries, total: state.log.length } };
    }
    case 'dlq': {
      const all = [...state.dlq.values()].reverse();
      return { state, reply: { entries: all.slice(0, message.limit).map(dlqView), total: all.length } };
    }
    case 'dlq_purge': {
      const writes: RecordWrite[] = [...state.dlq.keys()].map((event_id) => ({ subkey: DLQ_PREFIX + event_id, value: undefined }));
      const purged = state.dlq.size;
      state.dlq.clear();
      return { state, writes, reply: { purged } };
    }
    case 'redrive':
      return redrive(state, config, message, context);
  }
}

// ---- ownership and views ----

/**
 * The webhook, if the caller may read or change it: 404 when there is none or
 * it is another tenant's, 403 for anyone of its tenant but its creator or a
 * platform admin. Its creator acting from another tenant (a personal token
 * for an organization's webhook, or after leaving the organization) is
 * another tenant's caller: a member who left keeps no hold on it.
 */
function owned(state: WebhookState, caller: WebhookCaller): WebhookConfig {
  const config = state.config;
  if (!config || (config.tenant !== caller.tenant && !caller.admin)) throw new ServiceError('not_found', 'No such webhook.');
  if (config.created_by !== caller.user_id && !caller.admin) throw new ServiceError('forbidden', 'Only the creator of a webhook or a platform admin may read or change it.');
  return config;
}

export function view(config: WebhookConfig): WebhookView {
  return {
    id: config.id,
    tenant: config.tenant,
    created_by: config.created_by,
    url: config.url,
    events: [...config.events],
    headers: config.headers ? { ...config.headers } : null,
    active: config.active,
    consecutive_failures: config.consecutive_failures,
    created_at_ms: config.created_at_ms,
    updated_at_ms: config.updated_at_ms,
    disabled_at_ms: config.disabled_at_ms,
    disabled_reason: config.disabled_reason,
    last_failure_at_ms: config.last_failure_at_ms,
    secret: config.secret,
  };
}

function dlqView(record: DlqRecord): DlqEntryView {
  const { body: _body, ...entry } = record;
  return entry;
}

// ---- configuration ----

export function validateEvents(events: string[]): string[] {
  const unknown = events.filter((type) => !isCatalogEvent(type));
  if (unknown.length > 0) {
    throw new ServiceError('BAD_REQUEST', `Unknown event type ${unknown.map((type) => JSON.stringify(type)).join(', ')}; see GET /api/v1/webhooks/events.`, {
      details: [{ field: 'body.events', message: `unknown event type ${unknown.join(', ')}` }],
    });
  }
  if (events.length === 0) throw new ServiceError('BAD_REQUEST', 'events must name at least one event type.', { details: [{ field: 'body.events', message: 'must not be empty' }] });
  return [...new Set(events)];
}

function configWrite(config: WebhookConfig): RecordWrite {
  return { subkey: CONFIG_SUBKEY, value: { ...config } };
}

function indexEntry(config: WebhookConfig): SubscriptionEntry {
  return {
    webhook_id: config.id,
    created_by: config.created_by,
    url: config.url,
    events: [...config.events],
    active: config.active,
    created_at_ms: config.created_at_ms,
    updated_at_ms: config.updated_at_ms,
    seq: config.index_seq,
  };
}

/** The index message for the config's current state: a flow-call acknowledged to `flow_id`, or a plain send. */
function indexSend(config: WebhookConfig, message: SubscriptionsMessage & { op: 'upsert' | 'remove' }, flow_id: string | null): ActorSend {
  const key = webhookSubscriptionsKey(config.tenant);
  if (flow_id === null) return { kind: WEBHOOK_SUBSCRIPTIONS_KIND, key, message };
  return flowCall(WEBHOOK_SUBSCRIPTIONS_KIND, key, message, { kind: WEBHOOK_KIND, key: config.id, flow_id, step: 'ack' });
}

/** Sends the index the config's entry and defers the reply until it acknowledges. */
function acknowledged(state: WebhookState, config: WebhookConfig, context: TurnContext, answer: PendingAck['answer'], result: Result, remove = false): Result {
  config.index_seq += 1;
  const flow_id = context.newId('whf_');
  state.acks.set(flow_id, { request_id: context.request_id, answer });
  const message: SubscriptionsMessage & { op: 'upsert' | 'remove' } = remove
    ? { op: 'remove', webhook_id: config.id, seq: config.index_seq }
    : { op: 'upsert', entry: indexEntry(config) };
  const sends = [...(result.sends ?? []), indexSend(config, message, flow_id)];
  return { ...result, sends, defer: context.request_id !== null, reply: context.request_id === null ? result.reply : undefined };
}

function create(state: WebhookState, message: Extract<WebhookMessage, { op: 'create' }>, context: TurnContext): Result {
  if (state.config) throw new ServiceError('conflict', 'A webhook with this id exists.');
  const events = validateEvents(message.events);
  const config: WebhookConfig = {
    id: state.id,
    tenant: message.tenant,
    created_by: message.caller.user_id,
    url: message.url,
    events,
    headers: message.headers,
    active: true,
    consecutive_failures: 0,
    created_at_ms: context.now,
    updated_at_ms: context.now,
    disabled_at_ms: null,
    disabled_reason: null,
    last_failure_at_ms: null,
    secret: message.secret,
    previous_secret: null,
    settings: message.settings,
    index_seq: 0,
    log_seq: 0,
  };
  state.config = config;
  const result: Result = { state, reply: view(config), writes: [configWrite(config)] };
  const deferred = acknowledged(state, config, context, 'create', result);
  deferred.writes = [configWrite(config)];
  return deferred;
}

function update(state: WebhookState, config: WebhookConfig, message: Extract<WebhookMessage, { op: 'update' }>, context: TurnContext): Result {
  const events = message.events === undefined ? undefined : validateEvents(message.events);
  if (message.url !== undefined) config.url = message.url;
  if (events !== undefined) config.events = events;
  if (message.headers !== undefined) config.headers = message.headers;
  config.settings = message.settings;
  config.updated_at_ms = context.now;
  const writes: RecordWrite[] = [];
  if (message.active === true && !config.active) reactivate(config);
  else if (message.active === false && config.active) deactivate(state, config, 'webhook deactivated', context.now, writes);
  const result = acknowledged(state, config, context, 'view', { state, reply: view(config), writes });
  result.writes!.push(configWrite(config));
  return withSchedule(state, context, result);
}

function reactivate(config: WebhookConfig): void {
  config.active = true;
  config.consecutive_failures = 0;
  config.disabled_at_ms = null;
  config.disabled_reason = null;
}

/** Stops deliveries: every pending one moves to the dead-letter queue (redrive it after enabling). */
function deactivate(state: WebhookState, config: WebhookConfig, reason: string, now: number, writes: RecordWrite[]): void {
  config.active = false;
  for (const pending of [...state.pending.values()]) deadLetter(state, config, pending, reason, now, writes);
}

function enable(state: WebhookState, config: WebhookConfig, settings: WebhookSettings, context: TurnContext): Result {
  reactivate(config);
  config.settings = settings;
  config.updated_at_ms = context.now;
  const result = acknowledged(state, config, context, 'view', { state, reply: view(config), writes: [] });
  result.writes!.push(configWrite(config));
  return result;
}

function rotate(state: WebhookState, config: WebhookConfig, message: Extract<WebhookMessage, { op: 'rotate' }>, context: TurnContext): Result {
  config.previous_secret = { secret: config.secret, until_ms: context.now + policy.previous_secret_ms };
  config.secret = message.secret;
  config.settings = message.settings;
  config.updated_at_ms = context.now;
  config.index_seq += 1;
  // The index only learns updated_at: no need to wait for it.
  return { state, reply: view(config), writes: [configWrite(config)], sends: [indexSend(config, { op: 'upsert', entry: indexEntry(config) }, null)] };
}

function remove(state: WebhookState, config: WebhookConfig, context: TurnContext): Result {
  const writes: RecordWrite[] = [{ subkey: CONFIG_SUBKEY, value: undefined }];
  for (const event_id of state.pending.keys()) writes.push({ subkey: PENDING_PREFIX + event_id, value: undefined });
  for (const event_id of state.dlq.keys()) writes.push({ subkey: DLQ_PREFIX + event_id, value: undefined });
  for (const item of state.log) writes.push({ subkey: logSubkey(item.seq), value: undefined });
  state.pending.clear();
  state.dlq.clear();
  state.log = [];
  state.config = null;
  state.alarm_ms = null;
  const result = acknowledged(state, config, context, 'deleted', { state, reply: { deleted: true }, writes }, true);
  result.alarms = [{ name: DELIVER_ALARM, due_ms: null }];
  return result;
}

function test(state: WebhookState, config: WebhookConfig, message: Extract<WebhookMessage, { op: 'test' }>, context: TurnContext): Result {
  if (!config.active) {
    throw new ServiceError('invalid_configuration', 'The webhook is inactive; enable it (POST .../enable or PATCH active=true) before testing.');
  }
  config.settings = message.settings;
  const event: WebhookEvent = {
    id: context.newId('evt_'),
    type: TEST_EVENT_TYPE,
    timestamp_ms: context.now,
    data: message.data ?? { webhook_id: config.id, message: 'This is a test event.' },
  };
  const publish: SubscriptionsMessage = { op: 'publish', event, also: config.id };
  return {
    state,
    reply: { enqueued: true, webhook_id: config.id },
    writes: [configWrite(config)],
    sends: [{ kind: WEBHOOK_SUBSCRIPTIONS_KIND, key: webhookSubscriptionsKey(config.tenant), message: publish }],
  };
}

function indexAnswered(state: WebhookState, message: FlowAnswer, context: TurnContext): Result {
  const pending = state.acks.get(message.flow_id);
  if (!pending || message.step !== 'ack') return { state };
  state.acks.delete(message.flow_id);
  const replies: DeferredReply[] = [];
  const config = state.config;
  if (!message.ok) {
    if (pending.answer === 'create' && config) {
      // The index refused the new webhook (the tenant's cap): undo the creation.
      state.config = null;
      if (pending.request_id) replies.push({ request_id: pending.request_id, error: message.error });
      return { state, writes: [{ subkey: CONFIG_SUBKEY, value: undefined }], replies };
    }
    if (pending.request_id) replies.push({ request_id: pending.request_id, error: message.error });
    return { state, replies };
  }
  if (pending.request_id) {
    if (pending.answer === 'deleted') replies.push({ request_id: pending.request_id, reply: { deleted: true } });
    else if (config) replies.push({ request_id: pending.request_id, reply: view(config) });
    else replies.push({ request_id: pending.request_id, error: { code: 'not_found', message: 'No such webhook.' } });
  }
  void context;
  return { state, replies };
}

// ---- delivery ----

function eventBody(event: WebhookEvent): string {
  return JSON.stringify({ id: event.id, type: event.type, timestamp: new Date(event.timestamp_ms).toISOString(), data: event.data ?? null });
}

function deliver(state: WebhookState, event: WebhookEvent, context: TurnContext): Result {
  const config = state.config;
  // A deleted webhook (or a message for one never created) has nothing to deliver to.
  if (!config) return { state };
  const writes: RecordWrite[] = [];
  if (state.pending.has(event.id)) return { state };
  const pending: PendingDelivery = {
    event_id: event.id,
    event_type: event.type,
    body: eventBody(event),
    enqueued_at_ms: context.now,
    attempts: 0,
    next_attempt_ms: context.now,
    in_flight: null,
    last_error: null,
  };
  if (!config.active) {
    deadLetter(state, config, pending, 'webhook inactive', context.now, writes);
    return { state, writes };
  }
  if (state.pending.size >= policy.pending_per_webhook_max) {
    deadLetter(state, config, pending, `delivery backlog full (${policy.pending_per_webhook_max} pending events)`, context.now, writes);
    return { state, writes };
  }
  state.pending.set(pending.event_id, pending);
  writes.push({ subkey: PENDING_PREFIX + pending.event_id, value: { ...pending } });
  return withSchedule(state, context, { state, writes, events: [] });
}

function redrive(state: WebhookState, config: WebhookConfig, message: Extract<WebhookMessage, { op: 'redrive' }>, context: TurnContext): Result {
  const entry = state.dlq.get(message.event_id);
  if (!entry) throw new ServiceError('dlq_entry_not_found', `No dead-letter entry ${message.event_id} for this webhook.`);
  if (!config.active) throw new ServiceError('invalid_configuration', 'The webhook is inactive; enable it before redriving.');
  config.settings = message.settings;
  const writes: RecordWrite[] = [{ subkey: DLQ_PREFIX + entry.event_id, value: undefined }, configWrite(config)];
  state.dlq.delete(entry.event_id);
  const original = JSON.parse(entry.body) as { type: string; timestamp: string; data: unknown };
  const event: WebhookEvent = { id: `redrive_${entry.event_id}`, type: original.type, timestamp_ms: Date.parse(original.timestamp), data: original.data };
  const delivered = deliver(state, event, context);
  return {
    ...delivered,
    writes: [...writes, ...(delivered.writes ?? [])],
    reply: { event_id: event.id, redriven: true, webhook_id: config.id },
  };
}

function attemptResult(state: WebhookState, message: AttemptResult, context: TurnContext): Result {
  const config = state.config;
  const pending = state.pending.get(message.event_id);
  // Late or repeated: the attempt is no longer in flight (its deadline passed, or the webhook changed).
  if (!config || !pending || pending.in_flight === null || pending.in_flight.attempt !== message.attempt) return { state };
  config.settings = message.settings;
  const writes: RecordWrite[] = [];
  const sends: ActorSend[] = [];
  const success = message.status_code !== null && message.status_code >= 200 && message.status_code < 300;
  const error = success ? null : (message.error ?? `HTTP ${message.status_code}${message.response_excerpt ? `: ${message.response_excerpt}` : ''}`);
  logDelivery(state, config, pending, message.attempt, message.status_code, error, message.duration_ms, context.now, writes, message.response ?? null);
  if (success) {
    state.pending.delete(pending.event_id);
    writes.push({ subkey: PENDING_PREFIX + pending.event_id, value: undefined });
    config.consecutive_failures = 0;
  } else {
    const status = message.status_code;
    const permanent = message.error_kind === 'refused' || (status !== null && status >= 400 && status < 500 && status !== 429);
    failAttempt(state, config, pending, error!, permanent, context.now, { writes, sends });
  }
  writes.push(configWrite(config));
  return withSchedule(state, context, { state, writes, sends, events: [] });
}

/** A failed attempt: dead-letter now (permanent, or the budget is spent) or schedule the retry. */
function failAttempt(state: WebhookState, config: WebhookConfig, pending: PendingDelivery, error: string, permanent: boolean, now: number, effects: Effects): void {
  const { writes } = effects;
  config.last_failure_at_ms = now;
  pending.in_flight = null;
  pending.last_error = error;
  if (permanent || pending.attempts >= policy.attempts_max) {
    deadLetter(state, config, pending, error, now, writes);
    config.consecutive_failures += 1;
    if (config.active && config.consecutive_failures >= config.settings.disable_after_failures) {
      config.disabled_at_ms = now;
      config.disabled_reason = `${config.consecutive_failures} consecutive events failed to deliver; last error: ${error}`.slice(0, 512);
      config.updated_at_ms = now;
      deactivate(state, config, 'webhook disabled after consecutive failures', now, writes);
      config.index_seq += 1;
      // Plain send: nobody waits for the index here.
      effects.sends.push(indexSend(config, { op: 'upsert', entry: indexEntry(config) }, null));
    }
    return;
  }
  pending.next_attempt_ms = now + backoffMs(pending.attempts, config.settings.retry_base_ms, policy.retry_ms_max, pending.event_id);
  writes.push({ subkey: PENDING_PREFIX + pending.event_id, value: { ...pending } });
}

/** What a turn accumulates. */
interface Effects {
  writes: RecordWrite[];
  sends: ActorSend[];
}

function deadLetter(state: WebhookState, config: WebhookConfig, pending: PendingDelivery, error: string, now: number, writes: RecordWrite[]): void {
  if (state.pending.delete(pending.event_id)) writes.push({ subkey: PENDING_PREFIX + pending.event_id, value: undefined });
  const record: DlqRecord = {
    attempt_count: pending.attempts,
    dlq_at_ms: now,
    enqueued_at_ms: pending.enqueued_at_ms,
    error,
    event_id: pending.event_id,
    event_type: pending.event_type,
    message_id: pending.event_id,
    webhook_id: config.id,
    body: pending.body,
  };
  state.dlq.delete(record.event_id);
  state.dlq.set(record.event_id, record);
  writes.push({ subkey: DLQ_PREFIX + record.event_id, value: record });
  while (state.dlq.size > policy.dlq_per_webhook_max) {
    const oldest = state.dlq.keys().next().value!;
    state.dlq.delete(oldest);
    writes.push({ subkey: DLQ_PREFIX + oldest, value: undefined });
  }
}

function logDelivery(
  state: WebhookState,
  config: WebhookConfig,
  pending: PendingDelivery,
  attempt: number,
  status_code: number | null,
  error: string | null,
  duration_ms: number,
  now: number,
  writes: RecordWrite[],
  response: LoggedResponse | null = null,
): void {
  config.log_seq += 1;
  const entry: DeliveryView = {
    attempt_number: attempt,
    error,
    event_id: pending.event_id,
    event_type: pending.event_type,
    response_time_ms: Math.max(0, Math.round(duration_ms)),
    status_code,
    success: error === null,
    timestamp_ms: now,
    webhook_id: config.id,
    request: loggedRequest(pending),
    response: response && boundedResponse(response),
  };
  state.log.push({ seq: config.log_seq, entry });
  writes.push({ subkey: logSubkey(config.log_seq), value: entry });
  while (state.log.length > policy.deliveries_kept_max) writes.push({ subkey: logSubkey(state.log.shift()!.seq), value: undefined });
}

/** The in-flight attempt's request, its body cut at logged_request_body_max; null for an attempt recorded before requests were kept. */
function loggedRequest(pending: PendingDelivery): LoggedRequest | null {
  const sent = pending.in_flight;
  if (!sent?.url || !sent.headers) return null;
  const max = policy.logged_request_body_max;
  return { method: 'POST', url: sent.url, headers: { ...sent.headers }, body: pending.body.slice(0, max), body_truncated: pending.body.length > max };
}

/** The worker bounds the answer already; checked again here, since the log is stored. */
function boundedResponse(response: LoggedResponse): LoggedResponse {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers).slice(0, policy.logged_response_headers_max)) {
    headers[name.slice(0, policy.logged_header_value_max)] = String(value).slice(0, policy.logged_header_value_max);
  }
  const max = policy.logged_response_body_max;
  return { status_code: response.status_code, headers, body: response.body.slice(0, max), body_truncated: response.body_truncated || response.body.length > max };
}

function attemptDeadline(config: WebhookConfig, now: number): number {
  return now + 2 * config.settings.attempt_timeout_ms + policy.attempt_deadline_margin_ms;
}

/**
 * Runs what is due (in-flight attempts past their deadline fail; due retries
 * start, up to in_flight_per_webhook_max at once) and keeps the `deliver`
 * alarm at the next due time.
 */
function withSchedule(state: WebhookState, context: TurnContext, result: Result): Result {
  const effects: Effects = { writes: result.writes ?? [], sends: [...(result.sends ?? [])] };
  const events: ActorEvent[] = result.events ?? [];
  const alarms = [...(result.alarms ?? [])];
  const config = state.config;
  const now = context.now;
  let next: number | null = null;
  if (config) {
    let failed = false;
    // Attempts whose result never came (the node died mid-attempt): failed, retried under the same id.
    for (const pending of [...state.pending.values()]) {
      if (pending.in_flight && pending.in_flight.deadline_ms <= now) {
        const error = 'no result before the attempt deadline (the node stopped mid-attempt?)';
        logDelivery(state, config, pending, pending.in_flight.attempt, null, error, 0, now, effects.writes);
        failAttempt(state, config, pending, error, false, now, effects);
        failed = true;
      }
    }
    let in_flight = 0;
    for (const pending of state.pending.values()) if (pending.in_flight) in_flight += 1;
    if (config.active) {
      const due = [...state.pending.values()].filter((p) => !p.in_flight && p.next_attempt_ms <= now).sort((a, b) => a.next_attempt_ms - b.next_attempt_ms);
      for (const pending of due) {
        if (in_flight >= policy.in_flight_per_webhook_max) break;
        events.push(startAttempt(config, pending, now, effects.writes));
        in_flight += 1;
      }
    }
    if (failed) effects.writes.push(configWrite(config));
    for (const pending of state.pending.values()) {
      if (pending.in_flight) next = next === null ? pending.in_flight.deadline_ms : Math.min(next, pending.in_flight.deadline_ms);
      else if (config.active && in_flight < policy.in_flight_per_webhook_max) next = next === null ? pending.next_attempt_ms : Math.min(next, pending.next_attempt_ms);
    }
  }
  if (next !== state.alarm_ms) {
    alarms.push({ name: DELIVER_ALARM, due_ms: next });
    state.alarm_ms = next;
  }
  return { ...result, writes: effects.writes, events, alarms, sends: effects.sends };
}

function startAttempt(config: WebhookConfig, pending: PendingDelivery, now: number, writes: RecordWrite[]): ActorEvent {
  pending.attempts += 1;
  pending.in_flight = { attempt: pending.attempts, deadline_ms: attemptDeadline(config, now) };
  const timestamp_s = Math.floor(now / 1000);
  const secrets = [config.secret];
  if (config.previous_secret && config.previous_secret.until_ms > now) secrets.push(config.previous_secret.secret);
  const signed = signatureHeader(secrets, pending.event_id, timestamp_s, pending.body);
  const attempt: WebhookAttempt = {
    webhook_id: config.id,
    event_id: pending.event_id,
    attempt: pending.attempts,
    url: config.url,
    headers: {
      ...(config.headers ?? {}),
      'content-type': 'application/json',
      'webhook-id': pending.event_id,
      'webhook-timestamp': String(timestamp_s),
      'webhook-signature': signed,
      'Service-Signature': signed,
    },
    body: pending.body,
    timeout_ms: config.settings.attempt_timeout_ms,
  };
  pending.in_flight.url = attempt.url;
  pending.in_flight.headers = { ...attempt.headers };
  writes.push({ subkey: PENDING_PREFIX + pending.event_id, value: { ...pending, in_flight: { ...pending.in_flight } } });
  return { type: WEBHOOK_ATTEMPT_EVENT, data: attempt };
}
