import {
  MinHeap,
  ServiceError,
  type ActorEvent,
  type ActorSend,
  type AlarmMessage,
  type RecordWrite,
  type TurnContext,
  type TurnResult,
} from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { retryDelayMs } from './backoff.js';
import { assertMove, TERMINAL_STATUSES } from './job-transitions.js';
import {
  JOB_ATTEMPT_EVENT,
  JOB_DIRECTORY_KIND,
  JOB_PRIORITIES,
  JOB_REGISTRY_KEY,
  JOB_REGISTRY_KIND,
  jobDirectoryKey,
  jobPolicy as policy,
  parseJobQueueKey,
  queueIdOf,
  type CancelFilter,
  type DirectoryMessage,
  type DlqEntryView,
  type JobAttempt,
  type JobAttemptResult,
  type JobListQuery,
  type JobPriority,
  type JobRequest,
  type JobSettings,
  type JobStatus,
  type JobView,
  type JobWebhookView,
  type QueueMessage,
  type QueueSettings,
  type QueueStatsView,
  type QueueView,
  type RegistryMessage,
  type RetryPolicy,
  type ScheduledJobAck,
  type ScheduleOutcome,
} from './messages.js';

/**
 * One job queue: pure domain logic of the `job-queue` actor (storage
 * `records`, key = jobQueueKey(tenant, name)).
 *
 * Records: `config` (settings, pause flag, counters of ids), `stats` (the
 * last hour's outcomes by minute), `j:<job_id>` one per job (its state,
 * attempt in flight, dead-letter entry).
 *
 * The queue owns its due schedule: in memory a heap of scheduled jobs by due
 * time, a heap of due ("ready") jobs by priority, and a heap of in-flight
 * deadlines, rebuilt from the job records at activation. One `tick` alarm
 * is kept at the earliest time something is due, so a job due while the
 * node was down fires when it is back (durable alarms). Firing and pausing
 * happen in this actor's turns, so a paused queue never starts an attempt.
 *
 * Delivery is I/O, so it happens outside the turn (as for webhooks): the
 * turn that starts an attempt records it in flight with a deadline and emits
 * a `job.attempt` event; the node's delivery worker POSTs it and tells the
 * `attempt_result` back. An attempt without a result by its deadline (the
 * node died mid-delivery) counts as failed and is retried under the policy;
 * a late result is ignored.
 */
export const CONFIG_SUBKEY = 'config';
export const STATS_SUBKEY = 'stats';
/** A job's progress (status, attempts, times, error, attempt in flight, DLQ entry): rewritten at each change. */
export const JOB_PREFIX = 'j:';
/** A job's definition (payload, webhook, secret, priority, policy): written once when scheduled. */
export const DEFINITION_PREFIX = 'd:';
export const TICK_ALARM = 'tick';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

export interface QueueConfig extends QueueSettings {
  tenant: string;
  name: string;
  owner_id: string;
  active: boolean;
  auto_created: boolean;
  created_at_ms: number;
  updated_at_ms: number;
  /** Change counter of what the directory holds. */
  seq: number;
  /** Creation counter of jobs: ties of equal due time and priority go first-scheduled first. */
  job_seq: number;
  job_settings: JobSettings;
}

export interface JobRecord {
  id: string;
  queue: string;
  user_id: string;
  status: JobStatus;
  priority: JobPriority;
  payload: unknown;
  attempts: number;
  /** The job's own policy; null: the queue's applies (read at each failure). */
  retry_policy: RetryPolicy | null;
  scheduled_at_ms: number;
  created_at_ms: number;
  updated_at_ms: number;
  last_attempt_at_ms: number | null;
  completed_at_ms: number | null;
  error: string | null;
  webhook: JobWebhookView;
  in_flight: { attempt: number; deadline_ms: number } | null;
  dlq: { at_ms: number; error: string } | null;
  seq: number;
}

type JobDefinitionField = 'id' | 'queue' | 'user_id' | 'priority' | 'payload' | 'retry_policy' | 'created_at_ms' | 'webhook' | 'seq';
/** The stored halves of a JobRecord. */
export type JobDefinition = Pick<JobRecord, JobDefinitionField>;
export type JobProgress = Pick<JobRecord, 'id' | Exclude<keyof JobRecord, JobDefinitionField>>;

export interface StatsBucket {
  minute: number;
  completed: number;
  failed: number;
  processing_ms_sum: number;
}

interface DueEntry {
  at: number;
  seq: number;
  id: string;
  token: number;
}
interface ReadyEntry {
  rank: number;
  at: number;
  seq: number;
  id: string;
  token: number;
}
interface DeadlineEntry {
  at: number;
  id: string;
  attempt: number;
}

export interface QueueState {
  readonly key: string;
  config: QueueConfig | null;
  jobs: Map<string, JobRecord>;
  counts: Record<JobStatus, number>;
  /** Job ids in the dead-letter queue, oldest entry first. */
  dlq: Set<string>;
  stats: StatsBucket[];
  // In memory only: the schedule, rebuilt at activation.
  delayed: MinHeap<DueEntry>;
  ready: MinHeap<ReadyEntry>;
  deadlines: MinHeap<DeadlineEntry>;
  /** The current schedule entry of each scheduled job: older entries of it are stale. */
  tokens: Map<string, number>;
  /** Scheduled jobs moved to `ready` (due, waiting for the queue to be active or for a slot). */
  readySet: Set<string>;
  token_seq: number;
  alarm_ms: number | null;
  /** The outcome buckets changed in this turn: write them once at its end. */
  stats_dirty: boolean;
}

type Result = TurnResult<QueueState, unknown>;
interface Effects {
  writes: RecordWrite[];
  sends: ActorSend[];
  events: ActorEvent[];
}

const rankOf = (priority: JobPriority) => JOB_PRIORITIES.indexOf(priority);
const zeroCounts = (): Record<JobStatus, number> => ({ scheduled: 0, processing: 0, completed: 0, failed: 0, cancelled: 0 });

export function emptyQueue(key: string): QueueState {
  return {
    key,
    config: null,
    jobs: new Map(),
    counts: zeroCounts(),
    dlq: new Set(),
    stats: [],
    delayed: new MinHeap<DueEntry>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq)),
    ready: new MinHeap<ReadyEntry>((a, b) => a.rank < b.rank || (a.rank === b.rank && (a.at < b.at || (a.at === b.at && a.seq < b.seq)))),
    deadlines: new MinHeap<DeadlineEntry>((a, b) => a.at < b.at),
    tokens: new Map(),
    readySet: new Set(),
    token_seq: 0,
    alarm_ms: null,
    stats_dirty: false,
  };
}

export function loadQueue(key: string, records: Iterable<[string, unknown]>): QueueState {
  const state = emptyQueue(key);
  const definitions = new Map<string, JobDefinition>();
  const progress: JobProgress[] = [];
  for (const [subkey, value] of records) {
    if (subkey === CONFIG_SUBKEY) state.config = value as QueueConfig;
    else if (subkey === STATS_SUBKEY) state.stats = value as StatsBucket[];
    else if (subkey.startsWith(DEFINITION_PREFIX)) definitions.set(subkey.slice(DEFINITION_PREFIX.length), value as JobDefinition);
    else if (subkey.startsWith(JOB_PREFIX)) progress.push(value as JobProgress);
  }
  const dead: JobRecord[] = [];
  for (const part of progress) {
    const definition = definitions.get(part.id);
    // Both records of a job are written in one commit; a part alone is not a job.
    if (!definition) continue;
    const job: JobRecord = { ...definition, ...part };
    state.jobs.set(job.id, job);
    state.counts[job.status] += 1;
    if (job.status === 'scheduled') enqueue(state, job);
    if (job.status === 'processing' && job.in_flight) state.deadlines.push({ at: job.in_flight.deadline_ms, id: job.id, attempt: job.in_flight.attempt });
    if (job.dlq) dead.push(job);
  }
  dead.sort((a, b) => a.dlq!.at_ms - b.dlq!.at_ms);
  for (const job of dead) state.dlq.add(job.id);
  return state;
}

export function stepQueue(state: QueueState, message: QueueMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case '$alarm':
      if (message.name !== TICK_ALARM) return { state };
      state.alarm_ms = null;
      return withSchedule(state, context, { state });
    case 'flow-call':
      return answerFlowCall(stepQueue, state, message, context);
    case 'flow-answer':
      return { state };
    case 'create':
      return create(state, message, context);
    case 'schedule': {
      const effects = newEffects();
      const ack = schedule(state, message.tenant, message.job, message.job_settings, context, effects);
      effects.writes.push(configWrite(state.config!));
      return withSchedule(state, context, { state, reply: ack, ...effects });
    }
    case 'schedule_many':
      return scheduleMany(state, message, context);
    case 'attempt_result':
      return attemptResults(state, [message], context);
    case 'attempt_results':
      return attemptResults(state, message.results, context);
    case 'cancel':
      return cancel(state, message.filter, context);
    case 'cleanup':
      return cleanup(state, message.retention_days, context);
    case 'get_job': {
      const job = ownJob(state, message.job_id);
      return { state, reply: jobView(state.config!, job) };
    }
    case 'delete_job':
      return deleteJob(state, message.job_id, context);
    default:
      break;
  }
  const config = existing(state);
  switch (message.op) {
    case 'get':
      return { state, reply: queueView(state, config) };
    case 'update':
      return update(state, config, message, context);
    case 'set_active':
      return setActive(state, config, message.active, message.job_settings, context);
    case 'delete':
      return removeQueue(state, config, message.force);
    case 'list_jobs':
      return { state, reply: listJobs(state, config, message.query) };
    case 'dlq':
      return { state, reply: dlqList(state, config, message.limit) };
    case 'redrive':
      return redrive(state, config, message.job_ids, message.job_settings, context);
    case 'stats':
      return { state, reply: stats(state, config, context.now) };
  }
}

function newEffects(): Effects {
  return { writes: [], sends: [], events: [] };
}

function existing(state: QueueState): QueueConfig {
  if (!state.config) throw new ServiceError('not_found', 'No such job queue.');
  return state.config;
}

function ownJob(state: QueueState, job_id: string): JobRecord {
  const job = state.jobs.get(job_id);
  if (!job) throw new ServiceError('not_found', 'No such job.');
  return job;
}

// ---- views ----

export function queueView(state: QueueState, config: QueueConfig): QueueView {
  return {
    id: queueIdOf(config.name),
    name: config.name,
    tenant: config.tenant,
    owner_id: config.owner_id,
    description: config.description,
    tags: { ...config.tags },
    retention_days: config.retention_days,
    retry_policy: { ...config.retry_policy },
    dlq_config: { ...config.dlq_config },
    default_priority: config.default_priority,
    concurrency: config.concurrency,
    active: config.active,
    auto_created: config.auto_created,
    created_at_ms: config.created_at_ms,
    updated_at_ms: config.updated_at_ms,
    pending_count: state.counts.scheduled,
    processing_count: state.counts.processing,
    completed_count: state.counts.completed,
    failed_count: state.counts.failed,
    cancelled_count: state.counts.cancelled,
  };
}

export function jobView(config: QueueConfig, job: JobRecord): JobView {
  return {
    id: job.id,
    queue: job.queue,
    user_id: job.user_id,
    status: job.status,
    priority: job.priority,
    payload: job.payload,
    attempts: job.attempts,
    retry_policy: { ...(job.retry_policy ?? config.retry_policy) },
    scheduled_at_ms: job.scheduled_at_ms,
    created_at_ms: job.created_at_ms,
    updated_at_ms: job.updated_at_ms,
    last_attempt_at_ms: job.last_attempt_at_ms,
    completed_at_ms: job.completed_at_ms,
    error: job.error,
    webhook: { ...job.webhook, headers: { ...job.webhook.headers }, events: [...job.webhook.events], active: job.status === 'scheduled' || job.status === 'processing' },
  };
}

// ---- configuration ----

export function defaultSettings(): QueueSettings {
  return {
    description: '',
    tags: {},
    retention_days: policy.retention_days_default,
    retry_policy: { max_attempts: policy.retry_max_attempts_default, backoff_seconds: policy.retry_backoff_seconds_default },
    dlq_config: { enabled: true, max_entries: policy.dlq_entries_default },
    default_priority: 'normal',
    concurrency: policy.concurrency_default,
  };
}

function configWrite(config: QueueConfig): RecordWrite {
  return { subkey: CONFIG_SUBKEY, value: { ...config } };
}

/** The directory's entry for the config's current state (a plain send: the outbox delivers it right after the commit). */
function directorySend(config: QueueConfig): ActorSend {
  config.seq += 1;
  const message: DirectoryMessage = {
    op: 'upsert',
    entry: {
      name: config.name,
      active: config.active,
      auto_created: config.auto_created,
      tags: { ...config.tags },
      created_at_ms: config.created_at_ms,
      updated_at_ms: config.updated_at_ms,
      seq: config.seq,
    },
  };
  return { kind: JOB_DIRECTORY_KIND, key: jobDirectoryKey(config.tenant), message };
}

function newQueue(state: QueueState, tenant: string, owner_id: string, settings: Partial<QueueSettings>, auto_created: boolean, job_settings: JobSettings, now: number, effects: Effects): QueueConfig {
  const { name } = parseJobQueueKey(state.key);
  const config: QueueConfig = {
    ...defaultSettings(),
    ...settings,
    tenant,
    name,
    owner_id,
    active: true,
    auto_created,
    created_at_ms: now,
    updated_at_ms: now,
    seq: 0,
    job_seq: 0,
    job_settings,
  };
  state.config = config;
  effects.sends.push(directorySend(config));
  const registry: RegistryMessage = { op: 'upsert', tenant, name };
  effects.sends.push({ kind: JOB_REGISTRY_KIND, key: JOB_REGISTRY_KEY, message: registry });
  effects.writes.push(configWrite(config));
  return config;
}

function create(state: QueueState, message: Extract<QueueMessage, { op: 'create' }>, context: TurnContext): Result {
  if (state.config) throw new ServiceError('job_queue_exists', `A job queue named ${JSON.stringify(state.config.name)} exists (it may have been created by scheduling into it).`);
  const effects = newEffects();
  const config = newQueue(state, message.tenant, message.owner_id, message.settings, false, message.job_settings, context.now, effects);
  return { state, reply: queueView(state, config), ...effects };
}

function update(state: QueueState, config: QueueConfig, message: Extract<QueueMessage, { op: 'update' }>, context: TurnContext): Result {
  Object.assign(config, message.settings);
  if (message.active !== undefined) config.active = message.active;
  config.job_settings = message.job_settings;
  config.updated_at_ms = context.now;
  const effects = newEffects();
  effects.sends.push(directorySend(config));
  effects.writes.push(configWrite(config));
  return withSchedule(state, context, { state, reply: queueView(state, config), ...effects });
}

function setActive(state: QueueState, config: QueueConfig, active: boolean, job_settings: JobSettings, context: TurnContext): Result {
  config.job_settings = job_settings;
  const effects = newEffects();
  if (config.active !== active) {
    config.active = active;
    config.updated_at_ms = context.now;
    effects.sends.push(directorySend(config));
  }
  effects.writes.push(configWrite(config));
  return withSchedule(state, context, { state, reply: queueView(state, config), ...effects });
}

function removeQueue(state: QueueState, config: QueueConfig, force: boolean): Result {
  const open = state.counts.scheduled + state.counts.processing;
  if (open > 0 && !force) {
    throw new ServiceError('job_queue_not_empty', `The queue has ${open} scheduled or processing jobs; cancel them, or delete with force=true.`);
  }
  const writes: RecordWrite[] = [{ subkey: CONFIG_SUBKEY, value: undefined }, { subkey: STATS_SUBKEY, value: undefined }];
  for (const id of state.jobs.keys()) writes.push({ subkey: JOB_PREFIX + id, value: undefined }, { subkey: DEFINITION_PREFIX + id, value: undefined });
  const directory: DirectoryMessage = { op: 'remove', name: config.name, seq: config.seq + 1 };
  const registry: RegistryMessage = { op: 'remove', tenant: config.tenant, name: config.name };
  const sends: ActorSend[] = [
    { kind: JOB_DIRECTORY_KIND, key: jobDirectoryKey(config.tenant), message: directory },
    { kind: JOB_REGISTRY_KIND, key: JOB_REGISTRY_KEY, message: registry },
  ];
  const fresh = emptyQueue(state.key);
  Object.assign(state, fresh);
  return { state, reply: { deleted: true }, writes, sends, alarms: [{ name: TICK_ALARM, due_ms: null }] };
}

// ---- scheduling ----

/** The job's progress record (small: what changes with its state). */
function jobWrite(job: JobRecord): RecordWrite {
  const progress: JobProgress = {
    id: job.id,
    status: job.status,
    attempts: job.attempts,
    scheduled_at_ms: job.scheduled_at_ms,
    updated_at_ms: job.updated_at_ms,
    last_attempt_at_ms: job.last_attempt_at_ms,
    completed_at_ms: job.completed_at_ms,
    error: job.error,
    in_flight: job.in_flight,
    dlq: job.dlq,
  };
  return { subkey: JOB_PREFIX + job.id, value: progress };
}

/** The job's definition record, written once. */
function definitionWrite(job: JobRecord): RecordWrite {
  const definition: JobDefinition = {
    id: job.id,
    queue: job.queue,
    user_id: job.user_id,
    priority: job.priority,
    payload: job.payload,
    retry_policy: job.retry_policy,
    created_at_ms: job.created_at_ms,
    webhook: job.webhook,
    seq: job.seq,
  };
  return { subkey: DEFINITION_PREFIX + job.id, value: definition };
}

/** Schedules one job (creating the queue when it does not exist: auto_created). Throws a ServiceError before changing anything. */
function schedule(state: QueueState, tenant: string, request: JobRequest, job_settings: JobSettings, context: TurnContext, effects: Effects): ScheduledJobAck {
  if (state.jobs.size >= policy.jobs_per_queue_max) {
    throw new ServiceError('job_queue_full', `The queue holds ${policy.jobs_per_queue_max} jobs; wait for cleanup or use another queue.`);
  }
  if (state.jobs.has(request.job_id)) throw new ServiceError('conflict', 'A job with this id exists.');
  const now = context.now;
  const config = state.config ?? newQueue(state, tenant, request.user_id, {}, true, job_settings, now, effects);
  config.job_settings = job_settings;
  config.job_seq += 1;
  const job: JobRecord = {
    id: request.job_id,
    queue: config.name,
    user_id: request.user_id,
    status: 'scheduled',
    priority: request.priority ?? config.default_priority,
    payload: request.payload,
    attempts: 0,
    retry_policy: request.retry_policy,
    scheduled_at_ms: request.scheduled_at_ms,
    created_at_ms: now,
    updated_at_ms: now,
    last_attempt_at_ms: null,
    completed_at_ms: null,
    error: null,
    webhook: {
      id: `${request.job_id}.webhook`,
      url: request.url,
      headers: { ...request.headers },
      secret: request.secret,
      events: [...request.events],
      active: true,
      created_at_ms: now,
      updated_at_ms: now,
    },
    in_flight: null,
    dlq: null,
    seq: config.job_seq,
  };
  state.jobs.set(job.id, job);
  state.counts.scheduled += 1;
  enqueue(state, job);
  effects.writes.push(definitionWrite(job), jobWrite(job));
  return { job_id: job.id, queue: config.name, scheduled_at_ms: job.scheduled_at_ms, status: 'scheduled' };
}

function scheduleMany(state: QueueState, message: Extract<QueueMessage, { op: 'schedule_many' }>, context: TurnContext): Result {
  const effects = newEffects();
  const outcomes: ScheduleOutcome[] = message.jobs.map((job) => {
    try {
      return { ok: true, ack: schedule(state, message.tenant, job, message.job_settings, context, effects) };
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      return { ok: false, code: error.code, error: error.message };
    }
  });
  // The job counter changed (the queue may even be new): its config is written once for the batch.
  if (state.config) effects.writes.push(configWrite(state.config));
  return withSchedule(state, context, { state, reply: { outcomes }, ...effects });
}

/** Puts a scheduled job on the due schedule (a new token makes its older entries stale). */
function enqueue(state: QueueState, job: JobRecord): void {
  const token = ++state.token_seq;
  state.tokens.set(job.id, token);
  state.readySet.delete(job.id);
  state.delayed.push({ at: job.scheduled_at_ms, seq: job.seq, id: job.id, token });
}

/** Takes a job off the schedule (its heap entries become stale). */
function unschedule(state: QueueState, job_id: string): void {
  state.tokens.delete(job_id);
  state.readySet.delete(job_id);
}

function move(state: QueueState, job: JobRecord, to: JobStatus, now: number): void {
  assertMove(job.status, to);
  state.counts[job.status] -= 1;
  state.counts[to] += 1;
  job.status = to;
  job.updated_at_ms = now;
}

// ---- cancel, delete, cleanup ----

function matches(job: JobRecord, filter: CancelFilter): boolean {
  if (filter.user_id !== null && job.user_id !== filter.user_id) return false;
  if (filter.priority !== undefined && job.priority !== filter.priority) return false;
  if (filter.scheduled_after_ms !== undefined && job.scheduled_at_ms < filter.scheduled_after_ms) return false;
  if (filter.scheduled_before_ms !== undefined && job.scheduled_at_ms > filter.scheduled_before_ms) return false;
  return true;
}

function cancelJob(state: QueueState, job: JobRecord, now: number, writes: RecordWrite[]): void {
  move(state, job, 'cancelled', now);
  job.completed_at_ms = now;
  unschedule(state, job.id);
  writes.push(jobWrite(job));
}

function cancel(state: QueueState, filter: CancelFilter, context: TurnContext): Result {
  if (!state.config) return { state, reply: { cancelled: 0 } };
  const writes: RecordWrite[] = [];
  const candidates = filter.job_ids ? filter.job_ids.map((id) => state.jobs.get(id)).filter((job): job is JobRecord => job !== undefined) : [...state.jobs.values()];
  let cancelled = 0;
  for (const job of candidates) {
    if (job.status !== 'scheduled' || !matches(job, filter)) continue;
    cancelJob(state, job, context.now, writes);
    cancelled += 1;
  }
  return withSchedule(state, context, { state, reply: { cancelled }, writes });
}

/** DELETE a job: a scheduled one is cancelled (kept until retention); a finished one is removed; one in processing is refused. */
function deleteJob(state: QueueState, job_id: string, context: TurnContext): Result {
  const job = ownJob(state, job_id);
  const writes: RecordWrite[] = [];
  if (job.status === 'processing') {
    throw new ServiceError('job_not_cancellable', 'The job is being delivered; it can be cancelled only while scheduled (also between retries).');
  }
  if (job.status === 'scheduled') {
    cancelJob(state, job, context.now, writes);
    return withSchedule(state, context, { state, reply: { outcome: 'cancelled' }, writes });
  }
  removeJob(state, job, writes);
  return { state, reply: { outcome: 'removed' }, writes };
}

function removeJob(state: QueueState, job: JobRecord, writes: RecordWrite[]): void {
  state.jobs.delete(job.id);
  state.counts[job.status] -= 1;
  state.dlq.delete(job.id);
  unschedule(state, job.id);
  writes.push({ subkey: JOB_PREFIX + job.id, value: undefined }, { subkey: DEFINITION_PREFIX + job.id, value: undefined });
}

function cleanup(state: QueueState, retention_days: number | null, context: TurnContext): Result {
  const config = state.config;
  if (!config) return { state, reply: { deleted: 0 } };
  const cutoff = context.now - (retention_days ?? config.retention_days) * DAY_MS;
  const writes: RecordWrite[] = [];
  let deleted = 0;
  for (const job of [...state.jobs.values()]) {
    if (!TERMINAL_STATUSES.includes(job.status)) continue;
    if ((job.completed_at_ms ?? job.updated_at_ms) > cutoff) continue;
    removeJob(state, job, writes);
    deleted += 1;
  }
  return { state, reply: { deleted }, writes };
}

// ---- reads ----

function listJobs(state: QueueState, config: QueueConfig, query: JobListQuery): { jobs: JobView[]; total: number } {
  const found: JobRecord[] = [];
  for (const job of state.jobs.values()) {
    if (query.status !== undefined && job.status !== query.status) continue;
    if (query.scheduled_after_ms !== undefined && job.scheduled_at_ms < query.scheduled_after_ms) continue;
    if (query.scheduled_before_ms !== undefined && job.scheduled_at_ms > query.scheduled_before_ms) continue;
    found.push(job);
  }
  found.sort(byScheduleThenId);
  return { jobs: found.slice(0, query.first).map((job) => jobView(config, job)), total: found.length };
}

/** The order of job lists: by scheduled_at, then id (also across queues). */
export function byScheduleThenId(a: { scheduled_at_ms: number; id: string }, b: { scheduled_at_ms: number; id: string }): number {
  return a.scheduled_at_ms - b.scheduled_at_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function dlqList(state: QueueState, config: QueueConfig, limit: number): { entries: DlqEntryView[]; total: number } {
  const ids = [...state.dlq].reverse().slice(0, limit);
  const entries = ids.map((id) => {
    const job = state.jobs.get(id)!;
    return { entry_id: `dlq_${id}`, job_id: id, dead_lettered_at_ms: job.dlq!.at_ms, error: job.dlq!.error, job: jobView(config, job) };
  });
  return { entries, total: state.dlq.size };
}

function redrive(state: QueueState, config: QueueConfig, job_ids: string[] | null, job_settings: JobSettings, context: TurnContext): Result {
  config.job_settings = job_settings;
  const wanted = job_ids ?? [...state.dlq].slice(0, policy.redrive_all_max);
  const writes: RecordWrite[] = [configWrite(config)];
  const skipped: string[] = [];
  let redriven = 0;
  for (const id of new Set(wanted)) {
    const job = state.jobs.get(id);
    if (!job || !state.dlq.has(id) || job.status !== 'failed') {
      skipped.push(id);
      continue;
    }
    state.dlq.delete(id);
    move(state, job, 'scheduled', context.now);
    job.dlq = null;
    job.attempts = 0;
    job.error = null;
    job.completed_at_ms = null;
    job.scheduled_at_ms = context.now;
    enqueue(state, job);
    writes.push(jobWrite(job));
    redriven += 1;
  }
  return withSchedule(state, context, { state, reply: { redriven, skipped_job_ids: skipped }, writes });
}

function stats(state: QueueState, config: QueueConfig, now: number): QueueStatsView {
  const minute = Math.floor(now / MINUTE_MS);
  let completed = 0;
  let failed = 0;
  let processing_ms = 0;
  for (const bucket of state.stats) {
    if (bucket.minute <= minute - 60) continue;
    completed += bucket.completed;
    failed += bucket.failed;
    processing_ms += bucket.processing_ms_sum;
  }
  // The oldest job waiting to run: due (scheduled in the past) or in flight, by how long it has been due.
  let oldest_due_ms: number | null = null;
  for (const job of state.jobs.values()) {
    if ((job.status === 'scheduled' && job.scheduled_at_ms <= now) || job.status === 'processing') {
      if (oldest_due_ms === null || job.scheduled_at_ms < oldest_due_ms) oldest_due_ms = job.scheduled_at_ms;
    }
  }
  const finished = completed + failed;
  return {
    queue: config.name,
    scheduled: state.counts.scheduled,
    processing: state.counts.processing,
    completed_last_hour: completed,
    failed_last_hour: failed,
    success_rate: finished === 0 ? 0 : Math.round((completed / finished) * 10_000) / 10_000,
    avg_processing_time_ms: completed === 0 ? 0 : Math.round(processing_ms / completed),
    oldest_job_age_seconds: oldest_due_ms === null ? 0 : Math.max(0, Math.floor((now - oldest_due_ms) / 1000)),
  };
}

function recordOutcome(state: QueueState, now: number, outcome: 'completed' | 'failed', processing_ms: number): void {
  const minute = Math.floor(now / MINUTE_MS);
  let bucket = state.stats[state.stats.length - 1];
  if (!bucket || bucket.minute !== minute) {
    bucket = { minute, completed: 0, failed: 0, processing_ms_sum: 0 };
    state.stats.push(bucket);
    while (state.stats.length > 0 && state.stats[0].minute <= minute - 60) state.stats.shift();
  }
  if (outcome === 'completed') {
    bucket.completed += 1;
    bucket.processing_ms_sum += processing_ms;
  } else bucket.failed += 1;
  // Written once, at the end of the turn (withSchedule).
  state.stats_dirty = true;
}

// ---- delivery ----

function attemptResults(state: QueueState, results: JobAttemptResult[], context: TurnContext): Result {
  const writes: RecordWrite[] = [];
  for (const result of results) applyResult(state, result, context.now, writes);
  return withSchedule(state, context, { state, writes });
}

/** One attempt's outcome: completed on a 2xx, else a failed attempt (retry or fail). A late or repeated result changes nothing. */
function applyResult(state: QueueState, message: JobAttemptResult, now: number, writes: RecordWrite[]): void {
  const config = state.config;
  const job = config ? state.jobs.get(message.job_id) : undefined;
  // Late or repeated: the attempt is no longer in flight (its deadline passed, or the job or queue went).
  if (!config || !job || job.status !== 'processing' || job.in_flight?.attempt !== message.attempt) return;
  config.job_settings = message.job_settings;
  const success = message.status_code !== null && message.status_code >= 200 && message.status_code < 300;
  if (success) {
    move(state, job, 'completed', now);
    job.in_flight = null;
    job.error = null;
    job.completed_at_ms = now;
    recordOutcome(state, now, 'completed', Math.max(0, Math.round(message.duration_ms)));
    writes.push(jobWrite(job));
  } else {
    const error = message.error ?? `HTTP ${message.status_code}${message.response_excerpt ? `: ${message.response_excerpt.slice(0, policy.response_excerpt_length_max)}` : ''}`;
    failAttempt(state, config, job, error, message.error_kind === 'refused', now, writes);
  }
}

/** A failed attempt: retry later under the policy, or fail (and dead-letter) when the attempts are spent or the target is refused. */
function failAttempt(state: QueueState, config: QueueConfig, job: JobRecord, error: string, permanent: boolean, now: number, writes: RecordWrite[]): void {
  job.in_flight = null;
  job.error = error.slice(0, 512);
  const retry = job.retry_policy ?? config.retry_policy;
  if (permanent || job.attempts >= retry.max_attempts) {
    move(state, job, 'failed', now);
    job.completed_at_ms = now;
    recordOutcome(state, now, 'failed', 0);
    if (config.dlq_config.enabled) deadLetter(state, config, job, now, writes);
    writes.push(jobWrite(job));
    return;
  }
  move(state, job, 'scheduled', now);
  job.scheduled_at_ms = now + retryDelayMs(retry, job.attempts, job.id);
  enqueue(state, job);
  writes.push(jobWrite(job));
}

function deadLetter(state: QueueState, config: QueueConfig, job: JobRecord, now: number, writes: RecordWrite[]): void {
  job.dlq = { at_ms: now, error: job.error ?? 'failed' };
  state.dlq.delete(job.id);
  state.dlq.add(job.id);
  // Past max_entries the oldest entry leaves the DLQ (its job stays failed, no longer redrivable).
  while (state.dlq.size > config.dlq_config.max_entries) {
    const oldest = state.dlq.values().next().value!;
    state.dlq.delete(oldest);
    const dropped = state.jobs.get(oldest);
    if (dropped && dropped !== job) {
      dropped.dlq = null;
      writes.push(jobWrite(dropped));
    } else if (dropped === job) job.dlq = null;
  }
}

function attemptDeadline(config: QueueConfig, now: number): number {
  return now + 2 * config.job_settings.attempt_timeout_ms + policy.attempt_deadline_margin_ms;
}

function startAttempt(state: QueueState, config: QueueConfig, job: JobRecord, now: number, effects: Effects): void {
  move(state, job, 'processing', now);
  unschedule(state, job.id);
  job.attempts += 1;
  job.last_attempt_at_ms = now;
  job.in_flight = { attempt: job.attempts, deadline_ms: attemptDeadline(config, now) };
  state.deadlines.push({ at: job.in_flight.deadline_ms, id: job.id, attempt: job.attempts });
  effects.writes.push(jobWrite(job));
  const attempt: JobAttempt = {
    queue_key: state.key,
    queue: config.name,
    job_id: job.id,
    attempt: job.attempts,
    url: job.webhook.url,
    headers: job.webhook.headers,
    secret: job.webhook.secret,
    body: JSON.stringify({ job_id: job.id, queue: config.name, attempt: job.attempts, payload: job.payload ?? null }),
    timeout_ms: config.job_settings.attempt_timeout_ms,
  };
  effects.events.push({ type: JOB_ATTEMPT_EVENT, data: attempt });
}

function validDelayed(state: QueueState, entry: DueEntry): boolean {
  return state.tokens.get(entry.id) === entry.token && !state.readySet.has(entry.id);
}
function validReady(state: QueueState, entry: ReadyEntry): boolean {
  return state.tokens.get(entry.id) === entry.token && state.readySet.has(entry.id);
}
function validDeadline(state: QueueState, entry: DeadlineEntry): boolean {
  const job = state.jobs.get(entry.id);
  return job !== undefined && job.status === 'processing' && job.in_flight?.attempt === entry.attempt;
}
function topOf<T>(heap: MinHeap<T>, valid: (entry: T) => boolean): T | undefined {
  for (let top = heap.peek(); top !== undefined; top = heap.peek()) {
    if (valid(top)) return top;
    heap.pop();
  }
  return undefined;
}

/**
 * Runs what is due and keeps the `tick` alarm at the next due time: in-flight
 * attempts past their deadline fail (and retry under the policy), due jobs
 * become ready, and, while the queue is active, ready jobs start by priority
 * up to the queue's concurrency (and dispatch_per_turn_max per turn).
 */
function withSchedule(state: QueueState, context: TurnContext, result: Result): Result {
  const effects: Effects = { writes: [...(result.writes ?? [])], sends: [...(result.sends ?? [])], events: [...(result.events ?? [])] };
  const alarms = [...(result.alarms ?? [])];
  const config = state.config;
  const now = context.now;
  let next: number | null = null;
  if (config) {
    for (let top = topOf(state.deadlines, (e) => validDeadline(state, e)); top && top.at <= now; top = topOf(state.deadlines, (e) => validDeadline(state, e))) {
      state.deadlines.pop();
      failAttempt(state, config, state.jobs.get(top.id)!, 'no result before the attempt deadline (the node stopped mid-delivery?)', false, now, effects.writes);
    }
    for (let top = topOf(state.delayed, (e) => validDelayed(state, e)); top && top.at <= now; top = topOf(state.delayed, (e) => validDelayed(state, e))) {
      state.delayed.pop();
      const job = state.jobs.get(top.id)!;
      state.readySet.add(top.id);
      state.ready.push({ rank: rankOf(job.priority), at: top.at, seq: top.seq, id: top.id, token: top.token });
    }
    let started = 0;
    if (config.active) {
      while (state.counts.processing < config.concurrency && started < policy.dispatch_per_turn_max) {
        const top = topOf(state.ready, (e) => validReady(state, e));
        if (!top) break;
        state.ready.pop();
        startAttempt(state, config, state.jobs.get(top.id)!, now, effects);
        started += 1;
      }
    }
    const deadline = topOf(state.deadlines, (e) => validDeadline(state, e));
    const delayed = topOf(state.delayed, (e) => validDelayed(state, e));
    if (deadline) next = deadline.at;
    if (delayed) next = next === null ? delayed.at : Math.min(next, delayed.at);
    // More ready jobs and free slots, but this turn started its share: continue at once.
    if (config.active && state.counts.processing < config.concurrency && topOf(state.ready, (e) => validReady(state, e))) next = now;
  }
  if (state.stats_dirty) {
    effects.writes.push({ subkey: STATS_SUBKEY, value: state.stats.map((b) => ({ ...b })) });
    state.stats_dirty = false;
  }
  if (next !== state.alarm_ms) {
    alarms.push({ name: TICK_ALARM, due_ms: next });
    state.alarm_ms = next;
  }
  return { ...result, ...effects, alarms };
}

