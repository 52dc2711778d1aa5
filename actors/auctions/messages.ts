import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The auctions area's public surface (spec doc 2 §2-§4.5; docs/api/auctions.md):
 * English auctions with proxy bidding and a soft close, each auction one
 * actor, every leading bid backed by a ledger hold (actors/ledger/messages.ts),
 * and one index per tenant that creates auctions (batches all-or-nothing),
 * keeps an item in one live auction at a time, and answers lists. Other
 * layers import this file only.
 */

/** One actor per auction, key = auctionKey(tenant, auction_id). */
export const AUCTION_KIND = 'auction';
/** One actor per tenant, key = auctionIndexKey(tenant). */
export const AUCTION_INDEX_KIND = 'auction-index';

export function auctionKey(tenant: string, auction_id: string): string {
  return JSON.stringify([tenant, auction_id]);
}

export function auctionIndexKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/** Every bound of the area; docs/api/auctions.md documents each (change both together). */
export const auctionPolicy = {
  /** Auctions per POST /auctions/batch. */
  max_batch_auctions: 50,
  /** Default soft-close window: a bid this close to the end moves the end this far past the bid. */
  soft_close_seconds_default: 120,
  soft_close_seconds_max: 3_600,
  /** The soft close never moves the end more than this past the end first set. */
  soft_close_extension_max_seconds: 86_400,
  /** end_time - start_time. */
  duration_max_seconds: 90 * 86_400,
  /** start_time at most this far ahead. */
  start_ahead_max_seconds: 365 * 86_400,
  /** Bids waiting for their hold at once; one more is refused with 503 actor_overloaded. */
  pending_bids_max: 5_000,
  /** Accepted bids kept per auction; past it the auction takes no more bids (409 auction_bid_limit_reached). */
  bids_per_auction_max: 200_000,
  /** Live (scheduled or open) auctions per tenant. */
  live_auctions_per_tenant_max: 10_000,
  /** The list's price and bid count lag the auction by at most this (status changes are sent at once). */
  index_refresh_ms: 1_000,
  currency_default: 'USD',
  item_id_length_max: 200,
  page_size_max: 100,
  bids_limit_default: 50,
  bids_limit_max: 1_000,
} as const;

export const AUCTION_STATUSES = ['scheduled', 'open', 'ended', 'settled', 'cancelled'] as const;
export type AuctionStatus = (typeof AUCTION_STATUSES)[number];

/** What a client sets at creation (times in epoch-ms; prices in minor units). */
/** An auctioned item of the items area: which domain and container hold it, and how many units are sold. */
export interface ItemRef {
  domain: string;
  container_id: string;
  quantity: number;
}

export interface AuctionSpec {
  auction_id: string;
  item_id: string;
  /** Set: item_id names an item of the items area, locked at creation and transferred at settlement; null: a free label. */
  item?: ItemRef | null;
  currency: string;
  starting_price: number;
  bid_increment: number;
  reserve_price: number | null;
  buy_it_now_price: number | null;
  soft_close_seconds: number;
  start_ms: number;
  end_ms: number;
}

export interface SettlementView {
  auction_id: string;
  /** in_progress while the capture is on its way; settled when every step is done; cancelled when the auction was cancelled. */
  status: 'in_progress' | 'settled' | 'cancelled';
  winner_id: string | null;
  final_price: number | null;
  reserve_met: boolean;
  /** The winner's hold was captured and the seller credited. */
  funds_settled: boolean;
  /** Holds this settlement (or cancellation) released. */
  holds_released: number;
  item_transferred: boolean;
  /** Why the item did not move, when it did not. */
  item_transfer_reason: string | null;
  /** The items area's container the item was delivered to (the winner's delivery container). */
  item_container_id?: string | null;
  /** Set if the ledger refused the capture (a defect; the hold stays with the winner). */
  error: string | null;
  completed_at_ms: number | null;
}

export interface AuctionView extends AuctionSpec {
  tenant: string;
  auction_type: 'english';
  seller_id: string;
  status: AuctionStatus;
  /** starting_price until the first bid, then the price the leader pays now. */
  current_price: number;
  high_bidder: string | null;
  total_bids: number;
  /** The end first set (the soft close moves end_ms). */
  original_end_ms: number;
  final_price: number | null;
  winner_id: string | null;
  reserve_met: boolean;
  created_at_ms: number;
  updated_at_ms: number;
  settlement: SettlementView | null;
  /** Increases with every change; the index keeps the newest. */
  version: number;
}

export interface BidView {
  bid_id: string;
  auction_id: string;
  bidder_id: string;
  amount: number;
  /** Placed by the bidder's proxy (automatically), or the bidder's proxy bid itself. */
  is_proxy: boolean;
  /** The ledger hold that backs the bid. */
  hold_id: string;
  /** Position in the auction's total order of accepted bids (1, 2, ...). */
  seq: number;
  timestamp_ms: number;
}

export interface AuctionCaller {
  user_id: string;
  admin: boolean;
}

export interface BidReply {
  accepted: boolean;
  closed: boolean;
  current_price: number;
  message: string;
  your_bid: number;
  /** The bidder now leads. */
  leading: boolean;
  high_bidder: string | null;
}

export interface CloseReply {
  auction: AuctionView;
  settlement: SettlementView;
}

export interface DeleteReply {
  auction_id: string;
  holds_released: number;
}

export type AuctionMessage =
  /** From the index (as a flow-call): create the auction; a repeat answers with the auction. */
  | { op: 'init'; tenant: string; seller_id: string; spec: AuctionSpec }
  | FlowCall<{ op: 'init'; tenant: string; seller_id: string; spec: AuctionSpec }>
  | { op: 'get' }
  /** Newest first; `before_seq` pages back through older bids. */
  | { op: 'bids'; limit: number; before_seq?: number }
  /** A plain bid (is_proxy false: amount is the bid) or a proxy bid (amount is the maximum). */
  | { op: 'bid'; caller: AuctionCaller; amount: number; is_proxy: boolean }
  | { op: 'close'; caller: AuctionCaller }
  | { op: 'set_status'; caller: AuctionCaller; status: AuctionStatus }
  | { op: 'delete'; caller: AuctionCaller }
  | FlowAnswer;

export interface AuctionListFilter {
  field: (typeof AUCTION_FILTER_FIELDS)[number];
  operator: (typeof AUCTION_FILTER_OPERATORS)[number];
  value: string;
}
export const AUCTION_FILTER_FIELDS = [
  'status',
  'seller_id',
  'item_id',
  'currency',
  'high_bidder',
  'winner_id',
  'current_price',
  'starting_price',
  'total_bids',
  'start_time',
  'end_time',
  'created_at',
] as const;
export const AUCTION_FILTER_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'in'] as const;
export const AUCTION_SORT_FIELDS = ['created_at', 'start_time', 'end_time', 'current_price', 'total_bids'] as const;

export interface AuctionListQuery {
  q?: string;
  status?: AuctionStatus;
  filters: AuctionListFilter[];
  sort_by?: (typeof AUCTION_SORT_FIELDS)[number];
  sort_order?: 'asc' | 'desc';
  page: number;
  page_size: number;
}

export type AuctionIndexMessage =
  /** Creates every auction of the list or none (the reply waits until each exists). */
  | { op: 'create'; tenant: string; seller_id: string; specs: AuctionSpec[] }
  | { op: 'upsert'; entry: AuctionView }
  | { op: 'remove'; auction_id: string }
  | { op: 'list'; query: AuctionListQuery }
  | FlowAnswer;

export interface AuctionListView {
  total: number;
  auctions: AuctionView[];
}

export interface CreatedView {
  auction_ids: string[];
  auctions: AuctionView[];
}
