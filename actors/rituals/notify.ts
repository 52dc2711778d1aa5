import type { ActorSend } from '../../runtime/index.js';
import { MQ_TOPIC_KIND, mqTopicKey, type TopicMessage } from '../mq/messages.js';
import { WEBHOOK_SUBSCRIPTIONS_KIND, webhookSubscriptionsKey, type SubscriptionsMessage } from '../webhooks/messages.js';
import type { NotifyTargets, RitualEventType } from './messages.js';

/**
 * How a ritual notifies, as outbox sends (durable with the turn that decided
 * it, delivered exactly once in effect):
 *
 * - each webhook named by the ritual gets its own signed delivery through the
 *   webhooks area's machinery: a `publish` to the tenant's subscription index
 *   with `also` = that webhook. The event type (`ritual.*`) is not in the
 *   catalog, so no webhook can subscribe to it; only the named webhooks get
 *   it, and only when they exist in the tenant and are active (the index is
 *   the tenant's). No catalog type was added.
 * - a `pubsub_channel` is the name of a message-queue topic of the tenant: a
 *   `publish` to the `mq-topic` actor [tenant, channel], which fans it out to
 *   its subscribed queues (a topic that does not exist drops it).
 */
export function notifySends(
  tenant: string,
  targets: NotifyTargets,
  event: { id: string; type: RitualEventType; timestamp_ms: number; data: Record<string, unknown> },
): ActorSend[] {
  const sends: ActorSend[] = [];
  for (const webhook_id of targets.webhook_ids) {
    const message: SubscriptionsMessage = { op: 'publish', event: { id: event.id, type: event.type, timestamp_ms: event.timestamp_ms, data: event.data }, also: webhook_id };
    sends.push({ kind: WEBHOOK_SUBSCRIPTIONS_KIND, key: webhookSubscriptionsKey(tenant), message });
  }
  if (targets.pubsub_channel !== null) sends.push(topicPublish(tenant, targets.pubsub_channel, event));
  return sends;
}

export function topicPublish(tenant: string, channel: string, event: { id: string; type: RitualEventType; timestamp_ms: number; data: Record<string, unknown> }): ActorSend {
  const message: TopicMessage = {
    op: 'publish',
    body: JSON.stringify({ event_id: event.id, type: event.type, timestamp_ms: event.timestamp_ms, data: event.data }),
    attributes: { event_type: event.type, ritual_def_id: String(event.data.ritual_def_id ?? ''), attempt_id: String(event.data.attempt_id ?? '') },
  };
  return { kind: MQ_TOPIC_KIND, key: mqTopicKey(tenant, channel), message };
}
