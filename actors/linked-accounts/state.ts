import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { stepLinkAnswer, stepLinkStart, type LinkFlow } from './flows.js';
import {
  IDENTITY_INDEX_KIND,
  identityIndexKey,
  LINKS_PER_USER_MAX,
  type ClaimReply,
  type IdentityIndexMessage,
  type IdentityLinksMessage,
  type LinkRecord,
} from './messages.js';

/**
 * Linked external accounts (spec doc 1 §2 LinkedAccount, §4.2).
 *
 * - `identity-links` (key = user id, snapshot): the user's links, at most one
 *   per configured provider (unlink names only the provider).
 * - `identity-index` (key = JSON [provider, subject], snapshot): which user
 *   holds an external identity, so one external account links to one user
 *   only. The link flow (flows.ts, coordinated by the user's identity-links
 *   actor) claims here first, then adds the link; unlinking removes the link
 *   and releases the claim through the outbox.
 *
 * A claim left behind by a link that failed half-way, by a deleted user, or
 * by an unlink whose release is still in the outbox is taken over with
 * `claim` + `replaces`: the flow passes the stale holder after checking that
 * the holder no longer has the link.
 */
export interface IdentityLinksState {
  links: LinkRecord[];
  /** Link flows in progress, by flow id (absent on states stored before flows). */
  flows?: Record<string, LinkFlow>;
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
      return { state: { ...state, links: [...state.links, link] }, reply: link };
    }

    case 'remove': {
      const link = state.links.find((l) => l.provider === message.provider);
      if (!link) throw new ServiceError('not_found', `No linked ${message.provider} account.`);
      return {
        state: { ...state, links: state.links.filter((l) => l !== link) },
        reply: link,
        sends: [{ kind: IDENTITY_INDEX_KIND, key: identityIndexKey(link.provider, link.subject), message: { op: 'release', user_id: context.key } }],
      };
    }

    case 'get':
      return { state, reply: state.links.find((l) => l.provider === message.provider) ?? null };

    case 'list':
      return { state, reply: [...state.links].sort((a, b) => a.linked_at_ms - b.linked_at_ms || (a.id < b.id ? -1 : 1)) };

    case 'link':
      return stepLinkStart(state, message, context);

    case 'flow-answer':
      return stepLinkAnswer(state, message, context);

    case 'flow-call':
      return answerFlowCall<IdentityLinksState, IdentityLinksMessage>(stepIdentityLinks, state, message, context);

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
      if (state.user_id === message.user_id) return { state, reply: { claimed: true, held_by: message.user_id } satisfies ClaimReply };
      if (state.user_id !== null && state.user_id !== message.replaces) return { state, reply: { claimed: false, held_by: state.user_id } satisfies ClaimReply };
      return { state: { user_id: message.user_id, claimed_at_ms: context.now }, reply: { claimed: true, held_by: message.user_id } satisfies ClaimReply };
    }

    case 'release': {
      // Only the holder releases (a late release from an earlier holder is ignored).
      if (state.user_id !== message.user_id) return { state, reply: { released: false } };
      return { state: initialIdentityIndex(), reply: { released: true } };
    }

    case 'get':
      return { state, reply: { user_id: state.user_id } };

    case 'flow-call':
      return answerFlowCall<IdentityIndexState, IdentityIndexMessage>(stepIdentityIndex, state, message, context);

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown identity-index operation ${(message as { op?: unknown }).op as string}.`);
  }
}
