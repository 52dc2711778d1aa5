/**
 * Bid resolution with eBay's proxy semantics, pure (docs/api/auctions.md,
 * "Bidding"). Every bid is resolved against the auction as it stands:
 *
 * - The minimum bid is starting_price before the first bid, then
 *   current_price + bid_increment.
 * - A plain bid is a bid of exactly its amount; a proxy bid names a maximum
 *   and bids the least needed to lead, up to that maximum.
 * - Against a leader whose maximum is higher or equal, the leader's proxy
 *   answers: the price becomes min(leader max, bid + increment) and the
 *   leader stays (ties go to the earlier bid).
 * - Beating a leader's maximum, a proxy leads at min(its max, leader max +
 *   increment); a plain bid leads at its amount.
 * - A proxy whose maximum meets the reserve brings the price up to the
 *   reserve at once (so the reserve is met as soon as someone will pay it).
 * - A plain bid at or above buy_it_now_price, while the price is below it,
 *   wins at buy_it_now_price and ends the auction.
 * - The leader may raise its own maximum with a higher proxy bid; the price
 *   stays (except to meet the reserve). So the leader's minimum is its own
 *   maximum + 1 (raiseMinimum), which may be below current_price +
 *   bid_increment; a plain bid by the leader is refused whatever its amount.
 *   The leader's refusals name that minimum (the least max_amount accepted).
 *
 * Every outcome that changes the price lists the bids it adds to the
 * auction's history, each higher than the one before.
 */
export interface Leader {
  bidder_id: string;
  /** The most the leader will pay: a proxy's maximum, or a plain bid's amount. */
  max: number;
  is_proxy: boolean;
}

export interface BiddingTerms {
  starting_price: number;
  bid_increment: number;
  reserve_price: number | null;
  buy_it_now_price: number | null;
}

export interface BiddingState extends BiddingTerms {
  current_price: number;
  leader: Leader | null;
}

export interface IncomingBid {
  bidder_id: string;
  amount: number;
  is_proxy: boolean;
}

/** A bid added to the history (the bidder's own, or a proxy answering for a leader). */
export interface HistoryBid {
  bidder_id: string;
  amount: number;
  is_proxy: boolean;
}

export type Resolution =
  | { kind: 'rejected'; code: 'bid_too_low' | 'already_high_bidder'; message: string; minimum: number }
  /** The bidder leads at `price`; `buy_now` ends the auction. */
  | { kind: 'leads'; price: number; leader: Leader; history: HistoryBid[]; buy_now: boolean }
  /** The leader's proxy answered: the price rose, the leader stays, the bid does not lead. */
  | { kind: 'outbid'; price: number; history: HistoryBid[] }
  /** The leader raised its own maximum. */
  | { kind: 'raised'; price: number; leader: Leader; history: HistoryBid[] };

/** The least a bidder other than the leader may bid. */
export function minimumBid(state: BiddingState): number {
  return state.leader === null ? state.starting_price : state.current_price + state.bid_increment;
}

/** The least maximum the leader's proxy bid may name to raise its own maximum. */
export function raiseMinimum(leader: Leader): number {
  return leader.max + 1;
}

/** The price a proxy with maximum `max` reaches on its own to meet the reserve. */
function withReserve(terms: BiddingTerms, price: number, max: number): number {
  if (terms.reserve_price === null || price >= terms.reserve_price) return price;
  return Math.max(price, Math.min(max, terms.reserve_price));
}

export function resolveBid(state: BiddingState, bid: IncomingBid): Resolution {
  const { leader } = state;
  if (leader !== null && leader.bidder_id === bid.bidder_id) {
    const minimum = raiseMinimum(leader);
    if (!bid.is_proxy) {
      return {
        kind: 'rejected',
        code: 'already_high_bidder',
        message: `You are the high bidder with a maximum of ${leader.max}; raise it with a proxy bid of max_amount at least ${minimum}.`,
        minimum,
      };
    }
    if (bid.amount < minimum) {
      return { kind: 'rejected', code: 'bid_too_low', message: `Your maximum is already ${leader.max}; a new one must be at least ${minimum}.`, minimum };
    }
    const price = withReserve(state, state.current_price, bid.amount);
    const history = price > state.current_price ? [{ bidder_id: bid.bidder_id, amount: price, is_proxy: true }] : [];
    return { kind: 'raised', price, leader: { bidder_id: bid.bidder_id, max: bid.amount, is_proxy: true }, history };
  }
  // Buy it now before the minimum: with the price within one increment of it, the minimum passes it, and a bid
  // of exactly buy_it_now_price must still buy (docs/api/auctions.md, rule 7).
  const bin = state.buy_it_now_price;
  if (!bid.is_proxy && bin !== null && state.current_price < bin && bid.amount >= bin) {
    const history = leader?.is_proxy && leader.max > state.current_price && leader.max < bin ? [{ bidder_id: leader.bidder_id, amount: leader.max, is_proxy: true }] : [];
    history.push({ bidder_id: bid.bidder_id, amount: bin, is_proxy: false });
    return { kind: 'leads', price: bin, leader: { bidder_id: bid.bidder_id, max: bin, is_proxy: false }, history, buy_now: true };
  }
  const minimum = minimumBid(state);
  if (bid.amount < minimum) {
    return { kind: 'rejected', code: 'bid_too_low', message: `The minimum bid is ${minimum}.`, minimum };
  }
  if (leader === null) {
    const price = bid.is_proxy ? withReserve(state, state.starting_price, bid.amount) : bid.amount;
    return { kind: 'leads', price, leader: { ...bid, max: bid.amount }, history: [{ bidder_id: bid.bidder_id, amount: price, is_proxy: bid.is_proxy }], buy_now: false };
  }
  if (bid.amount > leader.max) {
    const price = bid.is_proxy ? withReserve(state, Math.min(bid.amount, leader.max + state.bid_increment), bid.amount) : bid.amount;
    const history: HistoryBid[] = leader.is_proxy && leader.max > state.current_price ? [{ bidder_id: leader.bidder_id, amount: leader.max, is_proxy: true }] : [];
    history.push({ bidder_id: bid.bidder_id, amount: price, is_proxy: bid.is_proxy });
    return { kind: 'leads', price, leader: { bidder_id: bid.bidder_id, max: bid.amount, is_proxy: bid.is_proxy }, history, buy_now: false };
  }
  // The leader's proxy answers (a plain leader's max is the price, below this bid, so the leader is a proxy).
  const price = withReserve(state, Math.min(leader.max, bid.amount + state.bid_increment), leader.max);
  return { kind: 'outbid', price, history: [{ bidder_id: leader.bidder_id, amount: price, is_proxy: true }] };
}
