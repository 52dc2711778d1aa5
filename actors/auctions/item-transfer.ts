import type { ActorSend } from '../../runtime/index.js';
import { flowCall, type FlowReplyTo } from '../flow-call.js';
import {
  ITEM_CATALOG_KIND,
  ITEM_CONTAINER_KIND,
  itemCatalogKey,
  itemContainerKey,
  itemsPolicy,
  type CatalogMessage,
  type ContainerConfig,
  type ContainerMessage,
  type CustodyCall,
} from '../items/messages.js';
import type { AuctionView, ItemRef } from './messages.js';

/**
 * The auction's item: the messages it sends to the items area
 * (actors/items/messages.ts, docs/api/items.md "Locks and transfers").
 *
 * - At creation the tenant's auction index locks `quantity` units of the
 *   item in the seller's container (lock id `<auction_id>.item`, the owner
 *   must be the seller), before the auction exists; a refusal refuses the
 *   creation.
 * - At settlement with a winner, the auction asks the domain's catalog for
 *   the winner's delivery container `auction:<auction_id>` (created for it:
 *   one slot, no limits, so the delivery always fits; step `deliver`), then
 *   the seller's container to transfer the lock there (step `item`,
 *   answered by the delivery container once the units are placed).
 * - Without a winner, or when cancelled, the lock is released (a tell; the
 *   container remembers a release that arrives before the lock).
 */
export function itemLockId(auction_id: string): string {
  return `${auction_id}.item`;
}

export function deliveryContainerId(auction_id: string): string {
  return `${itemsPolicy.delivery_container_prefix}${auction_id}`;
}

/** The lock, sent as a flow-call by the index (its answer decides the creation). */
export function lockSend(tenant: string, seller_id: string, auction_id: string, item_id: string, item: ItemRef, reply_to: FlowReplyTo): ActorSend {
  const call: CustodyCall = { op: 'lock', lock_id: itemLockId(auction_id), item_id, quantity: item.quantity, owner_id: seller_id, holder: { area: 'auctions', ref: auction_id } };
  return flowCall(ITEM_CONTAINER_KIND, itemContainerKey(tenant, item.domain, item.container_id), call, reply_to);
}

export function unlockSend(tenant: string, auction_id: string, item: ItemRef): ActorSend {
  return { kind: ITEM_CONTAINER_KIND, key: itemContainerKey(tenant, item.domain, item.container_id), message: { op: 'unlock', lock_id: itemLockId(auction_id) } satisfies ContainerMessage };
}

/** Step `deliver`: the winner's delivery container. */
export function deliverSend(view: AuctionView, item: ItemRef, winner_id: string, reply_to: FlowReplyTo): ActorSend {
  const call: CatalogMessage = { op: 'container_ensure', container_id: deliveryContainerId(view.auction_id), owner_id: winner_id, slots: 1 };
  return flowCall(ITEM_CATALOG_KIND, itemCatalogKey(view.tenant, item.domain), call, reply_to);
}

/** Step `item`: the seller's container transfers the lock into the delivery container. */
export function transferSend(view: AuctionView, item: ItemRef, target: ContainerConfig, reply_to: FlowReplyTo): ActorSend {
  const call: CustodyCall = { op: 'transfer', lock_id: itemLockId(view.auction_id), to: { container_id: target.container_id, config: target, room_id: null } };
  return flowCall(ITEM_CONTAINER_KIND, itemContainerKey(view.tenant, item.domain, item.container_id), call, reply_to);
}
