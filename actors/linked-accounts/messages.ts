/**
 * The linked-accounts area's public surface: the two kinds, their keys,
 * messages and views. Other layers import this file only.
 */
import type { FlowAnswer, FlowCall } from '../flow-call.js';

/** A user's links (key = user id); it also coordinates the link flow (flows.ts). */
export const IDENTITY_LINKS_KIND = 'identity-links';
/** Which user holds an external identity (key = identityIndexKey(provider, subject)). */
export const IDENTITY_INDEX_KIND = 'identity-index';
/** Links one user may hold (one per provider; providers are configured, so this is a safety bound). */
export const LINKS_PER_USER_MAX = 50;
/** Link flows one user may have in progress at once. */
export const LINK_FLOWS_PER_USER_MAX = 16;

export function identityIndexKey(provider: string, subject: string): string {
  return JSON.stringify([provider, subject]);
}

export interface LinkRecord {
  id: string;
  provider: string;
  /** The provider's stable user id. */
  subject: string;
  provider_display_name: string;
  provider_email: string;
  linked_at_ms: number;
}

export type IdentityLinksMessage =
  | { op: 'add'; provider: string; subject: string; provider_display_name: string; provider_email: string }
  | { op: 'remove'; provider: string }
  | { op: 'get'; provider: string }
  | { op: 'list' }
  /**
   * Link the identity the edge got from the provider (after its code
   * exchange, the edge's I/O): a flow that claims the identity in the index
   * (taking over a stale claim whose holder no longer has the link), then
   * adds the link here; answered with the LinkRecord when it ends.
   */
  | { op: 'link'; provider: string; subject: string; provider_display_name: string; provider_email: string }
  | FlowCall<IdentityLinksMessage>
  | FlowAnswer;

export type IdentityIndexMessage =
  /** Claim for user_id. Held by another user: refused, unless that holder is `replaces` (a stale claim the flow checked). */
  | { op: 'claim'; user_id: string; replaces?: string }
  | { op: 'release'; user_id: string }
  | { op: 'get' }
  | FlowCall<IdentityIndexMessage>;

export interface ClaimReply {
  claimed: boolean;
  held_by: string;
}
