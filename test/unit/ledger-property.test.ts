import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AUCTION_KIND, auctionKey, type AuctionView } from '../../actors/auctions/messages.js';
import type { LedgerAccountMessage } from '../../actors/ledger/messages.js';
import { SELLER, TENANT, World } from './auctions-world.js';

/**
 * Property: whatever bids, proxy bids, outbids, closes, cancellations and
 * deletions happen, with every message between the auctions and the ledger
 * delivered in a random order and some delivered twice, money is conserved:
 * the sum of every account's balance (held funds included) plus the
 * transfers still on their way equals what was credited; no account's held
 * funds exceed its balance; and once everything is delivered and every
 * auction is over, no hold is open, each winner paid exactly its final
 * price and the seller received exactly the sum of them.
 */
const BIDDERS = ['u1', 'u2', 'u3', 'u4'];
const AUCTIONS = ['x', 'y'];
const FUNDS = 500;

const op = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('bid' as const), auction: fc.constantFrom(...AUCTIONS), bidder: fc.constantFrom(...BIDDERS), amount: fc.integer({ min: 5, max: 400 }), proxy: fc.boolean() }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('deliver' as const), pick: fc.nat(), duplicate: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), auction: fc.constantFrom(...AUCTIONS) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), auction: fc.constantFrom(...AUCTIONS), remove: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('end' as const), auction: fc.constantFrom(...AUCTIONS) }) },
);

/** Transfers on their way: sent and not yet applied by the payee (a duplicate of an applied one carries no money). */
function inFlightTransfers(world: World): number {
  let total = 0;
  const counted = new Set<string>();
  for (const send of world.inFlight) {
    const message = send.message as LedgerAccountMessage;
    if (message.op !== 'transfer_in' || counted.has(message.transfer_id)) continue;
    counted.add(message.transfer_id);
    if (!world.accounts.get(send.key)?.transfers.has(message.transfer_id)) total += message.amount;
  }
  return total;
}

function checkConservation(world: World): void {
  let total = 0;
  for (const account of world.accounts.values()) {
    for (const [currency, balance] of account.balances) {
      const held = account.held.get(currency) ?? 0;
      expect(held).toBeGreaterThanOrEqual(0);
      expect(held).toBeLessThanOrEqual(balance);
      total += balance;
    }
    let open = 0;
    for (const hold of account.holds.values()) if (hold.status === 'held') open += hold.amount;
    expect(open).toBe([...account.held.values()].reduce((a, b) => a + b, 0));
  }
  expect(total + inFlightTransfers(world)).toBe(BIDDERS.length * FUNDS);
}

describe('ledger conservation under auctions', () => {
  it('balance plus holds is conserved; holds end closed; winners pay exactly once', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const w = new World();
        for (const bidder of BIDDERS) w.fund(bidder, FUNDS);
        for (const id of AUCTIONS) w.create({ auction_id: id, reserve_price: id === 'y' ? 150 : null, buy_it_now_price: id === 'x' ? 350 : null });
        let n = 0;
        const key = (id: string) => auctionKey(TENANT, id);
        const seller = { user_id: SELLER, admin: false };
        for (const step of ops) {
          n += 1;
          switch (step.kind) {
            case 'bid':
              w.bid(step.auction, step.bidder, step.amount, step.proxy, `b${n}`);
              break;
            case 'deliver':
              if (w.inFlight.length > 0) w.deliver(step.pick % w.inFlight.length, step.duplicate);
              break;
            case 'close':
              w.ask(AUCTION_KIND, key(step.auction), { op: 'close', caller: seller }, `c${n}`);
              break;
            case 'cancel':
              w.ask(AUCTION_KIND, key(step.auction), step.remove ? { op: 'delete', caller: seller } : { op: 'set_status', caller: seller, status: 'cancelled' }, `d${n}`);
              break;
            case 'end':
              w.now = Math.max(w.now, w.auctions.get(key(step.auction))!.core!.view.end_ms);
              w.alarm(step.auction, 'end');
              break;
          }
          checkConservation(w);
        }
        // Finish: end every auction still live, deliver everything.
        for (const id of AUCTIONS) {
          w.now = Math.max(w.now, w.auctions.get(key(id))!.core!.view.end_ms);
          w.alarm(id, 'end');
        }
        w.drain();
        checkConservation(w);
        let sold = 0;
        const paid = new Map<string, number>();
        for (const id of AUCTIONS) {
          const core = w.auctions.get(key(id))!.core!;
          const view: AuctionView = core.view;
          expect(['settled', 'cancelled']).toContain(view.status);
          expect(core.queue).toEqual([]);
          if (view.winner_id) {
            expect(view.settlement?.funds_settled).toBe(true);
            sold += view.final_price!;
            paid.set(view.winner_id, (paid.get(view.winner_id) ?? 0) + view.final_price!);
          }
          const amounts = w.auctions.get(key(id))!.bids.map((bid) => bid.amount);
          for (let i = 1; i < amounts.length; i++) expect(amounts[i]).toBeGreaterThan(amounts[i - 1]);
        }
        for (const bidder of BIDDERS) expect(w.funds(bidder)).toEqual({ balance: FUNDS - (paid.get(bidder) ?? 0), held: 0, available: FUNDS - (paid.get(bidder) ?? 0) });
        expect(w.funds(SELLER)).toEqual({ balance: sold, held: 0, available: sold });
      }),
      { numRuns: 300 },
    );
  });
});
