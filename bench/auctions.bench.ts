import { auctionActors } from '../actors/auctions/actor.js';
import { AUCTION_INDEX_KIND, AUCTION_KIND, auctionIndexKey, auctionKey, type AuctionView, type BidReply, type BidView, type CloseReply, type CreatedView } from '../actors/auctions/messages.js';
import { ledgerActors } from '../actors/ledger/actor.js';
import { LEDGER_ACCOUNT_KIND, ledgerAccountKey, type AccountView } from '../actors/ledger/messages.js';
import { isServiceError } from '../runtime/index.js';
import { startBenchRuntime, type BenchRuntime } from './support/runtime.js';
import { runScenarios } from './support/scenarios.js';
import { percentile } from './support/stats.js';
import type { BenchRow } from './types.js';

/**
 * One hot auction through the in-process runtime on real LMDB (fsync per
 * commit), with the ledger: every bid that could lead places a hold on its
 * bidder's account (a flow-call through the outbox and back), the auction
 * decides bids in arrival order, and each outbid leader's hold is released.
 * Target (issue 16): 5,000 bids/s with a total order of accepted bids and
 * exactly one winner. After the load the bench checks the order (every
 * accepted bid higher than the one before), closes the auction, and checks
 * the ledger: one winner paid its final price, the seller got it, no hold left.
 */
const AREA = 'auctions';
const BIDS = Number(process.env.BENCH_AUCTION_BIDS ?? 50_000);
const BIDDERS = 1_000;
/** Bids in flight at once (the auction's waiting-bid bound is 5,000). */
const IN_FLIGHT = Number(process.env.BENCH_AUCTION_IN_FLIGHT ?? 1_000);
const LOOP_SECONDS_MAX = 30;
const TENANT = 'bench-tenant';
const SELLER = 'seller';
const FUNDS = 1_000_000_000;

export async function run(): Promise<BenchRow[]> {
  let bench: BenchRuntime | undefined;
  try {
    return await runScenarios(AREA, [
      {
        name: `one hot auction, ${BIDS.toLocaleString('en')} bids from ${BIDDERS} bidders`,
        async run() {
          bench = await startBenchRuntime([...ledgerActors, ...auctionActors]);
          const { runtime } = bench;
          await Promise.all(
            Array.from({ length: BIDDERS }, (_, i) =>
              runtime.ask(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, `bidder-${i}`), { op: 'credit', tenant: TENANT, user_id: `bidder-${i}`, reference: 'seed', currency: 'USD', amount: FUNDS, by: 'bench' }),
            ),
          );
          const now = Date.now();
          const auction_id = 'hot';
          await runtime.ask<CreatedView>(AUCTION_INDEX_KIND, auctionIndexKey(TENANT), {
            op: 'create',
            tenant: TENANT,
            seller_id: SELLER,
            specs: [{ auction_id, item_id: 'hot-item', currency: 'USD', starting_price: 100, bid_increment: 1, reserve_price: null, buy_it_now_price: null, soft_close_seconds: 0, start_ms: now, end_ms: now + 3_600_000 }],
          });
          const key = auctionKey(TENANT, auction_id);

          // Bid i offers 100 + i from bidder i mod BIDDERS: ascending in send order, so most lead, and a
          // bid overtaken by a later one is refused (bid_too_low), as in a real bidding war.
          const latencies: number[] = [];
          const refused = new Map<string, number>();
          let accepted = 0;
          let next = 0;
          const started_ms = performance.now();
          const deadline_ms = started_ms + LOOP_SECONDS_MAX * 1000;
          const worker = async () => {
            while (next < BIDS && performance.now() < deadline_ms) {
              const i = next++;
              const sent_ms = performance.now();
              try {
                const reply = await runtime.ask<BidReply>(AUCTION_KIND, key, { op: 'bid', caller: { user_id: `bidder-${i % BIDDERS}`, admin: false }, amount: 100 + i, is_proxy: false });
                if (reply.accepted) accepted++;
              } catch (error) {
                if (!isServiceError(error)) throw error;
                refused.set(error.code, (refused.get(error.code) ?? 0) + 1);
              }
              latencies.push(performance.now() - sent_ms);
            }
          };
          await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
          const seconds = (performance.now() - started_ms) / 1000;
          const answered = latencies.length;
          latencies.sort((a, b) => a - b);

          // Total order: the whole history, read back page by page, strictly increases with seq.
          const view = await runtime.ask<AuctionView>(AUCTION_KIND, key, { op: 'get' });
          const total = view.total_bids;
          const newestFirst: BidView[] = [];
          for (let before = total + 1; before > 1; ) {
            const page = await runtime.ask<{ total: number; bids: BidView[] }>(AUCTION_KIND, key, { op: 'bids', limit: 1_000, before_seq: before });
            newestFirst.push(...page.bids);
            before = page.bids[page.bids.length - 1].seq;
          }
          if (newestFirst.length !== total) throw new Error(`read ${newestFirst.length} of ${total} bids`);
          for (let j = 1; j < newestFirst.length; j++) {
            if (!(newestFirst[j - 1].amount > newestFirst[j].amount && newestFirst[j - 1].seq === newestFirst[j].seq + 1)) throw new Error(`bids out of order at seq ${newestFirst[j].seq}`);
          }
          if (total !== accepted) throw new Error(`history has ${total} bids, ${accepted} were answered accepted`);

          // Exactly one winner; the ledger agrees.
          const closed = await runtime.ask<CloseReply>(AUCTION_KIND, key, { op: 'close', caller: { user_id: SELLER, admin: false } });
          const { winner_id, final_price } = closed.settlement;
          if (!winner_id || final_price !== view.current_price || !closed.settlement.funds_settled) throw new Error(`bad settlement ${JSON.stringify(closed.settlement)}`);
          let held = 0;
          for (let b = 0; b < BIDDERS; b++) {
            const account = await runtime.ask<AccountView>(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, `bidder-${b}`), { op: 'get', tenant: TENANT, user_id: `bidder-${b}` });
            held += account.balances[0]?.held ?? 0;
          }
          // The seller's credit travels through the outbox after the close answered: wait for it.
          let sellerBalance = 0;
          for (let attempt = 0; attempt < 200 && sellerBalance !== final_price; attempt++) {
            const seller = await runtime.ask<AccountView>(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, SELLER), { op: 'get', tenant: TENANT, user_id: SELLER });
            sellerBalance = seller.balances[0]?.balance ?? 0;
            if (sellerBalance !== final_price) await new Promise((resolve) => setTimeout(resolve, 10));
          }
          if (held !== 0 || sellerBalance !== final_price) throw new Error(`ledger: ${held} still held, seller has ${sellerBalance} of ${final_price}`);

          const refusals = [...refused.entries()].map(([code, n]) => `${code} ${n}`).join(', ') || 'none';
          return [
            {
              area: AREA,
              scenario: 'bids answered, one hot auction (each: hold placed through the ledger, decided in arrival order)',
              value: Math.round(answered / seconds),
              unit: 'bids/s',
              note: `target 5,000/s; ${answered.toLocaleString('en')} bids in ${seconds.toFixed(1)} s, ${IN_FLIGHT} in flight; p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
            },
            {
              area: AREA,
              scenario: 'accepted bids (leading at their turn), same run',
              value: Math.round(accepted / seconds),
              unit: 'bids/s',
              note: `${accepted.toLocaleString('en')} accepted, totally ordered (checked); refused: ${refusals}; one winner ${winner_id} at ${final_price}, seller credited, 0 holds left`,
            },
          ];
        },
      },
    ]);
  } finally {
    await bench?.destroy();
  }
}
