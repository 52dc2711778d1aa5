import type { RecordsActorDefinition } from '../../runtime/index.js';
import { WEBHOOK_KIND, WEBHOOK_SUBSCRIPTIONS_KIND, type SubscriptionsMessage, type WebhookMessage } from './messages.js';
import { loadSubscriptions, stepSubscriptions, type SubscriptionsState } from './subscriptions-state.js';
import { loadWebhook, stepWebhook, type WebhookState } from './webhook-state.js';

/** One webhook (key = webhook id): config, secrets, pending deliveries, delivery log and dead-letter queue as records. */
export const webhookActor: RecordsActorDefinition<WebhookState, WebhookMessage, unknown> = {
  kind: WEBHOOK_KIND,
  storage: 'records',
  load: loadWebhook,
  step: stepWebhook,
};

/** A tenant's webhooks and their subscriptions (key = webhookSubscriptionsKey(tenant)): list, cap, event fan-out. */
export const webhookSubscriptionsActor: RecordsActorDefinition<SubscriptionsState, SubscriptionsMessage, unknown> = {
  kind: WEBHOOK_SUBSCRIPTIONS_KIND,
  storage: 'records',
  load: loadSubscriptions,
  step: stepSubscriptions,
};

export const webhookActors = [webhookActor, webhookSubscriptionsActor];
