/**
 * The message-queue area's public surface (spec doc 1 §2 "Message queue",
 * §4.6; conventions "Message queue data plane"): the actor kinds and keys,
 * the bounds, the messages the queue, topic and directory actors take and the
 * views they answer with (times in epoch-ms; the edge formats them). Other
 * layers import this file only.
 */
import type { FlowAnswer, FlowCall } from '../flow-call.js';
import type { FilterPolicy } from './filter-policy.js';

export type { FilterPolicy } from './filter-policy.js';
export { parseFilterPolicy } from './filter-policy.js';

export const MQ_QUEUE_KIND = 'mq-queue';
export const MQ_TOPIC_KIND = 'mq-topic';
export const MQ_DIRECTORY_KIND = 'mq-directory';

/** Actor key of a queue: tenant and queue name, unambiguously joined. */
export function mqQueueKey(tenant: string, name: string): string {
  return JSON.stringify([tenant, name]);
}

/** Actor key of a topic: tenant and topic name. */
export function mqTopicKey(tenant: string, name: string): string {
  return JSON.stringify([tenant, name]);
}

/** Actor key of a tenant's directory (the list index of its queues and topics). */
export function mqDirectoryKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

export const mqLimits = {
  queue_name_length_max: 80,
  topic_name_length_max: 256,
  /** A message body (UTF-8 bytes), as SQS and SNS. */
  body_bytes_max: 256 * 1024,
  attributes_max: 10,
  attribute_name_length_max: 256,
  attribute_value_length_max: 1024,
  group_id_length_max: 128,
  deduplication_id_length_max: 128,
  max_messages_max: 10,
  wait_time_seconds_max: 20,
  /**
   * The longest wait one receive holds in the queue actor: below the
   * runtime's deferred_reply_ms_max (10 s) with 2 s to spare for the answer's
   * turn and commit on a busy node, so the actor answers an empty list itself
   * before the runtime would answer flow_interrupted. A longer
   * wait_time_seconds is served by the edge in several parts.
   */
  receive_wait_ms_max: 8_000,
  visibility_timeout_seconds_max: 43_200,
  visibility_timeout_seconds_default: 30,
  delay_seconds_max: 900,
  retention_minutes_min: 1,
  retention_minutes_max: 20_160,
  retention_minutes_default: 5_760,
  max_receive_count_max: 1_000,
  /** FIFO de-duplication window on deduplication_id, as SQS FIFO. */
  fifo_deduplication_window_ms: 5 * 60_000,
  /** De-duplication ids one FIFO queue remembers; past it the oldest is forgotten before its window ends. */
  fifo_deduplication_ids_max: 100_000,
  /** Messages one queue holds; a send beyond it is refused (409 mq_queue_full). */
  queue_messages_max: 100_000,
  /** Body bytes one queue holds; a send beyond it is refused (409 mq_queue_full). */
  queue_bytes_max: 256 * 1024 * 1024,
  /** Receives waiting (long polling) on one queue at once. */
  waiters_max: 1_000,
  /** Expired messages and de-duplication records dropped per housekeeping turn. */
  sweep_batch_max: 10_000,
  subscriptions_per_topic_max: 100,
  topic_tags_max: 50,
  topic_retention_minutes_max: 1_440,
  topic_retention_minutes_default: 5,
  /** Publish de-duplication ids a topic remembers; past it the oldest is forgotten. */
  topic_deduplication_ids_max: 100_000,
  /** Bytes of a filter policy (serialised). */
  filter_policy_bytes_max: 16 * 1024,
  /** Messages one redrive call moves (each is one outbox message). */
  redrive_messages_max: 1_000,
} as const;

/** Message attributes: SNS filter policies match on them. */
export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

// ---- the queue actor ----

export interface QueueSettings {
  visibility_timeout_seconds: number;
  delay_seconds: number;
  message_retention_minutes: number;
  fifo: boolean;
  /** 0: no dead-letter queue. */
  max_receive_count: number;
  dead_letter_queue: string | null;
}

export interface QueueConfig extends QueueSettings {
  queue_id: string;
  name: string;
  created_at: number;
  updated_at: number;
}

export interface QueueSubscriptionView {
  topic_name: string;
  topic_id: string;
  filter_policy: FilterPolicy | null;
  subscribed_at: number;
}

export interface QueueStatistics {
  approximate_message_count: number;
  approximate_not_visible_count: number;
  approximate_delayed_count: number;
  oldest_message_age_seconds: number;
}

export interface QueueDetailView {
  config: QueueConfig;
  statistics: QueueStatistics;
  subscriptions: QueueSubscriptionView[];
}

export interface ReceivedMessage {
  message_id: string;
  receipt_handle: string;
  body: string;
  attributes: Attributes;
  receive_count: number;
  sent_at: number;
  group_id: string | null;
}

/** A copy handed from one actor to a queue (topic fan-out, dead-letter move). */
export interface MessageCopy {
  message_id: string;
  body: string;
  attributes: Attributes;
  sent_at: number;
  group_id: string | null;
  /** Receives so far (kept when a dead-letter move is refused and the message returns to its queue). */
  receive_count: number;
}

export type QueueMessage =
  | { op: 'create'; name: string; settings: QueueSettings }
  | { op: 'get' }
  | { op: 'delete' }
  | { op: 'purge' }
  /**
   * Move up to max_messages messages not in flight, oldest first, to `destination` (a dead-letter
   * queue's redrive). A flow: the queue first asks the destination (flow-call `redrive-destination`)
   * and moves nothing if it does not exist (mq_queue_not_found); the answer comes when it has moved.
   */
  | { op: 'redrive'; destination: string; max_messages: number }
  /** A redrive's check of its destination (a flow-call from the source queue): answers RedriveDestinationView, or mq_queue_not_found. */
  | { op: 'redrive-destination' }
  | { op: 'send'; body: string; attributes: Attributes; delay_seconds?: number; group_id?: string; deduplication_id?: string }
  /** wait_ms: at most receive_wait_ms_max; the ask is answered when a message arrives or the wait ends. */
  | { op: 'receive'; max_messages: number; wait_ms: number; visibility_timeout_seconds?: number }
  /** A read-only wait: answers {available} as soon as a message is receivable, or false at the end of wait_ms. */
  | { op: 'await-message'; wait_ms: number }
  | { op: 'delete-message'; receipt_handle: string }
  | { op: 'change-visibility'; receipt_handle: string; visibility_timeout_seconds: number }
  // From the topic actor (subscription flow, fan-out) and other queues (dead-letter moves), through the outbox.
  | { op: 'attach'; topic_name: string; topic_id: string; filter_policy: FilterPolicy | null; subscribed_at: number }
  | { op: 'detach'; topic_name: string; topic_id: string }
  | { op: 'deliver'; queue_id: string; copy: MessageCopy }
  | { op: 'dead-letter'; source_queue: string; copy: MessageCopy }
  | { op: 'dead-letter-refused'; copy: MessageCopy; reason: string }
  | FlowCall<QueueMessage>
  /** The destination's answer to a redrive's `redrive-destination` call. */
  | FlowAnswer;

export interface RedriveDestinationView {
  queue_id: string;
  fifo: boolean;
}

export interface RedriveView {
  moved: number;
  /** Messages the source queue still holds. */
  remaining: number;
}

export interface SendView {
  message_id: string;
  /** A FIFO send whose deduplication_id was seen within the window: nothing new was queued. */
  duplicate: boolean;
}

export interface ChangeVisibilityView {
  message_id: string;
  receipt_handle: string;
  visibility_timeout_seconds: number;
  visible_at: number;
}

// ---- the topic actor ----

export interface TopicSettings {
  max_message_size_bytes: number;
  retention_minutes: number;
  tags: Record<string, string>;
}

export interface TopicConfig extends TopicSettings {
  topic_id: string;
  name: string;
  created_at: number;
  updated_at: number;
}

export interface SubscriptionView {
  subscription_id: string;
  topic_name: string;
  queue_name: string;
  queue_id: string;
  filter_policy: FilterPolicy | null;
  raw_message_delivery: boolean;
  created_at: number;
}

export interface TopicDetailView {
  config: TopicConfig;
  message_count: number;
  subscription_count: number;
}

export interface PublishView {
  message_id: string;
  /** Queues a copy was sent to (their filter policy matched). */
  delivered_to: number;
  duplicate: boolean;
}

export type TopicMessage =
  | { op: 'create'; name: string; settings: TopicSettings }
  | { op: 'get' }
  | { op: 'delete' }
  | { op: 'publish'; body: string; attributes: Attributes; deduplication_id?: string }
  | { op: 'subscribe'; queue_name: string; filter_policy: FilterPolicy | null; raw_message_delivery: boolean }
  | { op: 'unsubscribe'; queue_name: string }
  | { op: 'list-subscriptions' }
  /** The queue was deleted: its subscription goes. */
  | { op: 'queue-gone'; queue_name: string; queue_id: string }
  | FlowAnswer;

/** The body a queue receives from a topic without raw_message_delivery (an SNS-like envelope, serialised as JSON). */
export interface NotificationEnvelope {
  type: 'Notification';
  message_id: string;
  topic_name: string;
  body: string;
  attributes: Attributes;
  /** RFC 3339. */
  timestamp: string;
}

// ---- the directory actor ----

export const SORT_FIELDS = ['name', '-name', 'created_at', '-created_at'] as const;
export type SortField = (typeof SORT_FIELDS)[number];

export interface DirectoryEntry {
  name: string;
  id: string;
  created_at: number;
}

export type DirectoryMessage =
  | { op: 'upsert'; type: 'queue' | 'topic'; entry: DirectoryEntry; rev: number }
  | { op: 'remove'; type: 'queue' | 'topic'; name: string; rev: number }
  | { op: 'list'; type: 'queue' | 'topic'; q?: string; sort_by: SortField; page: number; page_size: number };

export interface DirectoryListView {
  total: number;
  entries: DirectoryEntry[];
}
