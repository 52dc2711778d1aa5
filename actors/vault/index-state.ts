import type { RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import type { AttestationIndexMessage, AttestationListView, AttestationSummaryEntry } from './messages.js';

/**
 * A tenant's attestations: pure domain logic of the `attestation-index`
 * actor (storage `records`, key = attestationIndexKey(tenant), one record
 * `s:<attestation_id>` per attestation). The attestations send their summary
 * through the outbox on creation and on every status change; the list (status
 * filter, newest first, pages) is answered from here in one ask.
 */
export const SUMMARY_PREFIX = 's:';

export interface AttestationIndexState {
  entries: Map<string, AttestationSummaryEntry>;
}

export function loadAttestationIndex(_key: string, records: Iterable<[string, unknown]>): AttestationIndexState {
  const state: AttestationIndexState = { entries: new Map() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith(SUMMARY_PREFIX)) state.entries.set(subkey.slice(SUMMARY_PREFIX.length), value as AttestationSummaryEntry);
  }
  return state;
}

const STATUS_ORDER = { locked: 0, partially_unlocked: 1, unlocked: 2 } as const;

export function stepAttestationIndex(state: AttestationIndexState, message: AttestationIndexMessage, _context: TurnContext): TurnResult<AttestationIndexState, unknown> {
  switch (message.op) {
    case 'upsert': {
      const { entry } = message;
      const current = state.entries.get(entry.attestation_id);
      // A status only moves forward; an older summary arriving late is ignored.
      if (current && STATUS_ORDER[current.status] > STATUS_ORDER[entry.status]) return { state, reply: { applied: false } };
      state.entries.set(entry.attestation_id, entry);
      const writes: RecordWrite[] = [{ subkey: SUMMARY_PREFIX + entry.attestation_id, value: entry }];
      return { state, reply: { applied: true }, writes };
    }
    case 'list': {
      const matched = [...state.entries.values()]
        .filter((entry) => message.status === undefined || entry.status === message.status)
        .sort((a, b) => b.created_at_ms - a.created_at_ms || (a.attestation_id < b.attestation_id ? -1 : 1));
      const start = (message.page - 1) * message.page_size;
      const view: AttestationListView = { total: matched.length, attestations: matched.slice(start, start + message.page_size) };
      return { state, reply: view };
    }
    default:
      return { state };
  }
}
