import type { ActorSend, DeferredReply, TurnContext, TurnResult } from '../../runtime/index.js';
import { isServiceError } from '../../runtime/index.js';
import { emptyAccount, stepAccount, type AccountState } from '../../actors/ledger/account-state.js';
import { LEDGER_ACCOUNT_KIND, ledgerAccountKey, type LedgerAccountMessage } from '../../actors/ledger/messages.js';
import { initialSession, stepSession, type SessionState } from '../../actors/handshake/session-state.js';
import { initialContainerState, type ContainerState } from '../../actors/items/container-state.js';
import { stepContainerFlows } from '../../actors/items/flows.js';
import { ITEM_CONTAINER_KIND, itemContainerKey, type ContainerConfig, type ContainerMessage, type PlacementUnit, type StoredItem } from '../../actors/items/messages.js';
import { HANDSHAKE_INDEX_KIND, HANDSHAKE_SESSION_KIND, handshakePolicy, handshakeSessionKey, type Bundle, type Policy, type SessionMessage } from '../../actors/handshake/messages.js';

/**
 * A world of pure steps for handshake sessions and the ledger: states in
 * memory, sends in a bag delivered in the order the test picks (possibly
 * twice, to check idempotency without the runtime's de-duplication), asks
 * answered at once or through deferred replies. No runtime, no disk.
 */
export const TENANT = 'org_1';
export const DOMAIN = 'game';

export interface Outcome {
  reply?: any;
  error?: { code: string; message: string; details?: unknown };
}

export const DEFAULT_POLICY: Policy = {
  max_rounds: handshakePolicy.max_rounds.default,
  offer_ttl_seconds: handshakePolicy.offer_ttl_seconds.default,
  session_ttl_seconds: handshakePolicy.session_ttl_seconds.default,
  settlement_timeout_seconds: handshakePolicy.settlement_timeout_seconds.default,
};

export function usd(initiator: number, responder: number, terms: Bundle['initiator_gives']['terms'] = []): Bundle {
  const side = (amount: number) => ({ currency_legs: amount > 0 ? [{ currency_id: 'USD', amount }] : [], item_legs: [], terms: [] });
  return { initiator_gives: { ...side(initiator), terms }, responder_gives: side(responder) };
}

export class World {
  now = 1_000_000;
  readonly accounts = new Map<string, AccountState>();
  readonly sessions = new Map<string, SessionState>();
  /** Item containers of the session's domain (the items area's real step), by container id. */
  readonly containers = new Map<string, ContainerState>();
  readonly inFlight: ActorSend[] = [];
  readonly outcomes = new Map<string, Outcome>();
  private seq = 0;

  context(kind: string, key: string, request_id: string | null = null): TurnContext {
    return { now: this.now, kind, key, request_id, newId: (prefix = '') => `${prefix}${++this.seq}` };
  }

  private apply(kind: string, key: string, message: unknown, request_id: string | null): TurnResult<unknown, unknown> {
    if (kind === LEDGER_ACCOUNT_KIND) {
      const state = this.accounts.get(key) ?? emptyAccount(key);
      this.accounts.set(key, state);
      return stepAccount(state, message as LedgerAccountMessage, this.context(kind, key, request_id));
    }
    if (kind === ITEM_CONTAINER_KIND) {
      const state = this.containers.get(key) ?? initialContainerState();
      this.containers.set(key, state);
      return stepContainerFlows(state, message as ContainerMessage, this.context(kind, key, request_id));
    }
    if (kind === HANDSHAKE_SESSION_KIND) {
      const state = this.sessions.get(key) ?? initialSession();
      const result = stepSession(state, message as never, this.context(kind, key, request_id));
      this.sessions.set(key, result.state);
      return result;
    }
    return { state: null };
  }

  private collect(result: TurnResult<unknown, unknown>): void {
    for (const send of result.sends ?? []) if (send.kind !== HANDSHAKE_INDEX_KIND) this.inFlight.push(send);
    for (const reply of result.replies ?? []) this.settle(reply);
  }

  private settle(reply: DeferredReply): void {
    this.outcomes.set(reply.request_id, reply.error ? { error: reply.error } : { reply: reply.reply });
  }

  ask(kind: string, key: string, message: unknown, request_id: string): Outcome {
    try {
      const result = this.apply(kind, key, message, request_id);
      this.collect(result);
      if (!result.defer) this.outcomes.set(request_id, { reply: result.reply });
    } catch (error) {
      if (!isServiceError(error)) throw error;
      this.outcomes.set(request_id, { error: { code: error.code, message: error.message, details: error.details } });
    }
    return this.outcomes.get(request_id) ?? {};
  }

  /** An ask of a session; the outcome (possibly deferred: {} until answered). */
  session(session_id: string, message: SessionMessage, request_id = `r${++this.seq}`): Outcome {
    return this.ask(HANDSHAKE_SESSION_KIND, handshakeSessionKey(TENANT, DOMAIN, session_id), message, request_id);
  }

  state(session_id: string): SessionState {
    return this.sessions.get(handshakeSessionKey(TENANT, DOMAIN, session_id)) ?? initialSession();
  }

  deliver(index: number, duplicate = false): void {
    const send = duplicate ? this.inFlight[index] : this.inFlight.splice(index, 1)[0];
    try {
      this.collect(this.apply(send.kind, send.key, send.message, null));
    } catch (error) {
      if (!isServiceError(error)) throw error;
    }
  }

  drain(): void {
    while (this.inFlight.length > 0) this.deliver(0);
  }

  alarm(session_id: string, name: string): void {
    this.collect(this.apply(HANDSHAKE_SESSION_KIND, handshakeSessionKey(TENANT, DOMAIN, session_id), { op: '$alarm', name, due_ms: this.now }, null));
  }

  fund(user_id: string, amount: number, currency = 'USD'): void {
    this.ask(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, user_id), { op: 'credit', tenant: TENANT, user_id, reference: `fund-${user_id}-${++this.seq}`, currency, amount, by: 'admin' }, `fund-${this.seq}`);
  }

  create(session_id: string, initiator: string, responder: string, policy: Partial<Policy> = {}, opening: Bundle | null = null): Outcome {
    return this.session(session_id, {
      op: 'init',
      init: {
        tenant: TENANT,
        domain: DOMAIN,
        session_id,
        initiator: { id: initiator, kind: 'auth_user', label: initiator },
        responder: { id: responder, kind: 'auth_user', label: responder },
        policy: { ...DEFAULT_POLICY, ...policy },
        opening_bundle: opening,
      },
    });
  }

  /** A container `container_id` owned by `owner`, with `quantity` units of `unit` placed in it; its config. */
  container(container_id: string, owner: string, slots = 10, fill: { unit: PlacementUnit; quantity: number }[] = []): ContainerConfig {
    const config: ContainerConfig = { container_id, kind: 'slotted', owner_id: owner, parent_container_id: null, slots, max_weight_m: null, max_volume_m: null, created_at_ms: 0 };
    this.ask(ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, container_id), { op: 'place', config, placements: fill } satisfies ContainerMessage, `place-${++this.seq}`);
    return config;
  }

  items(container_id: string): StoredItem[] {
    const state = this.containers.get(itemContainerKey(TENANT, DOMAIN, container_id));
    return state ? [...state.items.values()] : [];
  }

  heldLocks(container_id: string): number {
    const state = this.containers.get(itemContainerKey(TENANT, DOMAIN, container_id));
    return state ? [...state.locks.values()].filter((lock) => lock.status === 'held').length : 0;
  }

  heldRooms(container_id: string): number {
    const state = this.containers.get(itemContainerKey(TENANT, DOMAIN, container_id));
    return state ? [...state.rooms.values()].filter((room) => room.status === 'held').length : 0;
  }

  funds(user_id: string, currency = 'USD'): { balance: number; held: number; available: number } {
    const state = this.accounts.get(ledgerAccountKey(TENANT, user_id)) ?? emptyAccount(ledgerAccountKey(TENANT, user_id));
    const balance = state.balances.get(currency) ?? 0;
    const held = state.held.get(currency) ?? 0;
    return { balance, held, available: balance - held };
  }
}
