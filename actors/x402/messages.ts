/**
 * The x402 area's public surface (payment-gated access, spec doc 1 §4.13):
 * the actor kinds, their keys, messages and views, and the pure helpers the
 * edge shares with the actors (money, path templates, price resolution).
 * Other layers import this file only.
 */
export { AMOUNT_ATOMIC_MAX, AMOUNT_USD_MAX, ATOMIC_PER_USD, USD_DECIMALS, USD_PATTERN, formatUsd, parseUsd, type ParsedUsd } from './money.js';
export { PATH_LENGTH_MAX, compareSpecificity, concreteSegments, isPathTemplate, normalizeTemplate, routedSegments, serviceOf, templateMatches } from './paths.js';
export { isExemptPath, pricedPath, resolvePrice, type ResolvedPrice } from './pricing.js';
export { DESCRIPTION_LENGTH_MAX, HTTP_METHODS, PRICE_RULES_MAX, RULE_TYPES, SETTLE_MODES, SETTLE_MODE_DEFAULT, type PriceRule, type RuleType, type SettleMode } from './rules.js';
import type { PriceRule, RuleType, SettleMode } from './rules.js';

/** The price rules of the whole platform: one actor (prices are the operator's, not a tenant's). */
export const X402_PRICING_KIND = 'x402-pricing';
export const X402_PRICING_KEY = 'platform';
/** One prepaid balance per paying principal (a tenant, or an `x402:<network>:<address>` payer). */
export const X402_BALANCE_KIND = 'x402-balance';

export function x402BalanceKey(principal: string): string {
  return JSON.stringify([principal]);
}

const TENANT_ID = /^(usr|org)_[A-Za-z0-9_-]{1,64}$/;
const PAYER = /^x402:([a-z0-9-]{1,32}):(0x[0-9a-fA-F]{40})$/;

/**
 * A principal named by a client (an admin's top-up): a user or organization
 * id as is, a payer with its address in lower case (as payment proofs name
 * it, x402PayerPrincipal), or undefined for anything else. A credit to
 * `0xABC…` must land in the balance the payer `0xabc…` spends.
 */
export function principalFrom(raw: string): string | undefined {
  if (TENANT_ID.test(raw)) return raw;
  const payer = PAYER.exec(raw);
  return payer ? x402PayerPrincipal(payer[1], payer[2]) : undefined;
}

/** The principal of a payer identified by an x402 payment proof. */
export function x402PayerPrincipal(network: string, address: string): string {
  return `x402:${network}:${address.toLowerCase()}`;
}

/** The optional fields every rule shares; absent ones keep the rule's current value (defaults for a new rule). */
export interface RuleFields {
  amount_usd: string;
  description?: string;
  discoverable?: boolean;
  enabled?: boolean;
  settle_mode?: SettleMode | null;
}

export type PricingMessage =
  | { op: 'put_default'; fields: RuleFields }
  | { op: 'put_service'; service: string; fields: RuleFields }
  | { op: 'put_endpoint'; method: string; path: string; fields: RuleFields }
  | { op: 'delete'; rule_type: RuleType; service?: string; method?: string; path?: string }
  | { op: 'list' };

/** Every reply of the pricing actor: the rules (by creation) and a version that changes with every write. */
export interface PricingView {
  rules: PriceRule[];
  version: number;
  /** put_*: the rule written; delete: the rule deleted (null when there was none). */
  rule?: PriceRule | null;
}

/** How the edge charges: `hold` (settled after a response below 500, refunded otherwise) or `final` (settle_before). */
export type ChargeSettle = 'hold' | 'final';

/** An unresolved hold is refunded this long after it was taken (the request's response never confirmed it). */
export const CHARGE_HOLD_MS = 5 * 60_000;
/** A settled or refunded charge is remembered this long: a retry with the same Idempotency-Key is not charged again. */
export const CHARGE_RETENTION_MS = 24 * 3_600_000;
/** A credited transaction is remembered this long: the same transaction is never credited twice. */
export const CREDIT_RETENTION_MS = 7 * 24 * 3_600_000;

export type BalanceMessage =
  | { op: 'get' }
  | { op: 'charge'; charge_id: string; amount_atomic: number; settle: ChargeSettle }
  | { op: 'settle'; charge_id: string; attempt: number }
  | { op: 'refund'; charge_id: string; attempt: number }
  /**
   * `paid`: the money was already taken (a settled payment). Such a credit is never refused for the balance's
   * maximum (the caller checks it before settling; a race past it must not lose what was paid), only where
   * arithmetic stops being exact.
   */
  | { op: 'credit'; transaction: string; amount_atomic: number; source: string; paid?: boolean };

export interface BalanceView {
  balance_atomic: number;
}

export type ChargeReply =
  | { outcome: 'charged'; charge_id: string; attempt: number; balance_atomic: number }
  /** The charge id was charged before and not refunded: this request is already paid. */
  | { outcome: 'duplicate'; charge_id: string; attempt: number; balance_atomic: number }
  | { outcome: 'insufficient'; balance_atomic: number };

export interface CreditReply {
  balance_atomic: number;
  credited_atomic: number;
  transaction: string;
  /** The transaction was credited before: nothing changed this time. */
  duplicate: boolean;
}
