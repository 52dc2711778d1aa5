import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { randomId, ServiceError, serialisedBytes } from '../../runtime/index.js';
import {
  JOB_DIRECTORY_KIND,
  JOB_PRIORITIES,
  JOB_QUEUE_KIND,
  JOB_REGISTRY_KEY,
  JOB_REGISTRY_KIND,
  JOB_STATUSES,
  JOB_WEBHOOK_EVENTS,
  jobDirectoryKey,
  jobIdFor,
  jobPolicy as policy,
  jobQueueKey,
  QUEUE_NAME_PATTERN,
  queueNameOfId,
  queueOfJobId,
  type BatchResultView,
  type CancelFilter,
  type DirectoryMessage,
  type DlqEntryView,
  type JobPriority,
  type JobRequest,
  type JobView,
  type QueueListQuery,
  type QueueListView,
  type QueueMessage,
  type QueueSettings,
  type QueueStatsView,
  type QueueView,
  type RegistryListView,
  type RegistryMessage,
  type ScheduledJobAck,
} from '../../actors/jobs/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { jobSettings, jobWorkerOf } from '../job-delivery.js';
import { bodyPartCheck, bodyValidatorAjv } from '../plugins/validation.js';
import { blockedAddressReason } from '../webhook-guard.js';
import { requireAdmin } from './admin.js';

/** The job queue (spec doc 1 §2, §3, §4.5; conventions "Job schedule body"; docs/api/jobs.md). */
const tags = ['jobs'];

// ---- schemas ----

const Ts = Type.String({ format: 'date-time' });
const EpochS = Type.Integer({ description: 'epoch-s' });
const NullableEpochS = Type.Union([EpochS, Type.Null()]);
const QueueName = Type.String({ pattern: QUEUE_NAME_PATTERN, description: 'Letters, digits, - _ . : (1-100 characters, starting with a letter or digit).' });
const Priority = Type.Union(JOB_PRIORITIES.map((p) => Type.Literal(p)), { description: 'critical > high > normal > low: among due jobs, higher first.' });
const Status = Type.Union(JOB_STATUSES.map((s) => Type.Literal(s)));
const RetryPolicy = Type.Object(
  {
    max_attempts: Type.Integer({ minimum: 1, maximum: policy.retry_max_attempts_max, description: 'Attempts in all, the first included.' }),
    backoff_seconds: Type.Integer({ minimum: 0, maximum: policy.retry_backoff_seconds_max, description: 'Wait after the first failure; doubles per failure (at most 1 h), times a jitter factor in [0.5, 1).' }),
  },
  { title: 'JobRetryPolicy' },
);
const DlqConfig = Type.Object(
  {
    enabled: Type.Boolean({ description: 'Failed jobs enter the DLQ (redrivable). Default true.' }),
    max_entries: Type.Integer({ minimum: 1, maximum: policy.dlq_entries_max, description: `Entries kept; past it the oldest leaves the DLQ (its job stays failed). Default ${policy.dlq_entries_default}.` }),
  },
  { title: 'JobDlqConfig' },
);
// A Record's key schema does not reach the JSON Schema (TypeBox writes patternProperties): checkTags holds the key lengths.
const Tags = Type.Record(Type.String(), Type.String({ maxLength: policy.tag_length_max }), {
  description: `At most ${policy.tags_max} tags; keys 1-${policy.tag_length_max} characters, values at most ${policy.tag_length_max}.`,
});
const Headers = Type.Record(Type.String(), Type.String(), { description: `Custom headers sent with every delivery (at most ${policy.headers_max}).` });

const JobQueue = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    owner_id: Type.String(),
    description: Type.String(),
    tags: Tags,
    active: Type.Boolean({ description: 'false while paused.' }),
    auto_created: Type.Boolean(),
    retention_days: Type.Integer(),
    retry_policy: RetryPolicy,
    dlq_config: DlqConfig,
    default_priority: Priority,
    concurrency: Type.Integer({ description: 'Jobs of this queue in flight at once.' }),
    pending_count: Type.Integer({ description: 'Jobs scheduled (also those waiting between retries).' }),
    processing_count: Type.Integer(),
    completed_count: Type.Integer({ description: 'Completed jobs retained (until cleanup).' }),
    failed_count: Type.Integer({ description: 'Failed jobs retained (until cleanup).' }),
    cancelled_count: Type.Integer({ description: 'Cancelled jobs retained (until cleanup).' }),
    created_at: Ts,
    updated_at: Ts,
  },
  { title: 'JobQueue' },
);
const JobWebhook = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    headers: Headers,
    secret: Type.String({ description: 'whsec_… : the deliveries of this job are signed with it. Sensitive.' }),
    events: Type.Array(Type.String()),
    active: Type.Boolean({ description: 'true while the job may still be delivered (scheduled or processing).' }),
    created_at: EpochS,
    updated_at: EpochS,
  },
  { title: 'JobWebhook' },
);
const Job = Type.Object(
  {
    id: Type.String(),
    queue: Type.String(),
    user_id: Type.String(),
    status: Status,
    priority: Priority,
    payload: Type.Unknown(),
    attempts: Type.Integer(),
    retry_policy: RetryPolicy,
    scheduled_at: EpochS,
    created_at: Ts,
    updated_at: Ts,
    last_attempt_at: NullableEpochS,
    completed_at: NullableEpochS,
    error: Type.Union([Type.String(), Type.Null()]),
    webhook_config: JobWebhook,
  },
  { title: 'Job' },
);
const ScheduledJobAck = Type.Object(
  { job_id: Type.String(), queue: Type.String(), scheduled_at: EpochS, status: Type.Literal('scheduled') },
  { title: 'ScheduledJobAck' },
);
const DlqEntry = Type.Object(
  { entry_id: Type.String(), job_id: Type.String(), dead_lettered_at: EpochS, error: Type.String(), job: Job },
  { title: 'JobDlqEntry' },
);
const QueueStats = Type.Object(
  {
    queue: Type.String(),
    scheduled: Type.Integer(),
    processing: Type.Integer(),
    completed_last_hour: Type.Integer(),
    failed_last_hour: Type.Integer(),
    success_rate: Type.Number({ description: 'completed / (completed + failed) over the last hour, in [0, 1]; 0 when none finished.' }),
    avg_processing_time_ms: Type.Integer({ description: 'Mean duration of the successful attempts of the last hour.' }),
    oldest_job_age_seconds: Type.Integer({ description: 'How long the longest-waiting due (or in-flight) job has been due; 0 when none.' }),
  },
  { title: 'QueueStats' },
);
const JobQueueHealth = Type.Object(
  {
    status: Type.Union([Type.Literal('healthy'), Type.Literal('unhealthy')]),
    scheduler_running: Type.Boolean(),
    processor_running: Type.Boolean(),
    redis: Type.Literal('not_used', { description: 'This service keeps jobs in its own actors on LMDB; there is no Redis.' }),
    in_flight: Type.Integer(),
    waiting: Type.Integer(),
  },
  { title: 'JobQueueHealth' },
);

const JobWebhookBody = Type.Object({
  url: Type.String({ minLength: 1, maxLength: policy.url_length_max, description: 'http or https URL the job is POSTed to when due.' }),
  headers: Type.Optional(Headers),
  secret: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'whsec_ + base64 of at least 24 bytes; generated when absent.' })),
  events: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 4, description: 'Only job.due exists (the default).' })),
});
const JobBody = Type.Object({
  webhook: JobWebhookBody,
  queue: Type.Optional(QueueName),
  payload: Type.Optional(Type.Unknown({ description: `Any JSON value up to ${policy.payload_bytes_max} bytes serialised.` })),
  scheduled_at: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch-s; absent or past: due now; at most a year ahead.' })),
  priority: Type.Optional(Priority),
  retry_policy: Type.Optional(RetryPolicy),
});
const batchJobsDescription = 'Each item as the body of POST /api/v1/jobs/schedule. An item that does not match it fails alone (failed[], code BAD_REQUEST); the others are scheduled.';
/** The batch as /openapi.json documents it: every item is a schedule body. */
const BatchBody = Type.Object({ jobs: Type.Array(JobBody, { minItems: 1, maxItems: policy.batch_jobs_max, description: batchJobsDescription }) });
/**
 * What the batch route validates: the envelope only (an array of objects, its length). Each item is
 * then checked in the handler against JobBody, so that one bad item fails alone (docs/api/jobs.md).
 */
const BatchEnvelope = Type.Object({ jobs: Type.Array(Type.Object({}), { minItems: 1, maxItems: policy.batch_jobs_max, description: batchJobsDescription }) });
const BatchFailure = Type.Object({
  code: Type.String({ description: 'BAD_REQUEST for an item refused at the edge (its shape or a field), else the code its queue refused it with (e.g. job_queue_full).' }),
  error: Type.String(),
  index: Type.Integer(),
});
const QueueSettingsBody = {
  description: Type.Optional(Type.String({ maxLength: policy.description_length_max })),
  tags: Type.Optional(Tags),
  retention_days: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.retention_days_max })),
  retry_policy: Type.Optional(RetryPolicy),
  dlq_config: Type.Optional(DlqConfig),
  default_priority: Type.Optional(Priority),
  concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.concurrency_max })),
};
const CreateQueueBody = Type.Object({ name: QueueName, ...QueueSettingsBody });
const UpdateQueueBody = Type.Object({ ...QueueSettingsBody, active: Type.Optional(Type.Boolean({ description: 'false pauses, true resumes (as POST pause/resume).' })) });
const QueueParams = Type.Object({ queue_id: Type.String({ minLength: 1, maxLength: 200 }) });
const QueueNameParams = Type.Object({ queue_name: Type.String({ minLength: 1, maxLength: 200 }) });
const JobParams = Type.Object({ job_id: Type.String({ minLength: 1, maxLength: 256 }) });
const QueueListQuerySchema = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 100, description: 'Substring of the queue name (case-insensitive).' })),
  active: Type.Optional(Type.Boolean()),
  auto_created: Type.Optional(Type.Boolean()),
  tag: Type.Optional(Type.String({ maxLength: policy.tag_length_max, description: 'Queues that carry this tag key.' })),
  page: Type.Optional(Type.Integer({ minimum: 0, description: '1-based; 0 or absent: 1.' })),
  limit: Type.Optional(Type.Integer({ minimum: 0, description: `Page size: 0 or absent: ${policy.list_limit_default}; larger than ${policy.list_limit_max}: ${policy.list_limit_max}.` })),
  sort: Type.Optional(Type.Union(['created_at', '-created_at', 'name', '-name', 'updated_at', '-updated_at'].map((s) => Type.Literal(s)), { description: 'Default -created_at.' })),
});
const DeleteQueueQuery = Type.Object({ force: Type.Optional(Type.Boolean({ description: 'Delete even with scheduled or processing jobs (they are dropped).' })) });
const DlqQuery = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.dlq_list_limit_max, description: `Newest first; default ${policy.dlq_list_limit_default}, at most ${policy.dlq_list_limit_max}.` })) });
const RedriveBody = Type.Object({ job_ids: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: policy.redrive_job_ids_max })) });
const JobListQuery = Type.Object({
  queue: Type.Optional(QueueName),
  status: Type.Optional(Status),
  scheduled_after: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch-s, inclusive.' })),
  scheduled_before: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch-s, inclusive.' })),
  limit: Type.Optional(Type.Integer({ minimum: 0, description: `0 or absent: ${policy.list_limit_default}; larger than ${policy.list_limit_max}: ${policy.list_limit_max}.` })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.list_offset_max })),
});
const CancelBulkBody = Type.Object({
  queue: Type.Optional(QueueName),
  job_ids: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: policy.redrive_job_ids_max })),
  priority: Type.Optional(Priority),
  scheduled_after: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch-s, inclusive.' })),
  scheduled_before: Type.Optional(Type.Integer({ minimum: 0, description: 'epoch-s, inclusive.' })),
});
const AdminCancelBody = Type.Object({ user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })) });
const CleanupBody = Type.Object({ retention_days: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.retention_days_max, description: "Override for every queue; absent: each queue's own retention_days." })) });
const CancelledCount = Type.Object({ cancelled_count: Type.Integer() });
const AdminQueue = Type.Object({ tenant: Type.String({ description: 'The tenant the queue belongs to (an organization id, else a user id).' }), ...JobQueue.properties }, { title: 'AdminJobQueue' });
const AdminQueueListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 0, description: `0 or absent: ${policy.list_limit_default}; larger than ${policy.list_limit_max}: ${policy.list_limit_max}.` })),
  offset: Type.Optional(Type.Integer({ minimum: 0 })),
});
const AdminQueueParams = Type.Object({ tenant: Type.String({ minLength: 1, maxLength: 128 }), queue_id: Type.String({ minLength: 1, maxLength: 200 }) });
const AdminJobListQuery = Type.Object({
  status: Type.Optional(Status),
  limit: Type.Optional(Type.Integer({ minimum: 0, description: `0 or absent: ${policy.list_limit_default}; larger than ${policy.list_limit_max}: ${policy.list_limit_max}.` })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.list_offset_max })),
});

// ---- checks at the edge ----

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

/** Names the service sets itself; a custom header may not override them. */
const RESERVED_HEADERS = new Set(['host', 'content-type', 'content-length', 'transfer-encoding', 'connection', 'user-agent', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'service-signature']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/;

function checkUrl(raw: string, field: string, allowPrivateTargets: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest(field, 'must be an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badRequest(field, 'must be an http or https URL');
  if (url.username || url.password) throw badRequest(field, 'must not carry credentials (use headers)');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (!allowPrivateTargets && isIP(host)) {
    const reason = blockedAddressReason(host);
    if (reason) throw badRequest(field, `targets a ${reason} address, which deliveries may not reach`);
  }
  return url.toString();
}

function checkHeaders(headers: Record<string, string> | undefined, field: string): Record<string, string> {
  if (headers === undefined) return {};
  const names = Object.keys(headers);
  if (names.length > policy.headers_max) throw badRequest(field, `may hold at most ${policy.headers_max} headers`);
  for (const name of names) {
    if (!HEADER_NAME.test(name)) throw badRequest(field, `${JSON.stringify(name)} is not a valid header name`);
    if (RESERVED_HEADERS.has(name.toLowerCase())) throw badRequest(field, `${name} is set by the service and cannot be overridden`);
    const value = headers[name];
    if (value.length > policy.header_value_length_max || /[\r\n\0]/.test(value)) throw badRequest(field, `${name} must be at most ${policy.header_value_length_max} characters without line breaks`);
  }
  return { ...headers };
}

function checkSecret(secret: string | undefined, field: string): string {
  if (secret === undefined) return `whsec_${randomBytes(32).toString('base64')}`;
  if (!SECRET.test(secret) || Buffer.from(secret.slice('whsec_'.length), 'base64').length < 24) {
    throw badRequest(field, 'must be whsec_ followed by base64 of at least 24 bytes');
  }
  return secret;
}

function checkTags(tags: Record<string, string> | undefined): void {
  if (tags === undefined) return;
  const keys = Object.keys(tags);
  if (keys.length > policy.tags_max) throw badRequest('body.tags', `may hold at most ${policy.tags_max} tags`);
  for (const key of keys) {
    if (key.length === 0 || key.length > policy.tag_length_max) {
      const shown = key.length > 32 ? `${JSON.stringify(key.slice(0, 32))}... (${key.length} characters)` : JSON.stringify(key);
      throw badRequest('body.tags', `key ${shown} must be 1-${policy.tag_length_max} characters`);
    }
  }
}

/** A batch item against the schedule body's schema: the 400 a single schedule of it would get, else null. */
const checkJobItem = bodyPartCheck(JobBody);

/** One job of a schedule or batch body, checked and completed (id, secret, time). */
function jobRequest(body: Static<typeof JobBody>, user_id: string, now_ms: number, field: string, allowPrivateTargets: boolean): { queue: string; job: JobRequest } {
  const queue = body.queue ?? 'default';
  const url = checkUrl(body.webhook.url, `${field}.webhook.url`, allowPrivateTargets);
  const headers = checkHeaders(body.webhook.headers, `${field}.webhook.headers`);
  const secret = checkSecret(body.webhook.secret, `${field}.webhook.secret`);
  const events = [...new Set(body.webhook.events ?? [...JOB_WEBHOOK_EVENTS])];
  const unknown = events.filter((event) => !(JOB_WEBHOOK_EVENTS as readonly string[]).includes(event));
  if (unknown.length > 0 || events.length === 0) throw badRequest(`${field}.webhook.events`, `may name only ${JOB_WEBHOOK_EVENTS.join(', ')}`);
  if (body.payload !== undefined && serialisedBytes(body.payload) > policy.payload_bytes_max) throw badRequest(`${field}.payload`, `must serialise to at most ${policy.payload_bytes_max} bytes`);
  const scheduled_at_ms = body.scheduled_at === undefined ? now_ms : body.scheduled_at * 1000;
  if (scheduled_at_ms > now_ms + policy.schedule_ahead_ms_max) throw badRequest(`${field}.scheduled_at`, 'must be at most a year ahead');
  return {
    queue,
    job: {
      job_id: jobIdFor(queue, randomId()),
      user_id,
      url,
      headers,
      secret,
      events,
      payload: body.payload ?? null,
      scheduled_at_ms,
      priority: (body.priority as JobPriority | undefined) ?? null,
      retry_policy: body.retry_policy ?? null,
    },
  };
}

function queueNameFromId(queue_id: string): string {
  const name = queueNameOfId(queue_id);
  if (name === null) throw new ServiceError('not_found', 'No such job queue.');
  return name;
}

function queueNameFromJobId(job_id: string): string {
  const name = queueOfJobId(job_id);
  if (name === null) throw new ServiceError('not_found', 'No such job.');
  return name;
}

function settingsOf(body: Partial<Static<typeof CreateQueueBody>>): Partial<QueueSettings> {
  checkTags(body.tags);
  const settings: Partial<QueueSettings> = {};
  if (body.description !== undefined) settings.description = body.description;
  if (body.tags !== undefined) settings.tags = { ...body.tags };
  if (body.retention_days !== undefined) settings.retention_days = body.retention_days;
  if (body.retry_policy !== undefined) settings.retry_policy = { ...body.retry_policy };
  if (body.dlq_config !== undefined) settings.dlq_config = { ...body.dlq_config };
  if (body.default_priority !== undefined) settings.default_priority = body.default_priority as JobPriority;
  if (body.concurrency !== undefined) settings.concurrency = body.concurrency;
  return settings;
}

// ---- shapes ----

const seconds = (ms: number) => Math.floor(ms / 1000);
const secondsOrNull = (ms: number | null) => (ms === null ? null : seconds(ms));

function queueShape(view: QueueView) {
  const { tenant: _tenant, created_at_ms, updated_at_ms, ...rest } = view;
  return { ...rest, created_at: isoTime(created_at_ms)!, updated_at: isoTime(updated_at_ms)! };
}

function jobShape(view: JobView) {
  const { webhook, scheduled_at_ms, created_at_ms, updated_at_ms, last_attempt_at_ms, completed_at_ms, ...rest } = view;
  const { created_at_ms: hook_created, updated_at_ms: hook_updated, ...hook } = webhook;
  return {
    ...rest,
    scheduled_at: seconds(scheduled_at_ms),
    created_at: isoTime(created_at_ms)!,
    updated_at: isoTime(updated_at_ms)!,
    last_attempt_at: secondsOrNull(last_attempt_at_ms),
    completed_at: secondsOrNull(completed_at_ms),
    webhook_config: { ...hook, created_at: seconds(hook_created), updated_at: seconds(hook_updated) },
  };
}

function adminQueueShape(view: QueueView) {
  return { tenant: view.tenant, ...queueShape(view) };
}

function dlqEntryShape(entry: DlqEntryView) {
  return { entry_id: entry.entry_id, job_id: entry.job_id, dead_lettered_at: seconds(entry.dead_lettered_at_ms), error: entry.error, job: jobShape(entry.job) };
}

function ackShape(ack: ScheduledJobAck) {
  return { job_id: ack.job_id, queue: ack.queue, scheduled_at: seconds(ack.scheduled_at_ms), status: ack.status };
}

/** POSTs whose fields are all optional accept a missing body as {}. */
async function emptyBodyIsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

const bySchedule = (a: JobView, b: JobView) => a.scheduled_at_ms - b.scheduled_at_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export function jobRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const settings = () => jobSettings(services.config);
  const allowPrivate = () => services.config.webhookAllowPrivateTargets;
  const queue = <Reply>(tenant: string, name: string, message: QueueMessage, readOnly = false) =>
    services.actors.ask<Reply>(JOB_QUEUE_KIND, jobQueueKey(tenant, name), message, { readOnly });
  const directory = <Reply>(tenant: string, message: DirectoryMessage, readOnly = false) =>
    services.actors.ask<Reply>(JOB_DIRECTORY_KIND, jobDirectoryKey(tenant), message, { readOnly });
  const registry = <Reply>(message: RegistryMessage) => services.actors.ask<Reply>(JOB_REGISTRY_KIND, JOB_REGISTRY_KEY, message);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });

  // ---- health ----

  app.get('/health/job_queue', {
    schema: {
      tags: ['health'],
      summary: "The job queue's probe: the scheduler (durable alarms fire on this node) and the processor (the delivery worker runs). 503 when either is down.",
      response: { 200: JobQueueHealth, 503: JobQueueHealth },
    },
  }, async (_request, reply) => {
    const health = (await jobWorkerOf(services)?.health()) ?? { processor_running: false, scheduler_running: false, in_flight: 0, waiting: 0 };
    const healthy = health.processor_running && health.scheduler_running;
    return reply.code(healthy ? 200 : 503).send({ status: healthy ? 'healthy' : 'unhealthy', redis: 'not_used', ...health });
  });

  // ---- queues ----

  app.get<{ Querystring: Static<typeof QueueListQuerySchema> }>('/api/v1/job-queues', {
    onRequest: authenticate,
    schema: schema('The tenant\'s job queues. search on the name; filters active, auto_created, tag (a tag key); sort created_at|name|updated_at, - for descending.', { querystring: QueueListQuerySchema }, {
      200: Type.Object({ pagination: Pagination, queues: Type.Array(JobQueue) }),
    }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(policy.list_limit_max, query.limit || policy.list_limit_default);
    const index = await directory<QueueListView>(principal.tenant, {
      op: 'list',
      query: { search: query.search, active: query.active, auto_created: query.auto_created, tag: query.tag, sort: (query.sort ?? '-created_at') as QueueListQuery['sort'], page, page_size },
    }, true);
    const views = await Promise.all(
      index.names.map((name) =>
        services.actors.ask<QueueView>(JOB_QUEUE_KIND, jobQueueKey(principal.tenant, name), { op: 'get' } satisfies QueueMessage, { readOnly: true }).catch((error: unknown) => {
          // Deleted since the directory answered: leave it out.
          if (error instanceof ServiceError && error.code === 'not_found') return null;
          throw error;
        }),
      ),
    );
    return {
      pagination: { page, page_size, total: index.total, has_more: page * page_size < index.total },
      queues: views.filter((view): view is QueueView => view !== null).map(queueShape),
    };
  });

  app.post<{ Body: Static<typeof CreateQueueBody> }>('/api/v1/job-queues', {
    onRequest: authenticate,
    schema: schema('Create a job queue (201). Scheduling into an unknown queue name also creates it, with auto_created true. A name in use: 409 job_queue_exists.', { body: CreateQueueBody }, {
      201: Type.Object({ created_at: Ts, id: Type.String(), name: Type.String() }),
    }, [409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const settings_ = settingsOf(request.body);
    const view = await queue<QueueView>(principal.tenant, request.body.name, { op: 'create', tenant: principal.tenant, owner_id: principal.user_id, settings: settings_, job_settings: settings() });
    return reply.code(201).send({ created_at: isoTime(view.created_at_ms)!, id: view.id, name: view.name });
  });

  app.get<{ Params: Static<typeof QueueParams> }>('/api/v1/job-queues/:queue_id', {
    onRequest: authenticate,
    schema: schema('One job queue with its counters.', { params: QueueParams }, { 200: JobQueue }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return queueShape(await queue<QueueView>(principal.tenant, queueNameFromId(request.params.queue_id), { op: 'get' }, true));
  });

  app.patch<{ Params: Static<typeof QueueParams>; Body: Static<typeof UpdateQueueBody> }>('/api/v1/job-queues/:queue_id', {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema('Change a queue: every field given replaces the current one (the name is the queue\'s identity and does not change). A new retry_policy applies to the next failure of jobs without their own.', { params: QueueParams, body: UpdateQueueBody }, { 200: JobQueue }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const name = queueNameFromId(request.params.queue_id);
    const message: QueueMessage = { op: 'update', settings: settingsOf(request.body), job_settings: settings() };
    if (request.body.active !== undefined) message.active = request.body.active;
    return queueShape(await queue<QueueView>(principal.tenant, name, message));
  });

  app.delete<{ Params: Static<typeof QueueParams>; Querystring: Static<typeof DeleteQueueQuery> }>('/api/v1/job-queues/:queue_id', {
    onRequest: authenticate,
    schema: schema('Delete a queue with its jobs and DLQ. With scheduled or processing jobs: 409 job_queue_not_empty unless force=true.', { params: QueueParams, querystring: DeleteQueueQuery }, { 204: Type.Null() }, [404, 409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await queue(principal.tenant, queueNameFromId(request.params.queue_id), { op: 'delete', force: request.query.force ?? false });
    return reply.code(204).send();
  });

  for (const action of ['pause', 'resume'] as const) {
    app.post<{ Params: Static<typeof QueueParams> }>(`/api/v1/job-queues/:queue_id/${action}`, {
      onRequest: authenticate,
      schema: schema(
        action === 'pause'
          ? 'Pause: active false. The queue starts no attempt until resumed (jobs keep their state; attempts already in flight finish).'
          : 'Resume: active true; jobs that fell due meanwhile are delivered at once, by priority.',
        { params: QueueParams },
        { 200: JobQueue },
        [404],
      ),
    }, async (request) => {
      const principal = requirePrincipal(request);
      return queueShape(await queue<QueueView>(principal.tenant, queueNameFromId(request.params.queue_id), { op: 'set_active', active: action === 'resume', job_settings: settings() }));
    });
  }

  app.get<{ Params: Static<typeof QueueParams>; Querystring: Static<typeof DlqQuery> }>('/api/v1/job-queues/:queue_id/dlq', {
    onRequest: authenticate,
    schema: schema('The dead-letter queue: failed jobs, newest entry first.', { params: QueueParams, querystring: DlqQuery }, {
      200: Type.Object({ entries: Type.Array(DlqEntry), queue: Type.String(), total: Type.Integer() }),
    }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const name = queueNameFromId(request.params.queue_id);
    const view = await queue<{ entries: DlqEntryView[]; total: number }>(principal.tenant, name, { op: 'dlq', limit: request.query.limit ?? policy.dlq_list_limit_default }, true);
    return {
      queue: name,
      total: view.total,
      entries: view.entries.map(dlqEntryShape),
    };
  });

  app.post<{ Params: Static<typeof QueueParams>; Body: Static<typeof RedriveBody> }>('/api/v1/job-queues/:queue_id/dlq/redrive', {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema(`Return dead-lettered jobs to the schedule (due now, attempts from 0): those in job_ids, or all (at most ${policy.redrive_all_max}) without it. skipped_job_ids: ids given that are not in the DLQ.`, { params: QueueParams, body: RedriveBody }, {
      200: Type.Object({ redriven_count: Type.Integer(), skipped_job_ids: Type.Array(Type.String()) }),
    }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const name = queueNameFromId(request.params.queue_id);
    const view = await queue<{ redriven: number; skipped_job_ids: string[] }>(principal.tenant, name, { op: 'redrive', job_ids: request.body.job_ids ?? null, job_settings: settings() });
    return { redriven_count: view.redriven, skipped_job_ids: view.skipped_job_ids };
  });

  app.get('/api/v1/queues', {
    onRequest: authenticate,
    schema: schema('The names of the tenant\'s job queues, sorted.', {}, { 200: Type.Array(Type.String()) }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return (await directory<{ names: string[] }>(principal.tenant, { op: 'names' }, true)).names;
  });

  app.get<{ Params: Static<typeof QueueNameParams> }>('/api/v1/queues/:queue_name/stats', {
    onRequest: authenticate,
    schema: schema('A queue\'s statistics: counts now, outcomes of the last hour, the oldest due job\'s wait.', { params: QueueNameParams }, { 200: QueueStats }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const name = request.params.queue_name;
    if (!new RegExp(QUEUE_NAME_PATTERN).test(name)) throw new ServiceError('not_found', 'No such job queue.');
    return queue<QueueStatsView>(principal.tenant, name, { op: 'stats' }, true);
  });

  // ---- jobs ----

  app.post<{ Body: Static<typeof JobBody> }>('/api/v1/jobs/schedule', {
    onRequest: authenticate,
    schema: schema('Schedule a job (201): POSTed, signed with its secret, to webhook.url when due. An unknown queue name creates the queue (auto_created).', { body: JobBody }, { 201: ScheduledJobAck }, [409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const { queue: name, job } = jobRequest(request.body, principal.user_id, services.clock.now(), 'body', allowPrivate());
    const ack = await queue<ScheduledJobAck>(principal.tenant, name, { op: 'schedule', tenant: principal.tenant, job, job_settings: settings() });
    return reply.code(201).send(ackShape(ack));
  });

  app.post<{ Body: Static<typeof BatchEnvelope> }>('/api/v1/jobs/schedule-batch', {
    onRequest: authenticate,
    schema: schema(`Schedule up to ${policy.batch_jobs_max} jobs; each item succeeds or fails on its own (failed: index, code and error), an item that is not a valid schedule body too.`, { body: BatchBody }, {
      200: Type.Object({
        failed: Type.Array(BatchFailure),
        failure_count: Type.Integer(),
        success_count: Type.Integer(),
        successful: Type.Array(ScheduledJobAck),
        total: Type.Integer(),
      }),
    }),
    // The schema above documents the items; the route validates the envelope only, and each item in the handler.
    validatorCompiler: () => app.lazySchemas.validator(() => bodyValidatorAjv().compile(BatchEnvelope)),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const now = services.clock.now();
    const failed: Static<typeof BatchFailure>[] = [];
    const accepted: { index: number; item: { queue: string; job: JobRequest } }[] = [];
    request.body.jobs.forEach((body, index) => {
      const field = `body.jobs.${index}`;
      try {
        const invalid = checkJobItem(body, field);
        if (invalid) throw invalid;
        accepted.push({ index, item: jobRequest(body as Static<typeof JobBody>, principal.user_id, now, field, allowPrivate()) });
      } catch (error) {
        if (!(error instanceof ServiceError)) throw error;
        failed.push({ index, code: error.code, error: error.message });
      }
    });
    const successful: ReturnType<typeof ackShape>[] = [];
    if (accepted.length > 0) {
      const view = await directory<BatchResultView>(principal.tenant, { op: 'schedule_batch', jobs: accepted.map((entry) => entry.item), job_settings: settings() });
      for (const result of view.results) {
        const index = accepted[result.index].index;
        if (result.ok) successful.push(ackShape(result.ack));
        else failed.push({ index, code: result.code, error: `${result.code}: ${result.error}` });
      }
    }
    failed.sort((a, b) => a.index - b.index);
    return { failed, failure_count: failed.length, success_count: successful.length, successful, total: request.body.jobs.length };
  });

  app.get<{ Querystring: Static<typeof JobListQuery> }>('/api/v1/jobs', {
    onRequest: authenticate,
    schema: schema('The tenant\'s jobs, ordered by scheduled_at then id; filters queue, status, scheduled_after/before (epoch-s, inclusive).', { querystring: JobListQuery }, {
      200: Type.Object({ jobs: Type.Array(Job), limit: Type.Integer(), offset: Type.Integer(), total: Type.Integer() }),
    }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const limit = Math.min(policy.list_limit_max, query.limit || policy.list_limit_default);
    const offset = query.offset ?? 0;
    const listQuery: QueueMessage = {
      op: 'list_jobs',
      query: {
        status: query.status,
        scheduled_after_ms: query.scheduled_after === undefined ? undefined : query.scheduled_after * 1000,
        scheduled_before_ms: query.scheduled_before === undefined ? undefined : query.scheduled_before * 1000,
        first: offset + limit,
      },
    };
    const names = query.queue !== undefined ? [query.queue] : (await directory<{ names: string[] }>(principal.tenant, { op: 'names' }, true)).names;
    const parts = await Promise.all(
      names.map((name) =>
        services.actors.ask<{ jobs: JobView[]; total: number }>(JOB_QUEUE_KIND, jobQueueKey(principal.tenant, name), listQuery, { readOnly: true }).catch((error: unknown) => {
          if (error instanceof ServiceError && error.code === 'not_found') return { jobs: [], total: 0 };
          throw error;
        }),
      ),
    );
    const jobs = parts.flatMap((part) => part.jobs).sort(bySchedule).slice(offset, offset + limit);
    return { jobs: jobs.map(jobShape), limit, offset, total: parts.reduce((sum, part) => sum + part.total, 0) };
  });

  app.post<{ Body: Static<typeof CancelBulkBody> }>('/api/v1/jobs/cancel-bulk', {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema("Cancel the caller's scheduled jobs (also those waiting between retries) that match every filter given; no filter: all of them.", { body: CancelBulkBody }, { 200: CancelledCount }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const filter: CancelFilter = { user_id: principal.user_id };
    if (body.queue !== undefined) filter.queue = body.queue;
    if (body.job_ids !== undefined) filter.job_ids = [...new Set(body.job_ids)];
    if (body.priority !== undefined) filter.priority = body.priority as JobPriority;
    if (body.scheduled_after !== undefined) filter.scheduled_after_ms = body.scheduled_after * 1000;
    if (body.scheduled_before !== undefined) filter.scheduled_before_ms = body.scheduled_before * 1000;
    return directory<{ cancelled_count: number }>(principal.tenant, { op: 'cancel_bulk', filter });
  });

  app.get<{ Params: Static<typeof JobParams> }>('/api/v1/jobs/:job_id', {
    onRequest: authenticate,
    schema: schema('One job of the tenant.', { params: JobParams }, { 200: Job }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const job_id = request.params.job_id;
    return jobShape(await queue<JobView>(principal.tenant, queueNameFromJobId(job_id), { op: 'get_job', job_id }, true));
  });

  app.delete<{ Params: Static<typeof JobParams> }>('/api/v1/jobs/:job_id', {
    onRequest: authenticate,
    schema: schema('A scheduled job is cancelled (status cancelled, kept until cleanup); a completed, failed or cancelled one is removed; one in processing: 409 job_not_cancellable.', { params: JobParams }, { 204: Type.Null() }, [404, 409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const job_id = request.params.job_id;
    await queue(principal.tenant, queueNameFromJobId(job_id), { op: 'delete_job', job_id });
    return reply.code(204).send();
  });

  // ---- administration ----

  app.post<{ Body: Static<typeof AdminCancelBody> }>('/admin/jobs/cancel-bulk', {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema('Platform admin: cancel every scheduled job of user_id, or of every user without it, in every tenant.', { body: AdminCancelBody }, { 200: CancelledCount }, [403]),
  }, async (request) => {
    requireAdmin(request);
    return registry<{ cancelled_count: number }>({ op: 'cancel_bulk', user_id: request.body.user_id ?? null });
  });

  app.post<{ Body: Static<typeof CleanupBody> }>('/admin/jobs/cleanup', {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema("Platform admin: delete completed, failed and cancelled jobs finished more than retention_days ago, in every queue (each queue's own retention_days, or the body's for all).", { body: CleanupBody }, {
      200: Type.Object({ deleted_count: Type.Integer(), retention_days: Type.Integer({ description: `The override given, else the default retention (${policy.retention_days_default}); queues with their own retention_days used theirs.` }) }),
    }, [403]),
  }, async (request) => {
    requireAdmin(request);
    const retention_days = request.body.retention_days ?? null;
    const view = await registry<{ deleted_count: number }>({ op: 'cleanup', retention_days });
    return { deleted_count: view.deleted_count, retention_days: retention_days ?? policy.retention_days_default };
  });

  // ---- administration of any tenant's queue (the operator console) ----
  // The same operations as the owner's routes above, on a queue named by its tenant and id;
  // an unknown tenant or queue answers 404 not_found as for the owner.

  app.get<{ Querystring: Static<typeof AdminQueueListQuery> }>('/admin/jobs/queues', {
    onRequest: authenticate,
    schema: schema('Platform admin: every job queue of every tenant, ordered by tenant then name, each with its tenant and counters.', { querystring: AdminQueueListQuery }, {
      200: Type.Object({ queues: Type.Array(AdminQueue), limit: Type.Integer(), offset: Type.Integer(), total: Type.Integer() }),
    }, [403]),
  }, async (request) => {
    requireAdmin(request);
    const limit = Math.min(policy.list_limit_max, request.query.limit || policy.list_limit_default);
    const offset = request.query.offset ?? 0;
    const page = await services.actors.ask<RegistryListView>(JOB_REGISTRY_KIND, JOB_REGISTRY_KEY, { op: 'list', offset, limit } satisfies RegistryMessage, { readOnly: true });
    const views = await Promise.all(
      page.queues.map(({ tenant, name }) =>
        services.actors.ask<QueueView>(JOB_QUEUE_KIND, jobQueueKey(tenant, name), { op: 'get' } satisfies QueueMessage, { readOnly: true }).catch((error: unknown) => {
          // Deleted since the registry answered: leave it out.
          if (error instanceof ServiceError && error.code === 'not_found') return null;
          throw error;
        }),
      ),
    );
    return { queues: views.filter((view): view is QueueView => view !== null).map(adminQueueShape), limit, offset, total: page.total };
  });

  app.get<{ Params: Static<typeof AdminQueueParams> }>('/admin/jobs/queues/:tenant/:queue_id', {
    onRequest: authenticate,
    schema: schema("Platform admin: any tenant's queue with its counters (as GET /api/v1/job-queues/{queue_id}).", { params: AdminQueueParams }, { 200: AdminQueue }, [403, 404]),
  }, async (request) => {
    requireAdmin(request);
    const { tenant, queue_id } = request.params;
    return adminQueueShape(await queue<QueueView>(tenant, queueNameFromId(queue_id), { op: 'get' }, true));
  });

  for (const action of ['pause', 'resume'] as const) {
    app.post<{ Params: Static<typeof AdminQueueParams> }>(`/admin/jobs/queues/:tenant/:queue_id/${action}`, {
      onRequest: authenticate,
      schema: schema(`Platform admin: ${action} any tenant's queue (as POST /api/v1/job-queues/{queue_id}/${action}).`, { params: AdminQueueParams }, { 200: AdminQueue }, [403, 404]),
    }, async (request) => {
      requireAdmin(request);
      const { tenant, queue_id } = request.params;
      return adminQueueShape(await queue<QueueView>(tenant, queueNameFromId(queue_id), { op: 'set_active', active: action === 'resume', job_settings: settings() }));
    });
  }

  app.get<{ Params: Static<typeof AdminQueueParams>; Querystring: Static<typeof AdminJobListQuery> }>('/admin/jobs/queues/:tenant/:queue_id/jobs', {
    onRequest: authenticate,
    schema: schema("Platform admin: the jobs of any tenant's queue, ordered by scheduled_at then id; filter status.", { params: AdminQueueParams, querystring: AdminJobListQuery }, {
      200: Type.Object({ jobs: Type.Array(Job), limit: Type.Integer(), offset: Type.Integer(), total: Type.Integer() }),
    }, [403, 404]),
  }, async (request) => {
    requireAdmin(request);
    const { tenant, queue_id } = request.params;
    const limit = Math.min(policy.list_limit_max, request.query.limit || policy.list_limit_default);
    const offset = request.query.offset ?? 0;
    const view = await queue<{ jobs: JobView[]; total: number }>(tenant, queueNameFromId(queue_id), { op: 'list_jobs', query: { status: request.query.status, first: offset + limit } }, true);
    return { jobs: view.jobs.sort(bySchedule).slice(offset, offset + limit).map(jobShape), limit, offset, total: view.total };
  });

  app.get<{ Params: Static<typeof AdminQueueParams>; Querystring: Static<typeof DlqQuery> }>('/admin/jobs/queues/:tenant/:queue_id/dlq', {
    onRequest: authenticate,
    schema: schema("Platform admin: any tenant's dead-letter queue, newest entry first (as GET /api/v1/job-queues/{queue_id}/dlq).", { params: AdminQueueParams, querystring: DlqQuery }, {
      200: Type.Object({ entries: Type.Array(DlqEntry), queue: Type.String(), total: Type.Integer() }),
    }, [403, 404]),
  }, async (request) => {
    requireAdmin(request);
    const { tenant, queue_id } = request.params;
    const name = queueNameFromId(queue_id);
    const view = await queue<{ entries: DlqEntryView[]; total: number }>(tenant, name, { op: 'dlq', limit: request.query.limit ?? policy.dlq_list_limit_default }, true);
    return { queue: name, total: view.total, entries: view.entries.map(dlqEntryShape) };
  });

  app.post<{ Params: Static<typeof AdminQueueParams>; Body: Static<typeof RedriveBody> }>('/admin/jobs/queues/:tenant/:queue_id/dlq/redrive', {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema("Platform admin: redrive any tenant's dead-lettered jobs (as POST /api/v1/job-queues/{queue_id}/dlq/redrive).", { params: AdminQueueParams, body: RedriveBody }, {
      200: Type.Object({ redriven_count: Type.Integer(), skipped_job_ids: Type.Array(Type.String()) }),
    }, [403, 404]),
  }, async (request) => {
    requireAdmin(request);
    const { tenant, queue_id } = request.params;
    const view = await queue<{ redriven: number; skipped_job_ids: string[] }>(tenant, queueNameFromId(queue_id), { op: 'redrive', job_ids: request.body.job_ids ?? null, job_settings: settings() });
    return { redriven_count: view.redriven, skipped_job_ids: view.skipped_job_ids };
  });
}
