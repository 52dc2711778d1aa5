/**
 * The rate-limits area's public surface: the two kinds and their keys, the
 * rule set the edge caches, the messages and views, the bounds, and the
 * canonical form of an endpoint path template. Other layers import this file
 * only (the edge's limiter is http/plugins/rate-limit.ts).
 */

/**
 * The rule set: one actor for the whole platform (key RATE_LIMIT_RULES_KEY),
 * `records` storage: the default tier, endpoint and module tiers, support
 * tiers and per-user settings, one record each, and a version every change
 * bumps (the edge re-reads the rule set only when it changed).
 */
export const RATE_LIMIT_RULES_KIND = 'rate-limit-rules';
export const RATE_LIMIT_RULES_KEY = 'platform';

/**
 * One actor per (caller, limit scope): the sliding window of the leases it
 * granted (actors/rate-limits/window-state.ts). The edge reserves a slice of
 * the window (a lease) and spends it locally.
 */
export const RATE_LIMIT_WINDOW_KIND = 'rate-limit-window';

export function rateLimitWindowKey(caller: string, scope: string): string {
  return JSON.stringify([caller, scope]);
}

/** Every bound of the area. docs/api/rate-limits.md documents each; change both together. */
export const rateLimitPolicy = {
  max_requests_max: 1_000_000_000,
  window_seconds_max: 86_400,
  endpoint_path_length_max: 512,
  module_length_max: 64,
  name_length_max: 64,
  description_length_max: 512,
  user_id_length_max: 128,
  /** Custom per-endpoint limits of one user. */
  custom_limits_per_user_max: 100,
  endpoint_tiers_max: 1_000,
  module_tiers_max: 200,
  support_tiers_max: 200,
  /** Users with settings: the whole rule set is cached by every node, so it stays bounded. */
  users_max: 10_000,
  /** Leases one window actor remembers; past it the two oldest merge (conservatively: the later expiry). */
  window_entries_max: 256,
} as const;

/** The `tier` of a user setting that names no support tier: the endpoint, module and default tiers apply. */
export const NO_SUPPORT_TIER = 'default';

export interface Limit {
  max_requests: number;
  window_seconds: number;
}

export type TierType = 'default' | 'endpoint' | 'module';

/** A default, endpoint or module tier (epoch-ms; the edge renders RFC 3339). */
export interface TierView extends Limit {
  id: string;
  /** The default tier: `default`; an endpoint tier: its path template as given; a module tier: the module. */
  name: string;
  tier_type: TierType;
  /** Null for the default tier until an admin sets it (its values then come from the node's configuration). */
  created_at_ms: number | null;
  updated_at_ms: number | null;
}

export interface SupportTierView extends Limit {
  name: string;
  description: string;
  created_at_ms: number;
  updated_at_ms: number;
}

export interface UserRateLimitView {
  user_id: string;
  /** A support tier's name, or `default` (none). */
  tier: string;
  bypass: boolean;
  /** Endpoint template as given -> limit (matched by its canonicalEndpoint form). */
  custom_limits: Record<string, Limit>;
  created_at_ms: number;
  updated_at_ms: number;
}

/** What the edge caches: everything the limiter needs to pick a request's limit. */
export interface RuleSetView {
  version: number;
  /** Bumped by POST /admin/rate-limits/cache/clear: every node drops its leases and denials when it sees a new epoch. */
  cache_epoch: number;
  /** Null until an admin sets it: the node's configured default applies. */
  default_tier: Limit | null;
  /** Canonical endpoint template -> limit. */
  endpoints: Record<string, Limit>;
  modules: Record<string, Limit>;
  support_tiers: Record<string, Limit>;
  users: Record<string, { tier: string; bypass: boolean; custom_limits: Record<string, Limit> }>;
}

export type ListOperator = 'eq' | 'ne' | 'lt' | 'lte' | 'gt' | 'gte' | 'contains' | 'in';
export interface ListFilter {
  field: string;
  operator: ListOperator;
  value: string;
}
export interface ListQuery {
  q?: string;
  sort_by?: string;
  sort_order?: 'asc' | 'desc';
  filters: ListFilter[];
  page: number;
  page_size: number;
}

export type RulesMessage =
  | { op: 'rules'; known_version: number | null }
  | { op: 'overview' }
  | { op: 'clear_cache' }
  | { op: 'get_default' }
  | { op: 'put_default'; limit: Limit }
  | { op: 'create_tier'; tier_type: 'endpoint' | 'module'; name: string; limit: Limit }
  | { op: 'get_tier'; tier_type: 'endpoint' | 'module'; name: string }
  | { op: 'put_tier'; tier_type: 'endpoint' | 'module'; name: string; limit: Limit }
  | { op: 'delete_tier'; tier_type: 'endpoint' | 'module'; name: string }
  | { op: 'list_tiers'; tier_type: 'endpoint' | 'module'; include: TierType[]; query: ListQuery }
  | { op: 'create_support_tier'; name: string; description: string; limit: Limit }
  | { op: 'get_support_tier'; name: string }
  | { op: 'put_support_tier'; name: string; description?: string; limit: Limit }
  | { op: 'delete_support_tier'; name: string }
  | { op: 'list_support_tiers'; query: ListQuery }
  | { op: 'create_user'; user_id: string; tier: string; bypass: boolean; custom_limits: Record<string, Limit> }
  | { op: 'get_user'; user_id: string }
  | { op: 'put_user'; user_id: string; tier: string; bypass: boolean; custom_limits: Record<string, Limit> }
  | { op: 'delete_user'; user_id: string }
  | { op: 'list_users'; tier?: string; bypass?: boolean; query: ListQuery };

/** `rules` answers null when the caller's version is current. */
export type RulesReply = RuleSetView | null;
export interface OverviewView {
  default_tier: TierView | null;
  endpoint_tiers: TierView[];
  module_tiers: TierView[];
  support_tiers: SupportTierView[];
  user_count: number;
}
export interface ListView<T> {
  total: number;
  items: T[];
}
/** A change's answer also carries the rule set's new version (the edge drops its cached rules). */
export interface Changed<T> {
  version: number;
  value: T;
}

/** The breach event the window actor publishes (once per caller and window). */
export const RATE_LIMIT_EXCEEDED_EVENT = 'rate_limit.exceeded';

/** Who the caller is, as the event and the webhooks see it. */
export interface RateLimitCaller {
  /** `user:<id>`, `tenant:<id>` (an API key) or `address:<ip>`. */
  id: string;
  /** The tenant whose webhooks get the event; null for an anonymous caller (the event goes to the node's bus only). */
  tenant: string | null;
  user_id: string | null;
}

export type WindowMessage =
  | {
      op: 'reserve';
      /** Tokens the node would like; the actor grants at most what the window has left. */
      want: number;
      limit: Limit;
      /** The lease lasts this long from the turn; its tokens count until lease end + window. */
      lease_ms: number;
      /** The node's previous lease of this window, with the tokens it did not spend (given back). */
      give_back?: { lease_id: string; unused: number };
      caller: RateLimitCaller;
      /** Named in the event: which policy, endpoint and method were limited. */
      policy: string;
      endpoint: string;
      method: string;
    }
  | { op: 'give_back'; lease_id: string; unused: number }
  /** The node saw this window idle: the actor deletes its record if nothing in it still counts. */
  | { op: 'forget' };

export interface ReserveReply {
  /** 0 when the window is full. */
  granted: number;
  lease_id: string | null;
  lease_end_ms: number;
  /** Tokens the window has left after this grant. */
  remaining: number;
  /** When the window next has a token (0 if it has one now). */
  retry_at_ms: number;
  /** When the window is next empty of counted requests (for the RateLimit `t` parameter). */
  reset_at_ms: number;
}

/**
 * The canonical form of an endpoint path template, so that `/api/v1/jobs/{id}`,
 * `/api/v1/jobs/{job_id}`, `/api/v1/jobs/:job_id` and `/api/v1/jobs/{job_id}/`
 * name the same tier: parameters become `{}`, no trailing slash, no empty
 * segments. Null when the text is not a path template (must start with `/`,
 * no query, no fragment, no whitespace or control characters).
 */
export function canonicalEndpoint(path: string): string | null {
  if (!path.startsWith('/') || path.length > rateLimitPolicy.endpoint_path_length_max) return null;
  if (/[\s?#\u0000-\u001f\u007f]/.test(path)) return null;
  const segments = path.split('/').filter((segment) => segment !== '');
  const canonical: string[] = [];
  for (const segment of segments) {
    if (/^\{[^{}/]*\}$/.test(segment) || /^:[^/]*$/.test(segment)) canonical.push('{}');
    else if (/[{}]/.test(segment)) return null;
    else canonical.push(segment);
  }
  return `/${canonical.join('/')}`;
}

/** A module name: what follows the version (`presence` in /api/v1/presence/...). */
export function isModuleName(name: string): boolean {
  return /^[A-Za-z0-9_.-]+$/.test(name) && name.length <= rateLimitPolicy.module_length_max;
}

export function isSupportTierName(name: string): boolean {
  return /^[A-Za-z0-9_.-]+$/.test(name) && name.length <= rateLimitPolicy.name_length_max && name !== NO_SUPPORT_TIER;
}
