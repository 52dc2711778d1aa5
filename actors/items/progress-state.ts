import type { ActorEvent, AlarmMessage, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import {
  DUPLICATE_CONVERTED_EVENT,
  TIER_REACHED_EVENT,
  type CollectionProgress,
  type DuplicateConvertedEvent,
  type ProgressMessage,
  type TierReached,
  type TierReachedEvent,
} from './messages.js';

/**
 * A user's collection progress in a domain: pure domain logic of the
 * `item-progress` actor (storage `records`, key = itemProgressKey(tenant,
 * domain, user_id), one record `p:<collection_id>` per collection started).
 *
 * Grants and crafts tell it what the user acquired (an `acquire` from the
 * catalog's flow, through the outbox, with the rules of the collections the
 * definitions belong to). A member seen for the first time is owned; each
 * further unit is a duplicate (counted in duplicate_counts; with
 * duplicate_policy `convert` it also publishes DUPLICATE_CONVERTED_EVENT).
 * A tier is reached when the owned count reaches its `required`, once: the
 * turn publishes TIER_REACHED_EVENT with its bonus_event on the node's event
 * bus and answers the tiers reached, so the flow can report them.
 */
export interface ProgressState {
  collections: Map<string, CollectionProgress>;
}

export function loadProgress(_key: string, records: Iterable<[string, unknown]>): ProgressState {
  const state: ProgressState = { collections: new Map() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith('p:')) state.collections.set(subkey.slice(2), value as CollectionProgress);
  }
  return state;
}

export function emptyProgress(collection_id: string): CollectionProgress {
  return { collection_id, owned: [], duplicate_counts: {}, tiers_reached: [], updated_at_ms: 0 };
}

export function stepProgress(state: ProgressState, message: ProgressMessage | AlarmMessage, context: TurnContext): TurnResult<ProgressState, unknown> {
  switch (message.op) {
    case 'get':
      return { state, reply: state.collections.get(message.collection_id) ?? emptyProgress(message.collection_id) };
    case 'acquire': {
      const writes: RecordWrite[] = [];
      const events: ActorEvent[] = [];
      const reached: TierReached[] = [];
      for (const rule of message.collections) {
        const before = state.collections.get(rule.collection_id) ?? emptyProgress(rule.collection_id);
        const owned = new Set(before.owned);
        const duplicate_counts = { ...before.duplicate_counts };
        let changed = false;
        for (const { definition_id, quantity } of message.acquired) {
          if (!rule.members.includes(definition_id) || quantity <= 0) continue;
          changed = true;
          let duplicates = quantity;
          if (!owned.has(definition_id)) {
            owned.add(definition_id);
            duplicates--;
          }
          if (duplicates === 0) continue;
          duplicate_counts[definition_id] = (duplicate_counts[definition_id] ?? 0) + duplicates;
          if (rule.duplicate_policy === 'convert' && rule.convert_event !== null) {
            const data: DuplicateConvertedEvent = {
              tenant: message.tenant,
              domain: message.domain,
              user_id: message.user_id,
              collection_id: rule.collection_id,
              definition_id,
              quantity: duplicates,
              convert_event: rule.convert_event,
            };
            events.push({ type: DUPLICATE_CONVERTED_EVENT, data });
          }
        }
        if (!changed) continue;
        const tiers_reached = [...before.tiers_reached];
        for (const tier of rule.tiers) {
          if (owned.size < tier.required || tiers_reached.includes(tier.required)) continue;
          tiers_reached.push(tier.required);
          const hit: TierReached = { collection_id: rule.collection_id, required: tier.required, bonus_event: tier.bonus_event };
          reached.push(hit);
          const data: TierReachedEvent = { ...hit, tenant: message.tenant, domain: message.domain, user_id: message.user_id, reached_at_ms: context.now };
          events.push({ type: TIER_REACHED_EVENT, data });
        }
        tiers_reached.sort((a, b) => a - b);
        const after: CollectionProgress = { collection_id: rule.collection_id, owned: [...owned], duplicate_counts, tiers_reached, updated_at_ms: context.now };
        state.collections.set(rule.collection_id, after);
        writes.push({ subkey: `p:${rule.collection_id}`, value: after });
      }
      return { state, reply: { tiers_reached: reached }, writes, events };
    }
    case 'flow-call':
      return answerFlowCall(stepProgress, state, message as never, context);
    default:
      return { state };
  }
}
