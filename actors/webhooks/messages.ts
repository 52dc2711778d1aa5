import type { ActorSend } from '../../runtime/index.js';
import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The webhooks area's public surface: the kinds and keys, the event catalog,
 * the bounds, the messages the webhook actor and the tenant's subscription
 * index take, the views they answer with, and the `webhook.attempt` event the
 * node's delivery worker (http/webhook-delivery.ts) performs. Other layers and
 * the areas that emit catalog events import this file only.
 */

/** One actor per webhook (key = webhook id): config, secrets, pending deliveries, log, DLQ. */
export const WEBHOOK_KIND = 'webhook';
/** One actor per tenant (key = webhookSubscriptionsKey): which webhooks exist, which are active for which events; fans events out. */
export const WEBHOOK_SUBSCRIPTIONS_KIND = 'webhook-subscriptions';

export function webhookSubscriptionsKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/** The fixed event catalog (spec doc 1 §6). Any other name is refused with 400 BAD_REQUEST. */
export const WEBHOOK_EVENT_CATALOG = [
  { event_type: 'entity.status_changed', description: "An entity's liveness status changed (unknown, alive, dead)." },
  { event_type: 'entity.liveness_anomaly', description: "A heartbeat's latency was anomalous for the entity." },
  { event_type: 'rate_limit.exceeded', description: 'A rate limit was breached.' },
  { event_type: 'test.webhook', description: 'Synthetic event emitted by POST /api/v1/webhooks/{webhook_id}/test.' },
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_CATALOG)[number]['event_type'];
export const WEBHOOK_EVENT_TYPES: readonly string[] = WEBHOOK_EVENT_CATALOG.map((entry) => entry.event_type);
export const TEST_EVENT_TYPE = 'test.webhook';

export function isCatalogEvent(type: string): type is WebhookEventType {
  return WEBHOOK_EVENT_TYPES.includes(type);
}

/** Every bound of the area (unit last). docs/api/webhooks.md documents each; change both together. */
export const webhookPolicy = {
  /** Attempts per event (spec §8), then the event is dead-lettered. */
  attempts_max: 5,
  /** Backoff: retry_base_ms * 2^(attempt-1), capped at retry_ms_max, times a jitter factor in [0.5, 1). */
  retry_base_ms_default: 5_000,
  retry_ms_max: 3_600_000,
  /** Consecutive exhausted events that disable a webhook (spec §8; WEBHOOK_DISABLE_AFTER_FAILURES). */
  disable_after_failures_default: 10,
  /** One attempt's time-out (spec §8; WEBHOOK_TIMEOUT_MS). */
  attempt_timeout_ms_default: 30_000,
  /** An attempt with no result after 2 * timeout + this counts as failed (the node died mid-attempt). */
  attempt_deadline_margin_ms: 1_000,
  /** Attempts one webhook has in flight at once; the others wait their turn. */
  in_flight_per_webhook_max: 16,
  /** Events waiting for delivery per webhook; past it a new event is dead-lettered at once. */
  pending_per_webhook_max: 1_000,
  /** Dead-letter entries kept per webhook; past it the oldest is dropped. */
  dlq_per_webhook_max: 1_000,
  dlq_list_limit_default: 50,
  dlq_list_limit_max: 500,
  /** Delivery log entries kept per webhook (the newest). */
  deliveries_kept_max: 100,
  deliveries_list_limit_default: 50,
  /** After a rotation, deliveries carry the previous secret's signature too, this long. */
  previous_secret_ms: 24 * 3_600_000,
  /** Webhooks per tenant. */
  webhooks_per_tenant_max: 100,
  url_length_max: 2_048,
  headers_max: 20,
  header_value_length_max: 1_024,
  /** Serialised size of a test event's data. */
  test_data_bytes_max: 16 * 1024,
  /** Stored excerpt of a target's answer (delivery log and DLQ error). */
  response_excerpt_length_max: 256,
  /** Each delivery log entry keeps the attempt's request and response, bounded (characters). */
  logged_request_body_max: 4_096,
  logged_response_body_max: 2_048,
  logged_response_headers_max: 30,
  logged_header_value_max: 256,
} as const;

/** Node settings the edge passes along with its messages (from NodeConfig); the actor keeps the latest. */
export interface WebhookSettings {
  attempt_timeout_ms: number;
  disable_after_failures: number;
  retry_base_ms: number;
}

export const defaultWebhookSettings: WebhookSettings = {
  attempt_timeout_ms: webhookPolicy.attempt_timeout_ms_default,
  disable_after_failures: webhookPolicy.disable_after_failures_default,
  retry_base_ms: webhookPolicy.retry_base_ms_default,
};

/** Who asks: the owner rule is checked by the webhook actor. */
export interface WebhookCaller {
  user_id: string;
  admin: boolean;
  /** The credential's tenant: a webhook answers only callers of its own tenant (and platform admins). */
  tenant: string;
}

/** An event as published: the id is fixed at the source, so every retry carries the same webhook-id. */
export interface WebhookEvent {
  id: string;
  type: string;
  timestamp_ms: number;
  data: unknown;
}

/** The view of one webhook (epoch-ms; the edge renders epoch-s). */
export interface WebhookView {
  id: string;
  tenant: string;
  created_by: string;
  url: string;
  events: string[];
  headers: Record<string, string> | null;
  active: boolean;
  consecutive_failures: number;
  created_at_ms: number;
  updated_at_ms: number;
  disabled_at_ms: number | null;
  disabled_reason: string | null;
  last_failure_at_ms: number | null;
  secret: string;
}

/** The request of one attempt as the delivery log keeps it (the body cut at logged_request_body_max). */
export interface LoggedRequest {
  method: 'POST';
  url: string;
  /** The headers the webhook actor set; the transport adds content-length and user-agent. */
  headers: Record<string, string>;
  body: string;
  body_truncated: boolean;
}

/** The target's answer to one attempt (after redirects), bounded by logged_response_*. */
export interface LoggedResponse {
  status_code: number;
  headers: Record<string, string>;
  body: string;
  body_truncated: boolean;
}

export interface DeliveryView {
  attempt_number: number;
  error: string | null;
  event_id: string;
  event_type: string;
  response_time_ms: number;
  status_code: number | null;
  success: boolean;
  timestamp_ms: number;
  webhook_id: string;
  /** null in entries logged before requests were kept. */
  request?: LoggedRequest | null;
  /** null when no answer came (time-out, connection failure, refusal, lost attempt). */
  response?: LoggedResponse | null;
}

export interface DlqEntryView {
  attempt_count: number;
  dlq_at_ms: number;
  enqueued_at_ms: number;
  error: string;
  event_id: string;
  event_type: string;
  message_id: string;
  webhook_id: string;
}

export type WebhookMessage =
  | {
      op: 'create';
      tenant: string;
      caller: WebhookCaller;
      url: string;
      events: string[];
      headers: Record<string, string> | null;
      secret: string;
      settings: WebhookSettings;
    }
  | { op: 'get'; caller: WebhookCaller }
  | {
      op: 'update';
      caller: WebhookCaller;
      url?: string;
      events?: string[];
      /** null clears the custom headers. */
      headers?: Record<string, string> | null;
      active?: boolean;
      settings: WebhookSettings;
    }
  | { op: 'delete'; caller: WebhookCaller }
  | { op: 'enable'; caller: WebhookCaller; settings: WebhookSettings }
  | { op: 'rotate'; caller: WebhookCaller; secret: string; settings: WebhookSettings }
  | { op: 'test'; caller: WebhookCaller; data: unknown; settings: WebhookSettings }
  | { op: 'deliveries'; caller: WebhookCaller; limit: number }
  | { op: 'dlq'; caller: WebhookCaller; limit: number }
  | { op: 'dlq_purge'; caller: WebhookCaller }
  | { op: 'redrive'; caller: WebhookCaller; event_id: string; settings: WebhookSettings }
  /** From the tenant's subscription index (outbox): one event to deliver. */
  | { op: 'deliver'; event: WebhookEvent }
  /** From the node's delivery worker (tell): how an attempt ended. */
  | AttemptResult
  | FlowAnswer;

export interface AttemptResult {
  op: 'attempt_result';
  event_id: string;
  attempt: number;
  /** The target's final HTTP status; null when no answer came. */
  status_code: number | null;
  /** Why there was no answer, or why it was refused: null on an HTTP answer. */
  error: string | null;
  /** `refused`: the delivery guard refused the target (not retried); `timeout` and `connection` are retried. */
  error_kind: 'timeout' | 'connection' | 'refused' | null;
  duration_ms: number;
  response_excerpt: string | null;
  /** The answer, bounded, for the delivery log (absent from workers that predate it). */
  response?: LoggedResponse | null;
  settings: WebhookSettings;
}

export type WebhookReply =
  | WebhookView
  | { deleted: true }
  | { enqueued: true; webhook_id: string }
  | { deliveries: DeliveryView[]; total: number }
  | { entries: DlqEntryView[]; total: number }
  | { purged: number }
  | { event_id: string; redriven: boolean; webhook_id: string };

/** What the subscription index keeps per webhook (and sorts and filters the list on). */
export interface SubscriptionEntry {
  webhook_id: string;
  created_by: string;
  url: string;
  events: string[];
  active: boolean;
  created_at_ms: number;
  updated_at_ms: number;
  /** The webhook's change counter: an older upsert arriving late is ignored. */
  seq: number;
}

export const LIST_FILTER_FIELDS = ['active', 'url', 'created_by', 'events', 'created_at', 'updated_at'] as const;
export const LIST_FILTER_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'in'] as const;
export interface ListFilter {
  field: (typeof LIST_FILTER_FIELDS)[number];
  operator: (typeof LIST_FILTER_OPERATORS)[number];
  value: string;
}

export interface SubscriptionListQuery {
  /** null: every webhook of the tenant (a platform admin); else only this creator's. */
  created_by: string | null;
  q?: string;
  sort_by?: 'created_at' | 'updated_at' | 'url';
  sort_order?: 'asc' | 'desc';
  filters: ListFilter[];
  page: number;
  page_size: number;
}

export type SubscriptionsMessage =
  | { op: 'upsert'; entry: SubscriptionEntry }
  | { op: 'remove'; webhook_id: string; seq: number }
  | { op: 'list'; query: SubscriptionListQuery }
  /** Fan `event` out to every active webhook subscribed to its type (and to `also`, when active). */
  | { op: 'publish'; event: WebhookEvent; also?: string }
  | FlowCall<{ op: 'upsert'; entry: SubscriptionEntry } | { op: 'remove'; webhook_id: string; seq: number }>;

export interface SubscriptionListView {
  total: number;
  webhook_ids: string[];
}

/**
 * The send that publishes a catalog event to the tenant's webhooks, for the
 * areas that emit them (liveness today, rate limits later). Put it in the
 * same turn's `sends` as the `events` entry: the outbox makes it durable, and
 * the id fixed here is the webhook-id of every delivery of it.
 */
export function webhookPublish(tenant: string, event: WebhookEvent): ActorSend {
  return { kind: WEBHOOK_SUBSCRIPTIONS_KIND, key: webhookSubscriptionsKey(tenant), message: { op: 'publish', event } satisfies SubscriptionsMessage };
}

/**
 * The runtime event the webhook actor emits when an attempt is due; the
 * node's delivery worker performs it and tells an AttemptResult back.
 */
export const WEBHOOK_ATTEMPT_EVENT = 'webhook.attempt';
export interface WebhookAttempt {
  webhook_id: string;
  event_id: string;
  attempt: number;
  url: string;
  /** Every header to send: content-type, the custom headers, webhook-id, webhook-timestamp, webhook-signature, Service-Signature. */
  headers: Record<string, string>;
  body: string;
  timeout_ms: number;
}
