import type { ActorSend } from '../../runtime/index.js';

/**
 * The settlement's item step, behind one small interface so the flow does
 * not depend on how items move. The items area (issue 15) is not part of
 * this service yet, so no item_id names an item the service knows: the step
 * reports `item_transferred: false` with the reason below and moves nothing
 * (docs/api/auctions.md, "Settlement"). When the items area lands, its
 * transfer message (actors/items/messages.ts) is sent from `start` as a
 * flow-call of step `item`, and its answer completes the step.
 */
export interface ItemTransferRequest {
  tenant: string;
  item_id: string;
  from_user_id: string;
  to_user_id: string;
  /** Stable across retries: the receiver applies it once. */
  transfer_id: string;
}

export type ItemTransferStart =
  | { kind: 'sent'; sends: ActorSend[] }
  | { kind: 'skipped'; reason: string };

export interface ItemTransferStep {
  start(request: ItemTransferRequest): ItemTransferStart;
}

export const ITEMS_UNAVAILABLE_REASON = 'items_area_unavailable: this service has no items area yet, so item_id names no item it can transfer';

/** The step this build runs: no items area, nothing to transfer. */
export const itemTransferStep: ItemTransferStep = {
  start: () => ({ kind: 'skipped', reason: ITEMS_UNAVAILABLE_REASON }),
};
