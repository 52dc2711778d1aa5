import type { FlowCall } from '../flow-call.js';

/**
 * The ledger's public surface (docs/api/ledger.md): one actor per account
 * (a user in a tenant) holding balances per currency in integer minor units
 * and the holds that reserve them. Other areas (auctions, handshakes) place,
 * capture and release holds with the messages below, sent as flow-calls
 * (actors/flow-call.ts) so their flows hear the outcome; a capture credits
 * the payee through the outbox. Other layers import this file only.
 */

/** One actor per account, key = ledgerAccountKey(tenant, user_id). */
export const LEDGER_ACCOUNT_KIND = 'ledger-account';

export function ledgerAccountKey(tenant: string, user_id: string): string {
  return JSON.stringify([tenant, user_id]);
}

/** Every bound of the area; docs/api/ledger.md documents each (change both together). */
export const ledgerPolicy = {
  currency_pattern: '^[A-Z][A-Z0-9_]{0,15}$',
  /** Every amount and balance is an integer of minor units no larger than this. */
  amount_max: Number.MAX_SAFE_INTEGER,
  /** Open holds per account at once; one more is refused with ledger_limit_reached. */
  open_holds_max: 1_000,
  /** Closed holds (captured or released) remembered per account for idempotency and history (the newest). */
  closed_holds_kept_max: 10_000,
  reference_length_max: 128,
  hold_id_length_max: 200,
  holds_page_size_max: 100,
} as const;

export interface LedgerParty {
  tenant: string;
  user_id: string;
}

/** Who a hold is for: the area and the resource that placed it (an auction, a handshake settlement). */
export interface HoldPurpose {
  area: string;
  ref: string;
}

export const HOLD_STATUSES = ['held', 'captured', 'released'] as const;
export type HoldStatus = (typeof HOLD_STATUSES)[number];

export interface HoldView {
  hold_id: string;
  currency: string;
  /** Minor units reserved. */
  amount: number;
  status: HoldStatus;
  purpose: HoldPurpose | null;
  /** Captured: the amount moved to the payee (the rest returned to the account). */
  captured_amount: number;
  payee: LedgerParty | null;
  created_at_ms: number;
  closed_at_ms: number | null;
}

export interface BalanceView {
  currency: string;
  /** Funds the account owns, held ones included. */
  balance: number;
  /** Reserved by open holds. */
  held: number;
  /** balance - held: what a new hold may reserve. Never negative. */
  available: number;
}

export interface AccountView {
  tenant: string;
  user_id: string;
  balances: BalanceView[];
  /** Open holds, oldest first. */
  holds: HoldView[];
}

export interface CreditReply {
  reference: string;
  currency: string;
  amount: number;
  /** True when the reference had been credited before: nothing changed. */
  idempotent: boolean;
  balance: BalanceView;
}

/**
 * The calls other areas send (as flow-calls) and the answers they get.
 * Each is idempotent by hold id: a repeat answers as the first did.
 */
export type HoldCall =
  /** Reserves `amount` of the available funds; 409 insufficient_funds when they do not suffice. */
  | { op: 'place_hold'; hold_id: string; currency: string; amount: number; purpose: HoldPurpose }
  /**
   * Moves `amount` (at most the held amount) to the payee and returns the rest
   * to the account, closing the hold. The payee's credit goes through the
   * outbox as a transfer with transfer id = hold id, which the payee applies once.
   */
  | { op: 'capture_hold'; hold_id: string; amount: number; payee: LedgerParty }
  /**
   * Returns the held funds to the account. A hold never seen is remembered as
   * released, so a placement arriving later (a retry, the outbox reordering)
   * is refused with hold_closed instead of reserving funds nobody will free.
   */
  | { op: 'release_hold'; hold_id: string };

export type HoldReply = { hold: HoldView; idempotent: boolean };

export type LedgerAccountMessage =
  | HoldCall
  | FlowCall<HoldCall>
  /** Platform admin credit, idempotent by reference. */
  | { op: 'credit'; tenant: string; user_id: string; reference: string; currency: string; amount: number; by: string }
  /** A payee's side of a capture: applied once per transfer id. */
  | { op: 'transfer_in'; transfer_id: string; from: LedgerParty; currency: string; amount: number }
  | { op: 'get'; tenant: string; user_id: string }
  | { op: 'holds'; status?: HoldStatus; page: number; page_size: number };

export interface HoldsPage {
  total: number;
  holds: HoldView[];
}
