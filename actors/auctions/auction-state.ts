import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall, flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { LEDGER_ACCOUNT_KIND, ledgerAccountKey, type HoldCall, type HoldReply, type LedgerAccountMessage } from '../ledger/messages.js';
import { minimumBid, resolveBid, type BiddingState, type HistoryBid, type Leader } from './bidding.js';
import { deliverSend, transferSend, unlockSend } from './item-transfer.js';
import type { ContainerConfig, ReceiveReply } from '../items/messages.js';
import {
  AUCTION_INDEX_KIND,
  AUCTION_KIND,
  auctionIndexKey,
  auctionPolicy as policy,
  type AuctionCaller,
  type AuctionIndexMessage,
  type AuctionMessage,
  type AuctionSpec,
  type AuctionStatus,
  type AuctionView,
  type BidReply,
  type BidView,
  type CloseReply,
  type DeleteReply,
  type SettlementView,
} from './messages.js';
import { softCloseEnd } from './soft-close.js';
import { canRequest, isFinal, REQUESTABLE } from './status-machine.js';

/**
 * One auction: pure domain logic of the `auction` actor (storage `records`,
 * key = auctionKey(tenant, auction_id)). Records: `a` the auction (terms,
 * leader, settlement), `b:<seq>` each accepted bid, in order, and `q:<n>`
 * each bid waiting for its hold, in arrival order (so a bid costs O(1) to store).
 *
 * Bids and holds. A bid that could lead is not accepted until the bidder's
 * funds are held: the auction asks the bidder's ledger account to place a
 * hold (a flow-call, step `hold`) and keeps the bid in a queue, in arrival
 * order. Holds are placed concurrently, but bids are decided in arrival
 * order only: when the answer for the head of the queue is in, the head is
 * resolved against the auction as it then stands (resolveBid), accepted or
 * refused, and the next head follows. So every accepted bid is higher than
 * the one before, whatever order the ledger answers in, and a bid never
 * jumps one that arrived before it. A refused bid's hold, and the hold of a
 * leader who is outbid, is released at once (a release_hold through the
 * outbox; the ledger applies it once and remembers a release that arrives
 * before its placement).
 *
 * Settlement (end alarm, close, PUT status, buy it now) waits for the bids
 * that arrived before the end, then captures the winner's hold to the seller
 * (flow-call, step `capture`; the ledger credits the seller through its own
 * outbox, once), releases the leader's hold when the reserve is not met,
 * and runs the item step (item-transfer.ts: the winner's delivery
 * container, step `deliver`, then the seller's container transfers the
 * locked item there, step `item`; without a winner the lock is released).
 * Each step is recorded in the settlement, so a restart continues where it
 * stopped and nothing applies twice.
 */
/** item_transfer_reason for an auction whose item_id is a label, not an item of the items area. */
export const FREE_LABEL_REASON = 'item_id is a label (no item_domain): the service has no item to transfer';
export const CORE_SUBKEY = 'a';
export const BID_PREFIX = 'b:';
export const QUEUE_PREFIX = 'q:';

export interface PendingBid {
  hold_id: string;
  bidder_id: string;
  amount: number;
  is_proxy: boolean;
  arrived_ms: number;
  /** The ask to answer (null after a restart: that caller got 503 flow_interrupted). */
  request_id: string | null;
  /** The ledger's answer, once in; the bid is decided when it reaches the head of the queue. */
  answer: { ok: true } | { ok: false; error: FlowError } | null;
}

export interface LeaderState extends Leader {
  hold_id: string;
}

export interface AuctionCore {
  view: AuctionView;
  leader: LeaderState | null;
  /** Bids waiting for their hold or their turn, in arrival order (stored as `q:` records, not in `a`). */
  queue: PendingBid[];
  /**
   * Counter for hold ids (unique per auction). A bid's arrival writes only its
   * `q:` record, not the core, so on load the counter is the larger of the
   * stored one and the newest queued bid's.
   */
  hold_seq: number;
  /** The end was reached (or close asked) while bids were waiting: settle when the queue drains. */
  closing: boolean;
  /** The list's copy is behind (price, bid count); the `index` alarm sends it. */
  index_dirty: boolean;
  deleted: boolean;
  /** Settlement steps not yet answered (`capture`, `item`); the settlement completes when none is left. */
  settle_pending?: string[];
  /** Asks waiting for the settlement (close, PUT status); in memory only. */
  waiting: { request_id: string; kind: 'close' | 'status' }[];
}

export interface AuctionState {
  readonly key: string;
  core: AuctionCore | null;
  bids: BidView[];
}

type Result = TurnResult<AuctionState, unknown>;

export function bidSubkey(seq: number): string {
  return BID_PREFIX + String(seq).padStart(10, '0');
}

function holdSeqOf(hold_id: string): number {
  return Number(hold_id.slice(hold_id.lastIndexOf('.') + 1));
}

export function queueSubkey(hold_id: string): string {
  return QUEUE_PREFIX + String(holdSeqOf(hold_id)).padStart(10, '0');
}

export function loadAuction(key: string, records: Iterable<[string, unknown]>): AuctionState {
  const state: AuctionState = { key, core: null, bids: [] };
  const queue: PendingBid[] = [];
  for (const [subkey, value] of records) {
    if (subkey === CORE_SUBKEY) state.core = { ...(value as AuctionCore), queue: [], waiting: [] };
    else if (subkey.startsWith(BID_PREFIX)) state.bids.push(value as BidView);
    else if (subkey.startsWith(QUEUE_PREFIX)) queue.push({ ...(value as PendingBid), request_id: null });
  }
  if (state.core) {
    state.core.queue = queue;
    for (const pending of queue) state.core.hold_seq = Math.max(state.core.hold_seq, holdSeqOf(pending.hold_id));
  }
  return state;
}

/** The stored form of the core (a copy: later turns of the batch mutate the live one); queue and asks live elsewhere. */
function stored(core: AuctionCore): AuctionCore {
  const view = { ...core.view, settlement: core.view.settlement && { ...core.view.settlement } };
  return { ...core, view, leader: core.leader && { ...core.leader }, queue: [], waiting: [] };
}

function storedPending(pending: PendingBid): PendingBid {
  return { ...pending, request_id: null };
}

/** A copy of the view for a reply (released after the commit, when later turns may have changed the live one). */
export function viewCopy(view: AuctionView): AuctionView {
  return { ...view, settlement: view.settlement && { ...view.settlement } };
}

/** Collects a turn's effects; `done` writes the core once. */
class Turn {
  readonly writes: RecordWrite[] = [];
  readonly sends: ActorSend[] = [];
  readonly alarms: AlarmChange[] = [];
  readonly replies: DeferredReply[] = [];
  coreChanged = false;
  indexNow = false;

  constructor(
    readonly state: AuctionState,
    readonly context: TurnContext,
  ) {}

  get core(): AuctionCore {
    return this.state.core!;
  }

  touch(): void {
    this.coreChanged = true;
    const view = this.core.view;
    view.version += 1;
    view.updated_at_ms = Math.max(this.context.now, view.updated_at_ms);
  }

  release(hold_id: string, bidder_id: string): void {
    const call: HoldCall = { op: 'release_hold', hold_id };
    this.sends.push({ kind: LEDGER_ACCOUNT_KIND, key: ledgerAccountKey(this.core.view.tenant, bidder_id), message: call satisfies LedgerAccountMessage });
  }

  answer(request_id: string | null, reply: unknown): void {
    if (request_id) this.replies.push({ request_id, reply });
  }

  refuse(request_id: string | null, error: FlowError): void {
    if (request_id) this.replies.push({ request_id, error });
  }

  /** Removes a decided bid from the stored queue. */
  dequeue(pending: PendingBid): void {
    this.writes.push({ subkey: queueSubkey(pending.hold_id), value: undefined });
  }

  done(reply?: unknown, defer = false): Result {
    const core = this.state.core;
    if (core && this.coreChanged) {
      if (this.indexNow) {
        core.index_dirty = false;
        this.sends.push(indexSend(viewCopy(core.view)));
      } else if (!core.index_dirty) {
        core.index_dirty = true;
        this.alarms.push({ name: 'index', due_ms: this.context.now + policy.index_refresh_ms });
      }
      this.writes.push({ subkey: CORE_SUBKEY, value: stored(core) });
    }
    const result: Result = { state: this.state, writes: this.writes, sends: this.sends, alarms: this.alarms, replies: this.replies };
    if (reply !== undefined) result.reply = reply;
    if (defer) result.defer = true;
    return result;
  }
}

function indexSend(view: AuctionView): ActorSend {
  return { kind: AUCTION_INDEX_KIND, key: auctionIndexKey(view.tenant), message: { op: 'upsert', entry: view } satisfies AuctionIndexMessage };
}

export function stepAuction(state: AuctionState, message: AuctionMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'init':
      return init(state, message, context);
    case 'flow-call':
      return answerFlowCall(stepAuction, state, message as never, context);
    case 'get':
      return { state, reply: viewCopy(current(state).view) };
    case 'bids': {
      current(state);
      const limit = Math.min(policy.bids_limit_max, message.limit > 0 ? message.limit : policy.bids_limit_default);
      // bids[i] has seq i + 1, so the bids before seq n are bids[0 .. n - 2].
      const older = message.before_seq === undefined ? state.bids : state.bids.slice(0, Math.max(0, message.before_seq - 1));
      return { state, reply: { total: state.bids.length, bids: older.slice(-limit).reverse() } };
    }
    case 'bid':
      return bid(state, message, context);
    case 'close':
      return close(state, message.caller, context);
    case 'set_status':
      return setStatus(state, message.caller, message.status, context);
    case 'delete':
      return remove(state, message.caller, context);
    case 'flow-answer':
      return flowAnswered(state, message, context);
    case '$alarm':
      return alarm(state, message.name, context);
    default:
      return { state };
  }
}

function current(state: AuctionState): AuctionCore {
  if (!state.core || state.core.deleted) throw new ServiceError('not_found', 'No such auction.');
  return state.core;
}

function requireSellerOrAdmin(core: AuctionCore, caller: AuctionCaller): void {
  if (!caller.admin && caller.user_id !== core.view.seller_id) throw new ServiceError('forbidden', 'Only the seller or a platform admin may do this.');
}

function init(state: AuctionState, message: Extract<AuctionMessage, { op: 'init' }>, context: TurnContext): Result {
  if (state.core) return { state, reply: viewCopy(state.core.view) };
  const spec: AuctionSpec = message.spec;
  const view: AuctionView = {
    ...spec,
    tenant: message.tenant,
    auction_type: 'english',
    seller_id: message.seller_id,
    status: 'scheduled',
    current_price: spec.starting_price,
    high_bidder: null,
    total_bids: 0,
    original_end_ms: spec.end_ms,
    final_price: null,
    winner_id: null,
    reserve_met: spec.reserve_price === null,
    created_at_ms: context.now,
    updated_at_ms: context.now,
    settlement: null,
    version: 1,
  };
  state.core = { view, leader: null, queue: [], hold_seq: 0, closing: false, index_dirty: false, deleted: false, waiting: [] };
  const turn = new Turn(state, context);
  turn.coreChanged = true;
  turn.indexNow = true;
  if (spec.start_ms <= context.now) open(turn);
  else turn.alarms.push({ name: 'start', due_ms: spec.start_ms });
  return turn.done(viewCopy(view));
}

function open(turn: Turn): void {
  const { view } = turn.core;
  view.status = 'open';
  turn.touch();
  turn.indexNow = true;
  turn.alarms.push({ name: 'start', due_ms: null }, { name: 'end', due_ms: view.end_ms });
}

function alarm(state: AuctionState, name: string, context: TurnContext): Result {
  const core = state.core;
  if (!core || core.deleted) return { state };
  const turn = new Turn(state, context);
  switch (name) {
    case 'start':
      if (core.view.status === 'scheduled') open(turn);
      break;
    case 'end':
      if (core.view.status === 'open' && context.now >= core.view.end_ms) beginSettlement(turn);
      break;
    case 'index':
      if (core.index_dirty) {
        core.index_dirty = false;
        return { state, writes: [{ subkey: CORE_SUBKEY, value: stored(core) }], sends: [indexSend(viewCopy(core.view))] };
      }
      break;
  }
  return turn.done();
}

function biddingState(core: AuctionCore): BiddingState {
  const { view, leader } = core;
  return { starting_price: view.starting_price, bid_increment: view.bid_increment, reserve_price: view.reserve_price, buy_it_now_price: view.buy_it_now_price, current_price: view.current_price, leader };
}

/** Refuses a bid that cannot be taken now (checked again when it is decided). */
function checkOpen(core: AuctionCore, now: number): void {
  const { view } = core;
  if (view.status === 'scheduled' || (view.status === 'open' && now < view.start_ms)) {
    throw new ServiceError('auction_not_open', `The auction opens at ${new Date(view.start_ms).toISOString()}.`, { details: { status: view.status } });
  }
  if (view.status !== 'open' || core.closing || now >= view.end_ms) {
    throw new ServiceError('auction_not_open', 'The auction has ended.', { details: { status: view.status === 'open' ? 'ended' : view.status } });
  }
}

function bid(state: AuctionState, message: Extract<AuctionMessage, { op: 'bid' }>, context: TurnContext): Result {
  const core = current(state);
  const { view } = core;
  checkOpen(core, context.now);
  if (message.caller.user_id === view.seller_id) throw new ServiceError('forbidden', 'The seller may not bid on their own auction.');
  if (state.bids.length >= policy.bids_per_auction_max) throw new ServiceError('auction_bid_limit_reached', `The auction has taken its ${policy.bids_per_auction_max} bids.`);
  if (core.queue.length >= policy.pending_bids_max) throw new ServiceError('actor_overloaded', 'Too many bids are waiting for their hold; retry.', { retryAfterSeconds: 1 });
  // The price only rises while bids wait, so a bid too low now stays too low: refuse it without a hold.
  const precheck = resolveBid(biddingState(core), { bidder_id: message.caller.user_id, amount: message.amount, is_proxy: message.is_proxy });
  if (precheck.kind === 'rejected') throw new ServiceError(precheck.code, precheck.message, { details: { minimum: precheck.minimum, current_price: view.current_price } });
  const turn = new Turn(state, context);
  core.hold_seq += 1;
  const hold_id = `${view.auction_id}.${core.hold_seq}`;
  const pending: PendingBid = {
    hold_id,
    bidder_id: message.caller.user_id,
    amount: message.amount,
    is_proxy: message.is_proxy,
    arrived_ms: context.now,
    request_id: context.request_id,
    answer: null,
  };
  core.queue.push(pending);
  // Only the queued bid is written (the hot path); the core follows when the bid is decided.
  turn.writes.push({ subkey: queueSubkey(hold_id), value: storedPending(pending) });
  const call: HoldCall = { op: 'place_hold', hold_id, currency: view.currency, amount: message.amount, purpose: { area: 'auctions', ref: view.auction_id } };
  turn.sends.push(flowCall(LEDGER_ACCOUNT_KIND, ledgerAccountKey(view.tenant, pending.bidder_id), call, { kind: AUCTION_KIND, key: state.key, flow_id: hold_id, step: 'hold' }));
  return turn.done(undefined, context.request_id !== null);
}

function flowAnswered(state: AuctionState, answer: FlowAnswer, context: TurnContext): Result {
  const core = state.core;
  if (!core) return { state };
  const turn = new Turn(state, context);
  if (answer.step === 'hold') {
    const pending = core.queue.find((bid) => bid.hold_id === answer.flow_id);
    if (!pending || pending.answer) {
      // A placement answered again (a retry applied after the first answer was a refusal, or after the
      // bid was decided): a hold nobody will use is released, unless it backs the leader.
      const unused = answer.ok && core.leader?.hold_id !== answer.flow_id && (!pending || !pending.answer!.ok);
      if (!unused) return { state };
      turn.release(answer.flow_id, (answer.reply as HoldReply).account.user_id);
      return turn.done();
    }
    pending.answer = answer.ok ? { ok: true } : { ok: false, error: answer.error };
    if (core.queue[0] !== pending) turn.writes.push({ subkey: queueSubkey(pending.hold_id), value: storedPending(pending) });
    drain(turn);
    return turn.done();
  }
  if (answer.step === 'capture') {
    const settlement = core.view.settlement;
    if (!settlement || settlement.status !== 'in_progress' || answer.flow_id !== `${core.view.auction_id}.settle`) return { state };
    if (answer.ok) settlement.funds_settled = true;
    else settlement.error = `${answer.error.code}: ${answer.error.message}`;
    stepDone(turn, 'capture');
    return turn.done();
  }
  if (answer.step === 'deliver' || answer.step === 'item') {
    const settlement = core.view.settlement;
    const item = core.view.item;
    if (!settlement || !item || settlement.status !== 'in_progress' || answer.flow_id !== `${core.view.auction_id}.item` || !(core.settle_pending ?? []).includes('item')) return { state };
    if (!answer.ok) {
      settlement.item_transfer_reason = `${answer.error.code}: ${answer.error.message}`;
      // The item could not be delivered: its lock is released, so it stays with the seller.
      if (answer.step === 'deliver') turn.sends.push(unlockSend(core.view.tenant, core.view.auction_id, item));
      stepDone(turn, 'item');
    } else if (answer.step === 'deliver') {
      turn.sends.push(transferSend(core.view, item, answer.reply as ContainerConfig, { kind: AUCTION_KIND, key: state.key, flow_id: answer.flow_id, step: 'item' }));
      turn.touch();
    } else {
      settlement.item_transferred = true;
      settlement.item_container_id = (answer.reply as ReceiveReply).container_id;
      stepDone(turn, 'item');
    }
    return turn.done();
  }
  return { state };
}

/** One settlement step answered; the settlement completes when none is left. */
function stepDone(turn: Turn, step: string): void {
  const core = turn.core;
  core.settle_pending = (core.settle_pending ?? []).filter((entry) => entry !== step);
  if (core.settle_pending.length === 0) finishSettlement(turn);
  else turn.touch();
}

/** Decides the bids at the head of the queue whose hold answer is in, in arrival order. */
function drain(turn: Turn): void {
  const core = turn.core;
  while (core.queue.length > 0 && core.queue[0].answer !== null) {
    const pending = core.queue.shift()!;
    turn.dequeue(pending);
    decide(turn, pending);
  }
  if (core.queue.length === 0 && core.closing && core.view.status === 'open') beginSettlement(turn);
}

function bidReply(core: AuctionCore, pending: PendingBid, accepted: boolean, message: string): BidReply {
  const { view } = core;
  return {
    accepted,
    closed: view.status !== 'open' || core.closing,
    current_price: view.current_price,
    message,
    your_bid: pending.amount,
    leading: view.high_bidder === pending.bidder_id,
    high_bidder: view.high_bidder,
  };
}

function decide(turn: Turn, pending: PendingBid): void {
  const core = turn.core;
  const { view } = core;
  const answer = pending.answer!;
  if (!answer.ok) {
    turn.refuse(pending.request_id, answer.error);
    return;
  }
  // Arrived in time (checked at arrival); the auction may since have been cancelled or settled.
  if (view.status !== 'open') {
    turn.release(pending.hold_id, pending.bidder_id);
    turn.refuse(pending.request_id, { code: 'auction_not_open', message: 'The auction has ended.', details: { status: view.status } });
    return;
  }
  const resolution = resolveBid(biddingState(core), { bidder_id: pending.bidder_id, amount: pending.amount, is_proxy: pending.is_proxy });
  switch (resolution.kind) {
    case 'rejected':
      turn.release(pending.hold_id, pending.bidder_id);
      turn.refuse(pending.request_id, { code: resolution.code, message: resolution.message, details: { minimum: resolution.minimum, current_price: view.current_price } });
      return;
    case 'outbid':
      turn.release(pending.hold_id, pending.bidder_id);
      record(turn, pending, resolution.history, resolution.price, core.leader!.hold_id);
      turn.answer(pending.request_id, bidReply(core, pending, false, `Outbid at once by the high bidder's maximum; the price is now ${view.current_price}.`));
      return;
    case 'raised':
      turn.release(core.leader!.hold_id, core.leader!.bidder_id);
      core.leader = { ...resolution.leader, hold_id: pending.hold_id };
      record(turn, pending, resolution.history, resolution.price, pending.hold_id);
      turn.answer(pending.request_id, bidReply(core, pending, true, `Your maximum is now ${pending.amount}.`));
      return;
    case 'leads': {
      const previous = core.leader;
      if (previous) turn.release(previous.hold_id, previous.bidder_id);
      core.leader = { ...resolution.leader, hold_id: pending.hold_id };
      view.high_bidder = pending.bidder_id;
      record(turn, pending, resolution.history, resolution.price, previous?.hold_id ?? pending.hold_id);
      if (resolution.buy_now) {
        // Bought: the bids behind it lose, whatever their amount.
        for (const later of core.queue) {
          turn.dequeue(later);
          turn.release(later.hold_id, later.bidder_id);
          turn.refuse(later.request_id, { code: 'auction_not_open', message: 'The auction ended: someone bought it now.', details: { status: 'ended' } });
        }
        core.queue = [];
        beginSettlement(turn);
        turn.answer(pending.request_id, bidReply(core, pending, true, `Bought it now at ${resolution.price}.`));
        return;
      }
      turn.answer(pending.request_id, bidReply(core, pending, true, `You are the high bidder at ${view.current_price}.`));
      return;
    }
  }
}

/** Appends the bids a resolution adds, moves the price, and applies the soft close. */
function record(turn: Turn, pending: PendingBid, history: HistoryBid[], price: number, other_hold_id: string): void {
  const core = turn.core;
  const { view } = core;
  const { bids } = turn.state;
  for (const entry of history) {
    const seq = bids.length + 1;
    const bidView: BidView = {
      bid_id: `${view.auction_id}.b${seq}`,
      auction_id: view.auction_id,
      bidder_id: entry.bidder_id,
      amount: entry.amount,
      is_proxy: entry.is_proxy,
      hold_id: entry.bidder_id === pending.bidder_id ? pending.hold_id : other_hold_id,
      seq,
      timestamp_ms: turn.context.now,
    };
    bids.push(bidView);
    turn.writes.push({ subkey: bidSubkey(seq), value: bidView });
  }
  view.current_price = price;
  view.total_bids = bids.length;
  view.reserve_met = view.reserve_price === null || price >= view.reserve_price;
  const end_ms = softCloseEnd(view.end_ms, pending.arrived_ms, view.soft_close_seconds * 1000, view.original_end_ms, policy.soft_close_extension_max_seconds * 1000);
  if (end_ms !== view.end_ms) {
    view.end_ms = end_ms;
    turn.alarms.push({ name: 'end', due_ms: end_ms });
  }
  turn.touch();
}

/** Ends bidding; settles now, or once the bids that arrived in time are decided. */
function beginSettlement(turn: Turn): void {
  const core = turn.core;
  turn.touch();
  turn.indexNow = true;
  turn.alarms.push({ name: 'end', due_ms: null });
  if (core.queue.length > 0) {
    core.closing = true;
    return;
  }
  core.closing = false;
  const { view, leader } = core;
  view.status = 'ended';
  const reserve_met = leader !== null && (view.reserve_price === null || view.current_price >= view.reserve_price);
  const settlement: SettlementView = {
    auction_id: view.auction_id,
    status: 'in_progress',
    winner_id: reserve_met ? leader!.bidder_id : null,
    final_price: reserve_met ? view.current_price : null,
    reserve_met,
    funds_settled: false,
    holds_released: 0,
    item_transferred: false,
    item_transfer_reason: null,
    item_container_id: null,
    error: null,
    completed_at_ms: null,
  };
  view.settlement = settlement;
  view.reserve_met = reserve_met || (leader === null && view.reserve_price === null);
  if (leader && !reserve_met) {
    turn.release(leader.hold_id, leader.bidder_id);
    settlement.holds_released += 1;
  }
  if (reserve_met) {
    const call: HoldCall = { op: 'capture_hold', hold_id: leader!.hold_id, amount: view.current_price, payee: { tenant: view.tenant, user_id: view.seller_id } };
    turn.sends.push(flowCall(LEDGER_ACCOUNT_KIND, ledgerAccountKey(view.tenant, leader!.bidder_id), call, { kind: AUCTION_KIND, key: turn.state.key, flow_id: `${view.auction_id}.settle`, step: 'capture' }));
    core.settle_pending = ['capture'];
    if (view.item) {
      core.settle_pending.push('item');
      turn.sends.push(deliverSend(view, view.item, leader!.bidder_id, { kind: AUCTION_KIND, key: turn.state.key, flow_id: `${view.auction_id}.item`, step: 'deliver' }));
    } else settlement.item_transfer_reason = FREE_LABEL_REASON;
    return;
  }
  if (view.item) {
    turn.sends.push(unlockSend(view.tenant, view.auction_id, view.item));
    settlement.item_transfer_reason = "no winner: the item's lock was released; it stays with the seller";
  } else settlement.item_transfer_reason = 'no winner: nothing to transfer';
  finishSettlement(turn);
}

function finishSettlement(turn: Turn): void {
  const core = turn.core;
  const { view } = core;
  const settlement = view.settlement!;
  settlement.status = 'settled';
  settlement.completed_at_ms = turn.context.now;
  view.status = 'settled';
  view.winner_id = settlement.winner_id;
  view.final_price = settlement.final_price;
  core.leader = null;
  turn.touch();
  turn.indexNow = true;
  for (const waiting of core.waiting) turn.answer(waiting.request_id, { auction: viewCopy(view), settlement: { ...settlement } } satisfies CloseReply);
  core.waiting = [];
}

/** Answers now when the settlement is done, or defers until it is. */
function settleAndAnswer(turn: Turn, kind: 'close' | 'status'): Result {
  const core = turn.core;
  beginSettlement(turn);
  if (core.view.status === 'settled') return turn.done({ auction: viewCopy(core.view), settlement: { ...core.view.settlement! } } satisfies CloseReply);
  if (turn.context.request_id) core.waiting.push({ request_id: turn.context.request_id, kind });
  return turn.done(undefined, turn.context.request_id !== null);
}

function close(state: AuctionState, caller: AuctionCaller, context: TurnContext): Result {
  const core = current(state);
  requireSellerOrAdmin(core, caller);
  if (core.view.status !== 'open' || core.closing) {
    throw new ServiceError('auction_not_open', `Only an open auction can be closed; this one is ${core.closing ? 'closing' : core.view.status}.`, { details: { status: core.view.status } });
  }
  return settleAndAnswer(new Turn(state, context), 'close');
}

/** Releases every hold the auction has or is placing, and answers the bids still waiting. */
function cancel(turn: Turn): number {
  const core = turn.core;
  let released = 0;
  if (core.leader) {
    turn.release(core.leader.hold_id, core.leader.bidder_id);
    released += 1;
    core.leader = null;
  }
  for (const pending of core.queue) {
    turn.dequeue(pending);
    // Released whether or not its placement is done: the ledger refuses a placement that arrives after the release.
    turn.release(pending.hold_id, pending.bidder_id);
    released += 1;
    turn.refuse(pending.request_id, { code: 'auction_not_open', message: 'The auction was cancelled.', details: { status: 'cancelled' } });
  }
  core.queue = [];
  core.closing = false;
  const { view } = core;
  if (view.item) turn.sends.push(unlockSend(view.tenant, view.auction_id, view.item));
  view.status = 'cancelled';
  view.high_bidder = null;
  view.settlement = {
    auction_id: view.auction_id,
    status: 'cancelled',
    winner_id: null,
    final_price: null,
    reserve_met: false,
    funds_settled: false,
    holds_released: released,
    item_transferred: false,
    item_transfer_reason: view.item ? "cancelled: the item's lock was released; it stays with the seller" : 'cancelled: nothing to transfer',
    item_container_id: null,
    error: null,
    completed_at_ms: turn.context.now,
  };
  turn.alarms.push({ name: 'start', due_ms: null }, { name: 'end', due_ms: null });
  turn.touch();
  turn.indexNow = true;
  return released;
}

function setStatus(state: AuctionState, caller: AuctionCaller, to: AuctionStatus, context: TurnContext): Result {
  const core = current(state);
  requireSellerOrAdmin(core, caller);
  const from = core.view.status;
  if (!canRequest(from, to) || core.closing) {
    throw new ServiceError('auction_invalid_transition', `An auction that is ${core.closing ? 'closing' : from} cannot be moved to ${to}.`, {
      details: { from, to, allowed: core.closing ? [] : REQUESTABLE[from] },
    });
  }
  const turn = new Turn(state, context);
  switch (to) {
    case 'open':
      core.view.start_ms = context.now;
      open(turn);
      return turn.done({ auction: viewCopy(core.view), settlement: null });
    case 'cancelled':
      cancel(turn);
      return turn.done({ auction: viewCopy(core.view), settlement: { ...core.view.settlement! } });
    default:
      return settleAndAnswer(turn, 'status');
  }
}

function remove(state: AuctionState, caller: AuctionCaller, context: TurnContext): Result {
  const core = current(state);
  requireSellerOrAdmin(core, caller);
  if (core.view.status === 'ended' || core.closing) {
    throw new ServiceError('auction_settling', 'The auction is being settled; delete it once it is settled.', { details: { status: core.view.status } });
  }
  const turn = new Turn(state, context);
  const holds_released = isFinal(core.view.status) ? 0 : cancel(turn);
  core.deleted = true;
  turn.coreChanged = true;
  turn.alarms.push({ name: 'index', due_ms: null });
  for (const entry of state.bids) turn.writes.push({ subkey: bidSubkey(entry.seq), value: undefined });
  state.bids = [];
  turn.indexNow = false;
  core.index_dirty = true; // no index alarm: the removal below replaces it
  turn.sends.push({ kind: AUCTION_INDEX_KIND, key: auctionIndexKey(core.view.tenant), message: { op: 'remove', auction_id: core.view.auction_id } satisfies AuctionIndexMessage });
  return turn.done({ auction_id: core.view.auction_id, holds_released } satisfies DeleteReply);
}

export { minimumBid };
