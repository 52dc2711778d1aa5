import type { AlarmMessage, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import type { OrgRole, UserOrgSync } from './state.js';

/**
 * The organizations one user belongs to (kind `user-orgs`, key = user_id), one
 * record per organization: `{role, joined_at_ms, seq}`. The organization actor
 * keeps it in step through its outbox (at-least-once, possibly repeated), and
 * the edge applies the same sync directly for read-your-writes; each sync
 * carries the organization's membership sequence number, so a repeated or late
 * one never undoes a newer change. `role` null is a removed membership, kept
 * (with its seq) so a late "added" cannot bring it back.
 *
 * A deleted organization does not fan out to its members: the edge skips an
 * organization that answers not_found and asks here to `drop` it (final).
 */
export interface UserOrgEntry {
  role: OrgRole | null;
  joined_at_ms: number;
  seq: number;
}

export interface UserOrgsState {
  orgs: Map<string, UserOrgEntry>;
}

export interface Membership {
  org_id: string;
  role: OrgRole;
  joined_at_ms: number;
}

export type UserOrgsMessage =
  | UserOrgSync
  | { op: 'drop'; org_id: string }
  | { op: 'list' };

/** The seq of a dropped (deleted) organization: no sync is newer. */
const DROPPED_SEQ = Number.MAX_SAFE_INTEGER;

export function loadUserOrgs(_key: string, records: Iterable<[string, unknown]>): UserOrgsState {
  const orgs = new Map<string, UserOrgEntry>();
  for (const [subkey, value] of records) orgs.set(subkey, value as UserOrgEntry);
  return { orgs };
}

export function memberships(state: UserOrgsState): Membership[] {
  const out: Membership[] = [];
  for (const [org_id, entry] of state.orgs) if (entry.role) out.push({ org_id, role: entry.role, joined_at_ms: entry.joined_at_ms });
  return out.sort((a, b) => a.joined_at_ms - b.joined_at_ms || (a.org_id < b.org_id ? -1 : a.org_id > b.org_id ? 1 : 0));
}

export function stepUserOrgs(state: UserOrgsState, message: UserOrgsMessage | AlarmMessage, _context: TurnContext): TurnResult<UserOrgsState, unknown> {
  switch (message.op) {
    case 'sync': {
      const current = state.orgs.get(message.org_id);
      if (current && current.seq >= message.seq) return { state, reply: { applied: false } };
      const entry: UserOrgEntry = { role: message.role, joined_at_ms: message.joined_at_ms, seq: message.seq };
      state.orgs.set(message.org_id, entry);
      const writes: RecordWrite[] = [{ subkey: message.org_id, value: entry }];
      return { state, writes, reply: { applied: true } };
    }
    case 'drop': {
      const current = state.orgs.get(message.org_id);
      if (current && current.seq === DROPPED_SEQ) return { state, reply: { dropped: false } };
      const entry: UserOrgEntry = { role: null, joined_at_ms: 0, seq: DROPPED_SEQ };
      state.orgs.set(message.org_id, entry);
      return { state, writes: [{ subkey: message.org_id, value: entry }], reply: { dropped: true } };
    }
    case 'list':
      return { state, reply: { memberships: memberships(state) } };
    case '$alarm':
      return { state };
  }
}
