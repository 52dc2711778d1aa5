import type { FlowAnswer, FlowCall } from '../flow-call.js';
import type { ContainerConfig } from '../items/messages.js';

/**
 * The handshake area's public surface (spec doc 2 §2 Handshake, §3, §4.6;
 * docs/api/handshake.md): negotiation sessions between two users of one
 * tenant in a domain, and the two-phase escrow that settles an accepted
 * offer through the ledger. Other layers import this file only.
 *
 * Two kinds:
 * - `handshake-session` (tenant, domain, session_id): the session, its
 *   offers and its settlement; it coordinates the settlement flow (holds
 *   placed, captured or released through the ledger's flow-calls).
 * - `handshake-index` (tenant, domain): a summary of every session, for
 *   lists and the explicit sweep; each session sends it its summary through
 *   the outbox after every change.
 */
export const HANDSHAKE_SESSION_KIND = 'handshake-session';
export const HANDSHAKE_INDEX_KIND = 'handshake-index';

export function handshakeSessionKey(tenant: string, domain: string, session_id: string): string {
  return JSON.stringify([tenant, domain, session_id]);
}
export function handshakeIndexKey(tenant: string, domain: string): string {
  return JSON.stringify([tenant, domain]);
}

/** Every bound and default of the area; docs/api/handshake.md documents each (change both together). */
export const handshakePolicy = {
  // The items area's domains (http/routes/items.ts): every item domain can be traded here.
  domain_pattern: '^[A-Za-z0-9_.-]{1,64}$',
  max_rounds: { default: 10, min: 1, max: 100 },
  offer_ttl_seconds: { default: 3_600, min: 10, max: 7 * 24 * 3_600 },
  session_ttl_seconds: { default: 24 * 3_600, min: 60, max: 30 * 24 * 3_600 },
  settlement_timeout_seconds: { default: 300, min: 10, max: 24 * 3_600 },
  currency_legs_max: 10,
  item_legs_max: 10,
  terms_max: 20,
  term_key_length_max: 64,
  term_value_length_max: 1_024,
  page_size_default: 20,
  page_size_max: 100,
  /** Sessions one domain index lists; past it a new session is still created but the oldest finished summaries are dropped. */
  index_sessions_max: 100_000,
} as const;

export const SESSION_STATUSES = ['NEGOTIATING', 'AGREED', 'SETTLED', 'CANCELLED', 'EXPIRED'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];
export const OFFER_STATUSES = ['OPEN', 'ACCEPTED', 'REJECTED', 'WITHDRAWN', 'COUNTERED', 'EXPIRED', 'CANCELLED'] as const;
export type OfferStatus = (typeof OFFER_STATUSES)[number];
export const SETTLEMENT_STATUSES = ['STAGING', 'COMMITTING', 'SETTLED', 'ROLLED_BACK'] as const;
export type SettlementStatus = (typeof SETTLEMENT_STATUSES)[number];
export const SESSION_SORT_FIELDS = ['created_at', 'updated_at', 'round'] as const;
export type SessionSortField = (typeof SESSION_SORT_FIELDS)[number];

export type Role = 'initiator' | 'responder';

export interface Party {
  id: string;
  kind: 'auth_user';
  label: string;
}

export interface CurrencyLeg {
  currency_id: string;
  /** Integer minor units, at least 1. */
  amount: number;
}
/** Units of an item the side gives, from a container of the items area (same tenant, domain = the session's domain) that the giver owns. */
export interface ItemLeg {
  item_id: string;
  quantity: number;
  container_id: string;
}
export interface Term {
  key: string;
  value: string;
  binding: boolean;
}
export interface Side {
  currency_legs: CurrencyLeg[];
  item_legs: ItemLeg[];
  terms: Term[];
}
export interface Bundle {
  initiator_gives: Side;
  responder_gives: Side;
}

export interface Policy {
  max_rounds: number;
  offer_ttl_seconds: number;
  session_ttl_seconds: number;
  settlement_timeout_seconds: number;
}

export interface OfferView {
  offer_id: string;
  session_id: string;
  round: number;
  /** The party's user id. */
  proposed_by: string;
  in_reply_to: string | null;
  bundle: Bundle;
  status: OfferStatus;
  created_at_ms: number;
  expires_at_ms: number;
  closed_at_ms: number | null;
}

export interface StageView {
  party_id: string;
  staged: boolean;
  /** Holds are being placed (a stage call is in flight). */
  staging: boolean;
  confirmed: boolean;
  ledger_hold_ids: string[];
  item_lock_ids: string[];
  /** Where this party receives the other side's items (named at stage; null when the other side gives none). */
  receive_container_id: string | null;
}

export interface SettlementView {
  settlement_id: string;
  session_id: string;
  accepted_offer_id: string;
  status: SettlementStatus;
  deadline_at_ms: number;
  initiator_stage: StageView;
  responder_stage: StageView;
  /** ROLLED_BACK: why (cancelled, deadline, sweep). */
  rollback_reason: string | null;
  /** Holds captured so far (COMMITTING and SETTLED). */
  holds_captured: number;
  /** Item legs transferred so far (COMMITTING and SETTLED). */
  items_transferred: number;
  /** Both confirmed and room for the items is being held in the receiving containers (the commit follows). */
  preparing: boolean;
  created_at_ms: number;
  completed_at_ms: number | null;
}

export interface SessionView {
  tenant: string;
  domain: string;
  session_id: string;
  initiator: Party;
  responder: Party;
  policy: Policy;
  status: SessionStatus;
  /** Why a session ended (CANCELLED, EXPIRED): cancelled_by_<role>, session_ttl, max_rounds, settlement_deadline. */
  closed_reason: string | null;
  round: number;
  active_offer_id: string | null;
  settlement_id: string | null;
  /** The settlement's deadline while AGREED (for the sweep). */
  deadline_at_ms: number | null;
  created_at_ms: number;
  updated_at_ms: number;
  expires_at_ms: number;
}

export type ConfirmOutcome = 'WAITING_FOR_COUNTERPARTY' | 'COMMITTED' | 'ALREADY_CONFIRMED';

export interface ConfirmReply {
  outcome: ConfirmOutcome;
  settlement: SettlementView;
}
export interface CancelReply {
  session_id: string;
  rolled_back: boolean;
  session: SessionView;
}
export interface CreatedReply {
  session: SessionView;
  opening_offer: OfferView | null;
}
/** The concessions view (concessions.ts): per offer, what each side gives against the offer before. */
export interface CurrencyDelta {
  currency_id: string;
  delta: number;
}
export interface PartyDelta {
  party_id: string;
  role: Role;
  currency_deltas: CurrencyDelta[];
  items_added: string[];
  items_removed: string[];
  terms_changed: string[];
}
export interface RoundConcessions {
  round: number;
  offer_id: string;
  proposed_by: string;
  deltas: PartyDelta[];
}

export interface HistoryReply {
  session_id: string;
  offers: OfferView[];
  /** Empty for the transcript view. */
  concessions: RoundConcessions[];
}

export interface SessionInit {
  tenant: string;
  domain: string;
  session_id: string;
  initiator: Party;
  responder: Party;
  policy: Policy;
  opening_bundle: Bundle | null;
}

export type SessionMessage =
  | { op: 'init'; init: SessionInit }
  | { op: 'get'; caller: string }
  | { op: 'history'; caller: string; view: 'transcript' | 'concessions' }
  | { op: 'offer'; caller: string; bundle: Bundle }
  | { op: 'accept'; caller: string; offer_id: string }
  | { op: 'reject'; caller: string; offer_id: string }
  | { op: 'withdraw'; caller: string; offer_id: string }
  | { op: 'cancel'; caller: string }
  /** `receive`: the caller's container for the other side's items (its config, read from the items catalog), or null. */
  | { op: 'stage'; caller: string; receive?: ContainerConfig | null }
  | { op: 'confirm'; caller: string }
  /** From the index's sweep: roll the settlement back if its deadline has passed. */
  | { op: 'sweep' }
  | FlowAnswer;

export interface ListQuery {
  mine_of: string | null;
  status?: SessionStatus;
  sort_by: SessionSortField;
  sort_order: 'asc' | 'desc';
  page: number;
  page_size: number;
}

export type IndexMessage =
  | { op: 'upsert'; entry: SessionView }
  | { op: 'list'; query: ListQuery }
  /** Sends `sweep` to every AGREED session whose deadline has passed; answers the count. */
  | { op: 'sweep' };

export interface ListReply {
  total: number;
  sessions: SessionView[];
}

export type { FlowCall };
