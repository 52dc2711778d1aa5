import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The job queue's public surface: the kinds and keys, the bounds, the
 * messages each kind takes, the views it answers with, and the `job.attempt`
 * event the node's delivery worker (http/job-delivery.ts) performs. Other
 * layers import this file only.
 *
 * Kinds:
 * - `job-queue` (key jobQueueKey(tenant, name)): one queue: its config, every
 *   job of the queue as a record, the due schedule, the dead-letter queue and
 *   the counters. The queue owns the due schedule, so pausing and firing are
 *   decided in one actor's turns (no read-guards-write race).
 * - `job-queue-directory` (key jobDirectoryKey(tenant)): the tenant's queues
 *   for listing, and the coordinator of what spans the tenant's queues
 *   (schedule-batch, cancel-bulk).
 * - `job-queue-registry` (one, key JOB_REGISTRY_KEY): every queue of every
 *   tenant, for the administrative fan-outs (admin cancel-bulk, cleanup).
 * - `job-scheduler-probe` (key: the node id): a durable alarm every
 *   probe_interval_ms, so GET /health/job_queue can tell that this node's
 *   alarms really fire.
 */
export const JOB_QUEUE_KIND = 'job-queue';
export const JOB_DIRECTORY_KIND = 'job-queue-directory';
export const JOB_REGISTRY_KIND = 'job-queue-registry';
export const JOB_PROBE_KIND = 'job-scheduler-probe';
export const JOB_REGISTRY_KEY = 'all';

export function jobQueueKey(tenant: string, name: string): string {
  return JSON.stringify([tenant, name]);
}

export function jobDirectoryKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/** The tenant and name inside a jobQueueKey. */
export function parseJobQueueKey(key: string): { tenant: string; name: string } {
  const [tenant, name] = JSON.parse(key) as [string, string];
  return { tenant, name };
}

/** Queue names: what Cloud Tasks and BullMQ users write (letters, digits, - _ . :), 1-100 characters. */
export const QUEUE_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$';
const queueName = new RegExp(QUEUE_NAME_PATTERN);
export function isQueueName(name: string): boolean {
  return queueName.test(name);
}

/** The queue's id: `jq_` + base64url of its name (the name is the queue's identity in its tenant, as in Cloud Tasks). */
export function queueIdOf(name: string): string {
  return `jq_${Buffer.from(name, 'utf8').toString('base64url')}`;
}

/** The name inside a queue id, or null when the id is not one. */
export function queueNameOfId(queue_id: string): string | null {
  if (!queue_id.startsWith('jq_')) return null;
  const name = Buffer.from(queue_id.slice(3), 'base64url').toString('utf8');
  return isQueueName(name) && queueIdOf(name) === queue_id ? name : null;
}

/** A job id names its queue: `job_<base64url(queue)>.<random>`, so a job is found with one ask. */
export function jobIdFor(queue: string, random: string): string {
  return `job_${Buffer.from(queue, 'utf8').toString('base64url')}.${random}`;
}

/** The queue name inside a job id, or null when the id is not one. */
export function queueOfJobId(job_id: string): string | null {
  const match = /^job_([A-Za-z0-9_-]{1,140})\.[A-Za-z0-9_-]{1,64}$/.exec(job_id);
  if (!match) return null;
  const name = Buffer.from(match[1], 'base64url').toString('utf8');
  return isQueueName(name) && Buffer.from(name, 'utf8').toString('base64url') === match[1] ? name : null;
}

export const JOB_STATUSES = ['scheduled', 'processing', 'completed', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Highest first: among due jobs, a higher priority is dispatched first. */
export const JOB_PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
export type JobPriority = (typeof JOB_PRIORITIES)[number];

/** The events a job's webhook may name (spec §6 leaves them open): the due delivery is the only one. */
export const JOB_WEBHOOK_EVENTS = ['job.due'] as const;

/** Every bound of the area (unit last). docs/api/jobs.md documents each; change both together. */
export const jobPolicy = {
  retry_max_attempts_default: 3,
  retry_max_attempts_max: 100,
  retry_backoff_seconds_default: 10,
  retry_backoff_seconds_max: 86_400,
  /** A retry never waits longer than this, however many doublings. */
  retry_wait_seconds_max: 3_600,
  retention_days_default: 7,
  retention_days_max: 3_650,
  dlq_entries_default: 10_000,
  dlq_entries_max: 100_000,
  dlq_list_limit_default: 50,
  dlq_list_limit_max: 500,
  /** Jobs of one queue in flight at once (Cloud Tasks' max_concurrent_dispatches). */
  concurrency_default: 1_000,
  concurrency_max: 10_000,
  /** Attempts one queue turn starts; more due jobs continue in the next turn. */
  dispatch_per_turn_max: 5_000,
  /** Jobs (of any status) one queue holds; scheduling past it is refused with 409 job_queue_full. */
  jobs_per_queue_max: 1_000_000,
  /** Queues per tenant seen by list and fan-out. */
  queues_per_tenant_max: 1_000,
  batch_jobs_max: 1_000,
  redrive_job_ids_max: 1_000,
  /** One redrive without job_ids moves at most this many entries. */
  redrive_all_max: 10_000,
  payload_bytes_max: 64 * 1024,
  url_length_max: 2_048,
  headers_max: 20,
  header_value_length_max: 1_024,
  description_length_max: 1_024,
  tags_max: 20,
  tag_length_max: 128,
  list_limit_default: 20,
  list_limit_max: 100,
  list_offset_max: 10_000,
  /** An attempt with no result after 2 * timeout + this counts as failed (the node died mid-attempt). */
  attempt_deadline_margin_ms: 1_000,
  /** Stored excerpt of a target's answer in the job's error. */
  response_excerpt_length_max: 256,
  /** The scheduler probe's alarm period; the health check wants a tick within 3 periods. */
  probe_interval_ms: 5_000,
  /** Earliest scheduled_at accepted, relative to now (a past time means "now"); latest: a year ahead. */
  schedule_ahead_ms_max: 366 * 86_400_000,
} as const;

/** Node settings the edge passes with the messages that can start attempts (from NodeConfig). */
export interface JobSettings {
  attempt_timeout_ms: number;
}

export interface RetryPolicy {
  max_attempts: number;
  backoff_seconds: number;
}

export interface DlqConfig {
  enabled: boolean;
  max_entries: number;
}

/** The changeable part of a queue (POST creates with defaults, PATCH changes any of them). */
export interface QueueSettings {
  description: string;
  tags: Record<string, string>;
  retention_days: number;
  retry_policy: RetryPolicy;
  dlq_config: DlqConfig;
  default_priority: JobPriority;
  concurrency: number;
}

export interface QueueView extends QueueSettings {
  id: string;
  name: string;
  tenant: string;
  owner_id: string;
  active: boolean;
  auto_created: boolean;
  created_at_ms: number;
  updated_at_ms: number;
  pending_count: number;
  processing_count: number;
  completed_count: number;
  failed_count: number;
  cancelled_count: number;
}

export interface JobWebhookView {
  id: string;
  url: string;
  headers: Record<string, string>;
  secret: string;
  events: string[];
  active: boolean;
  created_at_ms: number;
  updated_at_ms: number;
}

export interface JobView {
  id: string;
  queue: string;
  user_id: string;
  status: JobStatus;
  priority: JobPriority;
  payload: unknown;
  attempts: number;
  retry_policy: RetryPolicy;
  scheduled_at_ms: number;
  created_at_ms: number;
  updated_at_ms: number;
  last_attempt_at_ms: number | null;
  completed_at_ms: number | null;
  error: string | null;
  webhook: JobWebhookView;
}

export interface ScheduledJobAck {
  job_id: string;
  queue: string;
  scheduled_at_ms: number;
  status: 'scheduled';
}

export interface DlqEntryView {
  entry_id: string;
  job_id: string;
  dead_lettered_at_ms: number;
  error: string;
  job: JobView;
}

export interface QueueStatsView {
  queue: string;
  scheduled: number;
  processing: number;
  completed_last_hour: number;
  failed_last_hour: number;
  /** completed / (completed + failed) over the last hour, 4 decimals; 0 when none finished. */
  success_rate: number;
  avg_processing_time_ms: number;
  oldest_job_age_seconds: number;
}

/** One job to schedule, as the edge validated it (secret generated when absent). */
export interface JobRequest {
  job_id: string;
  user_id: string;
  url: string;
  headers: Record<string, string>;
  secret: string;
  events: string[];
  payload: unknown;
  /** Epoch-ms; a past time means "due now". */
  scheduled_at_ms: number;
  priority: JobPriority | null;
  retry_policy: RetryPolicy | null;
}

/** Filters of cancel-bulk (all given ones must match); docs/api/jobs.md. */
export interface CancelFilter {
  /** Only this user's jobs; null: every user's (the admin variant without user_id). */
  user_id: string | null;
  queue?: string;
  job_ids?: string[];
  priority?: JobPriority;
  scheduled_after_ms?: number;
  scheduled_before_ms?: number;
}

export interface JobListQuery {
  status?: JobStatus;
  scheduled_after_ms?: number;
  scheduled_before_ms?: number;
  /** How many of the first matches to return (offset + limit of the page). */
  first: number;
}

export type QueueMessage =
  | { op: 'create'; tenant: string; owner_id: string; settings: Partial<QueueSettings>; job_settings: JobSettings }
  | { op: 'get' }
  | { op: 'update'; settings: Partial<QueueSettings>; active?: boolean; job_settings: JobSettings }
  | { op: 'set_active'; active: boolean; job_settings: JobSettings }
  | { op: 'delete'; force: boolean }
  | { op: 'schedule'; tenant: string; job: JobRequest; job_settings: JobSettings }
  | { op: 'schedule_many'; tenant: string; jobs: JobRequest[]; job_settings: JobSettings }
  | { op: 'get_job'; job_id: string }
  | { op: 'delete_job'; job_id: string }
  | { op: 'list_jobs'; query: JobListQuery }
  | { op: 'cancel'; filter: CancelFilter }
  | { op: 'dlq'; limit: number }
  | { op: 'redrive'; job_ids: string[] | null; job_settings: JobSettings }
  | { op: 'stats' }
  | { op: 'cleanup'; retention_days: number | null }
  /** From the node's delivery worker (tell): how an attempt ended. */
  | JobAttemptResult
  /** The same for several attempts of the queue that ended together (one turn, one commit). */
  | { op: 'attempt_results'; results: JobAttemptResult[] }
  | FlowAnswer
  | FlowCall<QueueMessage>;

export type ScheduleOutcome = { ok: true; ack: ScheduledJobAck } | { ok: false; error: string; code: string };

export interface JobAttemptResult {
  op: 'attempt_result';
  job_id: string;
  attempt: number;
  /** The target's final HTTP status; null when no answer came. */
  status_code: number | null;
  /** Why there was no answer, or why it was refused: null on an HTTP answer. */
  error: string | null;
  /** `refused`: the delivery guard refused the target (not retried). */
  error_kind: 'timeout' | 'connection' | 'refused' | null;
  duration_ms: number;
  response_excerpt: string | null;
  job_settings: JobSettings;
}

/** What the directory keeps per queue (and filters and sorts the list on). */
export interface DirectoryEntry {
  name: string;
  active: boolean;
  auto_created: boolean;
  tags: Record<string, string>;
  created_at_ms: number;
  updated_at_ms: number;
  /** The queue's change counter: an older upsert arriving late is ignored. */
  seq: number;
}

export interface QueueListQuery {
  search?: string;
  active?: boolean;
  auto_created?: boolean;
  tag?: string;
  sort: 'created_at' | '-created_at' | 'name' | '-name' | 'updated_at' | '-updated_at';
  page: number;
  page_size: number;
}

export type DirectoryMessage =
  | { op: 'upsert'; entry: DirectoryEntry }
  | { op: 'remove'; name: string; seq: number }
  | { op: 'list'; query: QueueListQuery }
  | { op: 'names' }
  | { op: 'schedule_batch'; jobs: { queue: string; job: JobRequest }[]; job_settings: JobSettings }
  | { op: 'cancel_bulk'; filter: CancelFilter }
  | FlowAnswer
  | FlowCall<DirectoryMessage>;

export interface QueueListView {
  total: number;
  names: string[];
}

export interface BatchResultView {
  results: ({ index: number } & ScheduleOutcome)[];
}

export type RegistryMessage =
  | { op: 'upsert'; tenant: string; name: string }
  | { op: 'remove'; tenant: string; name: string }
  | { op: 'cancel_bulk'; user_id: string | null }
  | { op: 'cleanup'; retention_days: number | null }
  | { op: 'list'; offset: number; limit: number }
  | FlowAnswer;

/** A page of every queue of every tenant, ordered by tenant then name (the admin list). */
export interface RegistryListView {
  queues: { tenant: string; name: string }[];
  total: number;
}

export type ProbeMessage = { op: 'start' };

/** The runtime event a queue emits when an attempt starts; the node's worker performs it and tells a JobAttemptResult back. */
export const JOB_ATTEMPT_EVENT = 'job.attempt';
export interface JobAttempt {
  /** Where the result goes. */
  queue_key: string;
  queue: string;
  job_id: string;
  attempt: number;
  url: string;
  /** The job's custom headers; the worker adds content-type and the signature headers. */
  headers: Record<string, string>;
  secret: string;
  /** `{job_id, queue, attempt, payload}` as sent (and signed). */
  body: string;
  timeout_ms: number;
}

/** The runtime event the scheduler probe emits on each of its alarms. */
export const JOB_PROBE_EVENT = 'job.scheduler_tick';
