import { describe, expect, it } from 'vitest';
import { minimumBid, raiseMinimum, resolveBid, type BiddingState, type IncomingBid, type Resolution } from '../../actors/auctions/bidding.js';
import { softCloseEnd } from '../../actors/auctions/soft-close.js';
import { canRequest, isFinal, REQUESTABLE } from '../../actors/auctions/status-machine.js';
import { AUCTION_STATUSES } from '../../actors/auctions/messages.js';

/** Proxy-bid resolution (eBay's examples), the soft close and the state machine, as pure functions. */
const terms = { starting_price: 10, bid_increment: 1, reserve_price: null, buy_it_now_price: null };

/** Plays bids in order from a fresh auction, applying each resolution as the auction actor does. */
function play(bids: IncomingBid[], overrides: Partial<BiddingState> = {}): { state: BiddingState; results: Resolution[]; history: { bidder_id: string; amount: number }[] } {
  let state: BiddingState = { ...terms, current_price: 10, leader: null, ...overrides };
  const results: Resolution[] = [];
  const history: { bidder_id: string; amount: number }[] = [];
  for (const bid of bids) {
    const result = resolveBid(state, bid);
    results.push(result);
    if (result.kind === 'rejected') continue;
    history.push(...result.history.map(({ bidder_id, amount }) => ({ bidder_id, amount })));
    state = { ...state, current_price: result.price, leader: result.kind === 'outbid' ? state.leader : result.leader };
  }
  return { state, results, history };
}
const proxy = (bidder_id: string, amount: number): IncomingBid => ({ bidder_id, amount, is_proxy: true });
const plain = (bidder_id: string, amount: number): IncomingBid => ({ bidder_id, amount, is_proxy: false });

describe('proxy bidding (eBay semantics)', () => {
  it('a first proxy leads at the starting price', () => {
    const { state } = play([proxy('a', 20)]);
    expect(state).toMatchObject({ current_price: 10, leader: { bidder_id: 'a', max: 20 } });
  });

  it('a lower bid against a proxy raises the price to that bid plus one increment; the proxy keeps the lead', () => {
    const { state, results } = play([proxy('a', 20), plain('b', 15)]);
    expect(results[1]).toMatchObject({ kind: 'outbid', price: 16 });
    expect(state).toMatchObject({ current_price: 16, leader: { bidder_id: 'a' } });
  });

  it('between two proxies the higher maximum wins at the lower maximum plus one increment', () => {
    const { state, history } = play([proxy('a', 20), proxy('b', 30)]);
    expect(state).toMatchObject({ current_price: 21, leader: { bidder_id: 'b', max: 30 } });
    expect(history).toEqual([{ bidder_id: 'a', amount: 10 }, { bidder_id: 'a', amount: 20 }, { bidder_id: 'b', amount: 21 }]);
  });

  it('the winner pays no more than its maximum when the increment would pass it', () => {
    const { state } = play([proxy('a', 20), proxy('b', 21)], { bid_increment: 5 });
    expect(state).toMatchObject({ current_price: 21, leader: { bidder_id: 'b' } });
  });

  it('equal maximums: the earlier bid wins, at that maximum', () => {
    const { state, results } = play([proxy('a', 20), proxy('b', 20)]);
    expect(results[1]).toMatchObject({ kind: 'outbid', price: 20 });
    expect(state).toMatchObject({ current_price: 20, leader: { bidder_id: 'a' } });
  });

  it('a plain bid above a proxy maximum leads at its own amount', () => {
    const { state, history } = play([proxy('a', 20), plain('b', 25)]);
    expect(state).toMatchObject({ current_price: 25, leader: { bidder_id: 'b', is_proxy: false } });
    expect(history.slice(-2)).toEqual([{ bidder_id: 'a', amount: 20 }, { bidder_id: 'b', amount: 25 }]);
  });

  it('eBay help example: three bidders, the price climbs by increments and the highest maximum wins', () => {
    const { state, history } = play([proxy('a', 12), proxy('b', 15), plain('c', 14), proxy('c', 18)], { bid_increment: 1 });
    expect(state).toMatchObject({ current_price: 16, leader: { bidder_id: 'c', max: 18 } });
    const amounts = history.map((entry) => entry.amount);
    for (let i = 1; i < amounts.length; i++) expect(amounts[i]).toBeGreaterThan(amounts[i - 1]);
  });

  it('refuses a bid below the minimum, and a plain re-bid by the leader', () => {
    const { results } = play([plain('a', 9), plain('a', 10), plain('b', 10), plain('a', 30)]);
    expect(results.map((r) => r.kind === 'rejected' ? r.code : r.kind)).toEqual(['bid_too_low', 'leads', 'bid_too_low', 'already_high_bidder']);
    expect(minimumBid({ ...terms, current_price: 10, leader: { bidder_id: 'a', max: 10, is_proxy: false } })).toBe(11);
  });

  it('the leader raises its own maximum without raising the price', () => {
    const { state, results } = play([proxy('a', 20), proxy('a', 40), proxy('a', 30)]);
    expect(results[1]).toMatchObject({ kind: 'raised', price: 10 });
    expect(results[2]).toMatchObject({ kind: 'rejected', code: 'bid_too_low' });
    expect(state.leader).toMatchObject({ bidder_id: 'a', max: 40 });
  });

  it("the leader's refusals name the leader's true minimum (its maximum + 1, below price + increment), the least raise accepted", () => {
    // The tester's case: price 600 set by a plain leader, increment 10.
    const state: BiddingState = { ...terms, starting_price: 100, bid_increment: 10, current_price: 600, leader: { bidder_id: 'c', max: 600, is_proxy: false } };
    expect(minimumBid(state)).toBe(610);
    expect(raiseMinimum(state.leader!)).toBe(601);
    const again = resolveBid(state, plain('c', 700));
    expect(again).toMatchObject({ kind: 'rejected', code: 'already_high_bidder', minimum: 601 });
    expect((again as { message: string }).message).toMatch(/max_amount at least 601/);
    const low = resolveBid(state, proxy('c', 600));
    expect(low).toMatchObject({ kind: 'rejected', code: 'bid_too_low', minimum: 601 });
    expect((low as { message: string }).message).toMatch(/at least 601/);
    // The minimum named is the rule enforced: exactly it raises, the price stays.
    expect(resolveBid(state, proxy('c', 601))).toMatchObject({ kind: 'raised', price: 600, leader: { bidder_id: 'c', max: 601 } });
    // Anyone else still needs price + increment.
    expect(resolveBid(state, plain('b', 609))).toMatchObject({ kind: 'rejected', code: 'bid_too_low', minimum: 610 });
  });

  it('a proxy meeting the reserve brings the price to the reserve; one below it bids its maximum', () => {
    expect(play([proxy('a', 50)], { reserve_price: 40 }).state.current_price).toBe(40);
    expect(play([proxy('a', 30)], { reserve_price: 40 }).state.current_price).toBe(30);
    const defended = play([proxy('a', 50), plain('b', 12)], { reserve_price: 40 });
    expect(defended.state).toMatchObject({ current_price: 40, leader: { bidder_id: 'a' } });
  });

  it('a plain bid at or above buy it now wins at the buy-it-now price, over any proxy', () => {
    const { results, state } = play([proxy('a', 500), plain('b', 120)], { buy_it_now_price: 100 });
    expect(results[1]).toMatchObject({ kind: 'leads', price: 100, buy_now: true, leader: { bidder_id: 'b' } });
    expect(state.current_price).toBe(100);
    expect(play([proxy('a', 150)], { buy_it_now_price: 100 }).results[0]).toMatchObject({ kind: 'leads', buy_now: false });
  });

  it('a plain bid of exactly buy it now buys, also when the minimum bid has passed it (price within one increment)', () => {
    const { results, state } = play([plain('a', 1995), plain('b', 2000)], { bid_increment: 10, buy_it_now_price: 2000 });
    expect(results[1]).toMatchObject({ kind: 'leads', price: 2000, buy_now: true, leader: { bidder_id: 'b' } });
    expect(state.current_price).toBe(2000);
  });
});

describe('soft close', () => {
  const end = 100_000;
  it('a bid in the last window moves the end to one window after the bid', () => {
    expect(softCloseEnd(end, end - 30_000, 60_000, end, 3_600_000)).toBe(end + 30_000);
    expect(softCloseEnd(end, end - 1, 60_000, end, 3_600_000)).toBe(end + 59_999);
  });
  it('an earlier bid, a zero window, or a bid at or after the end changes nothing', () => {
    expect(softCloseEnd(end, end - 60_001, 60_000, end, 3_600_000)).toBe(end);
    expect(softCloseEnd(end, end - 10, 0, end, 3_600_000)).toBe(end);
    expect(softCloseEnd(end, end, 60_000, end, 3_600_000)).toBe(end);
  });
  it('never moves the end past the cap, nor backwards', () => {
    expect(softCloseEnd(end + 9_000, end + 8_000, 60_000, end, 10_000)).toBe(end + 10_000);
    expect(softCloseEnd(end + 20_000, end + 19_000, 60_000, end, 10_000)).toBe(end + 20_000);
  });
});

describe('state machine', () => {
  it('allows exactly the documented requested moves', () => {
    const allowed = AUCTION_STATUSES.flatMap((from) => AUCTION_STATUSES.filter((to) => canRequest(from, to)).map((to) => `${from}->${to}`));
    expect(allowed).toEqual(['scheduled->open', 'scheduled->cancelled', 'open->ended', 'open->settled', 'open->cancelled']);
    expect(REQUESTABLE.settled).toEqual([]);
    expect(AUCTION_STATUSES.filter(isFinal)).toEqual(['settled', 'cancelled']);
  });
});
