import type { ActorSend, DeferredReply, TurnContext, TurnResult } from '../../runtime/index.js';
import { isServiceError } from '../../runtime/index.js';
import { emptyAccount, loadAccount, stepAccount, type AccountState } from '../../actors/ledger/account-state.js';
import { LEDGER_ACCOUNT_KIND, ledgerAccountKey, type LedgerAccountMessage } from '../../actors/ledger/messages.js';
import { loadAuction, stepAuction, type AuctionState } from '../../actors/auctions/auction-state.js';
import { AUCTION_INDEX_KIND, AUCTION_KIND, auctionKey, type AuctionSpec } from '../../actors/auctions/messages.js';
import { initialCatalogState, stepCatalog, type CatalogState } from '../../actors/items/catalog-state.js';
import { initialContainerState, type ContainerState } from '../../actors/items/container-state.js';
import { stepContainerFlows } from '../../actors/items/flows.js';
import { ITEM_CATALOG_KIND, ITEM_CONTAINER_KIND, itemContainerKey, type ContainerMessage } from '../../actors/items/messages.js';

/**
 * A world of pure steps for the auctions and the ledger: the actors' states
 * in memory, their sends in a bag delivered one at a time in the order the
 * test picks (possibly twice, to check idempotency without the runtime's
 * de-duplication), asks answered through deferred replies. No runtime, no disk.
 */
export const TENANT = 'org_1';
export const SELLER = 'seller';

export interface Outcome {
  reply?: unknown;
  error?: { code: string; message: string; details?: unknown };
}

export class World {
  now = 1_000_000;
  readonly accounts = new Map<string, AccountState>();
  readonly auctions = new Map<string, AuctionState>();
  /** The items area's containers and catalogs (their real steps), by actor key. */
  readonly containers = new Map<string, ContainerState>();
  readonly catalogs = new Map<string, CatalogState>();
  /** Undelivered sends (the index's are dropped: the list is not under test here). */
  readonly inFlight: ActorSend[] = [];
  readonly outcomes = new Map<string, Outcome>();
  /** What each actor has written, as the store would hold it (values copied as msgpack would). */
  readonly records = new Map<string, Map<string, unknown>>();
  private seq = 0;

  context(kind: string, key: string, request_id: string | null = null): TurnContext {
    return { now: this.now, kind, key, request_id, newId: (prefix = '') => `${prefix}${++this.seq}` };
  }

  account(user_id: string): AccountState {
    const key = ledgerAccountKey(TENANT, user_id);
    let state = this.accounts.get(key);
    if (!state) {
      state = emptyAccount(key);
      this.accounts.set(key, state);
    }
    return state;
  }

  auction(auction_id: string): AuctionState {
    const key = auctionKey(TENANT, auction_id);
    let state = this.auctions.get(key);
    if (!state) {
      state = loadAuction(key, []);
      this.auctions.set(key, state);
    }
    return state;
  }

  private apply(kind: string, key: string, message: unknown, request_id: string | null): TurnResult<unknown, unknown> {
    let result: TurnResult<unknown, unknown>;
    if (kind === LEDGER_ACCOUNT_KIND) {
      const state = this.accounts.get(key) ?? emptyAccount(key);
      this.accounts.set(key, state);
      result = stepAccount(state, message as LedgerAccountMessage, this.context(kind, key, request_id));
    } else if (kind === AUCTION_KIND) {
      const state = this.auctions.get(key) ?? loadAuction(key, []);
      this.auctions.set(key, state);
      result = stepAuction(state, message as never, this.context(kind, key, request_id));
      this.auctions.set(key, result.state as AuctionState);
    } else if (kind === ITEM_CONTAINER_KIND) {
      const state = this.containers.get(key) ?? initialContainerState();
      this.containers.set(key, state);
      result = stepContainerFlows(state, message as ContainerMessage, this.context(kind, key, request_id));
    } else if (kind === ITEM_CATALOG_KIND) {
      const state = this.catalogs.get(key) ?? initialCatalogState();
      this.catalogs.set(key, state);
      result = stepCatalog(state, message as never, this.context(kind, key, request_id));
    } else return { state: null };
    const stored = this.records.get(`${kind} ${key}`) ?? new Map<string, unknown>();
    this.records.set(`${kind} ${key}`, stored);
    for (const write of result.writes ?? []) {
      if (write.value === undefined) stored.delete(write.subkey);
      else stored.set(write.subkey, structuredClone(write.value));
    }
    return result;
  }

  /**
   * A crash of one actor: its state is rebuilt from its records, as at
   * activation; the asks it was holding are lost (their callers got 503
   * flow_interrupted). Undelivered sends stay: they are in the outbox.
   */
  crash(kind: string, key: string): void {
    const stored = [...(this.records.get(`${kind} ${key}`) ?? new Map<string, unknown>()).entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (kind === LEDGER_ACCOUNT_KIND) this.accounts.set(key, loadAccount(key, stored));
    else this.auctions.set(key, loadAuction(key, stored));
  }

  private collect(result: TurnResult<unknown, unknown>): void {
    for (const send of result.sends ?? []) if (send.kind !== AUCTION_INDEX_KIND) this.inFlight.push(send);
    for (const reply of result.replies ?? []) this.settle(reply);
  }

  private settle(reply: DeferredReply): void {
    this.outcomes.set(reply.request_id, reply.error ? { error: reply.error } : { reply: reply.reply });
  }

  /** An ask: its outcome is recorded under `request_id` (now, or when a later turn answers it). */
  ask(kind: string, key: string, message: unknown, request_id: string): void {
    try {
      const result = this.apply(kind, key, message, request_id);
      this.collect(result);
      if (!result.defer) this.outcomes.set(request_id, { reply: result.reply });
    } catch (error) {
      if (!isServiceError(error)) throw error;
      this.outcomes.set(request_id, { error: { code: error.code, message: error.message, details: error.details } });
    }
  }

  /** Delivers the in-flight send at `index` (removed unless `duplicate`: then it stays to be delivered again). */
  deliver(index: number, duplicate = false): void {
    const send = duplicate ? this.inFlight[index] : this.inFlight.splice(index, 1)[0];
    try {
      this.collect(this.apply(send.kind, send.key, send.message, null));
    } catch (error) {
      // A refused tell is dropped, as the runtime's outbox does.
      if (!isServiceError(error)) throw error;
    }
  }

  /** Delivers everything, first in first out. */
  drain(): void {
    while (this.inFlight.length > 0) this.deliver(0);
  }

  alarm(auction_id: string, name: string): void {
    const key = auctionKey(TENANT, auction_id);
    this.collect(this.apply(AUCTION_KIND, key, { op: '$alarm', name, due_ms: this.now }, null));
  }

  fund(user_id: string, amount: number, currency = 'USD'): void {
    this.ask(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, user_id), { op: 'credit', tenant: TENANT, user_id, reference: `fund-${user_id}-${++this.seq}`, currency, amount, by: 'admin' }, `fund-${this.seq}`);
  }

  create(spec: Partial<AuctionSpec> & { auction_id: string }): void {
    const full: AuctionSpec = {
      item_id: `item-${spec.auction_id}`,
      currency: 'USD',
      starting_price: 10,
      bid_increment: 1,
      reserve_price: null,
      buy_it_now_price: null,
      soft_close_seconds: 0,
      start_ms: this.now,
      end_ms: this.now + 3_600_000,
      ...spec,
    };
    this.ask(AUCTION_KIND, auctionKey(TENANT, full.auction_id), { op: 'init', tenant: TENANT, seller_id: SELLER, spec: full }, `create-${full.auction_id}`);
  }

  bid(auction_id: string, user_id: string, amount: number, is_proxy: boolean, request_id: string): void {
    this.ask(AUCTION_KIND, auctionKey(TENANT, auction_id), { op: 'bid', caller: { user_id, admin: false }, amount, is_proxy }, request_id);
  }

  /** The items (and held locks) of a container of the items area. */
  container(domain: string, container_id: string): { items: { item_id: string; quantity: number; definition_id: string }[]; locks: number } {
    const state = this.containers.get(itemContainerKey(TENANT, domain, container_id));
    if (!state) return { items: [], locks: 0 };
    return { items: [...state.items.values()], locks: [...state.locks.values()].filter((lock) => lock.status === 'held').length };
  }

  /** The account's funds per currency: balance, held (open holds) and available. */
  funds(user_id: string, currency = 'USD'): { balance: number; held: number; available: number } {
    const state = this.account(user_id);
    const balance = state.balances.get(currency) ?? 0;
    const held = state.held.get(currency) ?? 0;
    return { balance, held, available: balance - held };
  }
}
