import { ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import {
  WEBHOOK_KIND,
  webhookPolicy as policy,
  type ListFilter,
  type SubscriptionEntry,
  type SubscriptionListQuery,
  type SubscriptionListView,
  type SubscriptionsMessage,
  type WebhookMessage,
} from './messages.js';

/**
 * A tenant's webhooks: pure domain logic of the `webhook-subscriptions`
 * actor (storage `records`, key = webhookSubscriptionsKey(tenant), one
 * record `w:<webhook_id>` per webhook).
 *
 * It answers the list (filters, sort, page), holds the per-tenant cap, and
 * fans a published event out: one `deliver` through the outbox to each
 * active webhook subscribed to the event's type. The publish arrives through
 * the outbox and its sends commit with its de-duplication record, so each
 * webhook gets the event exactly once. Upserts carry the webhook's change
 * counter; an older one arriving late is ignored.
 */
export const ENTRY_PREFIX = 'w:';

export interface SubscriptionsState {
  entries: Map<string, SubscriptionEntry>;
}

type Result = TurnResult<SubscriptionsState, unknown>;

export function loadSubscriptions(_key: string, records: Iterable<[string, unknown]>): SubscriptionsState {
  const state: SubscriptionsState = { entries: new Map() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith(ENTRY_PREFIX)) state.entries.set(subkey.slice(ENTRY_PREFIX.length), value as SubscriptionEntry);
  }
  return state;
}

export function stepSubscriptions(state: SubscriptionsState, message: SubscriptionsMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'upsert':
      return upsert(state, message.entry);
    case 'remove': {
      const entry = state.entries.get(message.webhook_id);
      if (!entry || entry.seq > message.seq) return { state, reply: { removed: false } };
      state.entries.delete(message.webhook_id);
      return { state, reply: { removed: true }, writes: [{ subkey: ENTRY_PREFIX + message.webhook_id, value: undefined }] };
    }
    case 'list':
      return { state, reply: list(state, message.query) };
    case 'publish': {
      const sends: ActorSend[] = [];
      for (const entry of state.entries.values()) {
        if (!entry.active) continue;
        if (!entry.events.includes(message.event.type) && entry.webhook_id !== message.also) continue;
        sends.push({ kind: WEBHOOK_KIND, key: entry.webhook_id, message: { op: 'deliver', event: message.event } satisfies WebhookMessage });
      }
      return { state, reply: { delivered_to: sends.length }, sends };
    }
    case 'flow-call':
      return answerFlowCall(stepSubscriptions, state, message as never, context);
    default:
      return { state };
  }
}

function upsert(state: SubscriptionsState, entry: SubscriptionEntry): Result {
  const current = state.entries.get(entry.webhook_id);
  if (current && current.seq >= entry.seq) return { state, reply: { applied: false } };
  if (!current && state.entries.size >= policy.webhooks_per_tenant_max) {
    throw new ServiceError('webhook_limit_reached', `A tenant may have at most ${policy.webhooks_per_tenant_max} webhooks; delete one first.`);
  }
  state.entries.set(entry.webhook_id, entry);
  const writes: RecordWrite[] = [{ subkey: ENTRY_PREFIX + entry.webhook_id, value: entry }];
  return { state, reply: { applied: true }, writes };
}

function compare(entry: SubscriptionEntry, filter: ListFilter): boolean {
  const { operator, value } = filter;
  if (filter.field === 'events') {
    const wanted = operator === 'in' ? value.split('|') : [value];
    switch (operator) {
      case 'eq':
      case 'contains':
      case 'in':
        return wanted.some((type) => entry.events.includes(type));
      case 'ne':
        return !entry.events.includes(value);
      default:
        throw badFilter(filter, `operator ${operator} does not apply to events (use eq, ne, contains, in)`);
    }
  }
  let actual: string | number | boolean;
  let expected: (raw: string) => string | number | boolean;
  switch (filter.field) {
    case 'active':
      actual = entry.active;
      expected = (raw) => {
        if (raw !== 'true' && raw !== 'false') throw badFilter(filter, 'active takes true or false');
        return raw === 'true';
      };
      break;
    case 'created_at':
    case 'updated_at':
      actual = Math.floor((filter.field === 'created_at' ? entry.created_at_ms : entry.updated_at_ms) / 1000);
      expected = (raw) => {
        const n = Number(raw);
        if (!Number.isFinite(n)) throw badFilter(filter, `${filter.field} takes epoch seconds`);
        return n;
      };
      break;
    default:
      actual = filter.field === 'url' ? entry.url : entry.created_by;
      expected = (raw) => raw;
  }
  if (operator === 'in') return value.split('|').map(expected).includes(actual);
  const target = expected(value);
  switch (operator) {
    case 'eq':
      return actual === target;
    case 'ne':
      return actual !== target;
    case 'contains':
      if (typeof actual !== 'string') throw badFilter(filter, `contains applies to text fields only`);
      return actual.toLowerCase().includes(String(target).toLowerCase());
    case 'lt':
      return actual < target;
    case 'lte':
      return actual <= target;
    case 'gt':
      return actual > target;
    case 'gte':
      return actual >= target;
  }
}

function badFilter(filter: ListFilter, message: string): ServiceError {
  const item = `${filter.field}:${filter.operator}:${filter.value}`;
  return new ServiceError('BAD_REQUEST', `filter ${JSON.stringify(item)}: ${message}`, { details: [{ field: 'querystring.filter', message }] });
}

function list(state: SubscriptionsState, query: SubscriptionListQuery): SubscriptionListView {
  const q = query.q?.toLowerCase();
  const matched = [...state.entries.values()].filter(
    (entry) =>
      (query.created_by === null || entry.created_by === query.created_by) &&
      (!q || entry.url.toLowerCase().includes(q) || entry.webhook_id === query.q) &&
      query.filters.every((filter) => compare(entry, filter)),
  );
  const sort_by = query.sort_by ?? 'created_at';
  const direction = query.sort_order === 'desc' ? -1 : 1;
  const keyOf = (entry: SubscriptionEntry) => (sort_by === 'url' ? entry.url : sort_by === 'updated_at' ? entry.updated_at_ms : entry.created_at_ms);
  matched.sort((a, b) => {
    const x = keyOf(a);
    const y = keyOf(b);
    if (x !== y) return (x < y ? -1 : 1) * direction;
    return a.webhook_id < b.webhook_id ? -direction : direction;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, webhook_ids: matched.slice(start, start + query.page_size).map((entry) => entry.webhook_id) };
}
