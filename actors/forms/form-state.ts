import { ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult, serialisedBytes } from '../../runtime/index.js';
import { flowCall, type FlowAnswer } from '../flow-call.js';
import { WEBHOOK_KIND, type WebhookMessage } from '../webhooks/messages.js';
import { JOB_QUEUE_KIND, JOB_WEBHOOK_EVENTS, jobIdFor, jobQueueKey, type QueueMessage } from '../jobs/messages.js';
import { fillTemplate } from './payload-template.js';
import { isSealed, openField, sealField } from './field-crypto.js';
import { canTransition, conditionalErrors, ruleProblems, schemaProperties, takesSubmissions } from './definition.js';
import {
  FORM_INDEX_KIND,
  FORM_KIND,
  FORM_STATE_MACHINE_KIND,
  FORM_SUBMISSION_EVENT_TYPE,
  formIndexKey,
  stateMachineKey,
  type Attachment,
  type HookRun,
  type StateMachineMessage,
  formPolicy,
  type Draft,
  type FormCaller,
  type FormDefinition,
  type FormMessage,
  type FormSettings,
  type FormSettingsPatch,
  type FormView,
  type Page,
  type Submission,
  type SubmissionAck,
  type SubmissionQuery,
  publicAttachment,
} from './messages.js';
import { compileSchema, describeErrors, type CompiledSchema } from './schema-compiler.js';
import { PATTERN_REPETITIONS_MAX, unsafePatternsOf, type UnsafePattern } from './schema-patterns.js';
import { TimeBoundExceeded } from './bounded-run.js';

/**
 * One form: pure domain logic of the `form` actor (storage `records`, key =
 * formKey(tenant, form_id)). Records: `def` (the definition with every schema
 * version), `s:<submission_id>` per submission, `d:<draft_id>` per draft.
 *
 * Not persisted: the compiled validator of each version (compiled on first
 * use after activation, then kept) and the per-address counters of public
 * submissions (a fixed one-minute window; a restart forgets them, which at
 * worst lets one address make one more window's worth).
 */
export interface FormState {
  def: FormDefinition | null;
  submissions: Map<string, Submission>;
  drafts: Map<string, Draft>;
  validators: Map<number, CompiledSchema>;
  public_counters: Map<string, { window_start_ms: number; count: number }>;
  /** The highest submission seq committed. */
  last_seq: number;
}

type Result = TurnResult<FormState, unknown>;

export const DRAFT_EXPIRY_ALARM = 'draft-expiry';
const PUBLIC_WINDOW_MS = 60_000;
/** Counters kept at once; past it the oldest windows are dropped first. */
const PUBLIC_COUNTERS_MAX = 10_000;

export function loadForm(_key: string, records: Iterable<[string, unknown]>): FormState {
  const state: FormState = { def: null, submissions: new Map(), drafts: new Map(), validators: new Map(), public_counters: new Map(), last_seq: 0 };
  for (const [subkey, value] of records) {
    if (subkey === 'def') state.def = value as FormDefinition;
    else if (subkey.startsWith('s:')) {
      const submission = value as Submission;
      state.submissions.set(subkey.slice(2), submission);
      state.last_seq = Math.max(state.last_seq, submission.seq);
    }
    else if (subkey.startsWith('d:')) state.drafts.set(subkey.slice(2), value as Draft);
  }
  return state;
}

export function isOwner(def: FormDefinition, caller: FormCaller): boolean {
  return caller.admin || caller.user_id === def.created_by;
}

export function formView(state: FormState): FormView {
  const { schemas, tenant: _tenant, ...rest } = state.def!;
  return { ...rest, schema: schemas[schemas.length - 1], submission_count: state.submissions.size };
}

function existing(state: FormState): FormDefinition {
  if (!state.def) throw new ServiceError('not_found', 'No such form.');
  return state.def;
}

function requireOwner(def: FormDefinition, caller: FormCaller): void {
  if (!isOwner(def, caller)) throw new ServiceError('forbidden', "Only the form's owner or a platform admin may change it.");
}

/** Checks a schema and the settings that depend on it; throws 400 with every problem. */
export function checkDefinition(schema: object, settings: FormSettings): CompiledSchema {
  if (serialisedBytes(schema) > formPolicy.schema_bytes_max) {
    throw new ServiceError('BAD_REQUEST', `The schema must serialise to at most ${formPolicy.schema_bytes_max} bytes.`, { details: [{ field: 'body.schema', message: 'is too large' }] });
  }
  const compiled = compileSchema(schema);
  if ('error' in compiled) {
    throw new ServiceError('invalid_json_schema', `The schema is not a valid JSON Schema: ${compiled.error}`, { details: [{ field: 'body.schema', message: compiled.error }] });
  }
  const unsafe = unsafePatternsOf(schema, compiled.patterns);
  if (unsafe.length > 0) {
    const details = unsafe.map((found) => ({ field: found.path === null ? 'body.schema' : `body.schema.${found.path}`, message: unsafeMessage(found) }));
    throw new ServiceError('BAD_REQUEST', `${details[0].field} ${details[0].message}`, { details });
  }
  const properties = schemaProperties(schema);
  const problems = ruleProblems(settings.conditional_logic, properties);
  for (const field of settings.fields) {
    if (!properties.has(field.name)) problems.push(`fields names ${field.name}, which is not a property of the schema`);
  }
  for (const honeypot of settings.spam.honeypot_fields) {
    if (properties.has(honeypot)) problems.push(`spam.honeypot_fields names ${honeypot}, which is a property of the schema (a honeypot must be a field real users never fill)`);
  }
  if (settings.multipart.enabled && settings.multipart.allowed_content_types.length === 0) {
    problems.push('multipart.allowed_content_types must name at least one type when multipart is enabled');
  }
  if (problems.length > 0) {
    throw new ServiceError('BAD_REQUEST', problems[0], { details: problems.map((message) => ({ field: 'body', message })) });
  }
  return compiled.validate;
}

function unsafeMessage(found: UnsafePattern): string {
  const where = found.path === null ? ' (a pattern the schema reaches through a $ref)' : '';
  return `${JSON.stringify(found.pattern)}${where} is not one RE2 reads (lookaround, a backreference, or a repetition bound over 1000), so it would run on JavaScript's backtracking engine, where it may backtrack catastrophically (a repetition inside a repetition, more than ${PATTERN_REPETITIONS_MAX} quantifiers, or syntax the checker cannot read); rewrite it without nested quantifiers, or in the syntax RE2 reads (then it runs in linear time)`;
}


/** The definition with a PATCH applied: lists replace, groups merge key by key (messages.ts, FormSettingsPatch). */
export function withSettings(def: FormDefinition, patch: FormSettingsPatch): FormDefinition {
  return {
    ...def,
    title: patch.title ?? def.title,
    fields: patch.fields ?? def.fields,
    conditional_logic: patch.conditional_logic ?? def.conditional_logic,
    execution: patch.execution ?? def.execution,
    drafts: { ...def.drafts, ...patch.drafts },
    spam: { ...def.spam, ...patch.spam },
    approval: { ...def.approval, ...patch.approval },
    multipart: { ...def.multipart, ...patch.multipart },
  };
}

function validatorOf(state: FormState, version: number): CompiledSchema {
  let validate = state.validators.get(version);
  if (!validate) {
    const schema = state.def!.schemas[version - 1];
    const compiled = compileSchema(schema);
    // A stored schema compiled when it was accepted; failing now is a defect, not bad input.
    if ('error' in compiled) throw new Error(`stored schema version ${version} no longer compiles: ${compiled.error}`);
    // A version stored before its patterns were checked as they are now: it takes nothing until a new schema replaces it.
    const unsafe = unsafePatternsOf(schema, compiled.patterns);
    if (unsafe.length > 0) {
      const where = (found: UnsafePattern) => (found.path === null ? 'schema' : `schema.${found.path}`);
      throw new ServiceError('conflict', `Schema version ${version} holds a pattern that may backtrack catastrophically (${where(unsafe[0])}); the form takes no submissions until its owner puts a new schema version.`, {
        details: { schema_version: version, patterns: unsafe.map((found) => ({ path: where(found), pattern: found.pattern })) },
      });
    }
    validate = compiled.validate;
    state.validators.set(version, validate);
  }
  return validate;
}

/** The validation errors of `data` against the current version and the conditional logic (empty when valid). */
export function validationErrors(state: FormState, data: Record<string, unknown>): string[] {
  const def = state.def!;
  if (serialisedBytes(data) > formPolicy.data_bytes_max) return [`/ is larger than ${formPolicy.data_bytes_max} bytes`];
  const validate = validatorOf(state, def.version);
  let valid: boolean;
  try {
    valid = validate(data);
  } catch (error) {
    if (error instanceof TimeBoundExceeded) return [`/ could not be checked against the schema's patterns within ${error.bound_ms} ms (a pattern with lookaround or a backreference backtracks on this data)`];
    throw error;
  }
  const errors = valid ? [] : describeErrors(validate.errors);
  return [...errors, ...conditionalErrors(def.conditional_logic, data)];
}

function indexSend(state: FormState) {
  return { kind: FORM_INDEX_KIND, key: formIndexKey(state.def!.tenant), message: { op: 'upsert', form: formView(state) } };
}

function ack(submission: Submission): SubmissionAck {
  return { submission_id: submission.submission_id, form_id: submission.form_id, form_version: submission.form_version, status: submission.status, hooks: submission.hooks };
}

/**
 * Validates and builds one submission, or returns the error that refuses it;
 * changes nothing (the caller commits).
 */
function prepareSubmission(
  state: FormState,
  data: Record<string, unknown>,
  submitted_by: string,
  anonymous: boolean,
  context: TurnContext,
  attachments: Attachment[] = [],
): Submission | ServiceError {
  const def = state.def!;
  if (attachments.length > 0 && (!def.multipart.enabled || attachments.length > def.multipart.max_files)) {
    return new ServiceError('conflict', 'This form does not take these files (multipart is off, or there are more than max_files).');
  }
  if (!takesSubmissions(def.status)) {
    return new ServiceError('form_not_accepting', `The form is ${def.status}; only an active form takes submissions.`, { details: { status: def.status } });
  }
  if (state.submissions.size >= formPolicy.submissions_per_form_max) {
    return new ServiceError('form_limit_reached', `The form holds the maximum of ${formPolicy.submissions_per_form_max} submissions.`);
  }
  let errors: string[];
  try {
    errors = validationErrors(state, data);
  } catch (error) {
    // A stored version refused now (its patterns): returned, so a batch stops there with its earlier items kept.
    if (error instanceof ServiceError) return error;
    throw error;
  }
  if (errors.length > 0) {
    return new ServiceError('submission_invalid', `The submission does not satisfy form version ${def.version}: ${errors[0]}`, {
      details: { errors, schema_version: def.version },
    });
  }
  const submission_id = context.newId('sub_');
  data = sealFields(def, submission_id, data, context);
  return {
    submission_id,
    seq: state.last_seq + 1,
    form_id: def.form_id,
    form_version: def.version,
    status: def.approval.enabled ? 'pending_approval' : 'submitted',
    anonymous,
    submitted_by,
    data,
    created_at_ms: context.now,
    updated_at_ms: context.now,
    approval: null,
    attachments,
    hooks: def.execution.on_valid_submission.map((hook, index) => ({
      index,
      kind: hook.kind,
      target: hook.kind === 'webhook' ? hook.webhook_id : hook.kind === 'job' ? hook.queue : hook.fsm_name,
      status: 'waiting_approval',
      attempts: 0,
      event_id: null,
      error: null,
      updated_at_ms: context.now,
    })),
  };
}

/**
 * Starts the hook runs `indexes` of a committed submission (a new attempt
 * each): the sends leave through the outbox after this turn's commit, so each
 * attempt reaches its target exactly once, also across a crash.
 * - webhook: the submission is delivered to the named webhook as its own
 *   signed delivery (event type form.submission, id <submission>.<hook>.<attempt>);
 *   the webhook's delivery log and retries take it from there (`dispatched`).
 * - fsm: a flow-call moves the named state machine; its answer makes the run
 *   `succeeded` or `failed`.
 */
export function startHooks(state: FormState, submission: Submission, indexes: number[], now: number): { submission: Submission; sends: ActorSend[] } {
  const def = state.def!;
  const sends: ActorSend[] = [];
  const hooks = submission.hooks.map((run) => {
    if (!indexes.includes(run.index)) return run;
    const hook = def.execution.on_valid_submission[run.index];
    const attempts = run.attempts + 1;
    if (!hook) return { ...run, status: 'failed' as const, attempts, error: { code: 'not_found', message: 'The form no longer has this hook.' }, updated_at_ms: now };
    if (hook.kind === 'webhook') {
      const event_id = `${submission.submission_id}.${run.index}.${attempts}`;
      const message: WebhookMessage = {
        op: 'deliver',
        event: { id: event_id, type: FORM_SUBMISSION_EVENT_TYPE, timestamp_ms: now, data: submissionEventData(submission) },
      };
      sends.push({ kind: WEBHOOK_KIND, key: hook.webhook_id, message });
      return { ...run, status: 'dispatched' as const, attempts, event_id, error: null, updated_at_ms: now };
    }
    const reply_to = { kind: FORM_KIND, key: formKeyOf(def), flow_id: submission.submission_id, step: `hook:${run.index}:${attempts}` };
    if (hook.kind === 'job') {
      // The job id is fixed per attempt, so the queue sees one job per attempt whatever the outbox does.
      const job_id = jobIdFor(hook.queue, `f${run.index}a${attempts}_${submission.submission_id.replace(/[^A-Za-z0-9_-]/g, '')}`.slice(0, 64));
      const call: QueueMessage = {
        op: 'schedule',
        tenant: def.tenant,
        job: {
          job_id,
          user_id: def.created_by,
          url: hook.target.url,
          headers: hook.target.headers,
          secret: hook.target.secret,
          events: [...JOB_WEBHOOK_EVENTS],
          payload: fillTemplate(hook.payload_template, submissionEventData(submission)),
          scheduled_at_ms: now,
          priority: null,
          retry_policy: null,
        },
        job_settings: { attempt_timeout_ms: hook.attempt_timeout_ms },
      };
      sends.push(flowCall(JOB_QUEUE_KIND, jobQueueKey(def.tenant, hook.queue), call, reply_to));
      return { ...run, status: 'running' as const, attempts, event_id: job_id, error: null, updated_at_ms: now };
    }
    const call: StateMachineMessage = { op: 'move', target_state: hook.target_state, cause: { form_id: submission.form_id, submission_id: submission.submission_id }, caller: hook.authorized_by ?? { user_id: def.created_by, admin: false } };
    sends.push(flowCall(FORM_STATE_MACHINE_KIND, stateMachineKey(def.tenant, hook.fsm_name), call, reply_to));
    return { ...run, status: 'running' as const, attempts, error: null, updated_at_ms: now };
  });
  return { submission: { ...submission, hooks }, sends };
}

function formKeyOf(def: FormDefinition): string {
  return JSON.stringify([def.tenant, def.form_id]);
}

/**
 * A record's data with its sealed values opened (`clear`: for the form's
 * owners and admins, and for its hooks) or replaced by "[encrypted]" (for
 * anyone else). `aadOf` names the additional data each value was sealed
 * with. A value that only looks sealed (a string a caller typed into a field
 * that is not encrypted, or one sealed under another key) does not open and
 * is answered as stored, so it never breaks a read.
 */
function revealData(data: Record<string, unknown>, clear: boolean, aadOf: (field: string) => string): Record<string, unknown> {
  const sealed = Object.entries(data).filter(([, value]) => isSealed(value));
  if (sealed.length === 0) return data;
  const revealedData = { ...data };
  for (const [name, value] of sealed) {
    if (!clear) {
      revealedData[name] = '[encrypted]';
      continue;
    }
    try {
      revealedData[name] = openField(value as string, aadOf(name));
    } catch {
      revealedData[name] = value;
    }
  }
  return revealedData;
}

/** The submission with its encrypted fields opened, or replaced by "[encrypted]" (revealData). */
export function revealed(submission: Submission, clear: boolean): Submission {
  const data = revealData(submission.data, clear, (field) => `${submission.form_id}/${submission.submission_id}/${field}`);
  return data === submission.data ? submission : { ...submission, data };
}

/**
 * A submission's data or a draft's partial_data as stored: the values of the
 * form's encrypted fields sealed, with `<form_id>/<record_id>/<field>` as
 * additional data (a draft id is never a submission id, so a draft's sealed
 * value does not open as a submission's).
 */
function sealFields(def: FormDefinition, record_id: string, data: Record<string, unknown>, context: TurnContext): Record<string, unknown> {
  const encrypted = def.fields.filter((field) => field.encrypted && data[field.name] !== undefined);
  if (encrypted.length === 0) return data;
  const sealed = { ...data };
  for (const field of encrypted) sealed[field.name] = sealField(data[field.name], `${def.form_id}/${record_id}/${field.name}`, context.newId('nonce_'));
  return sealed;
}

/** The draft as the caller may read it, as a submission is (readable): drafts saved before sealing hold clear values, read as they are. */
function readableDraft(def: FormDefinition, caller: FormCaller, draft: Draft): Draft {
  const partial_data = revealData(draft.partial_data, isOwner(def, caller), (field) => `${draft.form_id}/${draft.draft_id}/${field}`);
  return partial_data === draft.partial_data ? draft : { ...draft, partial_data };
}

/** What a webhook hook delivers: the submission as its owners read it. */
export function submissionEventData(stored: Submission) {
  const submission = revealed(stored, true);
  return {
    form_id: submission.form_id,
    form_version: submission.form_version,
    submission_id: submission.submission_id,
    status: submission.status,
    anonymous: submission.anonymous,
    submitted_by: submission.submitted_by,
    data: submission.data,
    attachments: submission.attachments.map(publicAttachment),
    created_at_ms: submission.created_at_ms,
  };
}

/** Commits a new submission and, unless it waits for approval, starts its hooks. */
function commitNew(state: FormState, prepared: Submission, writes: RecordWrite[], sends: ActorSend[], now: number): Submission {
  let submission = prepared;
  if (submission.status === 'submitted' && submission.hooks.length > 0) {
    const started = startHooks(state, submission, submission.hooks.map((run) => run.index), now);
    submission = started.submission;
    sends.push(...started.sends);
  }
  commitSubmission(state, submission, writes);
  return submission;
}

function commitSubmission(state: FormState, submission: Submission, writes: RecordWrite[]): void {
  state.submissions.set(submission.submission_id, submission);
  state.last_seq = submission.seq;
  writes.push({ subkey: `s:${submission.submission_id}`, value: submission });
}

/** The submission as the caller may read it: encrypted fields in clear only for owners and admins. */
function readable(state: FormState, caller: FormCaller, submission: Submission): Submission {
  return revealed(submission, isOwner(state.def!, caller));
}

function visibleSubmission(state: FormState, caller: FormCaller, submission_id: string): Submission {
  const def = existing(state);
  const submission = state.submissions.get(submission_id);
  // Another user's submission is as invisible as a missing one.
  if (!submission || (!isOwner(def, caller) && submission.submitted_by !== caller.user_id)) throw new ServiceError('not_found', 'No such submission.');
  return submission;
}

export function listSubmissions(state: FormState, caller: FormCaller, query: SubmissionQuery): Page<Submission> {
  const def = existing(state);
  const owner = isOwner(def, caller);
  if (query.submitter !== null && !owner) throw new ServiceError('forbidden', "The submitter filter is for the form's owners and platform admins.");
  // Others see their own submissions only.
  const submitter = owner ? query.submitter : caller.user_id;
  const matching = [...state.submissions.values()].filter(
    (submission) => (query.status === null || submission.status === query.status) && (submitter === null || submission.submitted_by === submitter),
  );
  const field = query.sort_by === 'updated_at' ? 'updated_at_ms' : 'created_at_ms';
  const sign = query.sort_order === 'asc' ? 1 : -1;
  matching.sort((a, b) => (a[field] - b[field] || a.seq - b.seq) * sign);
  const start = (query.page - 1) * query.page_size;
  return { items: matching.slice(start, start + query.page_size), total: matching.length };
}

function nextDraftExpiry(state: FormState): number | null {
  let next: number | null = null;
  for (const draft of state.drafts.values()) if (next === null || draft.expires_at_ms < next) next = draft.expires_at_ms;
  return next;
}

function countPublic(state: FormState, address: string, now: number, limit: number): boolean {
  const counter = state.public_counters.get(address);
  if (!counter || now - counter.window_start_ms >= PUBLIC_WINDOW_MS) {
    if (state.public_counters.size >= PUBLIC_COUNTERS_MAX) {
      for (const [key, value] of state.public_counters) if (now - value.window_start_ms >= PUBLIC_WINDOW_MS) state.public_counters.delete(key);
      if (state.public_counters.size >= PUBLIC_COUNTERS_MAX) state.public_counters.delete(state.public_counters.keys().next().value!);
    }
    state.public_counters.set(address, { window_start_ms: now, count: 1 });
    return true;
  }
  if (counter.count >= limit) return false;
  counter.count += 1;
  return true;
}

/** An fsm hook's answer: the run of that attempt succeeds or fails; a stale attempt's answer changes nothing. */
function hookAnswered(state: FormState, answer: FlowAnswer, now: number): Result {
  const submission = state.submissions.get(answer.flow_id);
  const match = /^hook:(\d+):(\d+)$/.exec(answer.step);
  if (!submission || !match) return { state };
  const [index, attempt] = [Number(match[1]), Number(match[2])];
  const run = submission.hooks[index];
  if (!run || run.attempts !== attempt || run.status !== 'running') return { state };
  const finished: HookRun = answer.ok
    ? { ...run, status: 'succeeded', error: null, updated_at_ms: now }
    : { ...run, status: 'failed', error: { code: answer.error.code, message: answer.error.message }, updated_at_ms: now };
  const updated: Submission = { ...submission, hooks: submission.hooks.map((other) => (other.index === index ? finished : other)), updated_at_ms: now };
  state.submissions.set(updated.submission_id, updated);
  return { state, writes: [{ subkey: `s:${updated.submission_id}`, value: updated }] };
}

export function stepForm(state: FormState, message: FormMessage | FlowAnswer | AlarmMessage, context: TurnContext): Result {
  const now = context.now;
  switch (message.op) {
    case 'create': {
      if (state.def) throw new ServiceError('conflict', 'A form with this id already exists.');
      const validate = checkDefinition(message.schema, message.settings);
      const form_id = JSON.parse(context.key)[1] as string;
      state.def = {
        form_id,
        tenant: message.tenant,
        name: message.name,
        title: message.title,
        status: 'draft',
        created_by: message.caller.user_id,
        created_at_ms: now,
        updated_at_ms: now,
        version: 1,
        schemas: [message.schema],
        revision: 1,
        ...message.settings,
      };
      state.validators.set(1, validate);
      return { state, reply: formView(state), writes: [{ subkey: 'def', value: state.def }], sends: [indexSend(state)] };
    }

    case 'get':
      existing(state);
      return { state, reply: formView(state) };

    case 'put_schema': {
      const def = existing(state);
      requireOwner(def, message.caller);
      if (def.status === 'disabled') throw new ServiceError('form_not_accepting', 'The form is disabled; its definition no longer changes.', { details: { status: def.status } });
      if (def.schemas.length >= formPolicy.versions_per_form_max) throw new ServiceError('form_limit_reached', `The form holds the maximum of ${formPolicy.versions_per_form_max} versions.`);
      const validate = checkDefinition(message.schema, def);
      const version = def.version + 1;
      state.def = { ...def, version, schemas: [...def.schemas, message.schema], updated_at_ms: now, revision: def.revision + 1 };
      state.validators.set(version, validate);
      return { state, reply: formView(state), writes: [{ subkey: 'def', value: state.def }], sends: [indexSend(state)] };
    }

    case 'update_settings': {
      const def = existing(state);
      requireOwner(def, message.caller);
      if (def.status === 'disabled') throw new ServiceError('form_not_accepting', 'The form is disabled; its definition no longer changes.', { details: { status: def.status } });
      const updated = withSettings(def, message.patch);
      // The settings must still fit the current schema (fields, rules and honeypots name its properties).
      checkDefinition(def.schemas[def.version - 1]!, updated);
      state.def = { ...updated, updated_at_ms: now, revision: def.revision + 1 };
      return { state, reply: formView(state), writes: [{ subkey: 'def', value: state.def }], sends: [indexSend(state)] };
    }

    case 'set_status': {
      const def = existing(state);
      requireOwner(def, message.caller);
      if (!canTransition(def.status, message.status)) {
        throw new ServiceError('invalid_status_transition', `A ${def.status} form cannot become ${message.status}.`, { details: { from: def.status, to: message.status } });
      }
      if (def.status === message.status) return { state, reply: formView(state) };
      state.def = { ...def, status: message.status, updated_at_ms: now, revision: def.revision + 1 };
      return { state, reply: formView(state), writes: [{ subkey: 'def', value: state.def }], sends: [indexSend(state)] };
    }

    case 'submit': {
      existing(state);
      const prepared = prepareSubmission(state, message.data, message.caller.user_id, false, context, message.attachments);
      if (prepared instanceof ServiceError) throw prepared;
      const writes: RecordWrite[] = [];
      const sends: ActorSend[] = [];
      const committed = commitNew(state, prepared, writes, sends, now);
      return { state, reply: ack(committed), writes, sends };
    }

    case 'submit_batch': {
      // Fail-fast: items are taken in order; the first refused one stops the
      // batch, and the ones before it stay committed (docs/api/forms.md, "Batch").
      existing(state);
      const writes: RecordWrite[] = [];
      const sends: ActorSend[] = [];
      const results: SubmissionAck[] = [];
      let failed: { index: number; code: string; message: string; details: unknown } | null = null;
      for (const [index, data] of message.items.entries()) {
        const prepared = prepareSubmission(state, data, message.caller.user_id, false, context);
        if (prepared instanceof ServiceError) {
          failed = { index, code: prepared.code, message: prepared.message, details: prepared.details ?? null };
          break;
        }
        results.push(ack(commitNew(state, prepared, writes, sends, now)));
      }
      return { state, reply: { results, failed }, writes, sends };
    }

    case 'submit_public': {
      const def = existing(state);
      if (!def.spam.allow_anonymous) throw new ServiceError('forbidden', 'This form does not take anonymous submissions.');
      if (!takesSubmissions(def.status)) throw new ServiceError('form_not_accepting', `The form is ${def.status}; only an active form takes submissions.`, { details: { status: def.status } });
      const filled = def.spam.honeypot_fields.filter((field) => message.data[field] !== undefined && message.data[field] !== null && message.data[field] !== '');
      if (filled.length > 0) throw new ServiceError('spam_suspected', 'The submission was refused as automated.', { details: { reason: 'honeypot' } });
      if (def.spam.min_submit_ms > 0 && (message.started_at_ms === null || now - message.started_at_ms < def.spam.min_submit_ms)) {
        throw new ServiceError('spam_suspected', `The submission was refused as automated: it must come at least ${def.spam.min_submit_ms} ms after started_at.`, { details: { reason: 'too_fast' } });
      }
      const data = { ...message.data };
      for (const field of def.spam.honeypot_fields) delete data[field];
      const prepared = prepareSubmission(state, data, 'anonymous', true, context);
      if (prepared instanceof ServiceError) throw prepared;
      if (!countPublic(state, message.address, now, def.spam.rate_limit_per_minute)) {
        const counter = state.public_counters.get(message.address)!;
        throw new ServiceError('rate_limited', `At most ${def.spam.rate_limit_per_minute} anonymous submissions per minute from one address.`, {
          retryAfterSeconds: Math.max(1, Math.ceil((counter.window_start_ms + PUBLIC_WINDOW_MS - now) / 1000)),
        });
      }
      const writes: RecordWrite[] = [];
      const sends: ActorSend[] = [];
      const committed = commitNew(state, prepared, writes, sends, now);
      return { state, reply: ack(committed), writes, sends };
    }

    case 'get_submission':
      return { state, reply: readable(state, message.caller, visibleSubmission(state, message.caller, message.submission_id)) };

    case 'list_submissions': {
      const page = listSubmissions(state, message.caller, message.query);
      return { state, reply: { ...page, items: page.items.map((submission) => readable(state, message.caller, submission)) } };
    }

    case 'decide': {
      const def = existing(state);
      const submission = visibleSubmission(state, message.caller, message.submission_id);
      const approver = def.approval.approver_role === 'admin' ? message.caller.admin : isOwner(def, message.caller);
      if (!approver) throw new ServiceError('forbidden', `Only ${def.approval.approver_role === 'admin' ? 'a platform admin' : "the form's owner or a platform admin"} decides on submissions.`);
      if (submission.status !== 'pending_approval') {
        throw new ServiceError('conflict', `The submission is ${submission.status}; only a pending_approval submission is approved or rejected.`, { details: { status: submission.status } });
      }
      let decided: Submission = {
        ...submission,
        status: message.decision,
        updated_at_ms: now,
        approval: { decided_by: message.caller.user_id, decided_at_ms: now, note: message.note },
      };
      let sends: ActorSend[] = [];
      if (message.decision === 'approved') {
        ({ submission: decided, sends } = startHooks(state, decided, decided.hooks.map((run) => run.index), now));
      } else {
        decided = { ...decided, hooks: decided.hooks.map((run) => ({ ...run, status: 'skipped' as const, updated_at_ms: now })) };
      }
      state.submissions.set(decided.submission_id, decided);
      return { state, reply: readable(state, message.caller, decided), writes: [{ subkey: `s:${decided.submission_id}`, value: decided }], sends };
    }

    case 'retry': {
      const def = existing(state);
      const submission = visibleSubmission(state, message.caller, message.submission_id);
      requireOwner(def, message.caller);
      const failed = submission.hooks.filter((run) => run.status === 'failed').map((run) => run.index);
      if (failed.length === 0) {
        throw new ServiceError('conflict', 'No hook of this submission has failed; only failed hooks are retried.', { details: { hooks: submission.hooks.map((run) => ({ index: run.index, status: run.status })) } });
      }
      const started = startHooks(state, { ...submission, updated_at_ms: now }, failed, now);
      state.submissions.set(submission.submission_id, started.submission);
      return { state, reply: readable(state, message.caller, started.submission), writes: [{ subkey: `s:${submission.submission_id}`, value: started.submission }], sends: started.sends };
    }

    case 'flow-answer':
      return hookAnswered(state, message, now);

    case 'save_draft': {
      const def = existing(state);
      if (!def.drafts.enabled) throw new ServiceError('conflict', 'This form does not keep drafts (drafts.enabled is false).');
      if (!takesSubmissions(def.status)) throw new ServiceError('form_not_accepting', `The form is ${def.status}; only an active form takes drafts.`, { details: { status: def.status } });
      if (state.drafts.size >= formPolicy.drafts_per_form_max) throw new ServiceError('form_limit_reached', `The form holds the maximum of ${formPolicy.drafts_per_form_max} drafts.`);
      if (serialisedBytes(message.partial_data) > formPolicy.data_bytes_max) {
        throw new ServiceError('BAD_REQUEST', `partial_data must serialise to at most ${formPolicy.data_bytes_max} bytes.`, { details: [{ field: 'body.partial_data', message: 'is too large' }] });
      }
      const draft_id = context.newId('drf_');
      const draft: Draft = {
        draft_id,
        form_id: def.form_id,
        form_version: def.version,
        subject: message.caller.user_id,
        partial_data: sealFields(def, draft_id, message.partial_data, context),
        created_at_ms: now,
        updated_at_ms: now,
        expires_at_ms: now + def.drafts.ttl_seconds * 1000,
      };
      state.drafts.set(draft.draft_id, draft);
      return { state, reply: readableDraft(def, message.caller, draft), writes: [{ subkey: `d:${draft.draft_id}`, value: draft }], alarms: [{ name: DRAFT_EXPIRY_ALARM, due_ms: nextDraftExpiry(state) }] };
    }

    case 'get_draft': {
      const def = existing(state);
      const draft = state.drafts.get(message.draft_id);
      // An expired draft is gone even before its alarm has removed it.
      if (!draft || draft.expires_at_ms <= now || (draft.subject !== message.caller.user_id && !isOwner(def, message.caller))) {
        throw new ServiceError('not_found', 'No such draft (unknown, expired, or another user\'s).');
      }
      return { state, reply: readableDraft(def, message.caller, draft) };
    }

    case '$alarm': {
      if (message.name !== DRAFT_EXPIRY_ALARM) return { state };
      const writes: RecordWrite[] = [];
      for (const [draft_id, draft] of state.drafts) {
        if (draft.expires_at_ms <= now) {
          state.drafts.delete(draft_id);
          writes.push({ subkey: `d:${draft_id}`, value: undefined });
        }
      }
      return { state, writes, alarms: [{ name: DRAFT_EXPIRY_ALARM, due_ms: nextDraftExpiry(state) }] };
    }
  }
}
