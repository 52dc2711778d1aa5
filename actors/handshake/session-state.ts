import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type DeferredReply, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { LEDGER_ACCOUNT_KIND, ledgerAccountKey, type HoldCall, type LedgerAccountMessage } from '../ledger/messages.js';
import { ITEM_CONTAINER_KIND, itemContainerKey, type ContainerConfig, type CustodyCall, type LockReply } from '../items/messages.js';
import {
  HANDSHAKE_INDEX_KIND,
  HANDSHAKE_SESSION_KIND,
  handshakeIndexKey,
  type Bundle,
  type CancelReply,
  type ConfirmReply,
  type CreatedReply,
  type HistoryReply,
  type IndexMessage,
  type OfferStatus,
  type OfferView,
  type Role,
  type SessionInit,
  type SessionMessage,
  type SessionView,
  type SettlementView,
  type StageView,
} from './messages.js';
import { concessions } from './concessions.js';
import { move, OFFER_MOVES, SESSION_MOVES, SETTLEMENT_MOVES } from './status-machine.js';

/**
 * One handshake session: pure domain logic of the `handshake-session` actor
 * (storage `snapshot`, key = handshakeSessionKey(tenant, domain, session_id)).
 * Each turn works on a copy of the state (the snapshot contract), so a
 * refused message changes nothing.
 *
 * Negotiation. Either party may make an offer when none is open; the party an
 * open offer was made to may counter it (the open offer becomes COUNTERED).
 * Every offer is a new round, up to policy.max_rounds; an offer expires by
 * alarm after offer_ttl_seconds, the session after session_ttl_seconds.
 *
 * Settlement: a two-phase escrow coordinated here, through the outbox.
 * Accepting opens it in STAGING with a deadline. `stage` places the caller's
 * ledger holds for what it gives (one hold per currency leg, flow-calls of
 * step `hold`, hold id = `<settlement_id>.<role>.<attempt>.<leg>`); a
 * refused hold releases the others of that attempt and the caller may stage
 * again. `confirm` by the second party (both staged) is the commit point: in
 * that one turn the settlement becomes COMMITTING and the captures of every
 * hold to the other party are sent (flow-calls of step `capture`), so after
 * a crash either the commit turn is durable and every capture is delivered
 * and applied exactly once (the ledger de-duplicates by hold id), or it is
 * not and every hold is still in place. `cancel`, the deadline alarm and the
 * sweep roll back: every hold id of the settlement is released (the ledger
 * remembers a release that arrives before its placement and refuses the
 * placement), so nothing stays reserved.
 *
 * Item legs go the same way through the items area's custody calls
 * (actors/items/messages.ts): `stage` also locks the units the caller gives
 * in its containers (flow-calls of step `lock`, lock id =
 * `<settlement_id>.<role>.<attempt>.i<leg>`) and records the container it
 * receives in. When both have confirmed, the session first holds room for
 * the arriving items in each receiving container (step `room`; a refusal
 * releases the rooms, un-confirms the party without room and answers the
 * confirm with items_capacity_exceeded), then commits: in that one turn the
 * captures and a `transfer` of every lock (step `item`, answered by the
 * receiving container once the units are placed in their room) leave
 * through the outbox. Rolling back also unlocks every lock id and releases
 * every room id (tombstones on the items side, as on the ledger's).
 */
export interface PendingCustody {
  /** The hold id (a currency leg), or the lock id (an item leg: `container_id` set). */
  hold_id: string;
  ok: boolean | null;
  error: FlowError | null;
  /** Item legs: the giver's container, and the locked units' weight and volume once locked (for the receiver's room). */
  container_id?: string;
  weight_m?: number;
  volume_m?: number;
}

export interface StageProgress {
  /** Increases with each staging attempt that failed, so a retry uses fresh hold ids. */
  attempt: number;
  /** The holds and locks of the attempt in flight (then of the stage done): id, and the answer once in. */
  pending: PendingCustody[];
  /** The caller's container for the other side's items (named at stage). */
  receive?: ContainerConfig | null;
  /** The stage ask waiting for the holds (after a restart its caller already got 503). */
  request_id: string | null;
}

export interface SettlementState {
  view: SettlementView;
  progress: Record<Role, StageProgress>;
  /** COMMITTING: the hold ids whose capture, and the lock ids whose transfer, is not yet answered. */
  capturing: string[];
  capture_errors: string[];
  /** Both confirmed: the rooms being held in the receiving containers before the commit. */
  prepare?: { attempt: number; request_id: string | null; rooms: { room_id: string; role: Role; ok: boolean | null; error: FlowError | null }[] } | null;
  /** Counts room attempts, so a retry after a refusal uses fresh room ids. */
  prepare_attempts?: number;
  /** The room held for each receiving party (set when every room is held). */
  rooms?: Partial<Record<Role, string>>;
}

export interface SessionState {
  session: SessionView | null;
  offers: OfferView[];
  settlement: SettlementState | null;
}

type Result = TurnResult<SessionState, unknown>;

export function initialSession(): SessionState {
  return { session: null, offers: [], settlement: null };
}

/** Collects a turn's effects on a copy of the state. */
class Turn {
  readonly state: SessionState;
  readonly sends: ActorSend[] = [];
  readonly alarms: AlarmChange[] = [];
  readonly replies: DeferredReply[] = [];
  changed = false;

  constructor(
    previous: SessionState,
    readonly context: TurnContext,
  ) {
    this.state = structuredClone(previous);
  }

  get session(): SessionView {
    return this.state.session!;
  }

  touch(): void {
    this.changed = true;
    this.session.updated_at_ms = Math.max(this.context.now, this.session.updated_at_ms);
  }

  ledger(user_id: string, call: HoldCall, step: string | null): void {
    const key = ledgerAccountKey(this.session.tenant, user_id);
    if (step === null) this.sends.push({ kind: LEDGER_ACCOUNT_KIND, key, message: call satisfies LedgerAccountMessage });
    else this.sends.push(flowCall(LEDGER_ACCOUNT_KIND, key, call, { kind: HANDSHAKE_SESSION_KIND, key: this.context.key, flow_id: holdIdOf(call), step }));
  }

  /** An items custody call to one of the session's domain containers; a flow-call answering `step` unless step is null. */
  items(container_id: string, call: CustodyCall, id: string, step: string | null): void {
    const key = itemContainerKey(this.session.tenant, this.session.domain, container_id);
    if (step === null) this.sends.push({ kind: ITEM_CONTAINER_KIND, key, message: call });
    else this.sends.push(flowCall(ITEM_CONTAINER_KIND, key, call, { kind: HANDSHAKE_SESSION_KIND, key: this.context.key, flow_id: id, step }));
  }

  done(reply?: unknown, defer = false): Result {
    if (this.changed) {
      const session = this.session;
      this.sends.push({ kind: HANDSHAKE_INDEX_KIND, key: handshakeIndexKey(session.tenant, session.domain), message: { op: 'upsert', entry: { ...session } } satisfies IndexMessage });
    }
    const result: Result = { state: this.state, sends: this.sends, alarms: this.alarms, replies: this.replies };
    if (reply !== undefined) result.reply = reply;
    if (defer) result.defer = true;
    return result;
  }
}

function holdIdOf(call: HoldCall): string {
  return call.hold_id;
}

export function stepSession(state: SessionState, message: SessionMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'init':
      return init(state, message.init, context);
    case 'get':
      return { state, reply: readable(state, message.caller) };
    case 'history': {
      const session = readable(state, message.caller);
      return { state, reply: { session_id: session.session_id, offers: state.offers, concessions: message.view === 'concessions' ? concessions(state.offers, session.initiator.id, session.responder.id) : [] } satisfies HistoryReply };
    }
    case 'offer':
      return offer(state, message.caller, message.bundle, context);
    case 'accept':
      return accept(state, message.caller, message.offer_id, context);
    case 'reject':
      return closeOffer(state, message.caller, message.offer_id, 'REJECTED', context);
    case 'withdraw':
      return closeOffer(state, message.caller, message.offer_id, 'WITHDRAWN', context);
    case 'cancel':
      return cancel(state, message.caller, context);
    case 'stage':
      return stage(state, message.caller, message.receive ?? null, context);
    case 'confirm':
      return confirm(state, message.caller, context);
    case 'sweep':
      return deadline(state, context, 'sweep');
    case 'flow-answer':
      return answered(state, message, context);
    case '$alarm':
      return alarm(state, message.name, context);
    default:
      return { state };
  }
}

/** The session, for one of its parties; anyone else (or no session) gets 404. */
function readable(state: SessionState, caller: string): SessionView {
  const session = state.session;
  if (!session || (caller !== session.initiator.id && caller !== session.responder.id)) throw new ServiceError('not_found', 'No such handshake session.');
  return session;
}

function roleOf(session: SessionView, caller: string): Role {
  return caller === session.initiator.id ? 'initiator' : 'responder';
}

function userOf(session: SessionView, role: Role): string {
  return role === 'initiator' ? session.initiator.id : session.responder.id;
}

function other(role: Role): Role {
  return role === 'initiator' ? 'responder' : 'initiator';
}

function invalidState(what: string, status: string): ServiceError {
  return new ServiceError('handshake_invalid_state', `${what} (the status is ${status}).`, { details: { status } });
}

function requireNegotiating(session: SessionView, now: number): void {
  if (session.status !== 'NEGOTIATING') throw invalidState('The session is not negotiating', session.status);
  if (now >= session.expires_at_ms) throw invalidState('The session has expired', 'EXPIRED');
}

function init(state: SessionState, init: SessionInit, context: TurnContext): Result {
  if (state.session) return { state, reply: { session: state.session, opening_offer: state.offers[0] ?? null } satisfies CreatedReply };
  const turn = new Turn(state, context);
  const now = context.now;
  turn.state.session = {
    tenant: init.tenant,
    domain: init.domain,
    session_id: init.session_id,
    initiator: init.initiator,
    responder: init.responder,
    policy: init.policy,
    status: 'NEGOTIATING',
    closed_reason: null,
    round: 0,
    active_offer_id: null,
    settlement_id: null,
    deadline_at_ms: null,
    created_at_ms: now,
    updated_at_ms: now,
    expires_at_ms: now + init.policy.session_ttl_seconds * 1000,
  };
  turn.changed = true;
  turn.alarms.push({ name: 'session', due_ms: turn.session.expires_at_ms });
  let opening: OfferView | null = null;
  if (init.opening_bundle) opening = addOffer(turn, init.initiator.id, init.opening_bundle, null);
  return turn.done({ session: turn.session, opening_offer: opening } satisfies CreatedReply);
}

function addOffer(turn: Turn, proposer: string, bundle: Bundle, in_reply_to: string | null): OfferView {
  const session = turn.session;
  const now = turn.context.now;
  session.round += 1;
  const offer: OfferView = {
    offer_id: `${session.session_id}.o${session.round}`,
    session_id: session.session_id,
    round: session.round,
    proposed_by: proposer,
    in_reply_to,
    bundle,
    status: 'OPEN',
    created_at_ms: now,
    expires_at_ms: Math.min(now + session.policy.offer_ttl_seconds * 1000, session.expires_at_ms),
    closed_at_ms: null,
  };
  turn.state.offers.push(offer);
  session.active_offer_id = offer.offer_id;
  turn.alarms.push({ name: 'offer', due_ms: offer.expires_at_ms });
  turn.touch();
  return offer;
}

function activeOffer(state: SessionState): OfferView | null {
  const id = state.session?.active_offer_id;
  return id ? (state.offers.find((offer) => offer.offer_id === id) ?? null) : null;
}

function offer(state: SessionState, caller: string, bundle: Bundle, context: TurnContext): Result {
  const session = readable(state, caller);
  requireNegotiating(session, context.now);
  if (session.round >= session.policy.max_rounds) {
    throw new ServiceError('handshake_max_rounds', `The session has used its ${session.policy.max_rounds} rounds.`, { details: { round: session.round, max_rounds: session.policy.max_rounds } });
  }
  const open = activeOffer(state);
  const openNow = open && open.status === 'OPEN' && context.now < open.expires_at_ms ? open : null;
  if (openNow && openNow.proposed_by === caller) {
    throw new ServiceError('handshake_offer_open', 'Your offer is still open: withdraw it first, or wait for an answer.', { details: { offer_id: openNow.offer_id } });
  }
  const turn = new Turn(state, context);
  const previous = turn.state.offers[turn.state.offers.length - 1] ?? null;
  if (open && open.status === 'OPEN') closeOfferIn(turn, open.offer_id, openNow ? 'COUNTERED' : 'EXPIRED');
  const made = addOffer(turn, caller, bundle, previous?.offer_id ?? null);
  return turn.done(made);
}

/** Closes an offer of the turn's state; leaves the session's active offer empty. */
function closeOfferIn(turn: Turn, offer_id: string, to: OfferStatus): OfferView {
  const offer = turn.state.offers.find((candidate) => candidate.offer_id === offer_id)!;
  move(OFFER_MOVES, offer, to);
  offer.closed_at_ms = turn.context.now;
  if (turn.session.active_offer_id === offer_id) {
    turn.session.active_offer_id = null;
    turn.alarms.push({ name: 'offer', due_ms: null });
  }
  turn.touch();
  return offer;
}

/** The open offer `offer_id`, for an answer by `caller`. */
function openOffer(state: SessionState, caller: string, offer_id: string, now: number): OfferView {
  const session = readable(state, caller);
  const offer = state.offers.find((candidate) => candidate.offer_id === offer_id);
  if (!offer) throw new ServiceError('not_found', 'No such offer in this session.');
  if (offer.status !== 'OPEN' || now >= offer.expires_at_ms) {
    const status = offer.status === 'OPEN' ? 'EXPIRED' : offer.status;
    throw new ServiceError('handshake_offer_not_open', `The offer is ${status}.`, { details: { status } });
  }
  requireNegotiating(session, now);
  return offer;
}

/** After an offer of the last round closed without agreement, nothing more can happen: the session expires. */
function exhaustRounds(turn: Turn): void {
  const session = turn.session;
  if (session.status === 'NEGOTIATING' && session.round >= session.policy.max_rounds && session.active_offer_id === null) endSession(turn, 'EXPIRED', 'max_rounds');
}

function closeOffer(state: SessionState, caller: string, offer_id: string, to: 'REJECTED' | 'WITHDRAWN', context: TurnContext): Result {
  const offer = openOffer(state, caller, offer_id, context.now);
  const proposer = offer.proposed_by === caller;
  if (to === 'REJECTED' && proposer) throw new ServiceError('forbidden', 'Only the party an offer was made to may reject it; withdraw your own offer instead.');
  if (to === 'WITHDRAWN' && !proposer) throw new ServiceError('forbidden', 'Only the party that made an offer may withdraw it.');
  const turn = new Turn(state, context);
  const closed = closeOfferIn(turn, offer_id, to);
  exhaustRounds(turn);
  return turn.done(closed);
}

function emptyStage(party_id: string): StageView {
  return { party_id, staged: false, staging: false, confirmed: false, ledger_hold_ids: [], item_lock_ids: [], receive_container_id: null };
}

function accept(state: SessionState, caller: string, offer_id: string, context: TurnContext): Result {
  const offer = openOffer(state, caller, offer_id, context.now);
  if (offer.proposed_by === caller) throw new ServiceError('forbidden', 'Only the party the offer was made to may accept it.');
  const turn = new Turn(state, context);
  const session = turn.session;
  closeOfferIn(turn, offer_id, 'ACCEPTED');
  move(SESSION_MOVES, session, 'AGREED');
  const settlement_id = `${session.session_id}.s`;
  const deadline = context.now + session.policy.settlement_timeout_seconds * 1000;
  session.settlement_id = settlement_id;
  session.deadline_at_ms = deadline;
  turn.state.settlement = {
    view: {
      settlement_id,
      session_id: session.session_id,
      accepted_offer_id: offer_id,
      status: 'STAGING',
      deadline_at_ms: deadline,
      initiator_stage: emptyStage(session.initiator.id),
      responder_stage: emptyStage(session.responder.id),
      rollback_reason: null,
      holds_captured: 0,
      items_transferred: 0,
      preparing: false,
      created_at_ms: context.now,
      completed_at_ms: null,
    },
    progress: { initiator: { attempt: 0, pending: [], request_id: null }, responder: { attempt: 0, pending: [], request_id: null } },
    capturing: [],
    capture_errors: [],
    prepare: null,
    prepare_attempts: 0,
    rooms: {},
  };
  turn.alarms.push({ name: 'session', due_ms: null }, { name: 'settlement', due_ms: deadline });
  turn.touch();
  return turn.done(turn.state.settlement.view);
}

function stageOf(settlement: SettlementState, role: Role): StageView {
  return role === 'initiator' ? settlement.view.initiator_stage : settlement.view.responder_stage;
}

function acceptedBundle(state: SessionState): Bundle {
  const id = state.settlement!.view.accepted_offer_id;
  return state.offers.find((offer) => offer.offer_id === id)!.bundle;
}

function liveSettlement(state: SessionState, caller: string): SettlementState {
  const session = readable(state, caller);
  const settlement = state.settlement;
  if (!settlement) throw invalidState('The session has no settlement: no offer was accepted', session.status);
  return settlement;
}

function sideOf(bundle: Bundle, role: Role) {
  return role === 'initiator' ? bundle.initiator_gives : bundle.responder_gives;
}

function stage(state: SessionState, caller: string, receive: ContainerConfig | null, context: TurnContext): Result {
  const settlement = liveSettlement(state, caller);
  const role = roleOf(state.session!, caller);
  const mine = stageOf(settlement, role);
  if (settlement.view.status !== 'STAGING') {
    if (mine.staged) return { state, reply: settlement.view };
    throw invalidState('The settlement is no longer staging', settlement.view.status);
  }
  if (mine.staged) return { state, reply: settlement.view };
  if (mine.staging) throw new ServiceError('handshake_stage_in_progress', 'Your holds are being placed; the first stage call answers when they are.');
  const bundle = acceptedBundle(state);
  const receives = sideOf(bundle, other(role)).item_legs.length > 0;
  if (receives && receive === null) {
    throw new ServiceError('BAD_REQUEST', 'The other side gives items: name the container you receive them in (body.receive_container_id).', {
      details: [{ field: 'body.receive_container_id', message: 'is required when the other side gives items' }],
    });
  }
  if (receive !== null && receive.owner_id !== caller) {
    throw new ServiceError('items_container_not_found', `Container ${receive.container_id} is not one you own (its owner_id must be your user id).`, {
      details: [{ field: 'body.receive_container_id', message: 'is not a container you own' }],
    });
  }
  const turn = new Turn(state, context);
  const live = turn.state.settlement!;
  const stageView = stageOf(live, role);
  const progress = live.progress[role];
  const side = sideOf(bundle, role);
  progress.receive = receives ? receive : null;
  stageView.receive_container_id = progress.receive?.container_id ?? null;
  if (side.currency_legs.length === 0 && side.item_legs.length === 0) {
    stageView.staged = true;
    turn.touch();
    return turn.done(live.view);
  }
  stageView.staging = true;
  const prefix = `${live.view.settlement_id}.${role}.${progress.attempt}`;
  progress.pending = [
    ...side.currency_legs.map((_leg, index): PendingCustody => ({ hold_id: `${prefix}.${index}`, ok: null, error: null })),
    ...side.item_legs.map((leg, index): PendingCustody => ({ hold_id: `${prefix}.i${index}`, ok: null, error: null, container_id: leg.container_id })),
  ];
  progress.request_id = context.request_id;
  const purpose = { area: 'handshake', ref: live.view.settlement_id };
  side.currency_legs.forEach((leg, index) => {
    const call: HoldCall = { op: 'place_hold', hold_id: `${prefix}.${index}`, currency: leg.currency_id, amount: leg.amount, purpose };
    turn.ledger(caller, call, 'hold');
  });
  side.item_legs.forEach((leg, index) => {
    const lock_id = `${prefix}.i${index}`;
    turn.items(leg.container_id, { op: 'lock', lock_id, item_id: leg.item_id, quantity: leg.quantity, owner_id: caller, holder: purpose }, lock_id, 'lock');
  });
  turn.touch();
  return turn.done(undefined, context.request_id !== null);
}

/** Gives back a hold or a lock (a tell: the ledger and the container apply it once and remember it). */
function giveBack(turn: Turn, role: Role, entry: PendingCustody): void {
  if (entry.container_id === undefined) turn.ledger(userOf(turn.session, role), { op: 'release_hold', hold_id: entry.hold_id }, null);
  else turn.items(entry.container_id, { op: 'unlock', lock_id: entry.hold_id }, entry.hold_id, null);
}

function answered(state: SessionState, answer: FlowAnswer, context: TurnContext): Result {
  const settlement = state.settlement;
  if (!settlement) return { state };
  if (answer.step === 'hold' || answer.step === 'lock') return holdAnswered(state, answer, context);
  if (answer.step === 'room') return roomAnswered(state, answer, context);
  if (answer.step === 'capture' || answer.step === 'item') {
    if (settlement.view.status !== 'COMMITTING' || !settlement.capturing.includes(answer.flow_id)) return { state };
    const turn = new Turn(state, context);
    const live = turn.state.settlement!;
    live.capturing = live.capturing.filter((id) => id !== answer.flow_id);
    if (answer.ok && answer.step === 'capture') live.view.holds_captured += 1;
    else if (answer.ok) live.view.items_transferred += 1;
    else live.capture_errors.push(`${answer.flow_id}: ${answer.error.code}: ${answer.error.message}`);
    if (live.capturing.length === 0) finishCommit(turn);
    else turn.touch();
    return turn.done();
  }
  return { state };
}

function holdAnswered(state: SessionState, answer: FlowAnswer, context: TurnContext): Result {
  const settlement = state.settlement!;
  if (settlement.view.status !== 'STAGING') return { state }; // rolled back: its release covers this hold id
  const role: Role | null = settlement.progress.initiator.pending.some((hold) => hold.hold_id === answer.flow_id)
    ? 'initiator'
    : settlement.progress.responder.pending.some((hold) => hold.hold_id === answer.flow_id)
      ? 'responder'
      : null;
  if (!role) return { state };
  const turn = new Turn(state, context);
  const live = turn.state.settlement!;
  const progress = live.progress[role];
  const hold = progress.pending.find((entry) => entry.hold_id === answer.flow_id)!;
  if (hold.ok !== null) return { state };
  hold.ok = answer.ok;
  hold.error = answer.ok ? null : answer.error;
  if (answer.ok && answer.step === 'lock') {
    const { lock } = answer.reply as LockReply;
    hold.weight_m = (lock.item?.unit_weight_m ?? 0) * lock.quantity;
    hold.volume_m = (lock.item?.unit_volume_m ?? 0) * lock.quantity;
  }
  if (progress.pending.some((entry) => entry.ok === null)) return turn.done();
  const stageView = stageOf(live, role);
  stageView.staging = false;
  const refused = progress.pending.find((entry) => !entry.ok);
  if (refused) {
    // All or nothing: give back what this attempt placed; the next attempt uses fresh ids.
    for (const entry of progress.pending) giveBack(turn, role, entry);
    if (progress.request_id) turn.replies.push({ request_id: progress.request_id, error: refused.error! });
    progress.pending = [];
    progress.attempt += 1;
  } else {
    stageView.staged = true;
    stageView.ledger_hold_ids = progress.pending.filter((entry) => entry.container_id === undefined).map((entry) => entry.hold_id);
    stageView.item_lock_ids = progress.pending.filter((entry) => entry.container_id !== undefined).map((entry) => entry.hold_id);
    if (progress.request_id) turn.replies.push({ request_id: progress.request_id, reply: live.view });
  }
  progress.request_id = null;
  turn.touch();
  return turn.done();
}

function confirm(state: SessionState, caller: string, context: TurnContext): Result {
  const settlement = liveSettlement(state, caller);
  const role = roleOf(state.session!, caller);
  const mine = stageOf(settlement, role);
  if (settlement.view.status === 'COMMITTING' || settlement.view.status === 'SETTLED') {
    return { state, reply: { outcome: 'ALREADY_CONFIRMED', settlement: settlement.view } satisfies ConfirmReply };
  }
  if (settlement.view.status !== 'STAGING') throw invalidState('The settlement was rolled back', settlement.view.status);
  if (!mine.staged) throw new ServiceError('handshake_not_staged', 'Stage your side first (POST .../settlement/stage), then confirm.');
  if (mine.confirmed) return { state, reply: { outcome: 'WAITING_FOR_COUNTERPARTY', settlement: settlement.view } satisfies ConfirmReply };
  const turn = new Turn(state, context);
  const live = turn.state.settlement!;
  stageOf(live, role).confirmed = true;
  turn.touch();
  if (!stageOf(live, other(role)).confirmed) return turn.done({ outcome: 'WAITING_FOR_COUNTERPARTY', settlement: live.view } satisfies ConfirmReply);
  const bundle = acceptedBundle(turn.state);
  const receivers = (['initiator', 'responder'] as const).filter((receiver) => sideOf(bundle, other(receiver)).item_legs.length > 0);
  if (receivers.length > 0) {
    prepare(turn, receivers);
    return turn.done(undefined, context.request_id !== null);
  }
  commit(turn);
  return turn.done({ outcome: 'COMMITTED', settlement: live.view } satisfies ConfirmReply);
}

/** Both confirmed and items move: hold room for them in each receiving container first (the confirm waits). */
function prepare(turn: Turn, receivers: Role[]): void {
  const live = turn.state.settlement!;
  const attempt = live.prepare_attempts ?? 0;
  live.prepare_attempts = attempt + 1;
  live.view.preparing = true;
  live.prepare = { attempt, request_id: turn.context.request_id, rooms: [] };
  for (const receiver of receivers) {
    const room_id = `${live.view.settlement_id}.${receiver}.room${attempt}`;
    const config = live.progress[receiver].receive!;
    const units = live.progress[other(receiver)].pending
      .filter((entry) => entry.container_id !== undefined)
      .map((entry) => ({ weight_m: entry.weight_m ?? 0, volume_m: entry.volume_m ?? 0 }));
    live.prepare.rooms.push({ room_id, role: receiver, ok: null, error: null });
    const call: CustodyCall = { op: 'reserve_room', room_id, config, owner_id: userOf(turn.session, receiver), units, holder: { area: 'handshake', ref: live.view.settlement_id } };
    turn.items(config.container_id, call, room_id, 'room');
  }
}

function roomAnswered(state: SessionState, answer: FlowAnswer, context: TurnContext): Result {
  const settlement = state.settlement!;
  const room = settlement.prepare?.rooms.find((entry) => entry.room_id === answer.flow_id);
  // Rolled back or refused meanwhile: the rollback (or the refusal) released every room id of the attempt.
  if (settlement.view.status !== 'STAGING' || !room || room.ok !== null) return { state };
  const turn = new Turn(state, context);
  const live = turn.state.settlement!;
  const prepared = live.prepare!;
  const entry = prepared.rooms.find((candidate) => candidate.room_id === answer.flow_id)!;
  entry.ok = answer.ok;
  entry.error = answer.ok ? null : answer.error;
  if (prepared.rooms.some((candidate) => candidate.ok === null)) return turn.done();
  live.prepare = null;
  live.view.preparing = false;
  const refused = prepared.rooms.filter((candidate) => !candidate.ok);
  if (refused.length === 0) {
    live.rooms = Object.fromEntries(prepared.rooms.map((candidate) => [candidate.role, candidate.room_id]));
    commit(turn);
    if (prepared.request_id) turn.replies.push({ request_id: prepared.request_id, reply: { outcome: 'COMMITTED', settlement: live.view } satisfies ConfirmReply });
    return turn.done();
  }
  // No room: give the held rooms back; whoever lacks room confirms again once it has made some.
  for (const candidate of prepared.rooms) turn.items(live.progress[candidate.role].receive!.container_id, { op: 'release_room', room_id: candidate.room_id }, candidate.room_id, null);
  for (const candidate of refused) stageOf(live, candidate.role).confirmed = false;
  if (prepared.request_id) turn.replies.push({ request_id: prepared.request_id, error: refused[0].error! });
  turn.touch();
  return turn.done();
}

/** The commit point: both confirmed; every hold is captured to the other party, through the outbox. */
function commit(turn: Turn): void {
  const live = turn.state.settlement!;
  const session = turn.session;
  move(SETTLEMENT_MOVES, live.view, 'COMMITTING');
  turn.alarms.push({ name: 'settlement', due_ms: null });
  const bundle = acceptedBundle(turn.state);
  for (const role of ['initiator', 'responder'] as const) {
    const legs = role === 'initiator' ? bundle.initiator_gives.currency_legs : bundle.responder_gives.currency_legs;
    const payee = { tenant: session.tenant, user_id: userOf(session, other(role)) };
    stageOf(live, role).ledger_hold_ids.forEach((hold_id, index) => {
      live.capturing.push(hold_id);
      turn.ledger(userOf(session, role), { op: 'capture_hold', hold_id, amount: legs[index].amount, payee }, 'capture');
    });
    const receiver = other(role);
    const receive = live.progress[receiver].receive ?? null;
    for (const entry of live.progress[role].pending) {
      if (entry.container_id === undefined || receive === null) continue;
      live.capturing.push(entry.hold_id);
      const to = { container_id: receive.container_id, config: receive, room_id: live.rooms?.[receiver] ?? null };
      turn.items(entry.container_id, { op: 'transfer', lock_id: entry.hold_id, to }, entry.hold_id, 'item');
    }
  }
  if (live.capturing.length === 0) finishCommit(turn);
}

function finishCommit(turn: Turn): void {
  const live = turn.state.settlement!;
  move(SETTLEMENT_MOVES, live.view, 'SETTLED');
  live.view.completed_at_ms = turn.context.now;
  move(SESSION_MOVES, turn.session, 'SETTLED');
  turn.session.deadline_at_ms = null;
  turn.touch();
}

/** Releases every hold the settlement placed or is placing, and answers a stage still waiting. */
function rollBack(turn: Turn, reason: string): void {
  const live = turn.state.settlement!;
  const session = turn.session;
  for (const role of ['initiator', 'responder'] as const) {
    const stageView = stageOf(live, role);
    const progress = live.progress[role];
    const hold_ids = new Set([...stageView.ledger_hold_ids, ...progress.pending.filter((entry) => entry.container_id === undefined).map((entry) => entry.hold_id)]);
    for (const hold_id of hold_ids) turn.ledger(userOf(session, role), { op: 'release_hold', hold_id }, null);
    for (const entry of progress.pending) if (entry.container_id !== undefined) giveBack(turn, role, entry);
    const room_ids = new Set([...(live.prepare?.rooms.filter((room) => room.role === role).map((room) => room.room_id) ?? []), ...(live.rooms?.[role] ? [live.rooms[role]!] : [])]);
    for (const room_id of room_ids) turn.items(progress.receive!.container_id, { op: 'release_room', room_id }, room_id, null);
    if (progress.request_id) {
      turn.replies.push({ request_id: progress.request_id, error: { code: 'handshake_invalid_state', message: 'The settlement was rolled back while your holds were being placed.', details: { status: 'ROLLED_BACK' } } });
    }
    progress.request_id = null;
    progress.pending = [];
    stageView.staging = false;
  }
  if (live.prepare?.request_id) {
    turn.replies.push({ request_id: live.prepare.request_id, error: { code: 'handshake_invalid_state', message: 'The settlement was rolled back while room for the items was being held.', details: { status: 'ROLLED_BACK' } } });
  }
  live.prepare = null;
  live.view.preparing = false;
  move(SETTLEMENT_MOVES, live.view, 'ROLLED_BACK');
  live.view.rollback_reason = reason;
  live.view.completed_at_ms = turn.context.now;
  turn.alarms.push({ name: 'settlement', due_ms: null });
}

function endSession(turn: Turn, to: 'CANCELLED' | 'EXPIRED', reason: string): void {
  const session = turn.session;
  const open = activeOffer(turn.state);
  if (open && open.status === 'OPEN') closeOfferIn(turn, open.offer_id, to === 'CANCELLED' ? 'CANCELLED' : 'EXPIRED');
  move(SESSION_MOVES, session, to);
  session.closed_reason = reason;
  session.deadline_at_ms = null;
  turn.alarms.push({ name: 'session', due_ms: null }, { name: 'offer', due_ms: null });
  turn.touch();
}

function cancel(state: SessionState, caller: string, context: TurnContext): Result {
  const session = readable(state, caller);
  if (session.status !== 'NEGOTIATING' && session.status !== 'AGREED') throw invalidState('The session has ended', session.status);
  if (state.settlement && state.settlement.view.status !== 'STAGING') throw invalidState('Both parties confirmed: the settlement is committing and cannot be cancelled', state.settlement.view.status);
  const turn = new Turn(state, context);
  const rolled_back = turn.state.settlement !== null;
  if (rolled_back) rollBack(turn, `cancelled_by_${roleOf(session, caller)}`);
  endSession(turn, 'CANCELLED', `cancelled_by_${roleOf(session, caller)}`);
  return turn.done({ session_id: session.session_id, rolled_back, session: turn.session } satisfies CancelReply);
}

/** The settlement deadline (alarm or sweep): an overdue STAGING settlement is rolled back and the session expires. */
function deadline(state: SessionState, context: TurnContext, reason: 'deadline' | 'sweep'): Result {
  const settlement = state.settlement;
  if (!settlement || settlement.view.status !== 'STAGING' || context.now < settlement.view.deadline_at_ms) return { state };
  const turn = new Turn(state, context);
  rollBack(turn, reason);
  endSession(turn, 'EXPIRED', 'settlement_deadline');
  return turn.done();
}

function alarm(state: SessionState, name: string, context: TurnContext): Result {
  const session = state.session;
  if (!session) return { state };
  switch (name) {
    case 'settlement':
      return deadline(state, context, 'deadline');
    case 'offer': {
      const open = activeOffer(state);
      if (!open || open.status !== 'OPEN' || context.now < open.expires_at_ms) return { state };
      const turn = new Turn(state, context);
      closeOfferIn(turn, open.offer_id, 'EXPIRED');
      exhaustRounds(turn);
      return turn.done();
    }
    case 'session': {
      if (session.status !== 'NEGOTIATING' || context.now < session.expires_at_ms) return { state };
      const turn = new Turn(state, context);
      endSession(turn, 'EXPIRED', 'session_ttl');
      return turn.done();
    }
    default:
      return { state };
  }
}
