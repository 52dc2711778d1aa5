import type { AlarmMessage, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { lineagePolicy, type ListedRecord, type Page, type RecordsMessage, type RecordsQuery } from './messages.js';

/**
 * A tenant's breeding records list: pure domain logic of the
 * `lineage-records` actor (storage `records`, key = lineageTenantKey(tenant),
 * one record `r:<record_id>` per breeding, without its seed). The breed flow
 * adds a record as its last step (a flow-call it waits for), so the list
 * shows a breeding as soon as its breed has answered. It keeps the newest
 * `records_listed_max` (the bound on this one actor's memory): adding past it
 * drops the oldest from the list.
 */
export interface RecordsState {
  records: Map<string, ListedRecord>;
}

type Result = TurnResult<RecordsState, unknown>;

export function loadRecords(_key: string, records: Iterable<[string, unknown]>): RecordsState {
  const state: RecordsState = { records: new Map() };
  for (const [subkey, value] of records) if (subkey.startsWith('r:')) state.records.set(subkey.slice(2), value as ListedRecord);
  return state;
}

export function listRecords(state: RecordsState, query: RecordsQuery): Page<ListedRecord> {
  const sign = query.sort_order === 'asc' ? 1 : -1;
  const matching = [...state.records.values()].filter(
    (record) =>
      // == null: a filter left out may arrive as undefined or, after a trip through another node, as null.
      (query.species_id == null || record.species_id === query.species_id) &&
      (query.parent == null || record.parents.includes(query.parent)) &&
      (query.requested_by == null || record.requested_by === query.requested_by),
  );
  matching.sort((a, b) => (a.created_at_ms - b.created_at_ms || (a.record_id < b.record_id ? -1 : a.record_id > b.record_id ? 1 : 0)) * sign);
  const start = (query.page - 1) * query.page_size;
  return { items: matching.slice(start, start + query.page_size), total: matching.length };
}

export function stepRecords(state: RecordsState, message: RecordsMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'add': {
      if (state.records.has(message.record.record_id)) return { state, reply: { added: false } };
      const writes: RecordWrite[] = [{ subkey: `r:${message.record.record_id}`, value: message.record }];
      if (state.records.size >= lineagePolicy.records_listed_max) {
        let oldest: ListedRecord | null = null;
        for (const record of state.records.values()) if (oldest === null || record.created_at_ms < oldest.created_at_ms) oldest = record;
        state.records.delete(oldest!.record_id);
        writes.push({ subkey: `r:${oldest!.record_id}`, value: undefined });
      }
      state.records.set(message.record.record_id, message.record);
      return { state, reply: { added: true }, writes };
    }
    case 'list':
      return { state, reply: listRecords(state, message.query) };
    case 'flow-call':
      return answerFlowCall(stepRecords, state, message as never, context);
    default:
      return { state };
  }
}
