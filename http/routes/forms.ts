import { randomBytes } from 'node:crypto';
import { join, relative } from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { serialisedBytes, ServiceError } from '../../runtime/index.js';
import {
  FORM_INDEX_KIND,
  FORM_KIND,
  FORM_STATE_MACHINE_KIND,
  FORM_STATUSES,
  STATE_NAME_PATTERN,
  SUBMISSION_STATUSES,
  stateMachineKey,
  type ExecutionHook,
  type HookRun,
  type StateMachineMessage,
  type StateMachineView,
  formIdFor,
  formIndexKey,
  formKey,
  formPolicy,
  publicAttachment,
  tenantOfFormId,
  type Draft,
  type FormCaller,
  type FormMessage,
  type FormSettings,
  type FormSettingsPatch,
  type FormView,
  type Page,
  type Submission,
  type SubmissionAck,
} from '../../actors/forms/messages.js';
import { WEBHOOK_KIND, type WebhookMessage, type WebhookView } from '../../actors/webhooks/messages.js';
import { blobDirectory, formsFieldKey, receiveUpload, SNIFFABLE_TYPES } from '../form-uploads.js';
import { sweepPartialUploads } from '../form-blob-sweep.js';
import { ATTACHMENT_HOP_HEADER, downloadHeaders, etagOf, notModified, openStoredFile, passOn, unavailable } from '../form-downloads.js';
import { hasFieldKey, setFieldKey } from '../../actors/forms/messages.js';
import { jobSettings } from '../job-delivery.js';
import { isQueueName } from '../../actors/jobs/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Forms and submissions (spec doc 2 §2 Forms, §3, §4.2; docs/api/forms.md). */

const FORM_ID = Type.String({ minLength: 1, maxLength: 600 });
const FormParams = Type.Object({ form_id: FORM_ID });
const SubmissionParams = Type.Object({ form_id: FORM_ID, submission_id: Type.String({ minLength: 1, maxLength: 64 }) });
const AttachmentParams = Type.Object({ form_id: FORM_ID, submission_id: Type.String({ minLength: 1, maxLength: 64 }), blob_id: Type.String({ minLength: 1, maxLength: 64 }) });
const DraftParams = Type.Object({ form_id: FORM_ID, draft_id: Type.String({ minLength: 1, maxLength: 64 }) });

const TEXT = (max: number) => Type.String({ minLength: 1, maxLength: max, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });
const FIELD_NAME = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z_][A-Za-z0-9_.-]*$' });
const StatusEnum = Type.Union(FORM_STATUSES.map((status) => Type.Literal(status)));
const SubmissionStatusEnum = Type.Union(SUBMISSION_STATUSES.map((status) => Type.Literal(status)));
const JsonObject = Type.Object({}, { additionalProperties: true, description: 'A JSON object.' });

const Field = Type.Object({
  name: FIELD_NAME,
  label: Type.Optional(Type.String({ maxLength: 512 })),
  kind: Type.Optional(Type.String({ maxLength: 64 })),
  encrypted: Type.Optional(Type.Boolean({ description: 'Stored encrypted at rest (AES-256-GCM); in clear only to the form\'s owners and admins.' })),
});
const Rule = Type.Object({ when: Type.String({ minLength: 1, maxLength: 512 }), require: Type.Array(FIELD_NAME, { minItems: 1, maxItems: 100 }) });
const Hook = Type.Object({
  kind: Type.Union([Type.Literal('webhook'), Type.Literal('fsm'), Type.Literal('job')]),
  target: Type.Optional(Type.Object({
    url: Type.String({ minLength: 1, maxLength: 2_048 }),
    secret: Type.String({ minLength: 16, maxLength: 256 }),
    headers: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9-]{1,64}$' }), Type.String({ maxLength: 1_024 }), { maxProperties: 20 })),
  }, { description: 'job hooks: where the job queue delivers the job, signed with the secret (as POST /api/v1/jobs webhook).' })),
  queue: Type.Optional(Type.String({ maxLength: 100 })),
  payload_template: Type.Optional(Type.Unknown()),
  webhook_id: Type.Optional(Type.String({ maxLength: 128 })),
  fsm_name: Type.Optional(Type.String({ maxLength: 128 })),
  target_state: Type.Optional(Type.String({ maxLength: 128 })),
});
const SettingsBody = {
  fields: Type.Optional(Type.Array(Field, { maxItems: formPolicy.fields_max })),
  conditional_logic: Type.Optional(Type.Array(Rule, { maxItems: formPolicy.conditional_rules_max })),
  drafts: Type.Optional(Type.Object({
    enabled: Type.Optional(Type.Boolean()),
    ttl_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: formPolicy.draft_ttl_seconds_max })),
  })),
  spam: Type.Optional(Type.Object({
    allow_anonymous: Type.Optional(Type.Boolean()),
    honeypot_fields: Type.Optional(Type.Array(FIELD_NAME, { maxItems: formPolicy.honeypot_fields_max })),
    min_submit_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: formPolicy.min_submit_ms_max })),
    rate_limit_per_minute: Type.Optional(Type.Integer({ minimum: 1, maximum: formPolicy.public_per_address_per_minute_max })),
  })),
  approval: Type.Optional(Type.Object({
    enabled: Type.Optional(Type.Boolean()),
    approver_role: Type.Optional(Type.Union([Type.Literal('owner'), Type.Literal('admin')])),
    kind: Type.Optional(Type.Literal('single')),
  })),
  execution: Type.Optional(Type.Object({
    on_valid_submission: Type.Optional(Type.Array(Hook, { maxItems: formPolicy.hooks_per_form_max })),
  })),
  multipart: Type.Optional(Type.Object({
    enabled: Type.Optional(Type.Boolean()),
    allowed_content_types: Type.Optional(Type.Array(Type.Union(SNIFFABLE_TYPES.map((type) => Type.Literal(type))), { maxItems: SNIFFABLE_TYPES.length })),
    blob_bucket: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,62}$' })),
    max_file_bytes: Type.Optional(Type.Integer({ minimum: 1, maximum: formPolicy.max_file_bytes_max })),
    max_files: Type.Optional(Type.Integer({ minimum: 1, maximum: formPolicy.max_files_max })),
  })),
};
const CreateBody = Type.Object({ name: TEXT(200), title: TEXT(500), schema: JsonObject, ...SettingsBody });
type CreateBodyType = Static<typeof CreateBody>;
const PatchBody = Type.Object({ title: Type.Optional(TEXT(500)), ...SettingsBody }, { minProperties: 1 });
type PatchBodyType = Static<typeof PatchBody>;

const FormSchema = Type.Object({
  form_id: Type.String(),
  name: Type.String(),
  title: Type.String(),
  status: StatusEnum,
  version: Type.Integer(),
  schema: JsonObject,
  fields: Type.Array(Type.Object({ name: Type.String(), label: Type.String(), kind: Type.String(), encrypted: Type.Boolean() })),
  conditional_logic: Type.Array(Type.Object({ when: Type.String(), require: Type.Array(Type.String()) })),
  drafts: Type.Object({ enabled: Type.Boolean(), ttl_seconds: Type.Integer() }),
  spam: Type.Object({ allow_anonymous: Type.Boolean(), honeypot_fields: Type.Array(Type.String()), min_submit_ms: Type.Integer(), rate_limit_per_minute: Type.Integer() }),
  approval: Type.Object({ enabled: Type.Boolean(), approver_role: Type.String(), kind: Type.String() }),
  execution: Type.Object({ on_valid_submission: Type.Array(Type.Object({
    kind: Type.String(), webhook_id: Type.Optional(Type.String()), fsm_name: Type.Optional(Type.String()), target_state: Type.Optional(Type.String()),
    queue: Type.Optional(Type.String()), payload_template: Type.Optional(Type.Unknown()), target: Type.Optional(Type.Object({ url: Type.String(), headers: Type.Record(Type.String(), Type.String()) })),
  })) }),
  multipart: Type.Object({ enabled: Type.Boolean(), allowed_content_types: Type.Array(Type.String()), blob_bucket: Type.String(), max_file_bytes: Type.Integer(), max_files: Type.Integer() }),
  submission_count: Type.Integer(),
  created_by: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { title: 'Form' });
const FormCreated = Type.Object({ form_id: Type.String(), name: Type.String(), status: StatusEnum, version: Type.Integer(), created_at: Type.String({ format: 'date-time' }) });

const Validation = Type.Object({ status: Type.String(), errors: Type.Array(Type.String()), schema_version: Type.Integer() });
const ExecutionStatus = Type.Object({ approval: Type.Unknown(), job: Type.Unknown(), webhook: Type.Unknown(), fsm: Type.Unknown() });
const SubmissionSchema = Type.Object({
  submission_id: Type.String(),
  form_id: Type.String(),
  form_version: Type.Integer(),
  status: SubmissionStatusEnum,
  anonymous: Type.Boolean(),
  submitted_by: Type.String(),
  data: JsonObject,
  attachments: Type.Array(Type.Object({
    blob_id: Type.String(), field: Type.String(), content_type: Type.String({ description: 'Sniffed from the content.' }), declared_type: Type.String(),
    file_name: Type.Union([Type.String(), Type.Null()]), size_bytes: Type.Integer(), sha256: Type.String(),
  })),
  validation: Validation,
  execution_status: ExecutionStatus,
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { title: 'Submission' });
const SubmissionAckSchema = Type.Object({
  submission_id: Type.String(),
  form_id: Type.String(),
  form_version: Type.Integer(),
  status: SubmissionStatusEnum,
  execution_status: ExecutionStatus,
}, { title: 'SubmissionAck' });
const DraftSchema = Type.Object({
  draft_id: Type.String(),
  form_id: Type.String(),
  form_version: Type.Integer(),
  subject: Type.String(),
  partial_data: JsonObject,
  expires_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { title: 'Draft' });

// Any safe integer (docs/api/common.md): a page past the end is empty, a page_size above the cap is capped (pageOf).
const PAGE = { page: Type.Optional(Type.Integer({ minimum: 0 })), page_size: Type.Optional(Type.Integer({ minimum: 0 })) };
const SORT_ORDER = Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')]));
const FormListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 200 })),
  status: Type.Optional(StatusEnum),
  include_inactive: Type.Optional(Type.Boolean()),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('name'), Type.Literal('title')])),
  sort_order: SORT_ORDER,
  ...PAGE,
});
const SubmissionListQuery = Type.Object({
  status: Type.Optional(SubmissionStatusEnum),
  submitter: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at')])),
  sort_order: SORT_ORDER,
  ...PAGE,
});
const SubmitBody = Type.Object({ data: JsonObject });
const BatchBody = Type.Object({ submissions: Type.Array(SubmitBody, { minItems: 1, maxItems: formPolicy.batch_submissions_max }) });
const PublicBody = Type.Object({
  data: JsonObject,
  started_at: Type.Optional(Type.String({ format: 'date-time', description: 'When the form was shown; needed when the form sets spam.min_submit_ms.' })),
});
const DecideBody = Type.Object({ note: Type.Optional(Type.String({ maxLength: 2_000 })) });

const STATE = Type.String({ pattern: STATE_NAME_PATTERN.source });
const MachineParams = Type.Object({ name: STATE });
const MachineBody = Type.Object({
  states: Type.Array(STATE, { minItems: 1, maxItems: formPolicy.state_machine_states_max }),
  initial: STATE,
  transitions: Type.Array(Type.Object({ from: STATE, to: STATE }), { maxItems: formPolicy.state_machine_transitions_max }),
});
const MachineSchema = Type.Object({
  name: Type.String(),
  states: Type.Array(Type.String()),
  initial: Type.String(),
  transitions: Type.Array(Type.Object({ from: Type.String(), to: Type.String() })),
  state: Type.String(),
  moves: Type.Integer(),
  created_by: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  history: Type.Array(Type.Object({ from: Type.String(), to: Type.String(), at: Type.String({ format: 'date-time' }), cause: Type.Unknown() })),
}, { title: 'StateMachine' });

function machineShape(view: StateMachineView) {
  return {
    name: view.name,
    states: view.states,
    initial: view.initial,
    transitions: view.transitions,
    state: view.state,
    moves: view.moves,
    created_by: view.created_by,
    created_at: isoTime(view.created_at_ms)!,
    updated_at: isoTime(view.updated_at_ms)!,
    history: view.history.map((move) => ({ from: move.from, to: move.to, at: isoTime(move.at_ms)!, cause: move.cause })),
  };
}

function pageOf(query: { page?: number; page_size?: number }) {
  const page = Math.max(1, query.page || 1);
  const page_size = Math.min(formPolicy.list_page_size_max, query.page_size || formPolicy.list_page_size_default);
  return { page, page_size };
}
function pagination(page: number, page_size: number, total: number) {
  return { page, page_size, total, has_more: page * page_size < total };
}

type SettingsBodyType = Omit<CreateBodyType, 'name' | 'title' | 'schema'>;

function refuse(field: string, message: string): never {
  throw new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field: `body.${field}`, message }] });
}

/** Execution hooks from the body, checked and normalised (create and PATCH). */
function hooksOf(hooks: NonNullable<NonNullable<SettingsBodyType['execution']>['on_valid_submission']>, attempt_timeout_ms: number): ExecutionHook[] {
  return hooks.map((hook, index) => {
    const field = `execution.on_valid_submission.${index}`;
    if (hook.kind === 'job') {
      if (!hook.queue || !isQueueName(hook.queue)) refuse(`${field}.queue`, 'is required for a job hook: a queue name (letters, digits, - _ . :, 1-100 characters)');
      if (!hook.target) refuse(`${field}.target`, 'is required for a job hook: {url, secret, headers?}');
      let url: URL | null = null;
      try {
        url = new URL(hook.target.url);
      } catch {
        url = null;
      }
      if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) refuse(`${field}.target.url`, 'must be an http or https URL');
      if (serialisedBytes(hook.payload_template ?? null) > 16 * 1024) refuse(`${field}.payload_template`, 'must serialise to at most 16384 bytes');
      return { kind: 'job', queue: hook.queue, payload_template: hook.payload_template ?? null, target: { url: hook.target.url, secret: hook.target.secret, headers: hook.target.headers ?? {} }, attempt_timeout_ms };
    }
    if (hook.kind === 'webhook') {
      if (!hook.webhook_id) refuse(`${field}.webhook_id`, 'is required for a webhook hook');
      return { kind: 'webhook', webhook_id: hook.webhook_id };
    }
    if (!hook.fsm_name || !STATE_NAME_PATTERN.test(hook.fsm_name)) refuse(`${field}.fsm_name`, 'is required for an fsm hook: 1-128 letters, digits and . _ : -');
    if (!hook.target_state) refuse(`${field}.target_state`, 'is required for an fsm hook');
    return { kind: 'fsm', fsm_name: hook.fsm_name, target_state: hook.target_state };
  });
}

/** Display fields from the body, with their defaults; a name twice, or encryption without the field key, is refused. */
function fieldsOf(fields: NonNullable<SettingsBodyType['fields']>): FormSettings['fields'] {
  if (fields.some((field) => field.encrypted) && !hasFieldKey()) refuse('fields.encrypted', 'needs the field key, which a cluster node has only when FORMS_FIELD_KEY is set (docs/api/forms.md, "Encrypted fields")');
  const names = new Set<string>();
  for (const field of fields) {
    if (names.has(field.name)) refuse('fields', `names ${field.name} twice`);
    names.add(field.name);
  }
  return fields.map((field) => ({ name: field.name, label: field.label ?? field.name, kind: field.kind ?? 'text', encrypted: field.encrypted ?? false }));
}

/** Conditional rules from the body, reduced to what is stored (create and PATCH). */
function rulesOf(rules: NonNullable<SettingsBodyType['conditional_logic']>): FormSettings['conditional_logic'] {
  return rules.map((rule) => ({ when: rule.when, require: rule.require }));
}

/** Settings from the body, with the documented defaults; features not built yet are refused, never silently dropped. */
function settingsOf(body: SettingsBodyType, attempt_timeout_ms: number): FormSettings {
  if (body.multipart?.enabled && (body.multipart.allowed_content_types?.length ?? 0) === 0) refuse('multipart.allowed_content_types', 'must name at least one type when multipart is enabled');
  return {
    multipart: {
      enabled: body.multipart?.enabled ?? false,
      allowed_content_types: [...new Set(body.multipart?.allowed_content_types ?? [])],
      blob_bucket: body.multipart?.blob_bucket ?? 'default',
      max_file_bytes: body.multipart?.max_file_bytes ?? formPolicy.max_file_bytes_default,
      max_files: body.multipart?.max_files ?? formPolicy.max_files_default,
    },
    execution: { on_valid_submission: hooksOf(body.execution?.on_valid_submission ?? [], attempt_timeout_ms) },
    fields: fieldsOf(body.fields ?? []),
    conditional_logic: rulesOf(body.conditional_logic ?? []),
    drafts: { enabled: body.drafts?.enabled ?? false, ttl_seconds: body.drafts?.ttl_seconds ?? formPolicy.draft_ttl_seconds_default },
    spam: {
      allow_anonymous: body.spam?.allow_anonymous ?? false,
      honeypot_fields: body.spam?.honeypot_fields ?? [],
      min_submit_ms: body.spam?.min_submit_ms ?? 0,
      rate_limit_per_minute: body.spam?.rate_limit_per_minute ?? formPolicy.public_per_address_per_minute_default,
    },
    approval: { enabled: body.approval?.enabled ?? false, approver_role: body.approval?.approver_role ?? 'owner', kind: 'single' },
  };
}

/** Only the keys of `group` that `keys` names and the body gave (a merge must not overwrite with undefined). */
function present<T extends object, K extends keyof T>(group: T, keys: readonly K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (group[key] !== undefined) out[key] = group[key];
  return out;
}

/** A PATCH body as a FormSettingsPatch: lists checked as at creation, groups reduced to the keys given. */
function settingsPatchOf(body: PatchBodyType, attempt_timeout_ms: number): FormSettingsPatch {
  const patch: FormSettingsPatch = {};
  if (body.title !== undefined) patch.title = body.title;
  if (body.fields !== undefined) patch.fields = fieldsOf(body.fields);
  if (body.conditional_logic !== undefined) patch.conditional_logic = rulesOf(body.conditional_logic);
  if (body.execution?.on_valid_submission !== undefined) patch.execution = { on_valid_submission: hooksOf(body.execution.on_valid_submission, attempt_timeout_ms) };
  if (body.drafts) patch.drafts = present(body.drafts, ['enabled', 'ttl_seconds']);
  if (body.spam) patch.spam = present(body.spam, ['allow_anonymous', 'honeypot_fields', 'min_submit_ms', 'rate_limit_per_minute']);
  if (body.approval) patch.approval = present(body.approval, ['enabled', 'approver_role']);
  if (body.multipart) {
    const multipart = present(body.multipart, ['enabled', 'allowed_content_types', 'blob_bucket', 'max_file_bytes', 'max_files']);
    patch.multipart = multipart.allowed_content_types ? { ...multipart, allowed_content_types: [...new Set(multipart.allowed_content_types)] } : multipart;
  }
  return patch;
}

function formShape(form: FormView) {
  return {
    form_id: form.form_id,
    name: form.name,
    title: form.title,
    status: form.status,
    version: form.version,
    schema: form.schema,
    fields: form.fields,
    conditional_logic: form.conditional_logic,
    drafts: form.drafts,
    spam: form.spam,
    approval: form.approval,
    // A job hook's secret is not shown: any member of the tenant may read the form.
    execution: { on_valid_submission: form.execution.on_valid_submission.map((hook) => (hook.kind === 'job' ? { kind: hook.kind, queue: hook.queue, payload_template: hook.payload_template, target: { url: hook.target.url, headers: hook.target.headers } } : hook)) },
    multipart: form.multipart,
    submission_count: form.submission_count,
    created_by: form.created_by,
    created_at: isoTime(form.created_at_ms)!,
    updated_at: isoTime(form.updated_at_ms)!,
  };
}

function hookShape(run: HookRun) {
  return {
    index: run.index,
    ...(run.kind === 'webhook' ? { webhook_id: run.target, event_id: run.event_id } : run.kind === 'job' ? { queue: run.target, job_id: run.event_id } : { fsm_name: run.target }),
    status: run.status,
    attempts: run.attempts,
    error: run.error,
    updated_at: isoTime(run.updated_at_ms),
  };
}

/** Each hook's progress, by kind (null when the form has no hook of that kind); approval shows the decision. */
function executionStatus(submission: { status: string; approval?: Submission['approval']; hooks: HookRun[] }) {
  const approval = submission.status === 'submitted' ? null : { status: submission.status, ...(submission.approval && { decided_by: submission.approval.decided_by, decided_at: isoTime(submission.approval.decided_at_ms), note: submission.approval.note }) };
  const of = (kind: HookRun['kind']) => {
    const runs = submission.hooks.filter((run) => run.kind === kind);
    return runs.length === 0 ? null : runs.map(hookShape);
  };
  return { approval, job: of('job'), webhook: of('webhook'), fsm: of('fsm') };
}

function ackShape(ack: SubmissionAck) {
  return { submission_id: ack.submission_id, form_id: ack.form_id, form_version: ack.form_version, status: ack.status, execution_status: executionStatus(ack) };
}

function submissionShape(submission: Submission) {
  return {
    submission_id: submission.submission_id,
    form_id: submission.form_id,
    form_version: submission.form_version,
    status: submission.status,
    anonymous: submission.anonymous,
    submitted_by: submission.submitted_by,
    data: submission.data,
    attachments: (submission.attachments ?? []).map(publicAttachment),
    validation: { status: 'valid', errors: [], schema_version: submission.form_version },
    execution_status: executionStatus(submission),
    created_at: isoTime(submission.created_at_ms)!,
    updated_at: isoTime(submission.updated_at_ms)!,
  };
}

function draftShape(draft: Draft) {
  return {
    draft_id: draft.draft_id,
    form_id: draft.form_id,
    form_version: draft.form_version,
    subject: draft.subject,
    partial_data: draft.partial_data,
    expires_at: isoTime(draft.expires_at_ms)!,
    updated_at: isoTime(draft.updated_at_ms)!,
  };
}

/**
 * The caller, and the tenant it acts in: the credential's. `acrossTenants`
 * (reading one form, its submissions, drafts and files, and approving or
 * rejecting): a platform admin acts in the tenant the form id names, as
 * admins read any tenant's agents and attestations, so a form whose
 * approver_role is "admin" has its deciders whatever tenant it is in.
 * Changing a form, submitting and retrying stay in the admin's own tenant;
 * an organization's API key acts for its own organization only. Anyone else
 * naming another tenant's form gets askForm's 404.
 */
function callerOf(request: FastifyRequest, acrossTenants?: { form_id: string }): { tenant: string; caller: FormCaller } {
  const principal = requirePrincipal(request);
  const caller = { user_id: principal.user_id, admin: principal.role === 'admin' };
  const formTenant = acrossTenants === undefined ? null : tenantOfFormId(acrossTenants.form_id);
  if (formTenant !== null && caller.admin && principal.org_id === null) return { tenant: formTenant, caller };
  return { tenant: principal.tenant, caller };
}

/** How often this node looks for half-written uploads a crash left on its disk (http/form-blob-sweep.ts). */
const PARTIAL_UPLOAD_SWEEP_MS = 10 * 60_000;

export function formRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  setFieldKey(formsFieldKey(services.config));
  // File times are the wall clock's, so the sweep compares them with Date.now(), not the node's (injectable) clock.
  const staleAfterMs = services.config.httpRequestTimeoutMs + 60_000;
  const sweep = () => {
    sweepPartialUploads(services.config.dataDir, staleAfterMs, Date.now()).then(
      (removed) => {
        if (removed > 0) app.log.info({ removed }, 'removed half-written uploads');
      },
      (error: unknown) => app.log.warn({ err: error }, 'sweep of half-written uploads failed'),
    );
  };
  const firstSweep = setTimeout(sweep, 5_000).unref();
  const sweeps = setInterval(sweep, PARTIAL_UPLOAD_SWEEP_MS).unref();
  app.addHook('onClose', (_instance, done) => {
    clearTimeout(firstSweep);
    clearInterval(sweeps);
    done();
  });
  /** One ask to the form; a form of another tenant (or an id that is none) is 404. */
  const askForm = <Reply>(tenant: string, form_id: string, message: FormMessage, readOnly = false): Promise<Reply> => {
    if (tenantOfFormId(form_id) !== tenant) throw new ServiceError('not_found', 'No such form.');
    return services.actors.ask<Reply>(FORM_KIND, formKey(tenant, form_id), message, { readOnly });
  };
  const tags = ['forms'];
  /** A webhook hook must name a webhook of the tenant that the creator may manage (read-only ask). */
  const checkWebhook = async (tenant: string, caller: FormCaller, webhook_id: string, index: number) => {
    const field = `body.execution.on_valid_submission.${index}.webhook_id`;
    const refused = () => new ServiceError('BAD_REQUEST', `${field} names no webhook of yours.`, { details: [{ field, message: 'names no webhook of yours' }] });
    if (webhook_id.length > 128) throw refused();
    const view = await services.actors.ask<WebhookView>(WEBHOOK_KIND, webhook_id, { op: 'get', caller: { ...caller, tenant } } satisfies WebhookMessage, { readOnly: true }).catch((error: unknown) => {
      if (error instanceof ServiceError && error.statusCode < 500) throw refused();
      throw error;
    });
    if (view.tenant !== tenant) throw refused();
  };
  /**
   * An fsm hook must name a state machine of the tenant that the caller may move by hand (its creator or an
   * admin): the hook then moves it with the caller's authority, so a form cannot move another member's machine.
   */
  const authorizeStateMachine = async (tenant: string, caller: FormCaller, hook: ExecutionHook, index: number) => {
    if (hook.kind !== 'fsm') return;
    const field = `body.execution.on_valid_submission.${index}.fsm_name`;
    const view = await services.actors
      .ask<StateMachineView | null>(FORM_STATE_MACHINE_KIND, stateMachineKey(tenant, hook.fsm_name), { op: 'get' }, { readOnly: true })
      .catch((error: unknown) => {
        if (error instanceof ServiceError && error.statusCode < 500) return null;
        throw error;
      });
    if (!view || (!caller.admin && view.created_by !== caller.user_id)) {
      throw new ServiceError('BAD_REQUEST', `${field} names no state machine you may move (define it first with PUT /api/v1/forms/state-machines/{name}; only its creator or an admin may name it).`, {
        details: [{ field, message: 'names no state machine you may move' }],
      });
    }
    hook.authorized_by = caller;
  };
  const checkHooks = (tenant: string, caller: FormCaller, hooks: ExecutionHook[]) =>
    Promise.all(hooks.map((hook, index) => (hook.kind === 'webhook' ? checkWebhook(tenant, caller, hook.webhook_id, index) : authorizeStateMachine(tenant, caller, hook, index))));

  app.get<{ Querystring: Static<typeof FormListQuery> }>('/api/v1/forms', {
    onRequest: authenticate,
    schema: {
      tags, summary: "The tenant's forms. Deprecated and disabled forms only with include_inactive (admins) or a status filter naming them.",
      security: bearerSecurity, querystring: FormListQuery,
      response: { 200: Type.Object({ forms: Type.Array(FormSchema), pagination: Pagination }), ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { q, status, include_inactive, sort_by, sort_order } = request.query;
    if (include_inactive && principal.role !== 'admin') throw new ServiceError('forbidden', 'include_inactive is for platform admins.');
    const { page, page_size } = pageOf(request.query);
    const query = { q: q ?? null, status: status ?? null, include_inactive: include_inactive ?? false, page, page_size, sort_by: sort_by ?? 'created_at', sort_order: sort_order ?? 'desc' } as const;
    const result = await services.actors.ask<Page<FormView>>(FORM_INDEX_KIND, formIndexKey(principal.tenant), { op: 'list', query }, { readOnly: true });
    return { forms: result.items.map(formShape), pagination: pagination(page, page_size, result.total) };
  });

  app.post<{ Body: CreateBodyType }>('/api/v1/forms', {
    onRequest: authenticate,
    schema: {
      tags, summary: 'Create a form (status draft, version 1). An invalid JSON Schema is 400 invalid_json_schema.',
      security: bearerSecurity, body: CreateBody,
      response: { 201: FormCreated, ...errorResponses(...bearerErrors) },
    },
  }, async (request, reply) => {
    const { tenant, caller } = callerOf(request);
    const settings = settingsOf(request.body, jobSettings(services.config).attempt_timeout_ms);
    await checkHooks(tenant, caller, settings.execution.on_valid_submission);
    const form_id = formIdFor(tenant, randomBytes(12).toString('base64url'));
    const form = await askForm<FormView>(tenant, form_id, { op: 'create', tenant, caller, name: request.body.name, title: request.body.title, schema: request.body.schema, settings });
    return reply.code(201).send({ form_id: form.form_id, name: form.name, status: form.status, version: form.version, created_at: isoTime(form.created_at_ms)! });
  });

  app.get<{ Params: Static<typeof FormParams> }>('/api/v1/forms/:form_id', {
    onRequest: authenticate,
    schema: { tags, summary: 'A form with its current schema version.', security: bearerSecurity, params: FormParams, response: { 200: FormSchema, ...errorResponses(...bearerErrors, 404) } },
  }, async (request) => {
    const { tenant, caller } = callerOf(request, request.params);
    return formShape(await askForm<FormView>(tenant, request.params.form_id, { op: 'get', caller }, true));
  });

  app.patch<{ Params: Static<typeof FormParams>; Body: PatchBodyType }>('/api/v1/forms/:form_id', {
    onRequest: authenticate,
    schema: {
      tags, summary: "Change a form's title and settings (owners and admins). Lists (fields, conditional_logic, execution.on_valid_submission) replace the current ones; the other groups merge key by key. The schema version does not change.",
      security: bearerSecurity, params: FormParams, body: PatchBody,
      response: { 200: FormSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    const patch = settingsPatchOf(request.body, jobSettings(services.config).attempt_timeout_ms);
    // Unknown fields are ignored, so a body of only those is as empty as {} (and would still bump updated_at).
    if (Object.keys(patch).length === 0) throw new ServiceError('BAD_REQUEST', 'The body changes nothing: give at least one of title, fields, conditional_logic, execution, drafts, spam, approval, multipart.');
    await checkHooks(tenant, caller, patch.execution?.on_valid_submission ?? []);
    return formShape(await askForm<FormView>(tenant, request.params.form_id, { op: 'update_settings', caller, patch }));
  });

  app.put<{ Params: Static<typeof FormParams>; Body: { schema: object } }>('/api/v1/forms/:form_id/schema', {
    onRequest: authenticate,
    schema: {
      tags, summary: 'A new schema version (version + 1); earlier submissions keep the version they were validated against. Owners and admins.',
      security: bearerSecurity, params: FormParams, body: Type.Object({ schema: JsonObject }),
      response: { 200: FormSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    return formShape(await askForm<FormView>(tenant, request.params.form_id, { op: 'put_schema', caller, schema: request.body.schema }));
  });

  app.post<{ Params: Static<typeof FormParams>; Body: { status: (typeof FORM_STATUSES)[number] } }>('/api/v1/forms/:form_id/status', {
    onRequest: authenticate,
    schema: {
      tags, summary: 'Move the form through its status state machine (docs/api/forms.md). Not allowed: 409 invalid_status_transition.',
      security: bearerSecurity, params: FormParams, body: Type.Object({ status: StatusEnum }),
      response: { 200: FormSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    return formShape(await askForm<FormView>(tenant, request.params.form_id, { op: 'set_status', caller, status: request.body.status }));
  });

  app.post<{ Params: Static<typeof FormParams>; Body: { partial_data: Record<string, unknown> } }>('/api/v1/forms/:form_id/drafts', {
    onRequest: authenticate,
    // The answer holds the draft's encrypted fields in clear for the form's owners: an Idempotency-Key does not store it (http/secret-responses.ts).
    config: { secretResponse: true },
    schema: {
      tags, summary: 'Save a draft (not validated); it expires after drafts.ttl_seconds. Needs drafts.enabled and an active form.',
      security: bearerSecurity, params: FormParams, body: Type.Object({ partial_data: JsonObject }),
      response: { 201: DraftSchema, ...errorResponses(...bearerErrors, 404, 409) },
    },
  }, async (request, reply) => {
    const { tenant, caller } = callerOf(request);
    const draft = await askForm<Draft>(tenant, request.params.form_id, { op: 'save_draft', caller, partial_data: request.body.partial_data });
    return reply.code(201).send(draftShape(draft));
  });

  app.get<{ Params: Static<typeof DraftParams> }>('/api/v1/forms/:form_id/drafts/:draft_id', {
    onRequest: authenticate,
    schema: {
      tags, summary: "A draft with its partial_data: its subject, the form's owners and admins. Expired: 404.",
      security: bearerSecurity, params: DraftParams, response: { 200: DraftSchema, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request, request.params);
    return draftShape(await askForm<Draft>(tenant, request.params.form_id, { op: 'get_draft', caller, draft_id: request.params.draft_id }, true));
  });

  app.get<{ Params: Static<typeof FormParams>; Querystring: Static<typeof SubmissionListQuery> }>('/api/v1/forms/:form_id/submissions', {
    onRequest: authenticate,
    schema: {
      tags, summary: "Submissions: every one for the form's owners and admins (submitter filter theirs only), the caller's own for others.",
      security: bearerSecurity, params: FormParams, querystring: SubmissionListQuery,
      response: { 200: Type.Object({ submissions: Type.Array(SubmissionSchema), pagination: Pagination }), ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request, request.params);
    const { page, page_size } = pageOf(request.query);
    const query = { status: request.query.status ?? null, submitter: request.query.submitter ?? null, page, page_size, sort_by: request.query.sort_by ?? 'created_at', sort_order: request.query.sort_order ?? 'desc' } as const;
    const result = await askForm<Page<Submission>>(tenant, request.params.form_id, { op: 'list_submissions', caller, query }, true);
    return { submissions: result.items.map(submissionShape), pagination: pagination(page, page_size, result.total) };
  });

  app.post<{ Params: Static<typeof FormParams>; Body: Static<typeof SubmitBody> }>('/api/v1/forms/:form_id/submissions', {
    onRequest: authenticate,
    schema: {
      tags, summary: 'Submit: validated against the current schema version and the conditional logic, then committed. Invalid: 400 submission_invalid; form not active: 409.',
      security: bearerSecurity, params: FormParams, body: SubmitBody,
      response: { 201: SubmissionAckSchema, ...errorResponses(...bearerErrors, 404, 409) },
    },
  }, async (request, reply) => {
    const { tenant, caller } = callerOf(request);
    const ack = await askForm<SubmissionAck>(tenant, request.params.form_id, { op: 'submit', caller, data: request.body.data as Record<string, unknown> });
    return reply.code(201).send(ackShape(ack));
  });

  app.post<{ Params: Static<typeof FormParams>; Body: Static<typeof BatchBody> }>('/api/v1/forms/:form_id/submissions/batch', {
    onRequest: authenticate,
    schema: {
      tags, summary: `Submit up to ${formPolicy.batch_submissions_max} in order, fail-fast: the first refused one stops the batch (\`failed\`), the ones before it are committed.`,
      security: bearerSecurity, params: FormParams, body: BatchBody,
      response: {
        200: Type.Object({
          count: Type.Integer(),
          results: Type.Array(SubmissionAckSchema),
          failed: Type.Union([Type.Null(), Type.Object({ index: Type.Integer(), code: Type.String(), message: Type.String(), details: Type.Unknown() })]),
        }),
        ...errorResponses(...bearerErrors, 404, 409),
      },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    const items = request.body.submissions.map((item) => item.data as Record<string, unknown>);
    const outcome = await askForm<{ results: SubmissionAck[]; failed: { index: number; code: string; message: string; details: unknown } | null }>(
      tenant, request.params.form_id, { op: 'submit_batch', caller, items },
    );
    return { count: outcome.results.length, results: outcome.results.map(ackShape), failed: outcome.failed };
  });

  app.post<{ Params: Static<typeof FormParams>; Body: Static<typeof PublicBody> }>('/api/v1/forms/:form_id/submissions/public', {
    schema: {
      tags, summary: 'Anonymous submission (no bearer) to a form with spam.allow_anonymous: honeypots, min_submit_ms and a per-address rate limit guard it.',
      params: FormParams, body: PublicBody,
      response: { 201: SubmissionAckSchema, ...errorResponses(400, 403, 404, 409, 413, 415, 429, 503) },
    },
  }, async (request, reply) => {
    const tenant = tenantOfFormId(request.params.form_id);
    if (tenant === null) throw new ServiceError('not_found', 'No such form.');
    const started_at_ms = request.body.started_at === undefined ? null : Date.parse(request.body.started_at);
    const message: FormMessage = { op: 'submit_public', address: request.ip, data: request.body.data as Record<string, unknown>, started_at_ms: Number.isFinite(started_at_ms) ? started_at_ms : null };
    const ack = await askForm<SubmissionAck>(tenant, request.params.form_id, message);
    return reply.code(201).send(ackShape(ack));
  });

  app.get<{ Params: Static<typeof SubmissionParams> }>('/api/v1/forms/:form_id/submissions/:submission_id', {
    onRequest: authenticate,
    schema: {
      tags, summary: "A submission: its submitter, the form's owners and admins.",
      security: bearerSecurity, params: SubmissionParams, response: { 200: SubmissionSchema, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request, request.params);
    return submissionShape(await askForm<Submission>(tenant, request.params.form_id, { op: 'get_submission', caller, submission_id: request.params.submission_id }, true));
  });

  app.get<{ Params: Static<typeof AttachmentParams> }>('/api/v1/forms/:form_id/submissions/:submission_id/attachments/:blob_id', {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "A submission's file, as uploaded (docs/api/forms.md, \"Downloads\"): its submitter, the form's owners and admins. ETag is the SHA-256; If-None-Match gives 304.",
      security: bearerSecurity, params: AttachmentParams,
      response: {
        200: { description: 'The file: Content-Type as sniffed at upload, Content-Disposition attachment with its name.', content: { 'application/octet-stream': { schema: Type.String({ format: 'binary' }) } } },
        304: { description: 'Not modified (If-None-Match named its ETag).', type: 'null' },
        ...errorResponses(...bearerErrors, 404),
      },
    },
  }, async (request, reply) => {
    const { tenant, caller } = callerOf(request, request.params);
    const { form_id, submission_id, blob_id } = request.params;
    // The submission's read decides who may have its files.
    const submission = await askForm<Submission>(tenant, form_id, { op: 'get_submission', caller, submission_id }, true);
    const attachment = (submission.attachments ?? []).find((candidate) => candidate.blob_id === blob_id);
    if (attachment === undefined) throw new ServiceError('not_found', 'The submission has no such attachment.');
    const ifNoneMatch = request.headers['if-none-match'];
    const cluster = services.cluster;
    const self = services.config.cluster?.nodeId;
    if (cluster !== undefined && attachment.node_id !== undefined && attachment.node_id !== self) {
      // Another node's disk holds it: pass the request on (once) and stream its answer back.
      if (request.headers[ATTACHMENT_HOP_HEADER] !== undefined) throw unavailable('The file is not on the node it was passed to.');
      const memberUrl = cluster.memberHttpUrl(attachment.node_id);
      if (memberUrl === undefined) throw unavailable(`The node holding this file (${attachment.node_id}) is not in the cluster now.`);
      const answer = await passOn(memberUrl, request.url, { authorization: request.headers.authorization, ifNoneMatch });
      reply.code(answer.status).headers(answer.headers);
      return reply.send(answer.body ?? undefined);
    }
    if (notModified(ifNoneMatch, attachment)) return reply.code(304).header('etag', etagOf(attachment)).send();
    const file = await openStoredFile(services.config.dataDir, attachment);
    if (file === null) throw new ServiceError('not_found', "The attachment's file is no longer stored.");
    return reply.headers(downloadHeaders(attachment)).send(file);
  });

  for (const decision of ['approve', 'reject'] as const) {
    app.post<{ Params: Static<typeof SubmissionParams>; Body: Static<typeof DecideBody> }>(`/api/v1/forms/:form_id/submissions/:submission_id/${decision}`, {
      onRequest: authenticate,
      // The submission as its owners read it: encrypted fields in clear, never kept by the Idempotency-Key store.
      config: { secretResponse: true },
      schema: {
        tags, summary: `${decision === 'approve' ? 'Approve' : 'Reject'} a pending_approval submission (approval.enabled): the approver role decides once.`,
        security: bearerSecurity, params: SubmissionParams, body: DecideBody,
        response: { 200: SubmissionSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
      },
    }, async (request) => {
      const { tenant, caller } = callerOf(request, request.params);
      const message: FormMessage = { op: 'decide', caller, submission_id: request.params.submission_id, decision: decision === 'approve' ? 'approved' : 'rejected', note: request.body?.note ?? '' };
      return submissionShape(await askForm<Submission>(tenant, request.params.form_id, message));
    });
  }

  app.post<{ Params: Static<typeof SubmissionParams> }>('/api/v1/forms/:form_id/submissions/:submission_id/retry', {
    onRequest: authenticate,
    config: { secretResponse: true },
    schema: {
      tags, summary: "Run the submission's failed hooks again (a new attempt each). No failed hook: 409 conflict. Owners and admins.",
      security: bearerSecurity, params: SubmissionParams,
      response: { 200: SubmissionSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    return submissionShape(await askForm<Submission>(tenant, request.params.form_id, { op: 'retry', caller, submission_id: request.params.submission_id }));
  });

  const machinePath = '/api/v1/forms/state-machines/:name';
  const askMachine = (tenant: string, name: string, message: StateMachineMessage, readOnly = false) =>
    services.actors.ask<StateMachineView>(FORM_STATE_MACHINE_KIND, stateMachineKey(tenant, name), message, { readOnly });

  app.put<{ Params: Static<typeof MachineParams>; Body: Static<typeof MachineBody> }>(machinePath, {
    onRequest: authenticate,
    schema: {
      tags, summary: 'Create or redefine a named state machine that fsm hooks move (docs/api/forms.md, "State machines").',
      security: bearerSecurity, params: MachineParams, body: MachineBody,
      response: { 200: MachineSchema, ...errorResponses(...bearerErrors, 403, 409) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    const { states, initial, transitions } = request.body;
    return machineShape(await askMachine(tenant, request.params.name, { op: 'put', caller, name: request.params.name, definition: { states, initial, transitions } }));
  });

  app.get<{ Params: Static<typeof MachineParams> }>(machinePath, {
    onRequest: authenticate,
    schema: {
      tags, summary: 'A state machine: its definition, current state and newest moves.',
      security: bearerSecurity, params: MachineParams, response: { 200: MachineSchema, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const { tenant } = callerOf(request);
    return machineShape(await askMachine(tenant, request.params.name, { op: 'get' }, true));
  });

  app.post<{ Params: Static<typeof MachineParams>; Body: { target_state: string } }>(`${machinePath}/move`, {
    onRequest: authenticate,
    schema: {
      tags, summary: 'Move the machine by hand (its creator or an admin). Not an allowed move: 409 invalid_status_transition.',
      security: bearerSecurity, params: MachineParams, body: Type.Object({ target_state: STATE }),
      response: { 200: MachineSchema, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const { tenant, caller } = callerOf(request);
    return machineShape(await askMachine(tenant, request.params.name, { op: 'move', target_state: request.body.target_state, cause: { user_id: caller.user_id }, caller }));
  });

  // Its own scope: the multipart parser below hands the raw stream to the route and applies to this route alone.
  app.register(async (app) => {
    app.addContentTypeParser('multipart/form-data', (_request, _payload, done) => done(null, undefined));
    app.post<{ Params: Static<typeof FormParams> }>('/api/v1/forms/:form_id/submissions/multipart', {
      onRequest: authenticate,
      schema: {
        tags, summary: 'Submit with files (multipart/form-data: a `data` field holding the JSON object, and file fields). Files stream to the blob store; type sniffed; limits enforced while streaming.',
        security: bearerSecurity, params: FormParams,
        response: { 201: SubmissionAckSchema, ...errorResponses(...bearerErrors, 404, 409) },
      },
    }, async (request, reply) => {
      const { tenant, caller } = callerOf(request);
      const { form_id } = request.params;
      if (!request.headers['content-type']?.toLowerCase().startsWith('multipart/form-data')) {
        throw new ServiceError('unsupported_media_type', 'This route takes multipart/form-data.');
      }
      // The settings first (a read), so the limits apply while the body streams.
      if (tenantOfFormId(form_id) !== tenant) throw new ServiceError('not_found', 'No such form.');
      const form = await services.actors.ask<FormView>(FORM_KIND, formKey(tenant, form_id), { op: 'get', caller } satisfies FormMessage, { readOnly: true });
      if (!form.multipart.enabled) throw new ServiceError('conflict', 'This form does not take multipart submissions (multipart.enabled is false).');
      if (form.status !== 'active') throw new ServiceError('form_not_accepting', `The form is ${form.status}; only an active form takes submissions.`, { details: { status: form.status } });
      const directory = join(blobDirectory(services.config.dataDir, tenant, form_id), form.multipart.blob_bucket);
      const upload = await receiveUpload(request.raw, request.headers, form.multipart, directory, formPolicy.data_bytes_max);
      const holder = services.config.cluster === undefined ? {} : { node_id: services.config.cluster.nodeId };
      const attachments = upload.attachments.map((attachment) => ({ ...attachment, path: relative(services.config.dataDir, join(directory, attachment.blob_id)), ...holder }));
      try {
        const ack = await services.actors.ask<SubmissionAck>(FORM_KIND, formKey(tenant, form_id), { op: 'submit', caller, data: upload.data, attachments });
        return reply.code(201).send(ackShape(ack));
      } catch (error) {
        // Refused (invalid data, the form changed meanwhile): no file stays behind.
        await upload.discard();
        throw error;
      }
    });
  });
}
