import { answerFlowCall, type FlowCall } from '../flow-call.js';
import { ServiceError, type ActorSend, type AlarmMessage, type ErrorCode, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  DERIVED_SLUG_RETRIES,
  INVITATION_INDEX_KIND,
  INVITATIONS_PER_EMAIL_MAX,
  normalizeEmail,
  normalizeSlug,
  ORG_DIRECTORY_KEY,
  ORG_MEMBERS_MAX,
  ORG_DIRECTORY_KIND,
  ORG_DOMAIN_KIND,
  slugify,
  txtHolds,
  USER_ORGS_KIND,
  USER_ORGS_MAX,
  verificationRecordName,
  verificationRecordValue,
  type FlowAck,
  type InvitationAccepted,
  type InvitationCreated,
  type Member,
  type OrganizationMessage,
} from './messages.js';
import {
  actingRole,
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
 * `stepOrganizationFlows`); every step is pure, talks to the other kinds only
 * through its outbox (`sends`), and they answer through theirs (`flow_*`
 * messages, see FlowAnswer in messages.ts). A flow's state is a record
 * `f:<flow_id>` of the organization, written in the turn that starts or
 * advances it, so a crash between steps loses nothing: the outbox delivers
 * the step and its answer, and the flow goes on.
 *
 * The route asks once; the turn defers its reply (`defer: true`, keeping
 * `context.request_id` in the flow record) and the turn that ends the flow
 * answers (`replies`). Every flow ends by waiting for the indexes to
 * acknowledge the organization's changes (`await`), so a read right after
 * the reply sees them (read-your-writes).
 *
 * - create: hold the owner's membership slot in `user-orgs` (USER_ORGS_MAX
 *   when capped, counted and taken in one turn) -> claim the slug in
 *   `org-directory` (a derived slug that is taken is retried with a random
 *   suffix, DERIVED_SLUG_RETRIES times) -> create the organization and its
 *   owner -> await the user-orgs and directory syncs. Compensation: a slug
 *   that stays taken gives the slot back (`release`), then answers 409
 *   `org_slug_taken`; a refused slot answers 409 `conflict` (nothing held).
 * - invite: the rules and the organization's own cap in the organization's
 *   turn; the invitation is recorded and the address's index holds it under
 *   INVITATIONS_PER_EMAIL_MAX in its own turn (`reserve`, replacing this
 *   organization's earlier invitation to the address). Compensation: a
 *   refused invitation is dropped again, 409 `conflict`.
 * - accept: proof and the invitation checked in the organization's turn; a
 *   new member's slot is held in `user-orgs` under USER_ORGS_MAX; then the
 *   invitation is used up, the member added, and the index, user-orgs and
 *   directory updates awaited. Compensation: when the invitation went away
 *   meanwhile (revoked, expired, used), the slot is given back and the
 *   invitee gets the invitation's error.
 * - verify a domain: the organization compares the TXT records the edge saw
 *   with the domain's expected value in its turn (no match: 409
 *   `domain_not_verified`, nothing changes), then claims the domain in
 *   `org-domain` (one organization per domain) and marks it verified.
 *   Refused: 409 `domain_taken`, the domain stays pending. Compensation: a
 *   claim that succeeds after its domain went away (the organization was
 *   deleted meanwhile) is released again. Removing a domain waits for its
 *   claim to finish (409 `conflict` meanwhile), so a claim always finds the
 *   domain it was made for or none.
 * - every other change (member add, role change, removal, leave, update,
 *   SSO, delete, revoke, decline, domain add and removal): the organization's
 *   single turn, then await its index updates (a removed domain's release).
 */

/** How a flow ends for its asker. */
export type FlowOutcome = { reply: unknown } | { error: { code: ErrorCode; message: string } };

export interface CreateParams {
  org_id: string;
  name: string;
  created_by: string;
  owner_user_id: string;
  logo_url: string | null;
  metadata: unknown;
  capped: boolean;
}

export type OrgFlow =
  /** Waiting for `awaiting` index acknowledgements, then answers `outcome`. */
  | { kind: 'await'; flow_id: string; request_id: string | null; awaiting: number; outcome: FlowOutcome }
  | { kind: 'create'; flow_id: string; request_id: string | null; stage: 'reserve' | 'claim'; params: CreateParams; slug: string; derived: boolean; attempt: number }
  | { kind: 'invite'; flow_id: string; request_id: string | null; invitation_id: string; reply: InvitationCreated }
  | { kind: 'accept'; flow_id: string; request_id: string | null; invitation_id: string; user_id: string }
  /** Claiming a domain whose TXT record matched (`token`: the one it matched). */
  | { kind: 'domain'; flow_id: string; request_id: string | null; domain: string; token: string };

type Result = TurnResult<OrganizationState, unknown>;

const slotRefused = (): FlowOutcome => ({ error: { code: 'conflict', message: `A user may belong to at most ${USER_ORGS_MAX} organizations.` } });

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
  if (!state.flows.delete(flow_id)) return;
  effects.writes.push({ subkey: `f:${flow_id}`, value: undefined });
}

/**
 * Ends a flow with `outcome` once the indexes have applied `effects.sends`:
 * asks each to acknowledge, and records an `await` flow counting them. With
 * nothing to wait for (or nobody asking), answers at once: as this turn's
 * reply when this turn is the ask (`asking`), else through `replies`.
 */
function finish(state: OrganizationState, context: TurnContext, effects: Effects, flow_id: string, request_id: string | null, outcome: FlowOutcome, asking: boolean): Partial<Result> {
  let awaiting = 0;
  if (request_id !== null) {
    const ack: FlowAck = { org_id: context.key, flow_id };
    for (const send of effects.sends) {
      if (!ackable(send)) continue;
      send.message = { ...(send.message as object), ack };
      awaiting++;
    }
  }
  if (awaiting > 0) {
    putFlow(state, effects, { kind: 'await', flow_id, request_id, awaiting, outcome });
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

/** A derived slug's next try: its first 40 characters and a random suffix (the turn's one source of randomness). */
export function retrySlug(name: string, context: TurnContext): string {
  const suffix = context.newId().toLowerCase().replace(/[^a-z0-9]/g, '').slice(0, 8) || '0';
  return `${slugify(name).slice(0, 40)}-${suffix}`;
}

// ------------------------------------------------------------------ create

function startCreate(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'create' }>, context: TurnContext): Result {
  if (state.meta) {
    // A retried create returns the organization unchanged.
    const slugMatches = message.slug === undefined || normalizeSlug(message.slug) === state.meta.slug;
    if (!state.meta.deleted && state.meta.created_by === message.created_by && slugMatches) return { state, reply: orgView(state) };
    throw new ServiceError('conflict', 'An organization with this id already exists.');
  }
  if ([...state.flows.values()].some((flow) => flow.kind === 'create')) throw new ServiceError('conflict', 'An organization with this id is being created.');
  const effects: Effects = { writes: [], sends: [] };
  const params: CreateParams = {
    org_id: message.org_id,
    name: message.name,
    created_by: message.created_by,
    owner_user_id: message.owner_user_id ?? message.created_by,
    logo_url: message.logo_url ?? null,
    metadata: message.metadata ?? {},
    capped: message.capped ?? false,
  };
  const flow: OrgFlow = {
    kind: 'create',
    flow_id: context.newId('flw_'),
    request_id: context.request_id,
    stage: 'reserve',
    params,
    slug: message.slug !== undefined ? normalizeSlug(message.slug) : slugify(message.name),
    derived: message.slug === undefined,
    attempt: 0,
  };
  putFlow(state, effects, flow);
  effects.sends.push({ kind: USER_ORGS_KIND, key: params.owner_user_id, message: { op: 'reserve', org_id: params.org_id, flow_id: flow.flow_id, capped: params.capped } });
  return { state, ...effects, defer: true };
}

function claim(flow: Extract<OrgFlow, { kind: 'create' }>): ActorSend {
  return { kind: ORG_DIRECTORY_KIND, key: ORG_DIRECTORY_KEY, message: { op: 'claim', org_id: flow.params.org_id, slug: flow.slug, flow_id: flow.flow_id } };
}

function release(flow: { flow_id: string }, org_id: string, user_id: string): ActorSend {
  return { kind: USER_ORGS_KIND, key: user_id, message: { op: 'release', org_id, flow_id: flow.flow_id } };
}

function createReserved(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'create' }>, ok: boolean, context: TurnContext): Result {
  const effects: Effects = { writes: [], sends: [] };
  if (!ok) return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, slotRefused(), false) };
  const next = { ...flow, stage: 'claim' as const };
  putFlow(state, effects, next);
  effects.sends.push(claim(next));
  return { state, ...effects };
}

function createClaimed(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'create' }>, ok: boolean, slug: string, context: TurnContext): Result {
  const effects: Effects = { writes: [], sends: [] };
  const { params } = flow;
  if (!ok) {
    if (flow.derived && flow.attempt < DERIVED_SLUG_RETRIES) {
      const next = { ...flow, attempt: flow.attempt + 1, slug: retrySlug(params.name, context) };
      putFlow(state, effects, next);
      effects.sends.push(claim(next));
      return { state, ...effects };
    }
    // Compensation: the owner's slot goes back before the asker hears of the taken slug.
    effects.sends.push(release(flow, params.org_id, params.owner_user_id));
    const taken: FlowOutcome = { error: { code: 'org_slug_taken', message: `The slug "${slug}" is taken by another organization.` } };
    return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, taken, false) };
  }
  const now = context.now;
  state.meta = {
    org_id: params.org_id,
    name: params.name,
    slug,
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

function startInvite(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'invite' }>, context: TurnContext): Result {
  const now = context.now;
  const meta = requireLive(state);
  const acting = actingRole(state, message.by);
  requireManager(acting);
  if (message.role === 'owner' && acting !== 'owner') throw new ServiceError('forbidden', 'Only an owner can invite an owner.');
  // Someone who is already a member needs no invitation.
  if (message.existing_user_id && state.members.has(message.existing_user_id)) throw new ServiceError('conflict', 'This e-mail address belongs to a member already.');
  const email = normalizeEmail(message.email);
  requireInvitationRoom(state, email, now);
  const effects: Effects = { writes: [], sends: [] };
  // Inviting an address again replaces its pending invitation (the old token stops working);
  // the index removes it in the same turn that holds the new one.
  const replaced = [...state.invitations.values()].filter((invitation) => invitation.email === email);
  for (const invitation of replaced) dropInvitation(state, effects, invitation, false);
  const invitation: Invitation = {
    invitation_id: message.invitation_id,
    email,
    role: message.role,
    token_hash: message.token_hash,
    invited_by: message.by.user_id,
    created_at_ms: now,
    expires_at_ms: now + message.ttl_ms,
  };
  state.invitations.set(invitation.invitation_id, invitation);
  effects.writes.push({ subkey: `i:${invitation.invitation_id}`, value: invitation });
  const flow: OrgFlow = {
    kind: 'invite',
    flow_id: context.newId('flw_'),
    request_id: context.request_id,
    invitation_id: invitation.invitation_id,
    reply: { invitation: invitationView(meta.org_id, invitation), org_name: meta.name },
  };
  putFlow(state, effects, flow);
  effects.sends.push({
    kind: INVITATION_INDEX_KIND,
    key: email,
    message: {
      op: 'reserve',
      entry: indexEntry(meta.org_id, invitation),
      replaces: replaced.map((old) => ({ invitation_id: old.invitation_id, expires_at_ms: old.expires_at_ms })),
      flow_id: flow.flow_id,
    },
  });
  return { state, ...effects, alarms: [invitationAlarm(state)], defer: true };
}

function inviteIndexed(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'invite' }>, ok: boolean, context: TurnContext): Result {
  const effects: Effects = { writes: [], sends: [] };
  if (ok) return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, { reply: flow.reply }, false) };
  // Compensation: the address is full; the invitation never existed for anyone.
  const invitation = state.invitations.get(flow.invitation_id);
  if (invitation) dropInvitation(state, effects, invitation, false);
  const full: FlowOutcome = { error: { code: 'conflict', message: `This address already has ${INVITATIONS_PER_EMAIL_MAX} pending invitations.` } };
  return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, full, false), alarms: [invitationAlarm(state)] };
}

// ------------------------------------------------------------------ accept

function startAccept(state: OrganizationState, message: Extract<OrganizationMessage, { op: 'accept_invitation' }>, context: TurnContext): Result {
  requireLive(state);
  const invitation = invitationFor(state, message.invitation_id, message.email, context.now);
  requireProof(invitation, message.email_verified, message.token_hash);
  const flow_id = context.newId('flw_');
  // An existing member keeps their role and takes no new slot.
  if (state.members.has(message.user_id)) return completeAccept(state, context, flow_id, context.request_id, invitation.invitation_id, message.user_id, false, true);
  requireMemberRoom(state, message.user_id);
  const effects: Effects = { writes: [], sends: [] };
  putFlow(state, effects, { kind: 'accept', flow_id, request_id: context.request_id, invitation_id: invitation.invitation_id, user_id: message.user_id });
  effects.sends.push({ kind: USER_ORGS_KIND, key: message.user_id, message: { op: 'reserve', org_id: context.key, flow_id, capped: true } });
  return { state, ...effects, defer: true };
}

/** Uses the invitation up and makes the membership; when the invitation went away meanwhile, gives the slot back. */
function completeAccept(state: OrganizationState, context: TurnContext, flow_id: string, request_id: string | null, invitation_id: string, user_id: string, held: boolean, asking: boolean): Result {
  const now = context.now;
  const effects: Effects = { writes: [], sends: [] };
  const invitation = state.invitations.get(invitation_id);
  const failure = ((): FlowOutcome | null => {
    if (!state.meta || state.meta.deleted || !invitation) return { error: { code: 'invitation_not_found', message: 'No such pending invitation for your e-mail address.' } };
    if (invitation.expires_at_ms <= now) return { error: { code: 'invitation_expired', message: 'This invitation has expired; ask for a new one.' } };
    if (!state.members.has(user_id) && state.members.size >= ORG_MEMBERS_MAX) return { error: { code: 'conflict', message: `An organization may hold at most ${ORG_MEMBERS_MAX} members.` } };
    return null;
  })();
  if (failure) {
    if (held) effects.sends.push(release({ flow_id }, context.key, user_id));
    return { state, ...finish(state, context, effects, flow_id, request_id, failure, asking) };
  }
  dropInvitation(state, effects, invitation!);
  let member: Member | undefined = state.members.get(user_id);
  if (member) {
    if (held) effects.sends.push(release({ flow_id }, context.key, user_id));
  } else {
    member = { user_id, role: invitation!.role, joined_at_ms: now };
    putMember(state, effects, user_id, member);
  }
  touch(state, effects, now);
  const reply: InvitationAccepted = { member: memberView(member), organization: orgView(state) };
  return { state, ...finish(state, context, effects, flow_id, request_id, { reply }, asking), alarms: [invitationAlarm(state)] };
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
  const effects: Effects = { writes: [], sends: [] };
  const flow: OrgFlow = { kind: 'domain', flow_id: context.newId('flw_'), request_id: context.request_id, domain: domain.domain, token: domain.token };
  putFlow(state, effects, flow);
  effects.sends.push({ kind: ORG_DOMAIN_KIND, key: domain.domain, message: { op: 'claim', org_id: context.key, flow_id: flow.flow_id } });
  return { state, ...effects, defer: true };
}

function domainClaimed(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'domain' }>, ok: boolean, context: TurnContext): Result {
  const effects: Effects = { writes: [], sends: [] };
  const live = state.meta !== null && !state.meta.deleted;
  const domain = live ? state.domains.get(flow.domain) : undefined;
  if (!domain || domain.token !== flow.token) {
    // Compensation: the domain went away while it was claimed; a claim it got is given back
    // (unless the organization holds the domain verified again by now).
    if (ok && domain?.status !== 'verified') effects.sends.push(releaseDomain(context.key, flow.domain));
    const gone: FlowOutcome = { error: { code: 'not_found', message: 'This organization has no such domain any more.' } };
    return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, gone, false) };
  }
  if (!ok) {
    const taken: FlowOutcome = { error: { code: 'domain_taken', message: `The domain "${flow.domain}" is verified by another organization.` } };
    return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, taken, false) };
  }
  if (domain.status !== 'verified') {
    domain.status = 'verified';
    domain.verified_at_ms = context.now;
    effects.writes.push({ subkey: `d:${domain.domain}`, value: domain });
  }
  return { state, ...finish(state, context, effects, flow.flow_id, flow.request_id, { reply: domainView(domain) }, false) };
}

// ------------------------------------------------------------------ the step

function acknowledged(state: OrganizationState, flow: Extract<OrgFlow, { kind: 'await' }>): Result {
  const effects: Effects = { writes: [], sends: [] };
  if (flow.awaiting > 1) {
    putFlow(state, effects, { ...flow, awaiting: flow.awaiting - 1 });
    return { state, ...effects };
  }
  endFlow(state, effects, flow.flow_id);
  return { state, ...effects, ...(flow.request_id !== null ? { replies: [{ request_id: flow.request_id, ...flow.outcome }] } : {}) };
}

/** The organization actor's step: its flows, and its single-turn operations awaiting their index updates. */
function isOwnFlowOp(op: string): boolean {
  return op === 'create' || op === 'invite' || op === 'accept_invitation' || op === 'verify_domain' || op === 'flow-call' || op.startsWith('flow_');
}

export function stepOrganizationFlows(state: OrganizationState, message: OrganizationMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'create':
      return startCreate(state, message, context);
    case 'invite':
      return startInvite(state, message, context);
    case 'accept_invitation':
      return startAccept(state, message, context);
    case 'verify_domain':
      return startVerifyDomain(state, message, context);

    case 'flow-call':
      // Another area's flow (SCIM) runs one of the organization's single-turn ops; a flow of our own cannot be started that way.
      if (isOwnFlowOp(message.call.op)) throw new ServiceError('BAD_REQUEST', `The organization's ${message.call.op} flow cannot be called from another flow.`);
      return answerFlowCall(stepOrganization, state, message as FlowCall<SingleTurnMessage>, context);

    case 'flow_ack': {
      const flow = state.flows.get(message.flow_id);
      return flow?.kind === 'await' ? acknowledged(state, flow) : { state };
    }
    case 'flow_reserved': {
      const flow = state.flows.get(message.flow_id);
      if (flow?.kind === 'create' && flow.stage === 'reserve') return createReserved(state, flow, message.ok, context);
      if (flow?.kind === 'accept') {
        if (message.ok) return completeAccept(state, context, flow.flow_id, flow.request_id, flow.invitation_id, flow.user_id, true, false);
        return { state, ...finish(state, context, { writes: [], sends: [] }, flow.flow_id, flow.request_id, slotRefused(), false) };
      }
      return { state };
    }
    case 'flow_claimed': {
      const flow = state.flows.get(message.flow_id);
      return flow?.kind === 'create' && flow.stage === 'claim' ? createClaimed(state, flow, message.ok, message.slug, context) : { state };
    }
    case 'flow_indexed': {
      const flow = state.flows.get(message.flow_id);
      return flow?.kind === 'invite' ? inviteIndexed(state, flow, message.ok, context) : { state };
    }
    case 'flow_domain_claimed': {
      const flow = state.flows.get(message.flow_id);
      return flow?.kind === 'domain' ? domainClaimed(state, flow, message.ok, context) : { state };
    }

    default: {
      const result = stepOrganization(state, message as SingleTurnMessage | AlarmMessage, context);
      if (context.request_id === null || !result.sends?.length) return result;
      const effects: Effects = { writes: result.writes ?? [], sends: result.sends };
      return { ...result, reply: undefined, ...finish(state, context, effects, context.newId('flw_'), context.request_id, { reply: result.reply }, true) };
    }
  }
}
