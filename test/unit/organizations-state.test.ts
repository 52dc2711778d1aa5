import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RecordWrite, TurnResult } from '../../runtime/index.js';
import {
  INVITATION_ALARM,
  INVITATION_RETENTION_MS,
  loadOrganization,
  ORG_INVITATIONS_MAX,
  stepOrganization,
  type Member,
  type OrganizationMessage,
  type OrganizationState,
  type OrgRole,
  type UserOrgSync,
} from '../../actors/organizations/state.js';
import { loadUserOrgs, stepUserOrgs } from '../../actors/organizations/user-orgs-state.js';
import { loadInvitationIndex, stepInvitationIndex } from '../../actors/organizations/invitation-index-state.js';
import { loadOrgDirectory, stepOrgDirectory } from '../../actors/organizations/directory-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

const T0 = 1_700_000_000_000;
const DAY = 24 * 3600 * 1000;

/** An organization actor with a records store: every turn's writes applied, and reloadable. */
function harness() {
  const store = new Map<string, unknown>();
  let state: OrganizationState = loadOrganization('org_1', []);
  let now = T0;
  const apply = (writes: RecordWrite[] | undefined) => {
    for (const w of writes ?? []) {
      if (w.value === undefined) store.delete(w.subkey);
      else store.set(w.subkey, structuredClone(w.value));
    }
  };
  return {
    step(message: OrganizationMessage | { op: '$alarm'; name: string; due_ms: number }): TurnResult<OrganizationState, any> {
      const result = stepOrganization(state, message as OrganizationMessage, fixedContext(now, 'organization', 'org_1'));
      state = result.state;
      apply(result.writes);
      return result;
    },
    code(message: OrganizationMessage) {
      return codeOf(() => this.step(message));
    },
    reload() {
      state = loadOrganization('org_1', [...store.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
      return state;
    },
    get state() {
      return state;
    },
    advance(ms: number) {
      now += ms;
    },
    get now() {
      return now;
    },
  };
}

const create: OrganizationMessage = { op: 'create', org_id: 'org_1', name: 'Acme', slug: 'acme', created_by: 'u_owner' };
const by = (user_id: string) => ({ user_id, platform_admin: false });

describe('organization actor', () => {
  it('creates with the creator as owner, and a retried create changes nothing', () => {
    const h = harness();
    const created = h.step(create);
    expect(created.reply).toMatchObject({ org_id: 'org_1', name: 'Acme', slug: 'acme', member_count: 1, sso_enforced: false, sso_exempt_user_ids: [] });
    expect(created.sends?.map((s) => s.kind).sort()).toEqual(['org-directory', 'user-orgs']);
    const again = h.step(create);
    expect(again.writes ?? []).toEqual([]);
    expect(h.code({ ...create, created_by: 'someone-else' })).toBe('conflict');
    expect(h.step({ op: 'get_member', user_id: 'u_owner' }).reply).toMatchObject({ role: 'owner' });
    expect(h.code({ op: 'get_member', user_id: 'u_x' })).toBe('not_found');
  });

  it('an unknown organization is not_found', () => {
    const h = harness();
    expect(h.code({ op: 'get' })).toBe('not_found');
    expect(h.code({ op: 'add_member', user_id: 'u', role: 'member' })).toBe('not_found');
  });

  it('keeps the last owner: cannot leave, be removed or demoted', () => {
    const h = harness();
    h.step(create);
    expect(h.code({ op: 'remove_member', user_id: 'u_owner', by: by('u_owner') })).toBe('last_owner');
    expect(h.code({ op: 'set_role', user_id: 'u_owner', role: 'admin', by: by('u_owner') })).toBe('last_owner');
    expect(h.code({ op: 'add_member', user_id: 'u_owner', role: 'member' })).toBe('last_owner');
    h.step({ op: 'add_member', user_id: 'u2', role: 'owner' });
    h.step({ op: 'set_role', user_id: 'u_owner', role: 'member', by: by('u_owner') });
    expect(h.state.owner_count).toBe(1);
    expect(h.code({ op: 'remove_member', user_id: 'u2', by: by('u2') })).toBe('last_owner');
  });

  it('enforces role rules for members, admins and owners', () => {
    const h = harness();
    h.step(create);
    h.step({ op: 'add_member', user_id: 'admin', role: 'admin' });
    h.step({ op: 'add_member', user_id: 'm1', role: 'member' });
    h.step({ op: 'add_member', user_id: 'm2', role: 'member' });
    // A member manages nobody, but may leave.
    expect(h.code({ op: 'set_role', user_id: 'm2', role: 'admin', by: by('m1') })).toBe('forbidden');
    expect(h.code({ op: 'remove_member', user_id: 'm2', by: by('m1') })).toBe('forbidden');
    expect(h.code({ op: 'invite', invitation_id: 'i', email: 'x@y.z', role: 'member', token_hash: 'h', ttl_ms: DAY, by: by('m1') })).toBe('forbidden');
    // An admin manages members and admins, never owners or the owner role.
    expect(h.step({ op: 'set_role', user_id: 'm2', role: 'admin', by: by('admin') }).reply).toMatchObject({ role: 'admin' });
    expect(h.code({ op: 'set_role', user_id: 'm2', role: 'owner', by: by('admin') })).toBe('forbidden');
    expect(h.code({ op: 'set_role', user_id: 'u_owner', role: 'member', by: by('admin') })).toBe('forbidden');
    expect(h.code({ op: 'remove_member', user_id: 'u_owner', by: by('admin') })).toBe('forbidden');
    expect(h.code({ op: 'delete', by: by('admin') })).toBe('forbidden');
    expect(h.step({ op: 'remove_member', user_id: 'm2', by: by('admin') }).reply).toEqual({ removed: true });
    // A stranger does not learn the organization exists.
    expect(h.code({ op: 'update', name: 'x', by: by('stranger') })).toBe('not_found');
    // Leave.
    expect(h.step({ op: 'remove_member', user_id: 'm1', by: by('m1') }).reply).toEqual({ removed: true });
    expect(h.step({ op: 'remove_member', user_id: 'm1' }).reply).toEqual({ removed: false });
    expect(h.step({ op: 'get' }).reply.member_count).toBe(2);
  });

  it('membership syncs carry increasing seq numbers', () => {
    const h = harness();
    const seqs: number[] = [];
    const collect = (r: TurnResult<OrganizationState, unknown>) => {
      for (const s of r.sends ?? []) if (s.kind === 'user-orgs') seqs.push((s.message as UserOrgSync).seq);
    };
    collect(h.step(create));
    collect(h.step({ op: 'add_member', user_id: 'u2', role: 'member' }));
    collect(h.step({ op: 'set_role', user_id: 'u2', role: 'admin' }));
    collect(h.step({ op: 'remove_member', user_id: 'u2' }));
    expect(seqs).toEqual([1, 2, 3, 4]);
    expect(h.step({ op: 'member_sync', user_id: 'u2' }).reply).toMatchObject({ role: null, seq: 4 });
  });

  it('SSO policy applies to non-exempt members only', () => {
    const h = harness();
    h.step(create);
    h.step({ op: 'add_member', user_id: 'u2', role: 'member' });
    expect(h.step({ op: 'sso_policy', user_id: 'u2' }).reply.enforced).toBe(false);
    const view = h.step({ op: 'set_sso', sso_enforced: true, sso_exempt_user_ids: ['u_owner', 'u_owner'] }).reply;
    expect(view).toMatchObject({ sso_enforced: true, sso_exempt_user_ids: ['u_owner'] });
    expect(h.step({ op: 'sso_policy', user_id: 'u2' }).reply).toMatchObject({ enforced: true, name: 'Acme' });
    expect(h.step({ op: 'sso_policy', user_id: 'u_owner' }).reply.enforced).toBe(false);
    expect(h.step({ op: 'sso_policy', user_id: 'not-a-member' }).reply.enforced).toBe(false);
    // Absent exempt list keeps the current one.
    h.step({ op: 'set_sso', sso_enforced: true });
    expect(h.step({ op: 'get' }).reply.sso_exempt_user_ids).toEqual(['u_owner']);
  });

  it('invitations: accept with a verified e-mail or the token; expiry; single use', () => {
    const h = harness();
    h.step(create);
    const invite = (id: string, email: string) =>
      h.step({ op: 'invite', invitation_id: id, email, role: 'admin', token_hash: `hash-${id}`, ttl_ms: 7 * DAY, by: by('u_owner') });
    const created = invite('inv_1', ' Bob@Example.com ');
    expect(created.reply).toMatchObject({ invitation_id: 'inv_1', email: 'bob@example.com', role: 'admin', expires_at_ms: T0 + 7 * DAY });
    expect(created.alarms).toEqual([{ name: INVITATION_ALARM, due_ms: T0 + 7 * DAY + INVITATION_RETENTION_MS }]);
    expect(created.sends?.[0]).toMatchObject({ kind: 'org-invitation-index', key: 'bob@example.com', message: { op: 'add' } });
    const accept = { op: 'accept_invitation' as const, invitation_id: 'inv_1', user_id: 'u_bob' };
    // Another address: not found; unverified without a token: forbidden; a wrong token: forbidden.
    expect(h.code({ ...accept, email: 'eve@example.com', email_verified: true })).toBe('invitation_not_found');
    expect(h.code({ ...accept, email: 'bob@example.com', email_verified: false })).toBe('forbidden');
    expect(h.code({ ...accept, email: 'bob@example.com', email_verified: true, token_hash: 'wrong' })).toBe('forbidden');
    const accepted = h.step({ ...accept, email: 'BOB@example.com', email_verified: false, token_hash: 'hash-inv_1' });
    expect(accepted.reply.member).toMatchObject({ user_id: 'u_bob', role: 'admin' });
    expect(accepted.reply.organization.member_count).toBe(2);
    expect(h.code({ ...accept, email: 'bob@example.com', email_verified: true })).toBe('invitation_not_found');

    invite('inv_2', 'carol@example.com');
    h.advance(7 * DAY);
    expect(h.step({ op: 'list_invitations' }).reply.invitations).toEqual([]);
    expect(h.code({ op: 'accept_invitation', invitation_id: 'inv_2', user_id: 'u_c', email: 'carol@example.com', email_verified: true })).toBe('invitation_expired');
    h.advance(INVITATION_RETENTION_MS);
    const purged = h.step({ op: '$alarm', name: INVITATION_ALARM, due_ms: h.now });
    expect(purged.alarms).toEqual([{ name: INVITATION_ALARM, due_ms: null }]);
    expect(h.code({ op: 'accept_invitation', invitation_id: 'inv_2', user_id: 'u_c', email: 'carol@example.com', email_verified: true })).toBe('invitation_not_found');
  });

  it('re-inviting an address replaces its invitation; revoke and decline remove it', () => {
    const h = harness();
    h.step(create);
    const invite = (id: string) => h.step({ op: 'invite', invitation_id: id, email: 'd@example.com', role: 'member', token_hash: id, ttl_ms: DAY, by: by('u_owner') });
    invite('a');
    const second = invite('b');
    expect(second.sends?.map((s) => (s.message as { op: string }).op)).toEqual(['remove', 'add']);
    expect(h.step({ op: 'list_invitations' }).reply.invitations.map((i: { invitation_id: string }) => i.invitation_id)).toEqual(['b']);
    expect(h.code({ op: 'invite', invitation_id: 'o', email: 'o@example.com', role: 'owner', token_hash: 'o', ttl_ms: DAY, by: { user_id: 'u_owner', platform_admin: false } })).toBeUndefined();
    expect(h.step({ op: 'revoke_invitation', invitation_id: 'b', by: by('u_owner') }).reply).toMatchObject({ revoked: true, invitation: { email: 'd@example.com' } });
    expect(h.code({ op: 'revoke_invitation', invitation_id: 'b', by: by('u_owner') })).toBe('invitation_not_found');
    expect(h.step({ op: 'decline_invitation', invitation_id: 'o', email: 'o@example.com', email_verified: true }).reply).toEqual({ declined: true });
    expect(h.step({ op: 'list_invitations' }).reply.invitations).toEqual([]);
  });

  it('caps pending invitations; a refused invite changes nothing; re-inviting at the cap works', () => {
    const h = harness();
    h.step(create);
    const invite = (i: number) => ({ op: 'invite' as const, invitation_id: `i${i}`, email: `u${i}@example.com`, role: 'member' as const, token_hash: 'h', ttl_ms: DAY, by: by('u_owner') });
    for (let i = 0; i < ORG_INVITATIONS_MAX; i++) h.step(invite(i));
    expect(h.code(invite(ORG_INVITATIONS_MAX))).toBe('conflict');
    expect(h.state.invitations.size).toBe(ORG_INVITATIONS_MAX);
    expect(h.code({ ...invite(0), invitation_id: 'again' })).toBeUndefined();
    expect(h.state.invitations.has('i0')).toBe(false);
    expect(h.state.invitations.has('again')).toBe(true);
  });

  it('delete leaves a tombstone: members and invitations gone, id not reusable', () => {
    const h = harness();
    h.step(create);
    h.step({ op: 'add_member', user_id: 'u2', role: 'member' });
    h.step({ op: 'invite', invitation_id: 'i1', email: 'e@example.com', role: 'member', token_hash: 'x', ttl_ms: DAY, by: by('u_owner') });
    const deleted = h.step({ op: 'delete', by: by('u_owner') });
    expect(deleted.sends?.find((s) => s.kind === 'org-directory')?.message).toMatchObject({ org: null });
    h.reload();
    expect(h.code({ op: 'get' })).toBe('not_found');
    expect(h.code({ op: 'get_member', user_id: 'u2' })).toBe('not_found');
    expect(h.code(create)).toBe('conflict');
    expect(h.step({ op: 'sso_policy', user_id: 'u2' }).reply.enforced).toBe(false);
    expect(h.state.members.size).toBe(0);
    expect(h.state.invitations.size).toBe(0);
  });

  it('property: any sequence of membership operations keeps an owner, and reload equals the live state', () => {
    const users = ['u_owner', 'a', 'b', 'c'];
    const roles: OrgRole[] = ['owner', 'admin', 'member'];
    const op = fc.oneof(
      fc.record({ op: fc.constant('add_member' as const), user_id: fc.constantFrom(...users), role: fc.constantFrom(...roles), by: fc.option(fc.constantFrom(...users), { nil: undefined }) }),
      fc.record({ op: fc.constant('set_role' as const), user_id: fc.constantFrom(...users), role: fc.constantFrom(...roles), by: fc.option(fc.constantFrom(...users), { nil: undefined }) }),
      fc.record({ op: fc.constant('remove_member' as const), user_id: fc.constantFrom(...users), by: fc.option(fc.constantFrom(...users), { nil: undefined }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const h = harness();
        h.step(create);
        for (const o of ops) {
          const message = { ...o, by: o.by === undefined ? undefined : by(o.by) } as OrganizationMessage;
          codeOf(() => h.step(message));
          const owners = [...h.state.members.values()].filter((m: Member) => m.role === 'owner').length;
          expect(owners).toBeGreaterThanOrEqual(1);
          expect(h.state.owner_count).toBe(owners);
        }
        const live = [...h.state.members.values()].sort((x, y) => (x.user_id < y.user_id ? -1 : 1));
        const meta = structuredClone(h.state.meta);
        const reloaded = h.reload();
        expect([...reloaded.members.values()].sort((x, y) => (x.user_id < y.user_id ? -1 : 1))).toEqual(live);
        expect(reloaded.meta).toEqual(meta);
      }),
      { numRuns: 150 },
    );
  });
});

describe('user-orgs index', () => {
  it('applies syncs by seq: repeated and late syncs change nothing; drop is final', () => {
    let state = loadUserOrgs('u', []);
    const ctx = fixedContext(T0);
    const sync = (org_id: string, role: OrgRole | null, seq: number) => stepUserOrgs(state, { op: 'sync', org_id, role, joined_at_ms: T0, seq }, ctx);
    expect(sync('o1', 'member', 2).reply).toEqual({ applied: true });
    expect(sync('o1', null, 1).reply).toEqual({ applied: false });
    expect(sync('o1', 'member', 2).reply).toEqual({ applied: false });
    sync('o2', 'owner', 1);
    expect(stepUserOrgs(state, { op: 'list' }, ctx).reply).toMatchObject({ memberships: [{ org_id: 'o1', role: 'member' }, { org_id: 'o2', role: 'owner' }] });
    const removed = sync('o1', null, 3);
    state = loadUserOrgs('u', removed.writes!.map((w) => [w.subkey, w.value] as [string, unknown]).concat([['o2', state.orgs.get('o2')]]));
    expect(stepUserOrgs(state, { op: 'list' }, ctx).reply).toMatchObject({ memberships: [{ org_id: 'o2' }] });
    stepUserOrgs(state, { op: 'drop', org_id: 'o2' }, ctx);
    expect(sync('o2', 'owner', 99).reply).toEqual({ applied: false });
    expect(stepUserOrgs(state, { op: 'list' }, ctx).reply).toEqual({ memberships: [] });
  });
});

describe('invitation index', () => {
  const entry = { invitation_id: 'i1', org_id: 'o1', role: 'member' as const, invited_by: 'u', created_at_ms: T0, expires_at_ms: T0 + DAY };
  it('adds, lists, removes with a tombstone, hides expired, prunes after retention', () => {
    const state = loadInvitationIndex('e', []);
    expect(stepInvitationIndex(state, { op: 'add', entry }, fixedContext(T0)).reply).toEqual({ added: true });
    expect(stepInvitationIndex(state, { op: 'list' }, fixedContext(T0)).reply).toEqual({ invitations: [entry] });
    expect(stepInvitationIndex(state, { op: 'list' }, fixedContext(T0 + DAY)).reply).toEqual({ invitations: [] });
    expect(stepInvitationIndex(state, { op: 'get', invitation_id: 'i1' }, fixedContext(T0 + DAY)).reply).toEqual({ invitation: entry });
    stepInvitationIndex(state, { op: 'remove', invitation_id: 'i1', expires_at_ms: entry.expires_at_ms }, fixedContext(T0));
    expect(stepInvitationIndex(state, { op: 'add', entry }, fixedContext(T0)).reply).toEqual({ added: false });
    expect(stepInvitationIndex(state, { op: 'get', invitation_id: 'i1' }, fixedContext(T0)).reply).toEqual({ invitation: null });
    const pruned = stepInvitationIndex(state, { op: 'list' }, fixedContext(T0 + DAY + INVITATION_RETENTION_MS));
    expect(pruned.writes).toEqual([{ subkey: 'i1', value: undefined }]);
    expect(state.entries.size).toBe(0);
  });
});

describe('org directory', () => {
  it('claims unique slugs, sends the create, lists by revision and frees the slug on delete', () => {
    const state = loadOrgDirectory('global', []);
    const ctx = fixedContext(T0);
    const claimed = stepOrgDirectory(state, { op: 'claim', create: { ...create, slug: 'Acme' } as Extract<OrganizationMessage, { op: 'create' }> }, ctx);
    expect(claimed.sends).toEqual([{ kind: 'organization', key: 'org_1', message: { ...create, slug: 'acme' } }]);
    expect(codeOf(() => stepOrgDirectory(state, { op: 'claim', create: { ...create, org_id: 'org_2' } as Extract<OrganizationMessage, { op: 'create' }> }, ctx))).toBe('org_slug_taken');
    const org = { org_id: 'org_1', name: 'Acme', slug: 'acme', created_by: 'u', created_at_ms: T0, updated_at_ms: T0, logo_url: null, metadata: {}, sso_enforced: false, sso_exempt_user_ids: [], member_count: 1 };
    stepOrgDirectory(state, { op: 'sync', org_id: 'org_1', rev: 2, slug: 'acme', org: { ...org, name: 'Acme 2' } }, ctx);
    expect(stepOrgDirectory(state, { op: 'sync', org_id: 'org_1', rev: 1, slug: 'acme', org }, ctx).reply).toEqual({ applied: false });
    expect(stepOrgDirectory(state, { op: 'list', q: 'acme 2', page: 1, page_size: 10 }, ctx).reply).toMatchObject({ total: 1 });
    expect(stepOrgDirectory(state, { op: 'list', sso_enforced: true, page: 1, page_size: 10 }, ctx).reply).toMatchObject({ total: 0 });
    stepOrgDirectory(state, { op: 'sync', org_id: 'org_1', rev: 3, slug: 'acme', org: null }, ctx);
    expect(stepOrgDirectory(state, { op: 'list', page: 1, page_size: 10 }, ctx).reply).toMatchObject({ total: 0 });
    expect(codeOf(() => stepOrgDirectory(state, { op: 'claim', create: { ...create, org_id: 'org_2' } as Extract<OrganizationMessage, { op: 'create' }> }, ctx))).toBeUndefined();
  });
});
