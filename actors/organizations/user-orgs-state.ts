import { answerFlowCall } from '../flow-call.js';
import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { USER_ORGS_MAX, type Membership, type OrgRole, type UserOrgsMessage } from './messages.js';

/**
 * The organizations one user belongs to (kind `user-orgs`, key = user_id), one
 * record per organization. The organization keeps it in step through its
 * outbox (at-least-once, possibly repeated): each sync carries the
 * organization's membership sequence number (`seq`) and its summary revision
 * (`rev`), so a repeated or late one never undoes a newer change. `role` null
 * is a removed membership (or one of a deleted organization), kept with its
 * seq so a late "added" cannot bring it back.
 *
 * Beside the membership, each record keeps a copy of the organization's name
 * and SSO policy for this user, so the login's SSO check and the admin's user
 * detail are one ask. The organization sends it again to every member when
 * its name or policy changes.
 *
 * Slots: a flow making a membership (creating an organization, accepting an
 * invitation) first holds a slot here (`reserve`), in the same turn that
 * counts the user's memberships and slots against USER_ORGS_MAX, so two
 * requests cannot both take the last one. The membership sync that follows
 * clears the slot; a flow that fails gives it back (`release`).
 *
 * The organization's flows send these as flow-calls (actors/flow-call.ts):
 * the answer goes back in the same turn, a refused slot as `ok: false`.
 */
export interface UserOrgEntry {
  role: OrgRole | null;
  joined_at_ms: number;
  seq: number;
  /** The organization's summary revision of `name` and the SSO fields (-1: none yet). */
  rev: number;
  name: string;
  sso_enforced: boolean;
  sso_exempt: boolean;
  /** Flows holding a slot for this organization (ids). */
  slots: string[];
}

export interface UserOrgsState {
  orgs: Map<string, UserOrgEntry>;
}

export function loadUserOrgs(_key: string, records: Iterable<[string, unknown]>): UserOrgsState {
  const orgs = new Map<string, UserOrgEntry>();
  for (const [subkey, value] of records) orgs.set(subkey, { slots: [], rev: -1, name: '', sso_enforced: false, sso_exempt: false, ...(value as Partial<UserOrgEntry>) } as UserOrgEntry);
  return { orgs };
}

export function memberships(state: UserOrgsState): Membership[] {
  const out: Membership[] = [];
  for (const [org_id, entry] of state.orgs) if (entry.role) out.push({ org_id, org_name: entry.name, role: entry.role, joined_at_ms: entry.joined_at_ms });
  return out.sort((a, b) => a.joined_at_ms - b.joined_at_ms || (a.org_id < b.org_id ? -1 : a.org_id > b.org_id ? 1 : 0));
}

/** Memberships and held slots, the count USER_ORGS_MAX bounds. */
export function slotsTaken(state: UserOrgsState): number {
  let taken = 0;
  for (const entry of state.orgs.values()) if (entry.role || entry.slots.length > 0) taken++;
  return taken;
}

function blank(): UserOrgEntry {
  return { role: null, joined_at_ms: 0, seq: 0, rev: -1, name: '', sso_enforced: false, sso_exempt: false, slots: [] };
}

export function stepUserOrgs(state: UserOrgsState, message: UserOrgsMessage | AlarmMessage, context: TurnContext): TurnResult<UserOrgsState, unknown> {
  switch (message.op) {
    case 'flow-call':
      return answerFlowCall<UserOrgsState, UserOrgsMessage>(stepUserOrgs, state, message, context);

    case 'sync': {
      const current = state.orgs.get(message.org_id);
      const newMembership = !current || current.seq < message.seq;
      const newSummary = !current || current.rev < message.rev;
      if (!newMembership && !newSummary) return { state, reply: { applied: false }, };
      const entry: UserOrgEntry = { ...(current ?? blank()) };
      if (newMembership) {
        entry.role = message.role;
        entry.joined_at_ms = message.joined_at_ms;
        entry.seq = message.seq;
        // The membership the slots were held for is made: it counts itself now.
        if (message.role) entry.slots = [];
      }
      if (newSummary) {
        entry.rev = message.rev;
        entry.name = message.name;
        entry.sso_enforced = message.sso_enforced;
        entry.sso_exempt = message.sso_exempt;
      }
      state.orgs.set(message.org_id, entry);
      const writes: RecordWrite[] = [{ subkey: message.org_id, value: entry }];
      return { state, writes, reply: { applied: true }, };
    }

    case 'reserve': {
      const current = state.orgs.get(message.org_id);
      if (current?.role || current?.slots.includes(message.flow_id)) return { state, reply: { reserved: true } };
      const held = current !== undefined && current.slots.length > 0;
      if (message.capped && !held && slotsTaken(state) >= USER_ORGS_MAX) throw new ServiceError('conflict', `A user may belong to at most ${USER_ORGS_MAX} organizations.`);
      const entry: UserOrgEntry = { ...(current ?? blank()), slots: [...(current?.slots ?? []), message.flow_id] };
      state.orgs.set(message.org_id, entry);
      return { state, reply: { reserved: true }, writes: [{ subkey: message.org_id, value: entry }] };
    }

    case 'release': {
      const current = state.orgs.get(message.org_id);
      if (!current || !current.slots.includes(message.flow_id)) return { state, reply: { released: false }, };
      const entry: UserOrgEntry = { ...current, slots: current.slots.filter((id) => id !== message.flow_id) };
      const writes: RecordWrite[] = [];
      if (entry.role === null && entry.slots.length === 0 && entry.seq === 0) {
        state.orgs.delete(message.org_id);
        writes.push({ subkey: message.org_id, value: undefined });
      } else {
        state.orgs.set(message.org_id, entry);
        writes.push({ subkey: message.org_id, value: entry });
      }
      return { state, writes, reply: { released: true }, };
    }

    case 'list':
      return { state, reply: { memberships: memberships(state) } };

    case 'sso_policy': {
      const enforcing = memberships(state).find((m) => {
        const entry = state.orgs.get(m.org_id)!;
        return entry.sso_enforced && !entry.sso_exempt;
      });
      return { state, reply: { enforced_by: enforcing ? { org_id: enforcing.org_id, name: enforcing.org_name } : null } };
    }

    case '$alarm':
      return { state };
  }
}
