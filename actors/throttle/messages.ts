/**
 * The throttle area's public surface: the kinds and keys, the bounds, the
 * messages the plan directory, the subject buckets and the plan statistics
 * take, the views they answer with, and the subject validator the edge runs.
 * Other layers import this file only.
 */

/** One actor per tenant (key = throttlePlansKey): every plan of the tenant, the plan id's uniqueness, the list. */
export const THROTTLE_PLANS_KIND = 'throttle-plans';
/** One actor per (tenant, plan generation, subject): the subject's bucket. A hot subject is one actor, batched by the runtime. */
export const THROTTLE_SUBJECT_KIND = 'throttle-subject';
/** One actor per (tenant, plan generation): the plan's totals, fed by the subject actors through the outbox. */
export const THROTTLE_STATS_KIND = 'throttle-stats';

export function throttlePlansKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/**
 * A subject's bucket is keyed by the plan's generation (the directory's
 * sequence number when the plan was created), so a plan deleted and created
 * again under the same id starts with full buckets and zero totals.
 */
export function throttleSubjectKey(tenant: string, plan_id: string, generation: number, subject: string): string {
  return JSON.stringify([tenant, plan_id, generation, subject]);
}

export function throttleStatsKey(tenant: string, plan_id: string, generation: number): string {
  return JSON.stringify([tenant, plan_id, generation]);
}

/** Every bound of the area (unit last). docs/api/throttle.md documents each; change both together. */
export const throttlePolicy = {
  plans_per_tenant_max: 1_000,
  max_requests_max: 1_000_000,
  /** 30 days: with max_requests_max, window_ms * max_requests stays below 2^53 (exact integer arithmetic). */
  window_seconds_max: 2_592_000,
  refund_window_seconds_default: 60,
  refund_window_seconds_max: 86_400,
  actions_max: 100,
  tags_max: 20,
  tag_length_max: 64,
  subject_namespaces_max: 20,
  description_length_max: 1_024,
  subject_length_max: 256,
  /** Tokens refunded within their refund window that one subject remembers (to refuse a second refund). */
  refunded_tokens_per_subject_max: 10_000,
  /** A subject actor sends its counts to the plan's totals at most this often (the totals lag by about this much). */
  stats_flush_ms: 1_000,
} as const;

export type Enforcement = 'soft' | 'hard';
export type HeadersMode = 'none' | 'standard';

/** The fields a client sets on a plan. */
export interface PlanFields {
  limits: { max_requests: number; window_seconds: number };
  actions: Record<string, { cost: number }>;
  default_enforcement: Enforcement;
  description: string;
  headers_mode: HeadersMode;
  refund_window_seconds: number;
  subject_namespaces: string[];
  tags: string[];
}

/** A plan as the directory stores and answers it (epoch-ms; the edge renders RFC 3339). */
export interface PlanView extends PlanFields {
  plan_id: string;
  owner_id: string;
  created_at_ms: number;
  updated_at_ms: number;
  /** The directory's sequence number when the plan was created: part of its subject and stats keys. */
  generation: number;
  /** The directory's sequence number at the plan's last change: subject actors keep the newest rule they have seen. */
  version: number;
}

/** A PATCH: every field given replaces the plan's (actions and tags as a whole); limits may name one of its two fields. */
export type PlanChanges = Partial<Omit<PlanFields, 'limits'>> & { limits?: Partial<PlanFields['limits']> };

export interface PlanListQuery {
  q?: string;
  tag?: string;
  sort_by?: 'created_at' | 'updated_at';
  sort_order?: 'asc' | 'desc';
  page: number;
  page_size: number;
}

export type PlansMessage =
  | { op: 'create'; plan_id: string; owner_id: string; fields: PlanFields }
  | { op: 'get'; plan_id: string }
  | { op: 'update'; plan_id: string; changes: PlanChanges }
  | { op: 'delete'; plan_id: string }
  | { op: 'list'; query: PlanListQuery };

/** Answer of create, get, update and delete: the plan (null when there is none) and the directory's sequence number (for the edge's cache). */
export interface PlanReply {
  plan: PlanView | null;
  seq: number;
}

export interface PlanListView {
  total: number;
  plans: PlanView[];
}

/** What a subject actor needs of its plan, with the version it was read at. */
export interface PlanRule {
  version: number;
  max_requests: number;
  window_ms: number;
  refund_window_ms: number;
}

export function planRule(plan: PlanView): PlanRule {
  return {
    version: plan.version,
    max_requests: plan.limits.max_requests,
    window_ms: plan.limits.window_seconds * 1000,
    refund_window_ms: plan.refund_window_seconds * 1000,
  };
}

export type SubjectMessage =
  | { op: 'check'; rule: PlanRule; cost: number }
  | { op: 'peek'; rule: PlanRule }
  | { op: 'refund'; rule: PlanRule; consume_token: string }
  | { op: 'reset'; rule: PlanRule };

/** The bucket as a client sees it (`reset_at` epoch-s). */
export interface BucketView {
  limit: number;
  remaining: number;
  reset_after_seconds: number;
  reset_at: number;
  /** The window of the rule the answer was computed with (for RateLimit-Policy). */
  window_seconds: number;
}

export type CheckReason = 'within_limit' | 'limit_exceeded';

export interface CheckView extends BucketView {
  allowed: boolean;
  consume_token: string;
  reason: CheckReason;
  retry_after_seconds: number;
  cost: number;
}

export type RefundReason = 'refunded' | 'already_refunded' | 'refund_window_passed' | 'nothing_consumed' | 'bucket_full';

export interface RefundView {
  refunded: boolean;
  cost_refunded: number;
  reason: RefundReason;
}

export interface StatsCounts {
  total_checks: number;
  total_allowed: number;
  total_denied: number;
  total_refunded: number;
}

export type StatsMessage = { op: 'add'; counts: StatsCounts } | { op: 'get' };

// ---- subject identifiers ----

const EMAIL = /^[^\s@]+@[^\s@]+$/;
/** Separators people write phone numbers with. */
const PHONE_SEPARATED = /^\(?\d[\d\s().\-]*\d$/;
const SUBJECT = /^[A-Za-z0-9_][A-Za-z0-9_.:\-]*$/;

/**
 * Why `subject` may not be used as a throttle subject, or null when it may.
 * Subjects are internal ids (spec §4.14), never personal data: anything with
 * an `@` (an e-mail address), a leading `+` (an E.164 number), digits written
 * with phone separators (`555-123-4567`, `(555) 123 4567`), or a bare run of
 * 10 to 15 digits (a phone number without separators) is refused. Internal
 * ids are letters, digits and `_ . : -`, like `user:8f3a`, `usr_91`, `42`.
 * When the plan names subject_namespaces, the subject must be
 * `<namespace>:<id>` with one of them.
 */
export function subjectProblem(subject: string, namespaces: readonly string[]): string | null {
  if (subject.length === 0 || subject.length > throttlePolicy.subject_length_max) return `must be 1 to ${throttlePolicy.subject_length_max} characters`;
  const colon = subject.indexOf(':');
  const id = colon >= 0 ? subject.slice(colon + 1) : subject;
  if (subject.includes('@') || EMAIL.test(id)) return 'looks like an e-mail address; use an internal id (personal data is not accepted)';
  if (/^\+/.test(id) || /^\+/.test(subject)) return 'looks like a phone number; use an internal id (personal data is not accepted)';
  if (/^\d{10,15}$/.test(id) || (/[\s().\-]/.test(id) && PHONE_SEPARATED.test(id) && countDigits(id) >= 7 && countDigits(id) <= 15)) {
    return 'looks like a phone number; use an internal id (personal data is not accepted)';
  }
  if (!SUBJECT.test(subject)) return 'must be an internal id: letters, digits and _ . : - only';
  if (namespaces.length > 0) {
    const namespace = colon >= 0 ? subject.slice(0, colon) : null;
    if (namespace === null || id.length === 0 || !namespaces.includes(namespace)) return `must be <namespace>:<id> with a namespace of the plan (${namespaces.join(', ')})`;
  }
  return null;
}

function countDigits(text: string): number {
  let digits = 0;
  for (const char of text) if (char >= '0' && char <= '9') digits++;
  return digits;
}
