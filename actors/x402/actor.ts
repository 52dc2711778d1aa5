import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadBalance, stepBalance, type BalanceState } from './balance-state.js';
import { X402_BALANCE_KIND, X402_PRICING_KIND, type BalanceMessage, type PricingMessage, type PricingView } from './messages.js';
import { initialPricingState, stepPricing, type PricingState } from './pricing-state.js';

/** The platform's price rules: one actor, a snapshot (at most PRICE_RULES_MAX small rules). */
export const x402PricingActor: SnapshotActorDefinition<PricingState, PricingMessage, PricingView> = {
  kind: X402_PRICING_KIND,
  storage: 'snapshot',
  initial: initialPricingState,
  step: stepPricing,
};

/** One paying principal's prepaid balance, its charges and its credits, as records. */
export const x402BalanceActor: RecordsActorDefinition<BalanceState, BalanceMessage, unknown> = {
  kind: X402_BALANCE_KIND,
  storage: 'records',
  load: loadBalance,
  step: stepBalance,
};

export const x402Actors = [x402PricingActor, x402BalanceActor];
