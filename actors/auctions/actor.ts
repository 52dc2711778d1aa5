import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadAuction, stepAuction, type AuctionState } from './auction-state.js';
import { loadAuctionIndex, stepAuctionIndex, type AuctionIndexState } from './index-state.js';
import { AUCTION_INDEX_KIND, AUCTION_KIND, type AuctionIndexMessage, type AuctionMessage } from './messages.js';

/** One auction (key = auctionKey(tenant, auction_id)): terms, leader, bids, settlement. */
export const auctionActor: RecordsActorDefinition<AuctionState, AuctionMessage, unknown> = {
  kind: AUCTION_KIND,
  storage: 'records',
  load: loadAuction,
  step: stepAuction,
};

/** A tenant's auctions (key = auctionIndexKey(tenant)): creation, item claims, lists. */
export const auctionIndexActor: RecordsActorDefinition<AuctionIndexState, AuctionIndexMessage, unknown> = {
  kind: AUCTION_INDEX_KIND,
  storage: 'records',
  load: loadAuctionIndex,
  step: stepAuctionIndex,
};

export const auctionActors = [auctionActor, auctionIndexActor];
