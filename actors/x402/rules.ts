/** Price rules: their fields and the values they take (re-exported by messages.ts). */

export const SETTLE_MODES = ['verify_then_settle_after', 'settle_before'] as const;
export type SettleMode = (typeof SETTLE_MODES)[number];
export const SETTLE_MODE_DEFAULT: SettleMode = 'verify_then_settle_after';

export const RULE_TYPES = ['default', 'service', 'endpoint'] as const;
export type RuleType = (typeof RULE_TYPES)[number];

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Rules the platform holds at most (each is small; the edge caches them all). */
export const PRICE_RULES_MAX = 1_000;
export const DESCRIPTION_LENGTH_MAX = 500;

/** A price rule as stored and shown (spec's PriceRule; times epoch-ms here, RFC 3339 at the edge). */
export interface PriceRule {
  id: string;
  rule_type: RuleType;
  /** The service a service rule prices, or an endpoint rule's owning service (first path segment); null for the default. */
  service: string | null;
  /** Endpoint rules: the HTTP method, upper case; otherwise null. */
  method: string | null;
  /** Endpoint rules: the router path template as given; otherwise null. */
  path: string | null;
  amount_usd: string;
  amount_atomic: number;
  description: string;
  discoverable: boolean;
  enabled: boolean;
  /** null: the platform default (SETTLE_MODE_DEFAULT). */
  settle_mode: SettleMode | null;
  created_at_ms: number;
  updated_at_ms: number;
}

