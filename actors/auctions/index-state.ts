import { ServiceError, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { lockSend, unlockSend } from './item-transfer.js';
import {
  AUCTION_INDEX_KIND,
  AUCTION_KIND,
  auctionKey,
  auctionPolicy as policy,
  type AuctionIndexMessage,
  type AuctionListFilter,
  type AuctionListQuery,
  type AuctionListView,
  type AuctionSpec,
  type AuctionView,
  type CreatedView,
} from './messages.js';
import { isFinal } from './status-machine.js';

/**
 * A tenant's auctions: pure domain logic of the `auction-index` actor
 * (storage `records`, key = auctionIndexKey(tenant)). Records: `s:<id>` the
 * summary of each auction (the auction's view, sent by the auction through
 * the outbox on every status change and at most every index_refresh_ms
 * otherwise), `i:<item_id>` the live auction holding each item, `p:<flow>` a
 * creation in progress, `d:<id>` each deleted auction (the outbox may bring
 * an auction's last summary after its removal: it must not bring it back).
 *
 * It creates auctions, a batch all-or-nothing: every check (batch size,
 * an item in two auctions of the batch or in a live auction, the tenant's
 * cap) is made in the one turn that claims the items, so two concurrent
 * batches cannot both pass; then it sends each auction its `init` (a
 * flow-call, step = auction id) and answers once all have answered, so the
 * auctions exist when the caller hears of them. An item is free again when
 * its auction is settled, cancelled or deleted.
 *
 * When auctions sell items of the items area (`spec.item`), the creation
 * first locks each item in the seller's container (flow-calls of step
 * `lock:<auction_id>`, item-transfer.ts); only when every lock is placed are
 * the auctions created. One refused lock refuses the batch: every lock of
 * it is released (tells; a release arriving before its lock is remembered)
 * and the items are free, nothing created.
 */
export const SUMMARY_PREFIX = 's:';
export const ITEM_PREFIX = 'i:';
export const PENDING_PREFIX = 'p:';
export const DELETED_PREFIX = 'd:';

interface PendingCreation {
  flow_id: string;
  request_id: string | null;
  auction_ids: string[];
  answered: string[];
  /** Items of the items area: locked before the auctions are created. */
  tenant?: string;
  seller_id?: string;
  specs?: AuctionSpec[];
  locks?: { auction_id: string; ok: boolean | null; error: FlowError | null }[];
}

export interface AuctionIndexState {
  entries: Map<string, AuctionView>;
  /** item_id -> the live auction holding it. */
  items: Map<string, string>;
  pending: Map<string, PendingCreation>;
  deleted: Set<string>;
}

type Result = TurnResult<AuctionIndexState, unknown>;

export function loadAuctionIndex(_key: string, records: Iterable<[string, unknown]>): AuctionIndexState {
  const state: AuctionIndexState = { entries: new Map(), items: new Map(), pending: new Map(), deleted: new Set() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith(SUMMARY_PREFIX)) state.entries.set(subkey.slice(SUMMARY_PREFIX.length), value as AuctionView);
    else if (subkey.startsWith(ITEM_PREFIX)) state.items.set(subkey.slice(ITEM_PREFIX.length), value as string);
    else if (subkey.startsWith(DELETED_PREFIX)) state.deleted.add(subkey.slice(DELETED_PREFIX.length));
    else if (subkey.startsWith(PENDING_PREFIX)) {
      const pending = value as PendingCreation;
      state.pending.set(pending.flow_id, { ...pending, request_id: null });
    }
  }
  return state;
}

export function stepAuctionIndex(state: AuctionIndexState, message: AuctionIndexMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'create':
      return create(state, message, context);
    case 'upsert':
      return upsert(state, message.entry);
    case 'remove':
      return remove(state, message.auction_id);
    case 'list':
      return { state, reply: list(state, message.query) };
    case 'flow-answer':
      return message.step.startsWith('lock:') ? lockAnswered(state, message, context) : initAnswered(state, message);
    default:
      return { state };
  }
}

function create(state: AuctionIndexState, message: Extract<AuctionIndexMessage, { op: 'create' }>, context: TurnContext): Result {
  const { specs } = message;
  if (specs.length === 0 || specs.length > policy.max_batch_auctions) {
    throw new ServiceError('BAD_REQUEST', `A batch holds 1 to ${policy.max_batch_auctions} auctions.`, { details: [{ field: 'body.auctions', message: `must hold 1 to ${policy.max_batch_auctions} auctions` }] });
  }
  const conflicts: { index: number; item_id: string; auction_id: string | null }[] = [];
  const seen = new Map<string, number>();
  specs.forEach((spec, index) => {
    const holder = state.items.get(spec.item_id);
    if (holder !== undefined) conflicts.push({ index, item_id: spec.item_id, auction_id: holder });
    else if (seen.has(spec.item_id)) conflicts.push({ index, item_id: spec.item_id, auction_id: null });
    seen.set(spec.item_id, index);
  });
  if (conflicts.length > 0) {
    throw new ServiceError('auction_item_conflict', `${conflicts.length} auction(s) name an item that is already in a live auction (or twice in this batch); none was created.`, { details: conflicts });
  }
  if (state.items.size + specs.length > policy.live_auctions_per_tenant_max) {
    throw new ServiceError('auction_limit_reached', `A tenant may have at most ${policy.live_auctions_per_tenant_max} live auctions; none was created.`);
  }
  const flow_id = context.newId('acf_');
  const pending: PendingCreation = { flow_id, request_id: context.request_id, auction_ids: specs.map((spec) => spec.auction_id), answered: [] };
  const writes: RecordWrite[] = [];
  for (const spec of specs) {
    state.items.set(spec.item_id, spec.auction_id);
    writes.push({ subkey: ITEM_PREFIX + spec.item_id, value: spec.auction_id });
  }
  const withItems = specs.filter((spec) => spec.item);
  if (withItems.length > 0) {
    pending.tenant = message.tenant;
    pending.seller_id = message.seller_id;
    pending.specs = specs;
    pending.locks = withItems.map((spec) => ({ auction_id: spec.auction_id, ok: null, error: null }));
    state.pending.set(flow_id, pending);
    writes.push({ subkey: PENDING_PREFIX + flow_id, value: { ...pending, request_id: null } });
    const sends = withItems.map((spec) =>
      lockSend(message.tenant, message.seller_id, spec.auction_id, spec.item_id, spec.item!, { kind: AUCTION_INDEX_KIND, key: context.key, flow_id, step: `lock:${spec.auction_id}` }),
    );
    return { state, writes, sends, defer: context.request_id !== null };
  }
  state.pending.set(flow_id, pending);
  writes.push({ subkey: PENDING_PREFIX + flow_id, value: { ...pending, request_id: null } });
  return { state, writes, sends: initSends(message.tenant, message.seller_id, specs, context.key, flow_id), defer: context.request_id !== null };
}

function initSends(tenant: string, seller_id: string, specs: AuctionSpec[], key: string, flow_id: string) {
  return specs.map((spec) =>
    flowCall(AUCTION_KIND, auctionKey(tenant, spec.auction_id), { op: 'init' as const, tenant, seller_id, spec }, {
      kind: AUCTION_INDEX_KIND,
      key,
      flow_id,
      step: spec.auction_id,
    }),
  );
}

/** A lock's answer: when all are in, create the auctions, or release every lock and refuse the batch. */
function lockAnswered(state: AuctionIndexState, answer: FlowAnswer, context: TurnContext): Result {
  const pending = state.pending.get(answer.flow_id);
  const lock = pending?.locks?.find((entry) => `lock:${entry.auction_id}` === answer.step);
  if (!pending || !lock || lock.ok !== null) return { state };
  lock.ok = answer.ok;
  lock.error = answer.ok ? null : answer.error;
  const writes: RecordWrite[] = [];
  if (pending.locks!.some((entry) => entry.ok === null)) {
    writes.push({ subkey: PENDING_PREFIX + pending.flow_id, value: { ...pending, request_id: null } });
    return { state, writes };
  }
  const specs = pending.specs!;
  const refused = pending.locks!.find((entry) => !entry.ok);
  if (refused) {
    const sends = specs.filter((spec) => spec.item).map((spec) => unlockSend(pending.tenant!, spec.auction_id, spec.item!));
    for (const spec of specs) freeItem(state, spec.item_id, spec.auction_id, writes);
    state.pending.delete(pending.flow_id);
    writes.push({ subkey: PENDING_PREFIX + pending.flow_id, value: undefined });
    const index = specs.findIndex((spec) => spec.auction_id === refused.auction_id);
    const error = refused.error!;
    const replies: DeferredReply[] = pending.request_id
      ? [{ request_id: pending.request_id, error: { code: error.code, message: specs.length > 1 ? `auctions.${index}: ${error.message} None was created.` : error.message, details: error.details } }]
      : [];
    return { state, writes, sends, replies };
  }
  // Every item is locked: create the auctions (the specs are not needed any more).
  const { tenant, seller_id } = pending;
  delete pending.specs;
  delete pending.locks;
  writes.push({ subkey: PENDING_PREFIX + pending.flow_id, value: { ...pending, request_id: null } });
  return { state, writes, sends: initSends(tenant!, seller_id!, specs, context.key, pending.flow_id) };
}

function initAnswered(state: AuctionIndexState, answer: FlowAnswer): Result {
  const pending = state.pending.get(answer.flow_id);
  if (!pending || !pending.auction_ids.includes(answer.step) || pending.answered.includes(answer.step)) return { state };
  const writes: RecordWrite[] = [];
  if (answer.ok) {
    const view = answer.reply as AuctionView;
    const current = state.entries.get(view.auction_id);
    if (!current || current.version < view.version) {
      state.entries.set(view.auction_id, view);
      writes.push({ subkey: SUMMARY_PREFIX + view.auction_id, value: view });
    }
  }
  pending.answered.push(answer.step);
  if (pending.answered.length < pending.auction_ids.length) {
    writes.push({ subkey: PENDING_PREFIX + pending.flow_id, value: { ...pending, request_id: null } });
    return { state, writes };
  }
  state.pending.delete(pending.flow_id);
  writes.push({ subkey: PENDING_PREFIX + pending.flow_id, value: undefined });
  const replies: DeferredReply[] = [];
  if (pending.request_id) {
    const auctions = pending.auction_ids.map((id) => state.entries.get(id)).filter((view): view is AuctionView => view !== undefined);
    replies.push({ request_id: pending.request_id, reply: { auction_ids: pending.auction_ids, auctions } satisfies CreatedView });
  }
  return { state, writes, replies };
}

function upsert(state: AuctionIndexState, entry: AuctionView): Result {
  const current = state.entries.get(entry.auction_id);
  if (state.deleted.has(entry.auction_id) || (current && current.version >= entry.version)) return { state, reply: { applied: false } };
  state.entries.set(entry.auction_id, entry);
  const writes: RecordWrite[] = [{ subkey: SUMMARY_PREFIX + entry.auction_id, value: entry }];
  if (isFinal(entry.status)) freeItem(state, entry.item_id, entry.auction_id, writes);
  return { state, reply: { applied: true }, writes };
}

function remove(state: AuctionIndexState, auction_id: string): Result {
  if (state.deleted.has(auction_id)) return { state, reply: { removed: false } };
  state.deleted.add(auction_id);
  const writes: RecordWrite[] = [{ subkey: DELETED_PREFIX + auction_id, value: true }];
  const entry = state.entries.get(auction_id);
  if (!entry) return { state, reply: { removed: false }, writes };
  state.entries.delete(auction_id);
  writes.push({ subkey: SUMMARY_PREFIX + auction_id, value: undefined });
  freeItem(state, entry.item_id, auction_id, writes);
  return { state, reply: { removed: true }, writes };
}

function freeItem(state: AuctionIndexState, item_id: string, auction_id: string, writes: RecordWrite[]): void {
  if (state.items.get(item_id) !== auction_id) return;
  state.items.delete(item_id);
  writes.push({ subkey: ITEM_PREFIX + item_id, value: undefined });
}

const TIME_FIELDS = { start_time: 'start_ms', end_time: 'end_ms', created_at: 'created_at_ms' } as const;
const NUMBER_FIELDS = ['current_price', 'starting_price', 'total_bids'] as const;

function badFilter(filter: AuctionListFilter, message: string): ServiceError {
  const item = `${filter.field}:${filter.operator}:${filter.value}`;
  return new ServiceError('BAD_REQUEST', `filter ${JSON.stringify(item)}: ${message}`, { details: [{ field: 'querystring.filter', message }] });
}

function matches(entry: AuctionView, filter: AuctionListFilter): boolean {
  const { field, operator, value } = filter;
  const numeric = field in TIME_FIELDS || (NUMBER_FIELDS as readonly string[]).includes(field);
  const actual: string | number | null =
    field in TIME_FIELDS ? Math.floor(entry[TIME_FIELDS[field as keyof typeof TIME_FIELDS]] / 1000) : (entry[field as keyof AuctionView] as string | number | null);
  const parse = (raw: string): string | number => {
    if (!numeric) return raw;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw badFilter(filter, field in TIME_FIELDS ? `${field} takes epoch seconds` : `${field} takes a number`);
    return n;
  };
  if (operator === 'contains') {
    if (numeric) throw badFilter(filter, 'contains applies to text fields only');
    return actual !== null && String(actual).toLowerCase().includes(value.toLowerCase());
  }
  if (operator === 'in') return value.split('|').map(parse).includes(actual as string | number);
  const wanted = parse(value);
  if (operator === 'eq') return actual === wanted;
  if (operator === 'ne') return actual !== wanted;
  if (actual === null) return false;
  switch (operator) {
    case 'lt':
      return actual < wanted;
    case 'lte':
      return actual <= wanted;
    case 'gt':
      return actual > wanted;
    case 'gte':
      return actual >= wanted;
  }
}

function list(state: AuctionIndexState, query: AuctionListQuery): AuctionListView {
  const q = query.q?.toLowerCase();
  // Every filter is parsed before the first entry, so a bad one is refused on an empty index too.
  const probe = { auction_id: '', item_id: '', seller_id: '', status: 'open', currency: '', high_bidder: null, winner_id: null, current_price: 0, starting_price: 0, total_bids: 0, start_ms: 0, end_ms: 0, created_at_ms: 0 } as unknown as AuctionView;
  for (const filter of query.filters) matches(probe, filter);
  const matched = [...state.entries.values()].filter(
    (entry) =>
      (query.status === undefined || entry.status === query.status) &&
      (!q || entry.auction_id.toLowerCase().includes(q) || entry.item_id.toLowerCase().includes(q) || entry.seller_id.toLowerCase().includes(q)) &&
      query.filters.every((filter) => matches(entry, filter)),
  );
  const sort_by = query.sort_by ?? 'created_at';
  const direction = query.sort_order === 'asc' ? 1 : -1;
  const keyOf = (entry: AuctionView): number =>
    sort_by === 'start_time' ? entry.start_ms : sort_by === 'end_time' ? entry.end_ms : sort_by === 'current_price' ? entry.current_price : sort_by === 'total_bids' ? entry.total_bids : entry.created_at_ms;
  matched.sort((a, b) => (keyOf(a) - keyOf(b)) * direction || (a.auction_id < b.auction_id ? -direction : direction));
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, auctions: matched.slice(start, start + query.page_size) };
}
