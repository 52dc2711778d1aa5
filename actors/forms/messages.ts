/**
 * The forms area's public surface (docs/api/forms.md): the kinds and keys,
 * the bounds, the definition and submission shapes, the messages each kind
 * takes. Other layers import this file only.
 *
 * Kinds:
 * - `form` (key formKey(tenant, form_id), storage records): the definition
 *   with every schema version, its submissions and drafts, and the per-address
 *   counters of public submissions.
 * - `form-index` (key formIndexKey(tenant), storage records): the tenant's
 *   forms for listing; each form sends it its view after every definition change.
 */
export const FORM_KIND = 'form';
export const FORM_INDEX_KIND = 'form-index';
/** One per (tenant, name) (key = stateMachineKey): a named state machine that `fsm` hooks move. */
export const FORM_STATE_MACHINE_KIND = 'form-state-machine';

export function formKey(tenant: string, form_id: string): string {
  return JSON.stringify([tenant, form_id]);
}
export function formIndexKey(tenant: string): string {
  return JSON.stringify([tenant]);
}
export function stateMachineKey(tenant: string, name: string): string {
  return JSON.stringify([tenant, name]);
}

/** Event type of a form hook's webhook delivery: sent to the named webhook alone, not a catalog type one subscribes to. */
export const FORM_SUBMISSION_EVENT_TYPE = 'form.submission';

/**
 * A form id names its tenant (`frm_<base64url(tenant)>.<random>`), so the
 * public submission route, which has no credential, finds the form with one ask.
 */
export function formIdFor(tenant: string, random: string): string {
  return `frm_${Buffer.from(tenant, 'utf8').toString('base64url')}.${random}`;
}

/** The tenant inside a form id, or null when the id is not one. */
export function tenantOfFormId(form_id: string): string | null {
  const match = /^frm_([A-Za-z0-9_-]{1,400})\.[A-Za-z0-9_-]{1,64}$/.exec(form_id);
  if (!match) return null;
  const tenant = Buffer.from(match[1], 'base64url').toString('utf8');
  return tenant.length > 0 && Buffer.from(tenant, 'utf8').toString('base64url') === match[1] ? tenant : null;
}

/** Every bound of the area (unit last). docs/api/forms.md documents each; change both together. */
export const formPolicy = {
  schema_bytes_max: 64 * 1024,
  versions_per_form_max: 500,
  fields_max: 200,
  conditional_rules_max: 100,
  honeypot_fields_max: 10,
  /** Submission data, serialised. */
  data_bytes_max: 64 * 1024,
  /** One batch request submits at most this many; the first invalid one stops the batch (fail-fast). */
  batch_submissions_max: 100,
  /** Submissions one form keeps (every one is in memory while the form is active); past it submit is refused with 409. */
  submissions_per_form_max: 200_000,
  drafts_per_form_max: 10_000,
  /** multipart.max_file_bytes: default 10 MiB, at most 1 GiB. */
  max_file_bytes_default: 10 * 1024 * 1024,
  max_file_bytes_max: 1024 * 1024 * 1024,
  max_files_default: 5,
  max_files_max: 20,
  draft_ttl_seconds_default: 86_400,
  draft_ttl_seconds_max: 30 * 86_400,
  /** Public submissions one address may make to one form per minute, unless the form sets spam.rate_limit_per_minute. */
  public_per_address_per_minute_default: 10,
  public_per_address_per_minute_max: 10_000,
  min_submit_ms_max: 3_600_000,
  hooks_per_form_max: 10,
  state_machine_states_max: 50,
  state_machine_transitions_max: 500,
  state_machine_history_max: 100,
  list_page_size_default: 20,
  list_page_size_max: 100,
  /** Forms one tenant lists. */
  forms_per_tenant_max: 10_000,
} as const;

export const FORM_STATUSES = ['draft', 'active', 'paused', 'deprecated', 'disabled'] as const;
export type FormStatus = (typeof FORM_STATUSES)[number];

/** Submission statuses: `submitted` (no approval needed), `pending_approval`, then `approved` or `rejected`. */
export const SUBMISSION_STATUSES = ['submitted', 'pending_approval', 'approved', 'rejected'] as const;
export type SubmissionStatus = (typeof SUBMISSION_STATUSES)[number];

export interface FormField {
  name: string;
  label: string;
  kind: string;
  encrypted: boolean;
}

export interface ConditionalRule {
  /** `<field>` (present and not empty), or `<field> <op> <JSON literal>` with op one of == != < <= > >=. */
  when: string;
  require: string[];
}

/** What runs once per valid submission (after approval when approval is enabled). */
export type ExecutionHook =
  | { kind: 'webhook'; webhook_id: string }
  | {
      kind: 'job';
      queue: string;
      /** JSON with "{{path}}" placeholders filled from the submission (docs/api/forms.md, "Execution hooks"). */
      payload_template: unknown;
      /** Where the job queue delivers the job (signed with the secret), as in POST /api/v1/jobs. */
      target: { url: string; secret: string; headers: Record<string, string> };
      attempt_timeout_ms: number;
    }
  | {
      kind: 'fsm';
      fsm_name: string;
      target_state: string;
      /**
       * Who set the hook (form create or PATCH), checked then as one who may move the machine by hand (its creator
       * or an admin); the hook moves it with their authority. Absent in hooks stored before 2026-11-30: the form's
       * creator, not as an admin.
       */
      authorized_by?: FormCaller;
    };

export type HookStatus = 'waiting_approval' | 'running' | 'dispatched' | 'succeeded' | 'failed' | 'skipped';

/** One hook's progress on one submission. */
export interface HookRun {
  index: number;
  kind: ExecutionHook['kind'];
  /** webhook_id or fsm_name. */
  target: string;
  status: HookStatus;
  attempts: number;
  /** The webhook event id of the last attempt (webhook hooks). */
  event_id: string | null;
  error: { code: string; message: string } | null;
  updated_at_ms: number;
}

export interface MultipartSettings {
  enabled: boolean;
  /** Sniffed content types a file may have (docs/api/forms.md, "Multipart"). */
  allowed_content_types: string[];
  /** A folder of the blob store the form's files go to. */
  blob_bucket: string;
  max_file_bytes: number;
  max_files: number;
}

/** A file of a multipart submission, as committed with it. */
export interface Attachment {
  blob_id: string;
  field: string;
  /** Sniffed from the file's first bytes. */
  content_type: string;
  declared_type: string;
  file_name: string | null;
  size_bytes: number;
  sha256: string;
  /** Relative to DATA_DIR. */
  path?: string;
  /** Cluster mode: the node whose disk holds the file (downloads are passed on to it). */
  node_id?: string;
}

/** An attachment as clients see it: where it is stored stays inside. */
export function publicAttachment({ path: _path, node_id: _node, ...attachment }: Attachment): Omit<Attachment, 'path' | 'node_id'> {
  return attachment;
}

export interface FormSettings {
  multipart: MultipartSettings;
  execution: { on_valid_submission: ExecutionHook[] };
  fields: FormField[];
  conditional_logic: ConditionalRule[];
  drafts: { enabled: boolean; ttl_seconds: number };
  spam: { allow_anonymous: boolean; honeypot_fields: string[]; min_submit_ms: number; rate_limit_per_minute: number };
  approval: { enabled: boolean; approver_role: 'owner' | 'admin'; kind: 'single' };
}

/**
 * PATCH /api/v1/forms/{id}: the title and the settings groups present in the
 * body. Lists (fields, conditional_logic, execution hooks) replace the
 * current ones; the other groups merge key by key onto the current ones.
 */
export interface FormSettingsPatch {
  title?: string;
  fields?: FormField[];
  conditional_logic?: ConditionalRule[];
  execution?: { on_valid_submission: ExecutionHook[] };
  drafts?: Partial<FormSettings['drafts']>;
  spam?: Partial<FormSettings['spam']>;
  approval?: Partial<FormSettings['approval']>;
  multipart?: Partial<MultipartSettings>;
}

export interface FormDefinition extends FormSettings {
  form_id: string;
  tenant: string;
  name: string;
  title: string;
  status: FormStatus;
  created_by: string;
  created_at_ms: number;
  updated_at_ms: number;
  /** The current schema version (1 at creation, +1 per PUT .../schema). */
  version: number;
  /** Every version's schema, index = version - 1, kept so each submission's schema stays readable. */
  schemas: object[];
  /** Raised by every definition change; the index keeps the newest it has seen. */
  revision: number;
}

export interface FormView extends Omit<FormDefinition, 'schemas' | 'tenant'> {
  schema: object;
  submission_count: number;
}

export interface Submission {
  submission_id: string;
  /** The form's count of submissions when this one was committed (1, 2, ...): the order of submissions made in the same millisecond. */
  seq: number;
  form_id: string;
  form_version: number;
  status: SubmissionStatus;
  anonymous: boolean;
  submitted_by: string;
  data: Record<string, unknown>;
  created_at_ms: number;
  updated_at_ms: number;
  approval: { decided_by: string; decided_at_ms: number; note: string } | null;
  hooks: HookRun[];
  attachments: Attachment[];
}

export interface Draft {
  draft_id: string;
  form_id: string;
  form_version: number;
  subject: string;
  partial_data: Record<string, unknown>;
  created_at_ms: number;
  updated_at_ms: number;
  expires_at_ms: number;
}

/** Who is calling: owners (the creator) and platform admins manage a form and read every submission. */
export interface FormCaller {
  user_id: string;
  admin: boolean;
}

export interface SubmissionQuery {
  status: SubmissionStatus | null;
  submitter: string | null;
  page: number;
  page_size: number;
  sort_by: 'created_at' | 'updated_at';
  sort_order: 'asc' | 'desc';
}

export type FormMessage =
  | { op: 'create'; tenant: string; caller: FormCaller; name: string; title: string; schema: object; settings: FormSettings }
  | { op: 'get'; caller: FormCaller }
  | { op: 'put_schema'; caller: FormCaller; schema: object }
  | { op: 'update_settings'; caller: FormCaller; patch: FormSettingsPatch }
  | { op: 'set_status'; caller: FormCaller; status: FormStatus }
  | { op: 'submit'; caller: FormCaller; data: Record<string, unknown>; attachments?: Attachment[] }
  | { op: 'submit_batch'; caller: FormCaller; items: Record<string, unknown>[] }
  | { op: 'submit_public'; address: string; data: Record<string, unknown>; started_at_ms: number | null }
  | { op: 'get_submission'; caller: FormCaller; submission_id: string }
  | { op: 'list_submissions'; caller: FormCaller; query: SubmissionQuery }
  | { op: 'decide'; caller: FormCaller; submission_id: string; decision: 'approved' | 'rejected'; note: string }
  | { op: 'save_draft'; caller: FormCaller; partial_data: Record<string, unknown> }
  | { op: 'get_draft'; caller: FormCaller; draft_id: string }
  | { op: 'retry'; caller: FormCaller; submission_id: string };

export interface SubmissionAck {
  submission_id: string;
  form_id: string;
  form_version: number;
  status: SubmissionStatus;
  hooks: HookRun[];
}

export type FormIndexMessage =
  | { op: 'upsert'; form: FormView }
  | { op: 'list'; query: FormListQuery };

export interface FormListQuery {
  q: string | null;
  status: FormStatus | null;
  /** Admins asking include_inactive: deprecated and disabled forms too; otherwise they are left out unless `status` names them. */
  include_inactive: boolean;
  page: number;
  page_size: number;
  sort_by: 'created_at' | 'updated_at' | 'name' | 'title';
  sort_order: 'asc' | 'desc';
}

export interface Page<T> {
  items: T[];
  total: number;
}

/** State machine names and state names: 1-128 letters, digits and . _ : - */
export const STATE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

export interface StateMachineDefinition {
  states: string[];
  initial: string;
  transitions: { from: string; to: string }[];
}

export interface StateMachineView extends StateMachineDefinition {
  name: string;
  state: string;
  /** Moves made so far. */
  moves: number;
  created_by: string;
  created_at_ms: number;
  updated_at_ms: number;
  /** The newest moves, newest last (at most state_machine_history_max). */
  history: { from: string; to: string; at_ms: number; cause: { form_id: string; submission_id: string } | { user_id: string } }[];
}

export type StateMachineMessage =
  | { op: 'put'; caller: FormCaller; name: string; definition: StateMachineDefinition }
  | { op: 'get' }
  | { op: 'move'; target_state: string; cause: StateMachineView['history'][number]['cause']; caller: FormCaller | null };

/** The node's key for encrypted fields, set by the edge at start (actors/forms/field-crypto.ts). */
export { hasFieldKey, setFieldKey } from './field-crypto.js';
