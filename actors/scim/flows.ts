import { ServiceError, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { DIRECTORY_KEY, DIRECTORY_KIND, USER_KIND, type NewUser, type SummarySync } from '../accounts/messages.js';
import { emailDomain, ORGANIZATION_KIND } from '../organizations/messages.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { stepScimDirectory, visibleUser, type ScimDirectoryState } from './state.js';
import { takeToken, type BucketRule } from './rate.js';
import {
  SCIM_CREATE_BURST,
  SCIM_CREATE_PER_SECOND,
  SCIM_DIRECTORY_KIND,
  SCIM_FLOWS_MAX,
  type ScimAttributes,
  type ScimDirectoryMessage,
  type ScimTokenCreate,
  type ScimFlowReply,
  type ScimTokenManager,
  type ScimTokenView,
  type ScimUpdateReply,
  type ScimUserRecord,
} from './messages.js';

/**
 * The SCIM flows, coordinated by the organization's scim-directory actor: a
 * route makes one ask, the directory does its own part in that turn, then
 * talks to the user directory, the user and the organization actors through
 * the outbox (actors/flow-call.ts) and answers the deferred ask when the flow
 * ends. Each flow is a record `f:<flow_id>` until then, so it survives a
 * restart (the asker then gets flow_interrupted; the flow goes on). Steps
 * are pure; the next step is chosen from the previous one's answer.
 *
 * Provisioning (POST /Users), a saga:
 *   take a creation from the organization's bucket (at once: 429 when empty)
 *   -> with the verified-domains rule: ask the organization whether the
 *      e-mail's domain is verified (no: 403, nothing reserved or created)
 *   -> reserve the userName here (compensation: abort the reservation)
 *   -> lookup the e-mail in the user directory (owned by another account: uniqueness)
 *   -> claim e-mail and username (skipped when a resumed create already owns them)
 *   -> create the platform user (no usable password)
 *      [point of no return: from here a failure leaves the pending record, whose
 *       lease lets a retry with the same userName resume it, as before]
 *   -> add the member to the organization
 *   -> ban the platform user when created inactive (-> its summary to the directory)
 *   -> activate the record here: the answer.
 * A terminal failure before the point of no return runs the compensations in
 * reverse (the reservation is dropped) and answers the failure.
 *
 * A change (PATCH, PUT): the record is updated here; a deactivation bans the
 * platform user (every session ends), a new displayName renames it; each
 * summary goes to the user directory. A deleted platform user is skipped.
 *
 * The summary relay (ban-sync, rename-sync, delete-sync): the user actor holds
 * an admin change's reply until the directory has applied its summary only
 * when asked (it keeps the ask's request_id); a flow-call comes through the
 * outbox and is answered in its own turn, with the summary under `sync`. So
 * the flow sends the summary on and waits for the directory before it
 * answers, and the admin list shows the change once SCIM has answered
 * (test/unit/scim-hardening.test.ts pins the user actor's side; the relay can
 * go when the user actor holds flow-call answers too).
 *
 * Deprovisioning (DELETE): remove the member -> delete the platform user
 * (its summary to the directory) -> remove the record here. Each step is
 * idempotent, so a retried DELETE after a failure finishes the job.
 *
 * Token management: the organization actor answers the caller's role
 * (owner/admin, or a platform admin and an existing organization), then the
 * token is created or revoked here.
 */

export const DEACTIVATION_REASON = 'deactivated by SCIM';

type Step =
  | 'domain'
  | 'lookup'
  | 'claim'
  | 'create'
  | 'add-member'
  | 'ban'
  | 'ban-sync'
  | 'rename'
  | 'rename-sync'
  | 'remove-member'
  | 'delete-user'
  | 'delete-sync'
  | 'authorize';

interface FlowBase {
  flow_id: string;
  /** The deferred ask to answer (null: nobody waits). */
  request_id: string | null;
  step: Step;
  started_at_ms: number;
}

export interface ProvisionFlow extends FlowBase {
  kind: 'provision';
  scim_id: string;
  user: NewUser;
  active: boolean;
  /** The userName and attributes to reserve once the domain is known verified; null (or absent) once reserved. */
  attributes?: ScimAttributes | null;
  /** Owed if the flow fails terminally, run last first. */
  compensations: 'abort-reservation'[];
}

export interface ChangeFlow extends FlowBase {
  kind: 'change';
  scim_id: string;
  user_id: string;
  /** The record as this turn left it: the answer. */
  record: ScimUserRecord;
  ban: boolean;
  rename: string | null;
}

export interface DeprovisionFlow extends FlowBase {
  kind: 'deprovision';
  scim_id: string;
  user_id: string;
}

export interface TokenFlow extends FlowBase {
  kind: 'token';
  by: ScimTokenManager;
  create: ScimTokenCreate | null;
  revoke: { token_id: string } | null;
}

export type ScimFlow = ProvisionFlow | ChangeFlow | DeprovisionFlow | TokenFlow;

export function loadFlow(state: ScimDirectoryState, value: unknown): void {
  const flow = value as ScimFlow;
  state.flows.set(flow.flow_id, flow);
}

type Result = TurnResult<ScimDirectoryState, unknown>;
type Provision = Extract<ScimDirectoryMessage, { op: 'user-provision' }>;
type Change = Extract<ScimDirectoryMessage, { op: 'user-change' }>;
type Deprovision = Extract<ScimDirectoryMessage, { op: 'user-deprovision' }>;
type TokenManage = Extract<ScimDirectoryMessage, { op: 'token-manage' }>;

function uniqueness(email: string): FlowError {
  return { code: 'scim_uniqueness', message: `A platform account with the e-mail ${email} already exists.` };
}

/** A local step of the directory, as part of a flow turn: its writes are the flow's. */
function local(state: ScimDirectoryState, message: ScimDirectoryMessage, context: TurnContext): Result {
  return stepScimDirectory(state, message, context);
}

function capacity(state: ScimDirectoryState): void {
  if (state.flows.size >= SCIM_FLOWS_MAX) {
    throw new ServiceError('rate_limited', 'Too many SCIM operations in progress for this organization; retry shortly.', { retryAfterSeconds: 1 });
  }
}

/** Sends the flow's next step and stores the flow; `writes` are this turn's other writes. */
function next(state: ScimDirectoryState, context: TurnContext, flow: ScimFlow, step: Step, kind: string, key: string, call: unknown, writes: RecordWrite[] = []): Result {
  const moved = { ...flow, step } as ScimFlow;
  state.flows.set(moved.flow_id, moved);
  return {
    state,
    writes: [...writes, { subkey: `f:${moved.flow_id}`, value: moved }],
    sends: [flowCall(kind, key, call, { kind: SCIM_DIRECTORY_KIND, key: context.key, flow_id: moved.flow_id, step })],
  };
}

/** Ends the flow: its record goes, the ask is answered. */
function end(state: ScimDirectoryState, flow: ScimFlow, outcome: { reply: unknown } | { error: FlowError }, writes: RecordWrite[] = []): Result {
  state.flows.delete(flow.flow_id);
  const replies: DeferredReply[] = flow.request_id === null ? [] : [{ request_id: flow.request_id, ...outcome }];
  return { state, writes: [...writes, { subkey: `f:${flow.flow_id}`, value: undefined }], replies };
}

/** A terminal failure: the compensations owed, last first, then the answer. */
function fail(state: ScimDirectoryState, flow: ScimFlow, error: FlowError, context: TurnContext): Result {
  const writes: RecordWrite[] = [];
  if (flow.kind === 'provision') {
    for (const compensation of [...flow.compensations].reverse()) {
      if (compensation === 'abort-reservation') writes.push(...(local(state, { op: 'user-abort', scim_id: flow.scim_id }, context).writes ?? []));
    }
  }
  return end(state, flow, { error }, writes);
}

/** A step that threw in this turn (a ServiceError: nothing changed), as a flow error. */
function caught(error: unknown): FlowError {
  if (!(error instanceof ServiceError)) throw error;
  return { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) };
}

/** Starts a flow for the ask being handled: its id and the request to answer. */
function begin(context: TurnContext): FlowBase {
  return { flow_id: context.newId('sf_'), request_id: context.request_id, step: 'lookup', started_at_ms: context.now };
}

function deferred(result: Result): Result {
  return { ...result, defer: true };
}

// --- Provisioning ---------------------------------------------------------------

const CREATE_RULE: BucketRule = { per_second: SCIM_CREATE_PER_SECOND, burst: SCIM_CREATE_BURST };

export function stepUserProvision(state: ScimDirectoryState, message: Provision, context: TurnContext): Result {
  capacity(state);
  // The creation rate, per organization, taken in this turn (so no race passes it).
  const taken = takeToken(state.create_bucket, CREATE_RULE, context.now);
  if (!taken.ok) {
    throw new ServiceError(
      'rate_limited',
      `This organization provisions at most ${SCIM_CREATE_BURST} users at once and ${SCIM_CREATE_PER_SECOND * 60} a minute; retry later.`,
      { retryAfterSeconds: Math.max(1, Math.ceil(taken.retry_after_ms / 1000)) },
    );
  }
  const bucket: RecordWrite = { subkey: 'b:create', value: taken.bucket };
  const flow: ProvisionFlow = {
    ...begin(context),
    kind: 'provision',
    scim_id: message.scim_id,
    user: { id: message.user_id, role: 'user', ...message.platform },
    active: message.active,
    attributes: message.attributes,
    compensations: [],
  };
  if (message.verified_domains_only) {
    // Before anything is reserved or created: is the address in a domain this organization verified?
    const domain = emailDomain(message.platform.email) ?? '';
    state.create_bucket = taken.bucket;
    return deferred(next(state, context, flow, 'domain', ORGANIZATION_KIND, context.key, { op: 'domain_verified', domain }, [bucket]));
  }
  // user-reserve refuses (a userName in use) before anything changed: the ask is refused, the bucket untouched.
  const reserved = reserve(state, flow, context, [bucket]);
  state.create_bucket = taken.bucket;
  return deferred(reserved);
}

/** Reserves the userName (or resumes a stalled create of it), then looks the e-mail up. Throws (nothing changed) when the userName is in use. */
function reserve(state: ScimDirectoryState, flow: ProvisionFlow, context: TurnContext, writes: RecordWrite[] = []): Result {
  const reserved = local(state, { op: 'user-reserve', scim_id: flow.scim_id, user_id: flow.user.id, attributes: flow.attributes! }, context);
  const { user: record, resumed } = reserved.reply as { user: ScimUserRecord; resumed: boolean };
  const out = [...writes, ...(reserved.writes ?? [])];
  if (resumed) {
    // The stalled flow of this record is replaced: its late answers find no flow and are ignored.
    for (const stale of [...state.flows.values()]) {
      if (stale.kind !== 'provision' || stale.scim_id !== record.id || stale.flow_id === flow.flow_id) continue;
      state.flows.delete(stale.flow_id);
      out.push({ subkey: `f:${stale.flow_id}`, value: undefined });
    }
  }
  // A resumed create keeps its scim id and platform user id.
  const moved: ProvisionFlow = { ...flow, scim_id: record.id, user: { ...flow.user, id: record.user_id }, attributes: null, compensations: ['abort-reservation'] };
  return next(state, context, moved, 'lookup', DIRECTORY_KIND, DIRECTORY_KEY, { op: 'lookup', login: flow.user.email }, out);
}

function unverifiedDomain(email: string): FlowError {
  const domain = emailDomain(email) ?? email;
  return {
    code: 'forbidden',
    message: `The e-mail domain ${domain} is not verified by this organization: SCIM provisions only addresses in the organization's verified domains (verify it with POST /api/v1/orgs/{org_id}/domains).`,
  };
}

function advanceProvision(state: ScimDirectoryState, flow: ProvisionFlow, answer: FlowAnswer, context: TurnContext): Result {
  const { user } = flow;
  switch (flow.step) {
    case 'domain': {
      if (!answer.ok) return fail(state, flow, answer.error, context);
      if ((answer.reply as { verified?: unknown } | null)?.verified !== true) return fail(state, flow, unverifiedDomain(user.email), context);
      try {
        return reserve(state, flow, context);
      } catch (error) {
        return fail(state, flow, caught(error), context);
      }
    }
    case 'lookup': {
      if (!answer.ok) return fail(state, flow, answer.error, context);
      const owner = (answer.reply as { user_id: string | null }).user_id;
      // A resumed create whose platform user already exists skips the claim.
      if (owner === user.id) return next(state, context, flow, 'create', USER_KIND, user.id, { op: 'create', user });
      if (owner !== null) return fail(state, flow, uniqueness(user.email), context);
      return next(state, context, flow, 'claim', DIRECTORY_KIND, DIRECTORY_KEY, { op: 'claim', user });
    }
    case 'claim':
      if (!answer.ok) {
        const taken = answer.error.code === 'email_taken' || answer.error.code === 'username_taken';
        return fail(state, flow, taken ? uniqueness(user.email) : answer.error, context);
      }
      return next(state, context, flow, 'create', USER_KIND, user.id, { op: 'create', user });
    case 'create':
      if (!answer.ok) return fail(state, flow, answer.error, context);
      // The point of no return: a later failure leaves the pending record for a retry to resume.
      return next(state, context, { ...flow, compensations: [] }, 'add-member', ORGANIZATION_KIND, context.key, { op: 'add_member', user_id: user.id, role: 'member' });
    case 'add-member':
      if (!answer.ok) return fail(state, flow, answer.error, context);
      if (!flow.active) return next(state, context, flow, 'ban', USER_KIND, user.id, { op: 'ban', reason: DEACTIVATION_REASON, banned_by: `scim:${context.key}` });
      return activate(state, flow, context);
    case 'ban': {
      const sync = banned(answer);
      if (sync !== null && 'code' in sync) return fail(state, flow, sync, context);
      if (sync) return next(state, context, flow, 'ban-sync', DIRECTORY_KIND, DIRECTORY_KEY, sync);
      return activate(state, flow, context);
    }
    case 'ban-sync':
      if (!answer.ok) return fail(state, flow, answer.error, context);
      return activate(state, flow, context);
    default:
      return { state };
  }
}

function activate(state: ScimDirectoryState, flow: ProvisionFlow, context: TurnContext): Result {
  let activated: Result;
  try {
    activated = local(state, { op: 'user-activate', scim_id: flow.scim_id, active: flow.active }, context);
  } catch (error) {
    return fail(state, flow, caught(error), context);
  }
  const reply: ScimFlowReply = { user: activated.reply as ScimUserRecord, revoked_user_ids: flow.active ? [] : [flow.user.id] };
  return end(state, flow, { reply }, activated.writes ?? []);
}

/**
 * A `ban` or `admin-patch` answer: the summary to send on (null: none), or the
 * failure. A platform user deleted meanwhile has nothing to cut off or rename.
 */
function banned(answer: FlowAnswer): SummarySync | null | FlowError {
  if (!answer.ok) return answer.error.code === 'not_found' ? null : answer.error;
  return (answer.reply as { sync?: SummarySync | null } | null)?.sync ?? null;
}

// --- Changes (PATCH, PUT) ---------------------------------------------------------

export function stepUserChange(state: ScimDirectoryState, message: Change, context: TurnContext): Result {
  capacity(state);
  const current = visibleUser(state, message.scim_id);
  if (message.userName !== undefined && message.userName.toLowerCase() !== current.userName.toLowerCase()) {
    throw new ServiceError('scim_mutability', 'userName cannot be changed.');
  }
  const updated = local(state, { op: 'user-update', scim_id: message.scim_id, ...message.change }, context);
  const result = updated.reply as ScimUpdateReply;
  const rename = result.displayName_changed && result.user.displayName !== null ? result.user.displayName.slice(0, 100) : null;
  if (!result.deactivated && rename === null) {
    return { ...updated, reply: { user: result.user, revoked_user_ids: [] } satisfies ScimFlowReply };
  }
  const flow: ChangeFlow = { ...begin(context), kind: 'change', scim_id: message.scim_id, user_id: result.user.user_id, record: result.user, ban: result.deactivated, rename };
  return deferred(changeFrom(state, flow, 'start', context, updated.writes ?? []));
}

/** The change's next remote step after `done`, or its answer. */
function changeFrom(state: ScimDirectoryState, flow: ChangeFlow, done: 'start' | 'ban' | 'rename', context: TurnContext, writes: RecordWrite[] = []): Result {
  if (done === 'start' && flow.ban) {
    return next(state, context, flow, 'ban', USER_KIND, flow.user_id, { op: 'ban', reason: DEACTIVATION_REASON, banned_by: `scim:${context.key}` }, writes);
  }
  if (done !== 'rename' && flow.rename !== null) {
    return next(state, context, flow, 'rename', USER_KIND, flow.user_id, { op: 'admin-patch', patch: { display_name: flow.rename } }, writes);
  }
  const reply: ScimFlowReply = { user: flow.record, revoked_user_ids: flow.ban ? [flow.user_id] : [] };
  return end(state, flow, { reply }, writes);
}

function advanceChange(state: ScimDirectoryState, flow: ChangeFlow, answer: FlowAnswer, context: TurnContext): Result {
  switch (flow.step) {
    case 'ban':
    case 'rename': {
      const sync = banned(answer);
      if (sync !== null && 'code' in sync) {
        // The ban may have happened (a failure, not a refusal): the edge drops the cached sessions anyway.
        return fail(state, flow, flow.ban ? { ...sync, details: { revoked_user_ids: [flow.user_id] } } : sync, context);
      }
      if (sync) return next(state, context, flow, flow.step === 'ban' ? 'ban-sync' : 'rename-sync', DIRECTORY_KIND, DIRECTORY_KEY, sync);
      return changeFrom(state, flow, flow.step, context);
    }
    case 'ban-sync':
    case 'rename-sync':
      if (!answer.ok) return fail(state, flow, answer.error, context);
      return changeFrom(state, flow, flow.step === 'ban-sync' ? 'ban' : 'rename', context);
    default:
      return { state };
  }
}

// --- Deprovisioning (DELETE) --------------------------------------------------------

export function stepUserDeprovision(state: ScimDirectoryState, message: Deprovision, context: TurnContext): Result {
  const user = visibleUser(state, message.scim_id);
  capacity(state);
  const flow: DeprovisionFlow = { ...begin(context), kind: 'deprovision', scim_id: user.id, user_id: user.user_id };
  return deferred(next(state, context, flow, 'remove-member', ORGANIZATION_KIND, context.key, { op: 'remove_member', user_id: user.user_id }));
}

function advanceDeprovision(state: ScimDirectoryState, flow: DeprovisionFlow, answer: FlowAnswer, context: TurnContext): Result {
  switch (flow.step) {
    case 'remove-member':
      if (!answer.ok) return fail(state, flow, answer.error, context);
      return next(state, context, flow, 'delete-user', USER_KIND, flow.user_id, { op: 'admin-delete' });
    case 'delete-user': {
      if (!answer.ok && answer.error.code !== 'not_found') return fail(state, flow, { ...answer.error, details: { revoked_user_ids: [flow.user_id] } }, context);
      const sync = answer.ok ? (answer.reply as { sync?: SummarySync }).sync : undefined;
      if (sync) return next(state, context, flow, 'delete-sync', DIRECTORY_KIND, DIRECTORY_KEY, sync);
      return removeRecord(state, flow, context);
    }
    case 'delete-sync':
      if (!answer.ok) return fail(state, flow, answer.error, context);
      return removeRecord(state, flow, context);
    default:
      return { state };
  }
}

function removeRecord(state: ScimDirectoryState, flow: DeprovisionFlow, context: TurnContext): Result {
  let deleted: Result;
  try {
    deleted = local(state, { op: 'user-delete', scim_id: flow.scim_id }, context);
  } catch (error) {
    return fail(state, flow, { ...caught(error), details: { revoked_user_ids: [flow.user_id] } }, context);
  }
  const reply: ScimFlowReply = { user: deleted.reply as ScimUserRecord, revoked_user_ids: [flow.user_id] };
  return end(state, flow, { reply }, deleted.writes ?? []);
}

// --- Token management ---------------------------------------------------------------

export function stepTokenManage(state: ScimDirectoryState, message: TokenManage, context: TurnContext): Result {
  capacity(state);
  const flow: TokenFlow = { ...begin(context), kind: 'token', by: message.by, create: message.create ?? null, revoke: message.revoke ?? null };
  // A platform admin needs the organization to exist; anyone else needs to be its owner or admin.
  const call = message.by.platform_admin ? { op: 'get' } : { op: 'get_member', user_id: message.by.user_id };
  return deferred(next(state, context, flow, 'authorize', ORGANIZATION_KIND, context.key, call));
}

function advanceToken(state: ScimDirectoryState, flow: TokenFlow, answer: FlowAnswer, context: TurnContext): Result {
  if (!answer.ok) {
    // A stranger is told the same as for an unknown organization.
    const error: FlowError = answer.error.code === 'not_found' ? { code: 'not_found', message: 'No such organization.' } : answer.error;
    return end(state, flow, { error });
  }
  const role = (answer.reply as { role?: string }).role;
  if (!flow.by.platform_admin && role !== 'owner' && role !== 'admin') {
    return end(state, flow, { error: { code: 'forbidden', message: 'Only an owner or admin of the organization manages its SCIM tokens.' } });
  }
  let done: Result;
  try {
    done = flow.create
      ? local(state, { op: 'token-create', ...flow.create, created_by: flow.by.user_id }, context)
      : local(state, { op: 'token-revoke', token_id: flow.revoke?.token_id ?? '' }, context);
  } catch (error) {
    return end(state, flow, { error: caught(error) });
  }
  return end(state, flow, { reply: done.reply as ScimTokenView | { revoked: true } }, done.writes ?? []);
}

// --- Answers ------------------------------------------------------------------------

export function stepFlowAnswer(state: ScimDirectoryState, answer: FlowAnswer, context: TurnContext): Result {
  const flow = state.flows.get(answer.flow_id);
  // Unknown (finished, or replaced by a resumed create) or an answer to another step: nothing to do.
  if (!flow || flow.step !== answer.step) return { state };
  switch (flow.kind) {
    case 'provision':
      return advanceProvision(state, flow, answer, context);
    case 'change':
      return advanceChange(state, flow, answer, context);
    case 'deprovision':
      return advanceDeprovision(state, flow, answer, context);
    case 'token':
      return advanceToken(state, flow, answer, context);
  }
}
