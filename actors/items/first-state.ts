import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { firstSubjectKey, ITEM_CATALOG_KIND, itemCatalogKey, type CatalogMessage, type FirstMessage, type FirstReply, type FirstSubject } from './messages.js';

/**
 * Who was first: pure domain logic of the `item-first` actor (storage
 * `snapshot`, key = itemFirstKey(tenant, domain, subject), one per blueprint
 * output or collection tier). The first claim in the actor's turns wins and
 * is kept for good; a claim by the same claimant again (a repeated message)
 * is still first, any other is not. One actor per subject, whichever node
 * leads its partition, so concurrent crafts on different nodes cannot both
 * be first. A claim also tells the domain's catalog (through the outbox)
 * that the subject is taken, so its later plans skip the claim.
 */
export interface FirstState {
  claimed_by: string | null;
  claimed_at_ms: number | null;
}

export function initialFirstState(): FirstState {
  return { claimed_by: null, claimed_at_ms: null };
}

export function stepFirst(state: FirstState, message: FirstMessage | AlarmMessage, context: TurnContext): TurnResult<FirstState, FirstReply | unknown> {
  switch (message.op) {
    case 'get':
      return { state, reply: { first: false, ...state } satisfies FirstReply };
    case 'claim': {
      // Every claim also tells the domain's catalog the subject is taken (its
      // cache is in memory: after a restart or passivation it learns again).
      const [tenant, domain, ...subject] = JSON.parse(context.key) as [string, string, ...FirstSubject];
      const notice: CatalogMessage = { op: 'claimed', subject_key: firstSubjectKey(subject as FirstSubject) };
      const sends = [{ kind: ITEM_CATALOG_KIND, key: itemCatalogKey(tenant, domain), message: notice }];
      if (state.claimed_by !== null) return { state, reply: { first: state.claimed_by === message.claimant, ...state } satisfies FirstReply, sends };
      const claimed: FirstState = { claimed_by: message.claimant, claimed_at_ms: context.now };
      return { state: claimed, reply: { first: true, ...claimed } satisfies FirstReply, sends };
    }
    case 'flow-call':
      return answerFlowCall(stepFirst, state, message as never, context);
    default:
      return { state };
  }
}
