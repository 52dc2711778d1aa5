import type { WebhookSettings } from '../actors/webhooks/messages.js';
import type { NodeConfig } from './config.js';

/** The node's webhook settings, passed to the webhook actor with every message the edge and the delivery worker send it. */
export function webhookSettings(config: NodeConfig): WebhookSettings {
  return {
    attempt_timeout_ms: config.webhookTimeoutMs,
    disable_after_failures: config.webhookDisableAfterFailures,
    retry_base_ms: config.webhookRetryBaseMs,
  };
}
