import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { randomId, ServiceError } from '../../runtime/index.js';
import { ledgerPolicy } from '../../actors/ledger/messages.js';
import {
  AUCTION_FILTER_FIELDS,
  AUCTION_FILTER_OPERATORS,
  AUCTION_INDEX_KIND,
  AUCTION_KIND,
  AUCTION_SORT_FIELDS,
  AUCTION_STATUSES,
  auctionIndexKey,
  auctionKey,
  auctionPolicy as policy,
  type AuctionCaller,
  type AuctionListView,
  type AuctionMessage,
  type AuctionSpec,
  type AuctionView,
  type BidReply,
  type BidView,
  type CloseReply,
  type CreatedView,
  type DeleteReply,
  type SettlementView,
} from '../../actors/auctions/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { parseListFilters } from '../list-filters.js';

/** English auctions with proxy bidding and a soft close (spec doc 2 §4.5; docs/api/auctions.md). */
const tags = ['auctions'];
const base = '/api/v1/auctions';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));
const Status = literals(AUCTION_STATUSES);
const Money = (description: string, minimum = 0) => Type.Integer({ minimum, maximum: ledgerPolicy.amount_max, description: `${description} Integer minor units (1050 is 10.50 USD).` });
const NullableMoney = Type.Union([Type.Integer(), Type.Null()]);
const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);

const Settlement = Type.Object(
  {
    auction_id: Type.String(),
    status: literals(['in_progress', 'settled', 'cancelled'] as const),
    winner_id: Type.Union([Type.String(), Type.Null()]),
    final_price: NullableMoney,
    reserve_met: Type.Boolean(),
    funds_settled: Type.Boolean(),
    holds_released: Type.Integer(),
    item_transferred: Type.Boolean(),
    item_transfer_reason: Type.Union([Type.String(), Type.Null()]),
    item_container_id: Type.Union([Type.String(), Type.Null()], { description: "The items area container the item was delivered to (auction:<auction_id>, the winner's)." }),
    error: Type.Union([Type.String(), Type.Null()]),
    completed_at: NullableTime,
  },
  { title: 'Settlement' },
);
const Auction = Type.Object(
  {
    auction_id: Type.String(),
    auction_type: Type.Literal('english'),
    bid_increment: Type.Integer(),
    buy_it_now_price: NullableMoney,
    created_at: Time,
    currency: Type.String(),
    current_price: Type.Integer(),
    end_time: Time,
    original_end_time: Time,
    final_price: NullableMoney,
    high_bidder: Type.Union([Type.String(), Type.Null()]),
    item_id: Type.String(),
    item_domain: Type.Union([Type.String(), Type.Null()], { description: 'Set when item_id names an item of the items area.' }),
    item_container_id: Type.Union([Type.String(), Type.Null()], { description: "The seller's container it is locked in." }),
    item_quantity: Type.Union([Type.Integer(), Type.Null()]),
    reserve_price: Type.Union([Type.Integer(), Type.Null()], { description: 'Shown to the seller and platform admins only (null for others, as on eBay); reserve_met tells everyone.' }),
    reserve_met: Type.Boolean(),
    seller_id: Type.String(),
    soft_close_seconds: Type.Integer(),
    start_time: Time,
    starting_price: Type.Integer(),
    status: Status,
    total_bids: Type.Integer(),
    updated_at: Time,
    winner_id: Type.Union([Type.String(), Type.Null()]),
    settlement: Type.Union([Settlement, Type.Null()]),
  },
  { title: 'Auction' },
);
const Bid = Type.Object(
  {
    bid_id: Type.String(),
    auction_id: Type.String(),
    bidder_id: Type.String(),
    amount: Type.Integer(),
    is_proxy: Type.Boolean(),
    hold_id: Type.String(),
    seq: Type.Integer(),
    timestamp: Time,
  },
  { title: 'Bid' },
);
const ItemsId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.:-]+$' });
const CreateBody = Type.Object({
  item_id: Type.String({ minLength: 1, maxLength: policy.item_id_length_max, description: 'A label of your choosing, or, with item_domain and item_container_id, an item of the items area (locked now, transferred to the winner).' }),
  item_domain: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', description: 'The items area domain of item_id (with item_container_id).' })),
  item_container_id: Type.Optional(Type.String({ ...ItemsId, description: "The seller's container holding item_id (its owner_id must be the seller)." })),
  item_quantity: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'Units of the item sold (a part of a stack); default 1.' })),
  start_time: Type.String({ format: 'date-time', description: 'RFC 3339; in the past or now opens the auction at once.' }),
  end_time: Type.String({ format: 'date-time', description: 'RFC 3339; after start_time and in the future.' }),
  starting_price: Money('The minimum first bid.'),
  bid_increment: Money('Each bid after the first must exceed the current price by at least this.', 1),
  currency: Type.Optional(Type.String({ pattern: ledgerPolicy.currency_pattern, description: `Ledger currency of the bids; default ${policy.currency_default}.` })),
  reserve_price: Type.Optional(Money('Below it at the end, nobody wins and every hold is released.')),
  buy_it_now_price: Type.Optional(Money('A plain bid at or above it (while the price is below it) wins at this price and ends the auction.', 1)),
  soft_close_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.soft_close_seconds_max, description: `A bid in the last N seconds moves end_time to N seconds after the bid; 0 turns it off; default ${policy.soft_close_seconds_default}.` })),
});
type CreateBody = Static<typeof CreateBody>;
const IdParams = Type.Object({ auction_id: Type.String({ minLength: 1, maxLength: 64 }) });
const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of auction_id, item_id or seller_id (case-insensitive).' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(literals(AUCTION_SORT_FIELDS)),
  sort_order: Type.Optional(literals(['asc', 'desc'] as const)),
  filter: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 20 })),
  status: Type.Optional(Status),
});

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

/** Checks one create body against the clock and the policy; `field` prefixes the names in errors. */
export function specOf(body: CreateBody, now: number, field: string): AuctionSpec {
  const start_ms = Date.parse(body.start_time);
  const end_ms = Date.parse(body.end_time);
  if (!Number.isFinite(start_ms)) throw badRequest(`${field}.start_time`, 'must be an RFC 3339 date-time');
  if (!Number.isFinite(end_ms)) throw badRequest(`${field}.end_time`, 'must be an RFC 3339 date-time');
  if (end_ms <= start_ms) throw badRequest(`${field}.end_time`, 'must be after start_time');
  if (end_ms <= now) throw badRequest(`${field}.end_time`, 'must be in the future');
  if (end_ms - Math.max(start_ms, now) > policy.duration_max_seconds * 1000) throw badRequest(`${field}.end_time`, `must be at most ${policy.duration_max_seconds} s after start_time`);
  if (start_ms - now > policy.start_ahead_max_seconds * 1000) throw badRequest(`${field}.start_time`, `must be at most ${policy.start_ahead_max_seconds} s ahead`);
  const reserve_price = body.reserve_price ?? null;
  const buy_it_now_price = body.buy_it_now_price ?? null;
  if (reserve_price !== null && reserve_price < body.starting_price) throw badRequest(`${field}.reserve_price`, 'must be at least starting_price');
  if (buy_it_now_price !== null && buy_it_now_price <= body.starting_price) throw badRequest(`${field}.buy_it_now_price`, 'must be above starting_price');
  if (buy_it_now_price !== null && reserve_price !== null && buy_it_now_price < reserve_price) throw badRequest(`${field}.buy_it_now_price`, 'must be at least reserve_price');
  if ((body.item_domain === undefined) !== (body.item_container_id === undefined)) {
    throw badRequest(`${field}.${body.item_domain === undefined ? 'item_domain' : 'item_container_id'}`, 'is required with the other: item_domain and item_container_id name an item of the items area together');
  }
  if (body.item_quantity !== undefined && body.item_domain === undefined) throw badRequest(`${field}.item_quantity`, 'applies to an item of the items area only (with item_domain)');
  if (body.item_domain !== undefined && !/^[A-Za-z0-9_.:-]{1,128}$/.test(body.item_id)) throw badRequest(`${field}.item_id`, 'must be an item id of the items area');
  return {
    auction_id: randomId('auc_'),
    item_id: body.item_id,
    item: body.item_domain === undefined ? null : { domain: body.item_domain, container_id: body.item_container_id!, quantity: body.item_quantity ?? 1 },
    currency: body.currency ?? policy.currency_default,
    starting_price: body.starting_price,
    bid_increment: body.bid_increment,
    reserve_price,
    buy_it_now_price,
    soft_close_seconds: body.soft_close_seconds ?? policy.soft_close_seconds_default,
    // An auction whose start is past opens now: it never had an earlier start.
    start_ms: Math.max(start_ms, now),
    end_ms,
  };
}

function settlementShape(settlement: SettlementView) {
  const { completed_at_ms, ...rest } = settlement;
  return { ...rest, item_container_id: settlement.item_container_id ?? null, completed_at: isoTime(completed_at_ms) };
}

function auctionShape(view: AuctionView, caller: AuctionCaller) {
  const seller = caller.admin || caller.user_id === view.seller_id;
  return {
    auction_id: view.auction_id,
    auction_type: view.auction_type,
    bid_increment: view.bid_increment,
    buy_it_now_price: view.buy_it_now_price,
    created_at: isoTime(view.created_at_ms)!,
    currency: view.currency,
    current_price: view.current_price,
    end_time: isoTime(view.end_ms)!,
    original_end_time: isoTime(view.original_end_ms)!,
    final_price: view.final_price,
    high_bidder: view.high_bidder,
    item_id: view.item_id,
    item_domain: view.item?.domain ?? null,
    item_container_id: view.item?.container_id ?? null,
    item_quantity: view.item?.quantity ?? null,
    reserve_price: seller ? view.reserve_price : null,
    reserve_met: view.reserve_met,
    seller_id: view.seller_id,
    soft_close_seconds: view.soft_close_seconds,
    start_time: isoTime(view.start_ms)!,
    starting_price: view.starting_price,
    status: view.status,
    total_bids: view.total_bids,
    updated_at: isoTime(view.updated_at_ms)!,
    winner_id: view.winner_id,
    settlement: view.settlement && settlementShape(view.settlement),
  };
}

function bidShape(bid: BidView) {
  const { timestamp_ms, ...rest } = bid;
  return { ...rest, timestamp: isoTime(timestamp_ms)! };
}

function callerOf(principal: Principal): AuctionCaller {
  return { user_id: principal.user_id, admin: principal.role === 'admin' };
}

export function auctionRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const auction = <Reply>(principal: Principal, auction_id: string, message: AuctionMessage) => services.actors.ask<Reply>(AUCTION_KIND, auctionKey(principal.tenant, auction_id), message);
  const readAuction = <Reply>(principal: Principal, auction_id: string, message: AuctionMessage) =>
    services.actors.ask<Reply>(AUCTION_KIND, auctionKey(principal.tenant, auction_id), message, { readOnly: true });
  const createIn = (principal: Principal, specs: AuctionSpec[]) =>
    services.actors.ask<CreatedView>(AUCTION_INDEX_KIND, auctionIndexKey(principal.tenant), { op: 'create', tenant: principal.tenant, seller_id: principal.user_id, specs });

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: schema(
      `The tenant's auctions, newest first by default. q on auction_id, item_id, seller_id; status; filter on ${AUCTION_FILTER_FIELDS.join(', ')} (times in epoch-s); sort_by ${AUCTION_SORT_FIELDS.join(', ')}. Price and bid count may lag the auction by up to ${policy.index_refresh_ms} ms.`,
      { querystring: ListQuery },
      { 200: Type.Object({ auctions: Type.Array(Auction), pagination: Pagination }) },
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(policy.page_size_max, query.page_size || 20);
    const filters = parseListFilters(query.filter, AUCTION_FILTER_FIELDS, AUCTION_FILTER_OPERATORS);
    const view = await services.actors.ask<AuctionListView>(
      AUCTION_INDEX_KIND,
      auctionIndexKey(principal.tenant),
      { op: 'list', query: { q: query.q, status: query.status, filters, sort_by: query.sort_by, sort_order: query.sort_order, page, page_size } },
      { readOnly: true },
    );
    const caller = callerOf(principal);
    return { auctions: view.auctions.map((entry) => auctionShape(entry, caller)), pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total } };
  });

  app.post<{ Body: CreateBody }>(base, {
    onRequest: authenticate,
    schema: schema(
      'Create an English auction; the caller is the seller. Opens at start_time and ends at end_time by itself (durable alarms). An item already in a live auction of the tenant: 409 auction_item_conflict. With item_domain and item_container_id the item (of the items area, the seller\'s) is locked first: 404 items_item_not_found, 409 items_item_locked or items_insufficient_inputs refuse the creation; settlement transfers it to the winner.',
      { body: CreateBody },
      { 201: Type.Object({ auction_id: Type.String(), status: Status }) },
      [404, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const spec = specOf(request.body, services.clock.now(), 'body');
    const created = await createIn(principal, [spec]);
    const view = created.auctions[0];
    return reply.code(201).send({ auction_id: spec.auction_id, status: view?.status ?? (spec.start_ms <= services.clock.now() ? 'open' : 'scheduled') });
  });

  app.post<{ Body: { auctions: CreateBody[] } }>(`${base}/batch`, {
    onRequest: authenticate,
    schema: schema(
      `Create up to max_batch_auctions (${policy.max_batch_auctions}) auctions, all or nothing: one invalid body (400, details name it) or one conflicting item (409) and none is created.`,
      { body: Type.Object({ auctions: Type.Array(CreateBody, { minItems: 1, maxItems: policy.max_batch_auctions }) }) },
      { 201: Type.Object({ auction_ids: Type.Array(Type.String()), count: Type.Integer() }) },
      [404, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const now = services.clock.now();
    const specs = request.body.auctions.map((body, index) => specOf(body, now, `body.auctions.${index}`));
    const created = await createIn(principal, specs);
    return reply.code(201).send({ auction_ids: created.auction_ids, count: created.auction_ids.length });
  });

  app.get<{ Params: Static<typeof IdParams> }>(`${base}/:auction_id`, {
    onRequest: authenticate,
    schema: schema('One auction of the tenant, as it stands now.', { params: IdParams }, { 200: Auction }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return auctionShape(await readAuction<AuctionView>(principal, request.params.auction_id, { op: 'get' }), callerOf(principal));
  });

  app.delete<{ Params: Static<typeof IdParams> }>(`${base}/:auction_id`, {
    onRequest: authenticate,
    schema: schema(
      'Seller or platform admin: delete the auction. A live one is cancelled first, every bid hold released (holds_released counts them). An auction being settled: 409 auction_settling.',
      { params: IdParams },
      { 200: Type.Object({ auction_id: Type.String(), holds_released: Type.Integer(), message: Type.String(), status: Type.Literal('deleted') }) },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const deleted = await auction<DeleteReply>(principal, request.params.auction_id, { op: 'delete', caller: callerOf(principal) });
    return { auction_id: deleted.auction_id, holds_released: deleted.holds_released, message: `Auction deleted; ${deleted.holds_released} hold(s) released.`, status: 'deleted' as const };
  });

  app.get<{ Params: Static<typeof IdParams>; Querystring: { limit?: number; before_seq?: number } }>(`${base}/:auction_id/bids`, {
    onRequest: authenticate,
    schema: schema(
      `The accepted bids, newest first (each higher than the one before it). limit: default ${policy.bids_limit_default}, at most ${policy.bids_limit_max} (0 means the default); before_seq pages back to older bids. total counts them all.`,
      { params: IdParams, querystring: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 0 })), before_seq: Type.Optional(Type.Integer({ minimum: 1, description: 'Only bids with a smaller seq (the next page: the last seq you got).' })) }) },
      { 200: Type.Object({ bids: Type.Array(Bid), total: Type.Integer() }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await readAuction<{ total: number; bids: BidView[] }>(principal, request.params.auction_id, { op: 'bids', limit: request.query.limit ?? 0, before_seq: request.query.before_seq });
    return { bids: view.bids.map(bidShape), total: view.total };
  });

  const BidResult = Type.Object({
    accepted: Type.Boolean(),
    closed: Type.Boolean(),
    current_price: Type.Integer(),
    message: Type.String(),
    your_bid: Type.Integer(),
    leading: Type.Boolean(),
    high_bidder: Type.Union([Type.String(), Type.Null()]),
  });
  app.post<{ Params: Static<typeof IdParams>; Body: { amount: number } }>(`${base}/:auction_id/bids`, {
    onRequest: authenticate,
    schema: schema(
      "Bid exactly `amount`. The bidder's ledger holds `amount` first (409 insufficient_funds otherwise); accepted: true when the bid leads, false when a higher proxy answered at once (the price rose). At or above buy_it_now_price: wins and closed: true. Below the minimum: 409 bid_too_low; the high bidder: 409 already_high_bidder (details.minimum: the least max_amount of a proxy bid raising their maximum, that maximum + 1); not open: 409 auction_not_open; the seller: 403.",
      { params: IdParams, body: Type.Object({ amount: Money('The bid.', 1) }) },
      { 200: BidResult },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return auction<BidReply>(principal, request.params.auction_id, { op: 'bid', caller: callerOf(principal), amount: request.body.amount, is_proxy: false });
  });

  app.post<{ Params: Static<typeof IdParams>; Body: { max_amount: number } }>(`${base}/:auction_id/proxy-bid`, {
    onRequest: authenticate,
    schema: schema(
      "Proxy bid: the auction bids for you the least needed to lead, up to max_amount (eBay semantics). The ledger holds max_amount. success: true when you lead (or raised your own maximum); false when a higher or earlier equal maximum outbid you at once.",
      { params: IdParams, body: Type.Object({ max_amount: Money('Your maximum.', 1) }) },
      { 200: Type.Object({ success: Type.Boolean(), current_price: Type.Integer(), max_amount: Type.Integer(), message: Type.String(), leading: Type.Boolean(), high_bidder: Type.Union([Type.String(), Type.Null()]) }) },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const result = await auction<BidReply>(principal, request.params.auction_id, { op: 'bid', caller: callerOf(principal), amount: request.body.max_amount, is_proxy: true });
    return { success: result.accepted, current_price: result.current_price, max_amount: request.body.max_amount, message: result.message, leading: result.leading, high_bidder: result.high_bidder };
  });

  app.post<{ Params: Static<typeof IdParams> }>(`${base}/:auction_id/close`, {
    onRequest: authenticate,
    schema: schema(
      "Seller or platform admin: end the open auction now and settle it (capture the winner's hold to the seller, release the others, item step). Answers when the settlement is done.",
      { params: IdParams },
      { 200: Type.Object({ message: Type.String(), settlement: Settlement }) },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const closed = await auction<CloseReply>(principal, request.params.auction_id, { op: 'close', caller: callerOf(principal) });
    const { settlement } = closed;
    const message = settlement.winner_id
      ? `Settled: ${settlement.winner_id} won at ${settlement.final_price}.`
      : closed.auction.total_bids === 0
        ? 'Settled with no bids; no winner.'
        : 'Settled: the reserve was not met; no winner.';
    return { message, settlement: settlementShape(settlement) };
  });

  app.put<{ Params: Static<typeof IdParams>; Body: { status: (typeof AUCTION_STATUSES)[number] } }>(`${base}/:auction_id/status`, {
    onRequest: authenticate,
    schema: schema(
      'Seller or platform admin: move the auction along its state machine (scheduled -> open | cancelled; open -> ended | settled | cancelled). ended and settled settle it now, like close; cancelled releases every hold. Any other move: 409 auction_invalid_transition.',
      { params: IdParams, body: Type.Object({ status: Status }) },
      { 200: Type.Object({ success: Type.Boolean(), status: Status, message: Type.String(), settlement: Type.Union([Settlement, Type.Null()]) }) },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const changed = await auction<{ auction: AuctionView; settlement: SettlementView | null }>(principal, request.params.auction_id, { op: 'set_status', caller: callerOf(principal), status: request.body.status });
    return { success: true, status: changed.auction.status, message: `The auction is ${changed.auction.status}.`, settlement: changed.settlement && settlementShape(changed.settlement) };
  });
}
