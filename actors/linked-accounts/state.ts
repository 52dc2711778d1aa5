import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';

/**
 * Linked external accounts (spec doc 1 §2 LinkedAccount, §4.2).
 *
 * - `identity-links` (key = user id, snapshot): the user's links, at most one
 *   per configured provider (unlink names only the provider).
 * - `identity-index` (key = JSON [provider, subject], snapshot): which user
 *   holds an external identity, so one external account links to one user
 *   only. The edge claims here first, then adds the link; unlinking removes
 *   the link and releases the claim through the outbox.
 *
 * A claim left behind by a link that failed half-way (or by a deleted user) is
 * taken over with `claim` + `replaces`: the edge passes the stale holder after
 * checking that the holder no longer has the link.
 */
export const IDENTITY_LINKS_KIND = 'identity-links';
export const IDENTITY_INDEX_KIND = 'identity-index';
/** Links one user may hold (one per provider; providers are configured, so this is a safety bound). */
export const LINKS_PER_USER_MAX = 50;

export interface LinkRecord {
  id: string;
  provider: string;
  /** The provider's stable user id. */
  subject: string;
  provider_display_name: string;
  provider_email: string;
  linked_at_ms: number;
}

export interface IdentityLinksState {
  links: LinkRecord[];
}

export type IdentityLinksMessage =
  | { op: 'add'; provider: string; subject: string; provider_display_name: string; provider_email: string }
  | { op: 'remove'; provider: string }
  | { op: 'get'; provider: string }
  | { op: 'list' };

export function identityIndexKey(provider: string, subject: string): string {
  return JSON.stringify([provider, subject]);
}

export function initialIdentityLinks(): IdentityLinksState {
  return { links: [] };
}

export function stepIdentityLinks(
  state: IdentityLinksState,
  message: IdentityLinksMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<IdentityLinksState, unknown> {
  switch (message.op) {
    case 'add': {
      const existing = state.links.find((l) => l.provider === message.provider);
      if (existing) {
        if (existing.subject === message.subject) return { state, reply: existing }; // a retried link
        throw new ServiceError('account_already_linked', `This user already has a linked ${message.provider} account; unlink it first.`);
      }
      if (state.links.length >= LINKS_PER_USER_MAX) throw new ServiceError('account_already_linked', `A user may link at most ${LINKS_PER_USER_MAX} accounts.`);
      const link: LinkRecord = {
        id: context.newId('lnk_'),
        provider: message.provider,
        subject: message.subject,
        provider_display_name: message.provider_display_name,
        provider_email: message.provider_email,
        linked_at_ms: context.now,
      };
      return { state: { links: [...state.links, link] }, reply: link };
    }

    case 'remove': {
      const link = state.links.find((l) => l.provider === message.provider);
      if (!link) throw new ServiceError('not_found', `No linked ${message.provider} account.`);
      return {
        state: { links: state.links.filter((l) => l !== link) },
        reply: link,
        sends: [{ kind: IDENTITY_INDEX_KIND, key: identityIndexKey(link.provider, link.subject), message: { op: 'release', user_id: context.key } }],
      };
    }

    case 'get':
      return { state, reply: state.links.find((l) => l.provider === message.provider) ?? null };

    case 'list':
      return { state, reply: [...state.links].sort((a, b) => a.linked_at_ms - b.linked_at_ms || (a.id < b.id ? -1 : 1)) };

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown identity-links operation ${(message as { op?: unknown }).op as string}.`);
  }
}

export interface IdentityIndexState {
  user_id: string | null;
  claimed_at_ms: number;
}

export type IdentityIndexMessage =
  /** Claim for user_id. Held by another user: refused, unless that holder is `replaces` (a stale claim the edge checked). */
  | { op: 'claim'; user_id: string; replaces?: string }
  | { op: 'release'; user_id: string }
  | { op: 'get' };

export function initialIdentityIndex(): IdentityIndexState {
  return { user_id: null, claimed_at_ms: 0 };
}

export function stepIdentityIndex(
  state: IdentityIndexState,
  message: IdentityIndexMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<IdentityIndexState, unknown> {
  switch (message.op) {
    case 'claim': {
      if (state.user_id === message.user_id) return { state, reply: { claimed: true, held_by: message.user_id } };
      if (state.user_id !== null && state.user_id !== message.replaces) return { state, reply: { claimed: false, held_by: state.user_id } };
      return { state: { user_id: message.user_id, claimed_at_ms: context.now }, reply: { claimed: true, held_by: message.user_id } };
    }

    case 'release': {
      // Only the holder releases (a late release from an earlier holder is ignored).
      if (state.user_id !== message.user_id) return { state, reply: { released: false } };
      return { state: initialIdentityIndex(), reply: { released: true } };
    }

    case 'get':
      return { state, reply: { user_id: state.user_id } };

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown identity-index operation ${(message as { op?: unknown }).op as string}.`);
  }
}
