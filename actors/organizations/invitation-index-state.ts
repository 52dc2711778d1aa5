import { answerFlowCall, FlowRefusal } from '../flow-call.js';
import type { AlarmMessage, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { INVITATION_RETENTION_MS, INVITATIONS_PER_EMAIL_MAX, type IndexEntry, type InvitationIndexMessage } from './messages.js';

/**
 * Pending organization invitations by address (kind `org-invitation-index`,
 * key = normalized e-mail), so `GET /api/v1/auth/invitations` finds the
 * caller's invitations in one actor. One record per invitation. The
 * organization actor is the truth (accept and decline go there); this index
 * follows it through the outbox, idempotently: `remove` leaves a tombstone
 * until the invitation's own expiry, so a late `reserve` cannot bring a
 * removed invitation back. An expired invitation is no longer listed but
 * stays findable (`get`, so accepting it says `invitation_expired`) for
 * INVITATION_RETENTION_MS, like in the organization; then it is pruned
 * whenever the index is touched.
 *
 * A new invitation comes as `reserve` (the organization's invitation flow):
 * the turn that counts the address's pending invitations of other
 * organizations against INVITATIONS_PER_EMAIL_MAX also adds it, so two
 * invitations cannot both take the last place. The organization sends it as a
 * flow-call (actors/flow-call.ts); at the cap it is refused with a
 * FlowRefusal, which keeps the turn's removals of the replaced invitations.
 */
export interface IndexRecord extends IndexEntry {
  removed: boolean;
}

export interface InvitationIndexState {
  entries: Map<string, IndexRecord>;
}

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

/** Marks an invitation removed (a tombstone when unknown); false if it already was. */
function remove(state: InvitationIndexState, invitation_id: string, expires_at_ms: number, now: number, writes: RecordWrite[]): boolean {
  const current = state.entries.get(invitation_id);
  if (current?.removed) return false;
  if (!current && expires_at_ms <= now) return false;
  const record: IndexRecord = current
    ? { ...current, removed: true }
    : { invitation_id, org_id: '', role: 'member', invited_by: '', created_at_ms: 0, expires_at_ms, removed: true };
  state.entries.set(invitation_id, record);
  writes.push({ subkey: invitation_id, value: record });
  return true;
}

export function stepInvitationIndex(
  state: InvitationIndexState,
  message: InvitationIndexMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<InvitationIndexState, unknown> {
  if (message.op === 'flow-call') return answerFlowCall<InvitationIndexState, InvitationIndexMessage>(stepInvitationIndex, state, message, context);
  const now = context.now;
  const writes: RecordWrite[] = [];
  prune(state, now, writes);
  switch (message.op) {
    case 'reserve': {
      const { entry } = message;
      for (const old of message.replaces) remove(state, old.invitation_id, old.expires_at_ms, now, writes);
      const current = state.entries.get(entry.invitation_id);
      // Already indexed (a repeat), or removed before it got here (replaced meanwhile): nothing to hold.
      if (current) return { state, writes, reply: { added: false } };
      const others = pendingEntries(state, now).filter((pending) => pending.org_id !== entry.org_id).length;
      if (others >= INVITATIONS_PER_EMAIL_MAX) {
        // The removals above stand: the replaced invitations are gone from the organization either way.
        return { state, writes, reply: new FlowRefusal({ code: 'conflict', message: `This address already has ${INVITATIONS_PER_EMAIL_MAX} pending invitations.` }) };
      }
      if (entry.expires_at_ms <= now) return { state, writes, reply: { added: false } };
      const record: IndexRecord = { ...entry, removed: false };
      state.entries.set(record.invitation_id, record);
      writes.push({ subkey: record.invitation_id, value: record });
      return { state, writes, reply: { added: true } };
    }
    case 'remove': {
      const removed = remove(state, message.invitation_id, message.expires_at_ms, now, writes);
      return { state, writes, reply: { removed } };
    }
    case 'list':
      return { state, writes, reply: { invitations: pendingEntries(state, now) } };
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
