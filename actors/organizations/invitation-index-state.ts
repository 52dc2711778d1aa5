import type { AlarmMessage, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { INVITATION_RETENTION_MS, type IndexEntry } from './state.js';

/**
 * Pending organization invitations by address (kind `org-invitation-index`,
 * key = normalized e-mail), so `GET /api/v1/auth/invitations` finds the
 * caller's invitations in one actor. One record per invitation. The
 * organization actor is the truth (accept and decline go there); this index
 * follows it through the outbox and the edge's direct apply, both idempotent:
 * `remove` leaves a tombstone until the invitation's own expiry, so a late
 * `add` cannot bring a removed invitation back. An expired invitation is no
 * longer listed but stays findable (`get`, so accepting it says
 * `invitation_expired`) for INVITATION_RETENTION_MS, like in the organization;
 * then it is pruned whenever the index is touched.
 */
export interface IndexRecord extends IndexEntry {
  removed: boolean;
}

export interface InvitationIndexState {
  entries: Map<string, IndexRecord>;
}

export type InvitationIndexMessage =
  | { op: 'add'; entry: IndexEntry }
  | { op: 'remove'; invitation_id: string; expires_at_ms: number }
  | { op: 'list' }
  /** One entry that is not removed, expired or not (null if unknown). */
  | { op: 'get'; invitation_id: string };

/** Pending invitations one address may hold (the edge refuses a new one beyond it). */
export const INVITATIONS_PER_EMAIL_MAX = 100;

export function loadInvitationIndex(_key: string, records: Iterable<[string, unknown]>): InvitationIndexState {
  const entries = new Map<string, IndexRecord>();
  for (const [subkey, value] of records) entries.set(subkey, value as IndexRecord);
  return { entries };
}

function prune(state: InvitationIndexState, now: number, writes: RecordWrite[]): void {
  for (const [id, entry] of state.entries) {
    if (entry.expires_at_ms + INVITATION_RETENTION_MS <= now) {
      state.entries.delete(id);
      writes.push({ subkey: id, value: undefined });
    }
  }
}

export function pendingEntries(state: InvitationIndexState, now: number): IndexEntry[] {
  const out: IndexEntry[] = [];
  for (const entry of state.entries.values()) {
    if (entry.removed || entry.expires_at_ms <= now) continue;
    const { removed: _removed, ...view } = entry;
    out.push(view);
  }
  return out.sort((a, b) => b.created_at_ms - a.created_at_ms || (a.invitation_id < b.invitation_id ? -1 : 1));
}

export function stepInvitationIndex(
  state: InvitationIndexState,
  message: InvitationIndexMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<InvitationIndexState, unknown> {
  const writes: RecordWrite[] = [];
  prune(state, context.now, writes);
  switch (message.op) {
    case 'add': {
      const current = state.entries.get(message.entry.invitation_id);
      if (current || message.entry.expires_at_ms <= context.now) return { state, writes, reply: { added: false } };
      const record: IndexRecord = { ...message.entry, removed: false };
      state.entries.set(record.invitation_id, record);
      writes.push({ subkey: record.invitation_id, value: record });
      return { state, writes, reply: { added: true } };
    }
    case 'remove': {
      const current = state.entries.get(message.invitation_id);
      if (current?.removed) return { state, writes, reply: { removed: false } };
      if (!current && message.expires_at_ms <= context.now) return { state, writes, reply: { removed: false } };
      const record: IndexRecord = current
        ? { ...current, removed: true }
        : { invitation_id: message.invitation_id, org_id: '', role: 'member', invited_by: '', created_at_ms: 0, expires_at_ms: message.expires_at_ms, removed: true };
      state.entries.set(record.invitation_id, record);
      writes.push({ subkey: record.invitation_id, value: record });
      return { state, writes, reply: { removed: true } };
    }
    case 'list':
      return { state, writes, reply: { invitations: pendingEntries(state, context.now) } };
    case 'get': {
      const entry = state.entries.get(message.invitation_id);
      if (!entry || entry.removed) return { state, writes, reply: { invitation: null } };
      const { removed: _removed, ...view } = entry;
      return { state, writes, reply: { invitation: view } };
    }
    case '$alarm':
      return { state, writes };
  }
}
