import { answerFlowCall, flowCall, type FlowAnswer, type FlowCall, type FlowError } from '../flow-call.js';
import { DIRECTORY_KEY, DIRECTORY_KIND, USER_KIND, type PublicUser } from '../accounts/messages.js';
import { ServiceError, type ActorSend, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  DERIVED_SLUG_RETRIES,
  INVITATION_INDEX_KIND,
  normalizeEmail,
  normalizeSlug,
  ORG_DIRECTORY_KEY,
  ORG_MEMBERS_MAX,
  ORG_DIRECTORY_KIND,
  ORG_DOMAIN_KIND,
  ORGANIZATION_KIND,
  slugify,
  txtHolds,
  USER_ORGS_KIND,
  verificationRecordName,
  verificationRecordValue,
  type Actor,
  type InvitationAccepted,
  type InvitationCreated,
  type Member,
  type OrganizationMessage,
  type OrgFlowStep,
  type OrgRole,
} from './messages.js';
import {
  actingRole,
  declineInvitation,
  domainView,
  dropInvitation,
  indexEntry,
  invitationAlarm,
  invitationFor,
  invitationView,
  memberView,
  orgView,
  putMember,
  releaseDomain,
  requireDomain,
  requireInvitationRoom,
  requireLive,
  requireManager,
  requireMemberRoom,
  requireProof,
  stepOrganization,
  touch,
  type Effects,
  type Invitation,
  type OrganizationState,
  type SingleTurnMessage,
} from './state.js';

/**
 * The organizations area's flows: what spans the organization and its
 * indexes. The organization actor is the coordinator (its step is
 * `stepOrganizationFlows`); every step is pure and asks the other kinds
 * through its outbox with actors/flow-call.ts (`flow-call`, named by the
 * flow's id and an OrgFlowStep), and they answer through theirs
 * (`flow-answer`, a refusal as `ok: false`). A flow's state is a record
 * `f:<flow_id>` of the organization, written in the turn that starts or
 * advances it, so a crash between steps loses nothing: the outbox delivers
 * the step and its answer, and the flow goes on. An answer whose flow or step
 * is not the one waiting (late, repeated) is ignored.
 *
 * The route asks once; the turn defers its reply (`defer: true`, keeping
 * `context.request_id` in the flow record) and the turn that ends the flow
 * answers (`replies`). Every flow ends by waiting for the indexes to
 * acknowledge the organization's changes (`await`: its index messages go as
 * flow-calls of step `ack`), so a read right after the reply sees them
 * (read-your-writes).
 *
 * What the flows read from the accounts area is read in the flow, not by the
 * route before it (a read guarding a write races): the user actor's `get`
 * (`user`: the account exists; its e-mail and whether it is verified) and the
 * accounts directory's `lookup` (`lookup`: the account with an address).
 *
 * - create: [admin: the owner's account exists (`user`)] -> hold the owner's
 *   membership slot in `user-orgs` (USER_ORGS_MAX when capped, counted and
 *   taken in one turn) -> claim the slug in `org-directory` (a derived slug
 *   that is taken is retried with a random suffix, DERIVED_SLUG_RETRIES
 *   times) -> create the organization and its owner -> await the user-orgs
 *   and directory syncs. Compensation: a slug that stays taken gives the slot
 *   back (`release`), then answers 409 `org_slug_taken`; a refused slot
 *   answers 409 `conflict` (nothing held); an unknown owner 404 `not_found`.
 * - invite: the rules and the organization's own cap in the organization's
 *   turn -> the accounts directory's `lookup` of the address (a member needs
 *   no invitation: 409 `conflict`) -> the rules again and the invitation
 *   recorded -> the address's index holds it under INVITATIONS_PER_EMAIL_MAX
 *   in its own turn (`reserve`, replacing this organization's earlier
 *   invitation to the address). Compensation: a refused invitation is dropped
 *   again, 409 `conflict`.
 * - accept: the invitation is known -> the invitee's account (`user`: e-mail,
 *   verified) -> proof and the invitation checked; a new member's slot is
 *   held in `user-orgs` under USER_ORGS_MAX; then the invitation is used up,
 *   the member added, and the index, user-orgs and directory updates awaited.
 *   Compensation: when the invitation went away meanwhile (revoked, expired,
 *   used), the slot is given back and the invitee gets the invitation's error.
 * - decline: the invitee's account (`user`) -> proof checked, the invitation
 *   dropped, the index update awaited.
 * - admin add-member (`check_user`): the account exists (`user`) -> the
 *   single-turn add_member, its index updates awaited.
 * - verify a domain: the organization compares the TXT records the edge saw
 *   with the domain's expected value in its turn (no match: 409
 *   `domain_not_verified`, nothing changes), then claims the domain in
 *   `org-domain` (`domain`: one organization per domain) and marks it
 *   verified. Refused (`ok: false`): 409 `domain_taken`, the domain stays
 *   pending. Compensation: a claim that succeeds after its domain went away
 *   (the organization was deleted meanwhile) is released again. Removing a domain waits for its
 *   claim to finish (409 `conflict` meanwhile), so a claim always finds the
 *   domain it was made for or none.
 * - every other change (member add, role change, removal, leave, update,
 *   SSO, delete, revoke, domain add and removal): the organization's single
 *   turn, then await its index updates (a removed domain's release).
 */

/** How a flow ends for its asker. */
export type FlowOutcome = { reply: unknown } | { error: FlowError };

export interface CreateParams {
  org_id: string;
  name: string;
  created_by: string;
  owner_user_id: string;
  logo_url: string | null;
  metadata: unknown;
  capped: boolean;
}

export interface InviteParams {
  invitation_id: string;
  email: string;
  role: OrgRole;
  token_hash: string;
  ttl_ms: number;
  by: Actor;
}

interface FlowBase {
  flow_id: string;
  request_id: string | null;
  /** The step whose answer the flow waits for. */
  step: OrgFlowStep;
}

export type OrgFlow =
  /** Waiting for `awaiting` index acknowledgements, then answers `outcome`. */
  | (FlowBase & { kind: 'await'; step: 'ack'; awaiting: number; outcome: FlowOutcome })
  | (FlowBase & { kind: 'create'; step: 'user' | 'reserve' | 'claim'; params: CreateParams; slug: string; derived: boolean; attempt: number })
  | (FlowBase & { kind: 'invite'; step: 'lookup' | 'index'; params: InviteParams; reply: InvitationCreated | null })
  | (FlowBase & { kind: 'accept'; step: 'user' | 'reserve'; invitation_id: string; user_id: string; token_hash?: string })
  | (FlowBase & { kind: 'decline'; step: 'user'; invitation_id: string; user_id: string; token_hash?: string })
  | (FlowBase & { kind: 'add_member'; step: 'user'; user_id: string; role: OrgRole; by?: Actor })
  /** Claiming a domain whose TXT record matched (`token`: the one it matched). */
  | (FlowBase & { kind: 'domain'; step: 'domain'; domain: string; token: string });

type Result = TurnResult<OrganizationState, unknown>;
type Answer = Extract<FlowAnswer, { op: 'flow-answer' }>;

const fresh = (): Effects => ({ writes: [], sends: [] });

/** Index messages that can be acknowledged: the ones the organization waits for. */
function ackable(send: ActorSend): boolean {
  const op = (send.message as { op?: string }).op;
  if (send.kind === USER_ORGS_KIND) return op === 'sync' || op === 'release';
  if (send.kind === INVITATION_INDEX_KIND) return op === 'remove';
  if (send.kind === ORG_DOMAIN_KIND) return op === 'release';
  return send.kind === ORG_DIRECTORY_KIND && op === 'sync';
}

function putFlow(state: OrganizationState, effects: Effects, flow: OrgFlow): void {
  state.flows.set(flow.flow_id, flow);
  effects.writes.push({ subkey: `f:${flow.flow_id}`, value: flow });
}

function endFlow(state: OrganizationState, effects: Effects, flow_id: string): void {
  if (!state.flows.has(flow_id)) return;
  state.flows.delete(flow_id);
  effects.writes.push({ subkey: `f:${flow_id}`, value: undefined });
}

/** Stores the flow at its next step and asks `kind`/`key` to run `call`, answering to this organization. */
function ask(state: OrganizationState, context: TurnContext, effects: Effects, flow: OrgFlow, kind: string, key: string, call: unknown): void {
  putFlow(state, effects, flow);
  effects.sends.push(flowCall(kind, key, call, { kind: ORGANIZATION_KIND, key: context.key, flow_id: flow.flow_id, step: flow.step }));
}

/**
 * Ends a flow for its asker once its index messages are acknowledged: they
 * go as flow-calls (step `ack`) and the flow waits for their answers. With
 * nothing to wait for (or nobody asking), answers at once: as this turn's
 * reply when this turn is the ask (`asking`), else through `replies`.
 */
function finish(state: OrganizationState, context: TurnContext, effects: Effects, flow_id: string, request_id: string | null, outcome: FlowOutcome, asking: boolean): Partial<Result> {
  let awaiting = 0;
  if (request_id !== null) {
    const reply_to = { kind: ORGANIZATION_KIND, key: context.key, flow_id, step: 'ack' satisfies OrgFlowStep };
    effects.sends = effects.sends.map((send) => {
      if (!ackable(send)) return send;
      awaiting++;
      return flowCall(send.kind, send.key, send.message, reply_to);
    });
  }
  if (awaiting > 0) {
    putFlow(state, effects, { kind: 'await', flow_id, request_id, step: 'ack', awaiting, outcome });
    return { writes: effects.writes, sends: effects.sends, ...(asking ? { defer: true } : {}) };
  }
  endFlow(state, effects, flow_id);
  const base = { writes: effects.writes, sends: effects.sends };
  if (request_id === null) return base;
  if (asking) {
    if ('error' in outcome) throw new ServiceError(outcome.error.code, outcome.error.message);
    return { ...base, reply: outcome.reply };
  }
  return { ...base, replies: [{ request_id, ...outcome }] };
}

/** Ends the flow with an error (nothing of this turn to await). */
function fail(state: OrganizationState, context: TurnContext, flow: OrgFlow, error: FlowError, effects = fresh()): Result {
  return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, { error }, false) };
}

/** A ServiceError a step threw (nothing changed), as a flow error; anything else is a defect. */
function caught(error: unknown): FlowError {
  if (!(error instanceof ServiceError)) throw error;
  return { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) };
}

/**
 * Runs one of the organization's own steps as a flow's last step: its reply
 * (or the error it was refused with) answers the flow once its index
 * messages are acknowledged.
 */
function conclude(state: OrganizationState, context: TurnContext, flow: OrgFlow, run: () => Result): Result {
  let result: Result;
  try {
    result = run();
  } catch (error) {
    return fail(state, context, flow, caught(error));
  }
  const effects: Effects = { writes: result.writes ?? [], sends: result.sends ?? [] };
  return { ...result, reply: undefined, ...finish(state, context, effects, flow.flow_id, flow.request_id, { reply: result.reply }, false) };
}

/** The user actor's refusal of `get`: an unknown account is "No such user." */
function userError(error: FlowError): FlowError {
  return error.code === 'not_found' ? { code: 'not_found', message: 'No such user.' } : error;
}

/** A derived slug's next try: its first 40 characters and a random suffix (the turn's one source of randomness). */
export function retrySlug(name: string, context: TurnContext): string {
  const suffix = context.newId().toLowerCase().replace(/[^a-z0-9]/g, '').slice(0, 8) || '0';
  return `${slugify(name).slice(0, 40)}-${suffix}`;
}

// ------------------------------------------------------------------ create

type CreateFlow = Extract<OrgFlow, { kind: 'create' }>;

function startCreate(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'create' }>, context: TurnContext): Result {
  if (state.meta) {
    // A retried create returns the organization unchanged.
    const slugMatches = message.slug === undefined || normalizeSlug(message.slug) === state.meta.slug;
    if (!state.meta.deleted && state.meta.created_by === message.created_by && slugMatches) return { state, reply: orgView(state) };
    throw new ServiceError('conflict', 'An organization with this id already exists.');
  }
  if ([...state.flows.values()].some((flow) => flow.kind === 'create')) throw new ServiceError('conflict', 'An organization with this id is being created.');
  const effects = fresh();
  const params: CreateParams = {
    org_id: message.org_id,
    name: message.name,
    created_by: message.created_by,
    owner_user_id: message.owner_user_id ?? message.created_by,
    logo_url: message.logo_url ?? null,
    metadata: message.metadata ?? {},
    capped: message.capped ?? false,
  };
  const flow: CreateFlow = {
    kind: 'create',
    flow_id: context.newId('flw_'),
    request_id: context.request_id,
    step: 'reserve',
    params,
    slug: message.slug !== undefined ? normalizeSlug(message.slug) : slugify(message.name),
    derived: message.slug === undefined,
    attempt: 0,
  };
  if (message.check_owner) ask(state, context, effects, { ...flow, step: 'user' }, USER_KIND, params.owner_user_id, { op: 'get' });
  else reserve(state, context, effects, flow);
  return { state, ...effects, defer: true };
}

function reserve(state: OrganizationState, context: TurnContext, effects: Effects, flow: CreateFlow): void {
  const { params } = flow;
  ask(state, context, effects, { ...flow, step: 'reserve' }, USER_ORGS_KIND, params.owner_user_id, { op: 'reserve', org_id: params.org_id, flow_id: flow.flow_id, capped: params.capped });
}

function claim(state: OrganizationState, context: TurnContext, effects: Effects, flow: CreateFlow): void {
  ask(state, context, effects, { ...flow, step: 'claim' }, ORG_DIRECTORY_KIND, ORG_DIRECTORY_KEY, { op: 'claim', org_id: flow.params.org_id, slug: flow.slug });
}

function release(flow_id: string, org_id: string, user_id: string): ActorSend {
  return { kind: USER_ORGS_KIND, key: user_id, message: { op: 'release', org_id, flow_id } };
}

function createAnswered(state: OrganizationState, flow: CreateFlow, answer: Answer, context: TurnContext): Result {
  const effects = fresh();
  const { params } = flow;
  switch (flow.step) {
    case 'user':
      if (!answer.ok) return fail(state, context, flow, userError(answer.error));
      reserve(state, context, effects, flow);
      return { state, ...effects };
    case 'reserve':
      // A refused slot: nothing is held.
      if (!answer.ok) return fail(state, context, flow, answer.error);
      claim(state, context, effects, flow);
      return { state, ...effects };
    case 'claim':
      break;
  }
  if (!answer.ok) {
    if (answer.error.code === 'org_slug_taken' && flow.derived && flow.attempt < DERIVED_SLUG_RETRIES) {
      claim(state, context, effects, { ...flow, attempt: flow.attempt + 1, slug: retrySlug(params.name, context) });
      return { state, ...effects };
    }
    // Compensation: the owner's slot goes back before the asker hears of the taken slug.
    effects.sends.push(release(flow.flow_id, params.org_id, params.owner_user_id));
    return fail(state, context, flow, answer.error, effects);
  }
  const now = context.now;
  state.meta = {
    org_id: params.org_id,
    name: params.name,
    slug: flow.slug,
    created_by: params.created_by,
    created_at_ms: now,
    updated_at_ms: now,
    logo_url: params.logo_url,
    metadata: params.metadata,
    sso_enforced: false,
    sso_exempt_user_ids: [],
    seq: 0,
    rev: 0,
    deleted: false,
  };
  putMember(state, effects, params.owner_user_id, { user_id: params.owner_user_id, role: 'owner', joined_at_ms: now });
  touch(state, effects, now);
  return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, { reply: orgView(state) }, false) };
}

// ------------------------------------------------------------------ invite

type InviteFlow = Extract<OrgFlow, { kind: 'invite' }>;

/** The inviter's rules and the organization's own cap (checked when the flow starts and again when it records). */
function inviteRules(state: OrganizationState, params: InviteParams, now: number): void {
  requireLive(state);
  const acting = actingRole(state, params.by);
  requireManager(acting);
  if (params.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can invite an owner.');
  const email = normalizeEmail(params.email);
  // A new invitation replaces the address's pending one: an admin must not undo an owner's grant of the owner role that way.
  const pendingOwner = [...state.invitations.values()].some((invitation) => invitation.email === email && invitation.role === 'owner' && invitation.expires_at_ms > now);
  if (pendingOwner && acting !== 'owner') throw new ServiceError('forbidden', 'This address has a pending invitation to the owner role; only an owner can replace it.');
  requireInvitationRoom(state, email, now);
}

function startInvite(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'invite' }>, context: TurnContext): Result {
  const { op: _op, ...params } = message;
  inviteRules(state, params, context.now);
  const effects = fresh();
  const flow: InviteFlow = { kind: 'invite', flow_id: context.newId('flw_'), request_id: context.request_id, step: 'lookup', params: { ...params, email: normalizeEmail(params.email) }, reply: null };
  ask(state, context, effects, flow, DIRECTORY_KIND, DIRECTORY_KEY, { op: 'lookup', login: flow.params.email });
  return { state, ...effects, defer: true };
}

/** The address's account is known (`existing_user_id`): the rules again, then the invitation is recorded and the index asked to hold it. */
function recordInvite(state: OrganizationState, flow: InviteFlow, existing_user_id: string | null, context: TurnContext): Result {
  const now = context.now;
  const { params } = flow;
  inviteRules(state, params, now);
  // Someone who is already a member needs no invitation.
  if (existing_user_id && state.members.has(existing_user_id)) throw new ServiceError('conflict', 'This e-mail address belongs to a member already.');
  const meta = state.meta!;
  const email = params.email;
  const effects = fresh();
  // Inviting an address again replaces its pending invitation (the old token stops working);
  // the index removes it in the same turn that holds the new one.
  const replaced = [...state.invitations.values()].filter((invitation) => invitation.email === email);
  for (const invitation of replaced) dropInvitation(state, effects, invitation, false);
  const invitation: Invitation = {
    invitation_id: params.invitation_id,
    email,
    role: params.role,
    token_hash: params.token_hash,
    invited_by: params.by.user_id,
    created_at_ms: now,
    expires_at_ms: now + params.ttl_ms,
  };
  state.invitations.set(invitation.invitation_id, invitation);
  effects.writes.push({ subkey: `i:${invitation.invitation_id}`, value: invitation });
  const next: InviteFlow = { ...flow, step: 'index', reply: { invitation: invitationView(meta.org_id, invitation), org_name: meta.name } };
  ask(state, context, effects, next, INVITATION_INDEX_KIND, email, {
    op: 'reserve',
    entry: indexEntry(meta.org_id, invitation),
    replaces: replaced.map((old) => ({ invitation_id: old.invitation_id, expires_at_ms: old.expires_at_ms })),
  });
  return { state, ...effects, alarms: [invitationAlarm(state)] };
}

function inviteAnswered(state: OrganizationState, flow: InviteFlow, answer: Answer, context: TurnContext): Result {
  if (flow.step === 'lookup') {
    if (!answer.ok) return fail(state, context, flow, answer.error);
    const { user_id } = answer.reply as { user_id: string | null };
    try {
      return recordInvite(state, flow, user_id, context);
    } catch (error) {
      return fail(state, context, flow, caught(error));
    }
  }
  if (answer.ok) return { state, ...finish(state, context, fresh(), flow.flow_id, flow.request_id, { reply: flow.reply }, false) };
  // Compensation: the address is full; the invitation never existed for anyone.
  const effects = fresh();
  const invitation = state.invitations.get(flow.params.invitation_id);
  if (invitation) dropInvitation(state, effects, invitation, false);
  return { ...fail(state, context, flow, answer.error, effects), alarms: [invitationAlarm(state)] };
}

// ------------------------------------------------------------------ accept and decline

type AcceptFlow = Extract<OrgFlow, { kind: 'accept' }>;

/** Before asking for the invitee's account: the organization is live and the invitation known (its address, expiry and proof are checked on the answer). */
function requireKnownInvitation(state: OrganizationState, invitation_id: string): void {
  requireLive(state);
  if (!state.invitations.has(invitation_id)) throw new ServiceError('invitation_not_found', 'No such pending invitation for your e-mail address.');
}

/**
 * Accept and decline start alike: the invitation must be known, then the
 * invitee's account is asked for (its e-mail and whether it is verified are
 * the proof, checked on the answer).
 */
function startInviteeFlow(
  state: OrganizationState,
  kind: 'accept' | 'decline',
  message: Extract<OrganizationMessage, { op: 'accept_invitation' | 'decline_invitation' }>,
  context: TurnContext,
): Result {
  requireKnownInvitation(state, message.invitation_id);
  const effects = fresh();
  const flow: OrgFlow = {
    kind,
    flow_id: context.newId('flw_'),
    request_id: context.request_id,
    step: 'user',
    invitation_id: message.invitation_id,
    user_id: message.user_id,
    ...(message.token_hash === undefined ? {} : { token_hash: message.token_hash }),
  };
  ask(state, context, effects, flow, USER_KIND, message.user_id, { op: 'get' });
  return { state, ...effects, defer: true };
}

/** The invitee's account is known: proof and invitation checked, then a new member's slot is held (an existing member takes none). */
function acceptChecked(state: OrganizationState, flow: AcceptFlow, user: PublicUser, context: TurnContext): Result {
  requireLive(state);
  const invitation = invitationFor(state, flow.invitation_id, user.email, context.now);
  requireProof(invitation, user.email_verified, flow.token_hash);
  // An existing member keeps their role and takes no new slot.
  if (state.members.has(flow.user_id)) return completeAccept(state, context, flow.flow_id, flow.request_id, flow.invitation_id, flow.user_id, false);
  requireMemberRoom(state, flow.user_id);
  const effects = fresh();
  ask(state, context, effects, { ...flow, step: 'reserve' }, USER_ORGS_KIND, flow.user_id, { op: 'reserve', org_id: context.key, flow_id: flow.flow_id, capped: true });
  return { state, ...effects };
}

/** Uses the invitation up and makes the membership; when the invitation went away meanwhile, gives the slot back. */
function completeAccept(state: OrganizationState, context: TurnContext, flow_id: string, request_id: string | null, invitation_id: string, user_id: string, held: boolean): Result {
  const now = context.now;
  const effects = fresh();
  const invitation = state.invitations.get(invitation_id);
  const failure = ((): FlowOutcome | null => {
    if (!state.meta || state.meta.deleted || !invitation) return { error: { code: 'invitation_not_found', message: 'No such pending invitation for your e-mail address.' } };
    if (invitation.expires_at_ms <= now) return { error: { code: 'invitation_expired', message: 'This invitation has expired; ask for a new one.' } };
    if (!state.members.has(user_id) && state.members.size >= ORG_MEMBERS_MAX) return { error: { code: 'conflict', message: `An organization may hold at most ${ORG_MEMBERS_MAX} members.` } };
    return null;
  })();
  if (failure) {
    if (held) effects.sends.push(release(flow_id, context.key, user_id));
    return { state, ...finish(state, context, effects, flow_id, request_id, failure, false) };
  }
  dropInvitation(state, effects, invitation!);
  let member: Member | undefined = state.members.get(user_id);
  if (member) {
    if (held) effects.sends.push(release(flow_id, context.key, user_id));
  } else {
    member = { user_id, role: invitation!.role, joined_at_ms: now };
    putMember(state, effects, user_id, member);
  }
  touch(state, effects, now);
  const reply: InvitationAccepted = { member: memberView(member), organization: orgView(state) };
  return { state, ...finish(state, context, effects, flow_id, request_id, { reply }, false), alarms: [invitationAlarm(state)] };
}

function acceptAnswered(state: OrganizationState, flow: AcceptFlow, answer: Answer, context: TurnContext): Result {
  if (flow.step === 'user') {
    if (!answer.ok) return fail(state, context, flow, userError(answer.error));
    try {
      return acceptChecked(state, flow, answer.reply as PublicUser, context);
    } catch (error) {
      return fail(state, context, flow, caught(error));
    }
  }
  // A refused slot: nothing is held.
  if (!answer.ok) return fail(state, context, flow, answer.error);
  return completeAccept(state, context, flow.flow_id, flow.request_id, flow.invitation_id, flow.user_id, true);
}

// ------------------------------------------------------------------ admin add-member

function startAddMember(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'add_member' }>, context: TurnContext): Result {
  requireLive(state);
  const effects = fresh();
  const flow: OrgFlow = {
    kind: 'add_member',
    flow_id: context.newId('flw_'),
    request_id: context.request_id,
    step: 'user',
    user_id: message.user_id,
    role: message.role,
    ...(message.by === undefined ? {} : { by: message.by }),
  };
  ask(state, context, effects, flow, USER_KIND, message.user_id, { op: 'get' });
  return { state, ...effects, defer: true };
}

// ------------------------------------------------------------------ verify a domain

/** How many of the TXT values seen a domain_not_verified error echoes back, and how much of each. */
const FOUND_ECHO_MAX = 10;
const FOUND_ECHO_CHARS = 255;

function startVerifyDomain(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'verify_domain' }>, context: TurnContext): Result {
  requireLive(state);
  requireManager(actingRole(state, message.by), 'Only an owner or admin of the organization can manage its domains.');
  const domain = requireDomain(state, message.domain);
  if (domain.status === 'verified') return { state, reply: domainView(domain) };
  const record_name = verificationRecordName(domain.domain);
  const record_value = verificationRecordValue(domain.token);
  if (!txtHolds(message.txt, record_value)) {
    const found = message.txt.slice(0, FOUND_ECHO_MAX).map((strings) => strings.join('').slice(0, FOUND_ECHO_CHARS));
    throw new ServiceError('domain_not_verified', `No TXT record ${record_name} with the value ${record_value} was found; publish it and try again (DNS changes can take a while to show).`, {
      details: { method: 'dns_txt', record_name, record_value, found },
    });
  }
  const effects = fresh();
  const flow: OrgFlow = { kind: 'domain', flow_id: context.newId('flw_'), request_id: context.request_id, step: 'domain', domain: domain.domain, token: domain.token };
  ask(state, context, effects, flow, ORG_DOMAIN_KIND, domain.domain, { op: 'claim', org_id: context.key });
  return { state, ...effects, defer: true };
}

function domainClaimed(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'domain' }>, answer: Answer, context: TurnContext): Result {
  const effects = fresh();
  const live = state.meta !== null && !state.meta.deleted;
  const domain = live ? state.domains.get(flow.domain) : undefined;
  if (!domain || domain.token !== flow.token) {
    // Compensation: the domain went away while it was claimed; a claim it got is given back
    // (unless the organization holds the domain verified again by now).
    if (answer.ok && domain?.status !== 'verified') effects.sends.push(releaseDomain(context.key, flow.domain));
    const gone: FlowOutcome = { error: { code: 'not_found', message: 'This organization has no such domain any more.' } };
    return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, gone, false) };
  }
  // Refused (409 domain_taken: another organization holds it): the domain stays pending.
  if (!answer.ok) return fail(state, context, flow, answer.error, effects);
  if (domain.status !== 'verified') {
    domain.status = 'verified';
    domain.verified_at_ms = context.now;
    effects.writes.push({ subkey: `d:${domain.domain}`, value: domain });
  }
  return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, { reply: domainView(domain) }, false) };
}

// ------------------------------------------------------------------ the step

function acknowledged(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'await' }>): Result {
  const effects = fresh();
  if (flow.awaiting > 1) {
    putFlow(state, effects, { ...flow, awaiting: flow.awaiting - 1 });
    return { state, ...effects };
  }
  endFlow(state, effects, flow.flow_id);
  return { state, ...effects, ...(flow.request_id !== null ? { replies: [{ request_id: flow.request_id, ...flow.outcome }] } : {}) };
}

/** An answer to the step its flow waits for (any other is late or repeated, and ignored). */
function answered(state: OrganizationState, answer: Answer, context: TurnContext): Result {
  const flow = state.flows.get(answer.flow_id);
  if (!flow || flow.step !== answer.step) return { state };
  switch (flow.kind) {
    case 'await':
      // An index's answer, applied or not, is its acknowledgement.
      return acknowledged(state, flow);
    case 'create':
      return createAnswered(state, flow, answer, context);
    case 'invite':
      return inviteAnswered(state, flow, answer, context);
    case 'accept':
      return acceptAnswered(state, flow, answer, context);
    case 'decline': {
      if (!answer.ok) return fail(state, context, flow, userError(answer.error));
      const user = answer.reply as PublicUser;
      return conclude(state, context, flow, () => declineInvitation(state, { invitation_id: flow.invitation_id, email: user.email, email_verified: user.email_verified, token_hash: flow.token_hash }, context));
    }
    case 'add_member':
      if (!answer.ok) return fail(state, context, flow, userError(answer.error));
      return conclude(state, context, flow, () => stepOrganization(state, { op: 'add_member', user_id: flow.user_id, role: flow.role, by: flow.by }, context));
    case 'domain':
      return domainClaimed(state, flow, answer, context);
  }
}

/** The organization's own flows, which another area's flow cannot run through a flow-call. */
function isOwnFlow(message: OrganizationMessage): boolean {
  switch (message.op) {
    case 'create':
    case 'invite':
    case 'accept_invitation':
    case 'decline_invitation':
    case 'verify_domain':
    case 'flow-call':
    case 'flow-answer':
      return true;
    case 'add_member':
      return message.check_user === true;
    default:
      return false;
  }
}

/** The organization actor's step: its flows, and its single-turn operations awaiting their index updates. */
export function stepOrganizationFlows(state: OrganizationState, message: OrganizationMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'create':
      return startCreate(state, message, context);
    case 'invite':
      return startInvite(state, message, context);
    case 'accept_invitation':
      return startInviteeFlow(state, 'accept', message, context);
    case 'decline_invitation':
      return startInviteeFlow(state, 'decline', message, context);
    case 'verify_domain':
      return startVerifyDomain(state, message, context);
    case 'add_member':
      if (message.check_user) return startAddMember(state, message, context);
      return single(state, message, context);

    case 'flow-call':
      // Another area's flow (SCIM) runs one of the organization's single-turn ops; a flow of our own cannot be started that way.
      if (isOwnFlow(message.call)) throw new ServiceError('BAD_REQUEST', `The organization's ${message.call.op} flow cannot be called from another flow.`);
      return answerFlowCall(stepOrganization, state, message as FlowCall<SingleTurnMessage>, context);

    case 'flow-answer':
      return answered(state, message, context);

    default:
      return single(state, message, context);
  }
}

/** A single-turn op; when asked and it changed the indexes, answered once they acknowledge. */
function single(state: OrganizationState, message: SingleTurnMessage | AlarmMessage, context: TurnContext): Result {
  const result = stepOrganization(state, message, context);
  if (context.request_id === null || !result.sends?.length) return result;
  const effects: Effects = { writes: result.writes ?? [], sends: result.sends };
  return { ...result, reply: undefined, ...finish(state, context, effects, context.newId('flw_'), context.request_id, { reply: result.reply }, true) };
}
