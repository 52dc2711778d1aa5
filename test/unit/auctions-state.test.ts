import { describe, expect, it } from 'vitest';
import { AUCTION_KIND, auctionKey, type AuctionView, type BidReply, type CloseReply } from '../../actors/auctions/messages.js';
import { FREE_LABEL_REASON } from '../../actors/auctions/auction-state.js';
import { loadAuction, type AuctionState } from '../../actors/auctions/auction-state.js';
import { SELLER, TENANT, World } from './auctions-world.js';

/** The auction actor with the ledger, as pure steps (holds, order of acceptance, settlement, cancellation). */
function view(world: World, id: string): AuctionView {
  return world.auctions.get(auctionKey(TENANT, id))!.core!.view;
}

describe('auction with ledger holds', () => {
  it('a bid is accepted only once its hold is placed; an outbid leader is released at once; settlement captures to the seller', () => {
    const w = new World();
    w.fund('alice', 1_000);
    w.fund('bob', 1_000);
    w.create({ auction_id: 'a1' });
    expect(view(w, 'a1').status).toBe('open');
    w.bid('a1', 'alice', 100, false, 'r1');
    expect(w.outcomes.has('r1')).toBe(false); // waiting for the hold
    w.drain();
    expect(w.outcomes.get('r1')?.reply).toMatchObject({ accepted: true, current_price: 100, leading: true });
    expect(w.funds('alice')).toEqual({ balance: 1_000, held: 100, available: 900 });
    w.bid('a1', 'bob', 150, false, 'r2');
    w.drain();
    expect(w.outcomes.get('r2')?.reply).toMatchObject({ accepted: true, current_price: 150 });
    expect(w.funds('alice')).toEqual({ balance: 1_000, held: 0, available: 1_000 });
    expect(w.funds('bob').held).toBe(150);
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a1'), { op: 'close', caller: { user_id: SELLER, admin: false } }, 'c1');
    expect(w.outcomes.has('c1')).toBe(false); // waiting for the capture
    w.drain();
    const closed = w.outcomes.get('c1')?.reply as CloseReply;
    expect(closed.settlement).toMatchObject({ status: 'settled', winner_id: 'bob', final_price: 150, funds_settled: true, item_transferred: false, item_transfer_reason: FREE_LABEL_REASON, reserve_met: true });
    expect(w.funds('bob')).toEqual({ balance: 850, held: 0, available: 850 });
    expect(w.funds(SELLER)).toEqual({ balance: 150, held: 0, available: 150 });
  });

  it('refuses a bid the bidder cannot cover, leaving the auction as it was', () => {
    const w = new World();
    w.fund('alice', 50);
    w.create({ auction_id: 'a2' });
    w.bid('a2', 'alice', 100, false, 'r1');
    w.drain();
    expect(w.outcomes.get('r1')?.error?.code).toBe('insufficient_funds');
    expect(view(w, 'a2')).toMatchObject({ high_bidder: null, total_bids: 0, current_price: 10 });
  });

  it('decides bids in arrival order whatever order the ledger answers in, each accepted bid higher than the one before', () => {
    const w = new World();
    for (const user of ['u1', 'u2', 'u3']) w.fund(user, 1_000);
    w.create({ auction_id: 'a3' });
    w.bid('a3', 'u1', 20, false, 'b1');
    w.bid('a3', 'u2', 30, false, 'b2');
    w.bid('a3', 'u3', 25, false, 'b3');
    // The ledger answers the last first: nothing is decided until the first is in.
    w.deliver(2);
    w.deliver(1);
    const answers = () => w.inFlight.filter((send) => send.kind === AUCTION_KIND);
    for (const _ of [0, 1]) w.deliver(w.inFlight.indexOf(answers()[0]));
    expect(['b1', 'b2', 'b3'].filter((id) => w.outcomes.has(id))).toEqual([]);
    w.drain();
    expect(w.outcomes.get('b1')?.reply).toMatchObject({ accepted: true });
    expect(w.outcomes.get('b2')?.reply).toMatchObject({ accepted: true });
    expect(w.outcomes.get('b3')?.error?.code).toBe('bid_too_low');
    expect(w.funds('u3').held).toBe(0);
    expect(w.funds('u1').held).toBe(0);
    expect(w.funds('u2').held).toBe(30);
    const bids = w.auctions.get(auctionKey(TENANT, 'a3'))!.bids.map((bid) => bid.amount);
    expect(bids).toEqual([20, 30]);
  });

  it('the end alarm settles; a reserve not met releases the leader', () => {
    const w = new World();
    w.fund('alice', 1_000);
    w.create({ auction_id: 'a4', reserve_price: 500 });
    w.bid('a4', 'alice', 100, false, 'r1');
    w.drain();
    w.now = view(w, 'a4').end_ms;
    w.alarm('a4', 'end');
    w.drain();
    expect(view(w, 'a4')).toMatchObject({ status: 'settled', winner_id: null, settlement: { reserve_met: false, holds_released: 1, funds_settled: false } });
    expect(w.funds('alice')).toEqual({ balance: 1_000, held: 0, available: 1_000 });
  });

  it('buy it now ends the auction and refuses the bids queued behind it', () => {
    const w = new World();
    w.fund('alice', 1_000);
    w.fund('bob', 1_000);
    w.create({ auction_id: 'a5', buy_it_now_price: 200 });
    w.bid('a5', 'alice', 250, false, 'r1');
    w.bid('a5', 'bob', 300, false, 'r2');
    w.drain();
    expect(w.outcomes.get('r1')?.reply).toMatchObject({ accepted: true, closed: true, current_price: 200 });
    expect(w.outcomes.get('r2')?.error?.code).toBe('auction_not_open');
    expect(view(w, 'a5')).toMatchObject({ status: 'settled', winner_id: 'alice', final_price: 200 });
    expect(w.funds('alice')).toEqual({ balance: 800, held: 0, available: 800 });
    expect(w.funds('bob')).toEqual({ balance: 1_000, held: 0, available: 1_000 });
  });

  it('a soft close extends the end for a bid in the last window', () => {
    const w = new World();
    w.fund('alice', 1_000);
    w.create({ auction_id: 'a6', soft_close_seconds: 60 });
    const end = view(w, 'a6').end_ms;
    w.now = end - 10_000;
    w.bid('a6', 'alice', 20, false, 'r1');
    w.drain();
    expect(view(w, 'a6').end_ms).toBe(end + 50_000);
    w.now = end + 1;
    w.alarm('a6', 'end'); // the old due time: stale, ignored
    expect(view(w, 'a6').status).toBe('open');
  });

  it('cancelling releases the leader and every bid still waiting for its hold, in either order of arrival at the ledger', () => {
    const w = new World();
    w.fund('alice', 1_000);
    w.fund('bob', 1_000);
    w.create({ auction_id: 'a7' });
    w.bid('a7', 'alice', 20, false, 'r1');
    w.drain();
    w.bid('a7', 'bob', 40, false, 'r2'); // its placement is in flight
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a7'), { op: 'delete', caller: { user_id: SELLER, admin: false } }, 'd1');
    expect(w.outcomes.get('d1')?.reply).toEqual({ auction_id: 'a7', holds_released: 2 });
    expect(w.outcomes.get('r2')?.error?.code).toBe('auction_not_open');
    // Deliver the release before the placement: the placement is refused.
    w.deliver(w.inFlight.length - 1);
    w.drain();
    expect(w.funds('alice').held).toBe(0);
    expect(w.funds('bob').held).toBe(0);
  });

  it('only the seller or an admin closes, changes status or deletes', () => {
    const w = new World();
    w.create({ auction_id: 'a8', start_ms: w.now + 60_000 });
    expect(view(w, 'a8').status).toBe('scheduled');
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a8'), { op: 'set_status', caller: { user_id: 'mallory', admin: false }, status: 'open' }, 's1');
    expect(w.outcomes.get('s1')?.error?.code).toBe('forbidden');
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a8'), { op: 'close', caller: { user_id: SELLER, admin: false } }, 's2');
    expect(w.outcomes.get('s2')?.error?.code).toBe('auction_not_open');
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a8'), { op: 'set_status', caller: { user_id: 'root', admin: true }, status: 'open' }, 's3');
    expect(view(w, 'a8').status).toBe('open');
    w.ask(AUCTION_KIND, auctionKey(TENANT, 'a8'), { op: 'set_status', caller: { user_id: SELLER, admin: false }, status: 'scheduled' }, 's4');
    expect(w.outcomes.get('s4')?.error).toMatchObject({ code: 'auction_invalid_transition', details: { from: 'open', to: 'scheduled' } });
  });

  it('reloads from its records mid-flight and goes on', () => {
    const w = new World();
    w.fund('alice', 1_000);
    w.create({ auction_id: 'a9' });
    w.bid('a9', 'alice', 20, false, 'r1');
    const key = auctionKey(TENANT, 'a9');
    // Rebuild the records the actor wrote so far from its state, as a restart would load them.
    const state = w.auctions.get(key)!;
    const records: [string, unknown][] = [['a', { ...state.core!, waiting: [] }], ...state.core!.queue.map((bid, i) => [`q:${String(i + 1).padStart(10, '0')}`, bid] as [string, unknown])];
    const reloaded: AuctionState = loadAuction(key, records);
    w.auctions.set(key, reloaded);
    w.drain();
    expect(view(w, 'a9')).toMatchObject({ high_bidder: 'alice', current_price: 20 });
    expect((w.outcomes.get('r1')?.reply as BidReply | undefined)).toBeUndefined(); // the ask was lost with the restart
  });
});
