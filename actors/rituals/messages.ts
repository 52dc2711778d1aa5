/**
 * The rituals area's public surface (spec doc 2 §2 Rituals, §3 Ritual
 * attempt, §4.10; docs/api/rituals.md): the actor kinds and keys, the bounds,
 * the definition and attempt shapes, the messages the three actors take and
 * the views they answer with (times in epoch-ms). Other layers import this
 * file only.
 */
export { checkDefinition } from './definition.js';
export { effectiveOrder, orderViolation } from './quorum.js';
export { filterValueProblem } from './definition-filters.js';

/** One actor per tenant (key = ritualDefinitionsKey): every definition and its kept versions. */
export const RITUAL_DEFINITIONS_KIND = 'ritual-definitions';
/** One actor per attempt (key = ritualAttemptKey): its state machine, check-ins, escalations and alarms. */
export const RITUAL_ATTEMPT_KIND = 'ritual-attempt';
/** One actor per definition (key = ritualRecordKey): the attempts' history and the analytics, fed by outbox deltas. */
export const RITUAL_RECORD_KIND = 'ritual-record';

export function ritualDefinitionsKey(tenant: string): string {
  return JSON.stringify([tenant]);
}
export function ritualAttemptKey(tenant: string, attempt_id: string): string {
  return JSON.stringify([tenant, attempt_id]);
}
export function ritualRecordKey(tenant: string, ritual_def_id: string): string {
  return JSON.stringify([tenant, ritual_def_id]);
}

/** Every bound of the area. docs/api/rituals.md documents each; change both together. */
export const ritualPolicy = {
  definitions_per_tenant_max: 1_000,
  /** Versions a definition keeps (the newest); an attempt keeps its own copy of the version it armed. */
  versions_kept_max: 50,
  parts_max: 50,
  part_id_length_max: 64,
  assigned_to_length_max: 128,
  name_length_max: 200,
  description_length_max: 2_000,
  window_ms_max: 3_600_000,
  checkin_interval_seconds_max: 86_400,
  arm_ttl_seconds_default: 3_600,
  arm_ttl_seconds_max: 7 * 86_400,
  escalation_steps_max: 10,
  after_missed_seconds_max: 86_400,
  webhook_ids_max: 10,
  channel_length_max: 256,
  countdown_seconds_default: 3,
  countdown_seconds_max: 300,
  /** A late performance counts as a near miss when it is late by at most max(this, window_ms). */
  near_miss_ms_min: 1_000,
  /** Terminal attempts the analytics keep for the median and for `sample`. */
  recent_outcomes_kept: 1_000,
  lateness_leaders_max: 10,
  page_size_default: 20,
  page_size_max: 100,
} as const;

export const RITUAL_MODES = ['forward', 'reverse', 'any_order'] as const;
export type RitualMode = (typeof RITUAL_MODES)[number];

export const ATTEMPT_STATUSES = ['armed', 'counting_down', 'performing', 'completed', 'failed'] as const;
export type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];
export const TERMINAL_STATUSES: readonly AttemptStatus[] = ['completed', 'failed'];

export interface RitualPart {
  part_id: string;
  assigned_to: string;
  actor_type: 'user';
}

/** Where a notification goes: signed webhook deliveries and/or a message-queue topic of the tenant. */
export interface NotifyTargets {
  webhook_ids: string[];
  pubsub_channel: string | null;
}

export interface EscalationStep extends NotifyTargets {
  action: 'notify';
  after_missed_seconds: number;
}

/** What a client writes (create and PUT); every default applied by checkDefinition. */
export interface RitualDefinitionInput {
  name: string;
  description: string;
  parts: RitualPart[];
  ordering: string[];
  mode: RitualMode;
  window_ms: number;
  quorum: { required: number; of: number };
  /** 0: no check-ins are expected (and no escalation can be configured). */
  checkin_interval_seconds: number;
  arm_ttl_seconds: number;
  escalation: EscalationStep[];
  on_complete: NotifyTargets | null;
  on_dispute: 'none';
  /** The default topic of `countdown`. */
  announce_channel: string | null;
}

export interface RitualDefinition extends RitualDefinitionInput {
  ritual_def_id: string;
  created_by: string;
  created_at_ms: number;
  updated_at_ms: number;
  version: number;
}

export interface RitualCaller {
  user_id: string;
  admin: boolean;
}

// ---- the definitions actor ----

export const DEFINITION_SORT_FIELDS = ['created_at', 'name', 'version'] as const;
export const DEFINITION_FILTER_FIELDS = ['name', 'created_by', 'mode', 'version', 'created_at'] as const;
export const DEFINITION_FILTER_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'in'] as const;
export interface DefinitionFilter {
  field: (typeof DEFINITION_FILTER_FIELDS)[number];
  operator: (typeof DEFINITION_FILTER_OPERATORS)[number];
  value: string;
}

export interface DefinitionListQuery {
  q?: string;
  sort_by: (typeof DEFINITION_SORT_FIELDS)[number];
  sort_order: 'asc' | 'desc';
  filters: DefinitionFilter[];
  page: number;
  page_size: number;
}

export type DefinitionsMessage =
  | { op: 'create'; caller: RitualCaller; input: RitualDefinitionInput }
  | { op: 'update'; caller: RitualCaller; ritual_def_id: string; input: RitualDefinitionInput }
  | { op: 'get'; ritual_def_id: string; version?: number }
  | { op: 'list'; query: DefinitionListQuery };

export interface DefinitionListView {
  total: number;
  definitions: RitualDefinition[];
}

// ---- the attempt actor ----

export interface Performance {
  part_id: string;
  performed_by: string;
  server_ts_ms: number;
}

export interface LatePerformance extends Performance {
  late_by_ms: number;
  near_miss: boolean;
}

export interface PartCheckin {
  part_id: string;
  last_checkin_ms: number | null;
  checkins: number;
  /** Escalation steps fired since the last check-in (a check-in starts over). */
  steps_fired: number;
}

export interface EscalationFired {
  part_id: string;
  assigned_to: string;
  step: number;
  missed_at_ms: number;
  fired_at_ms: number;
  webhook_ids: string[];
  pubsub_channel: string | null;
  event_id: string;
}

export interface LateEntry {
  part_id: string;
  assigned_to: string;
  /** null: had not performed when the attempt ended (a later performance, within the deadline, fills it). */
  late_by_ms: number | null;
  performed: boolean;
}

export interface AttemptReport {
  outcome: 'completed' | 'failed';
  reason: 'quorum_reached' | 'window_closed' | 'deadline';
  ended_at_ms: number;
  window_open_ms: number | null;
  window_close_ms: number | null;
  performed: number;
  required: number;
  /** Between the first and the last counted performance; null with none. */
  spread_ms: number | null;
  on_time: (Performance & { offset_ms: number })[];
  late: LateEntry[];
  /** Parts that did not perform in a completed attempt whose quorum needed fewer than all. */
  skipped: string[];
}

export interface AttemptRecord {
  attempt_id: string;
  tenant: string;
  ritual_def_id: string;
  version: number;
  definition: RitualDefinition;
  armed_by: string;
  armed_at_ms: number;
  deadline_ms: number;
  rehearsal: boolean;
  status: AttemptStatus;
  countdown: { channel: string; seconds: number; announced_at_ms: number } | null;
  window_open_ms: number | null;
  window_close_ms: number | null;
  performances: Performance[];
  late_performances: LatePerformance[];
  checkins: PartCheckin[];
  escalations: EscalationFired[];
  report: AttemptReport | null;
  ended_at_ms: number | null;
  /** Change counter: the history keeps the newest view. */
  seq: number;
}

/** The Attempt of the spec plus what the service adds (docs/api/rituals.md). */
export type AttemptView = Omit<AttemptRecord, 'tenant' | 'definition'>;

export type AttemptMessage =
  | { op: 'arm'; tenant: string; caller: RitualCaller; definition: RitualDefinition; rehearsal: boolean }
  | { op: 'get' }
  | { op: 'checkin'; caller: RitualCaller; part_id: string }
  | { op: 'countdown'; caller: RitualCaller; seconds: number; channel: string | null }
  | { op: 'perform'; caller: RitualCaller; part_id: string };

export interface CheckinReply {
  attempt_id: string;
  part_id: string;
  next_deadline_ms: number;
  status: AttemptStatus;
}

export interface CountdownReply {
  attempt_id: string;
  channel: string;
  seconds: number;
  window_open_ms: number;
  window_close_ms: number;
  status: AttemptStatus;
}

export interface PerformReply {
  attempt_id: string;
  part_id: string;
  server_ts_ms: number;
  performed: number;
  required: number;
  late_by_ms: number | null;
  report: AttemptReport | null;
  status: AttemptStatus;
}

// ---- the record actor (history and analytics) ----

export interface OutcomeDelta {
  attempt_id: string;
  outcome: 'completed' | 'failed';
  ended_at_ms: number;
  spread_ms: number | null;
  late_parts: string[];
}

export type RecordMessage =
  | { op: 'attempt'; view: AttemptView }
  | { op: 'outcome'; delta: OutcomeDelta }
  | { op: 'late'; attempt_id: string; part_id: string; late_by_ms: number; near_miss: boolean }
  | { op: 'history'; status?: AttemptStatus; page: number; page_size: number }
  | { op: 'analytics'; sample?: number };

export interface HistoryView {
  total: number;
  attempts: AttemptView[];
}

export interface LatenessLeader {
  part_id: string;
  late_count: number;
  near_miss_count: number;
  total_late_ms: number;
}

export interface AnalyticsView {
  total_attempts: number;
  completed: number;
  failed: number;
  success_rate: number;
  median_spread_ms: number;
  lateness_leaders: LatenessLeader[];
  sampled: number;
}

// ---- what the topic and webhooks carry ----

export const RITUAL_EVENTS = ['ritual.countdown', 'ritual.escalation', 'ritual.completed', 'ritual.failed'] as const;
export type RitualEventType = (typeof RITUAL_EVENTS)[number];
