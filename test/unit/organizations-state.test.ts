import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ServiceError, type ErrorCode } from '../../runtime/index.js';
import { organizationActors } from '../../actors/organizations/actor.js';
import {
  INVITATION_RETENTION_MS,
  ORG_DIRECTORY_KEY,
  ORG_DIRECTORY_KIND,
  ORG_INVITATIONS_MAX,
  INVITATIONS_PER_EMAIL_MAX,
  USER_ORGS_MAX,
  ORGANIZATION_KIND,
  USER_ORGS_KIND,
  type Member,
  type OrganizationMessage,
  type OrgRole,
  type UserOrgSync,
} from '../../actors/organizations/messages.js';
import { INVITATION_ALARM, invitationAlarm, type OrganizationState } from '../../actors/organizations/state.js';
import { loadUserOrgs, stepUserOrgs, type UserOrgsState } from '../../actors/organizations/user-orgs-state.js';
import { loadInvitationIndex, stepInvitationIndex } from '../../actors/organizations/invitation-index-state.js';
import { loadOrgDirectory, stepOrgDirectory } from '../../actors/organizations/directory-state.js';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { FlowRefusal } from '../../actors/flow-call.js';
import { accountsStubActors } from '../helpers/accounts-stub.js';
import { actorWorld, callOf } from '../helpers/actor-world.js';
import { codeOf, fixedContext } from '../helpers/step.js';

const T0 = 1_700_000_000_000;
const DAY = 24 * 3600 * 1000;

/**
 * The organization actor (its step is the flows coordinator) with its
 * indexes in a pure actor world: every ask runs its flow to the end.
 */
function harness() {
  const w = actorWorld([...organizationActors, ...accountsStubActors], T0);
  return {
    w,
    /** The account the user actor answers with (accept and decline ask it for the e-mail and whether it is verified). */
    user(user_id: string, email: string, email_verified: boolean) {
      w.inject(USER_KIND, user_id, { op: 'put', email, email_verified });
    },
    step(message: OrganizationMessage | { op: '$alarm'; name: string; due_ms: number }): { reply: any } {
      const outcome = w.ask(ORGANIZATION_KIND, 'org_1', message);
      if (outcome.code !== undefined) throw new ServiceError(outcome.code as ErrorCode, outcome.code);
      expect(outcome.deferred).toBe(false);
      return { reply: outcome.reply };
    },
    code(message: OrganizationMessage) {
      return codeOf(() => this.step(message));
    },
    reload() {
      return w.reload(ORGANIZATION_KIND, 'org_1') as OrganizationState;
    },
    get state() {
      return w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1');
    },
    userOrgs(user_id: string) {
      return w.reply(USER_ORGS_KIND, user_id, { op: 'list' }).memberships;
    },
    advance(ms: number) {
      w.advance(ms);
    },
    get now() {
      return w.now;
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
    expect(h.userOrgs('u_owner')).toEqual([{ org_id: 'org_1', org_name: 'Acme', role: 'owner', joined_at_ms: T0 }]);
    expect(h.w.reply(ORG_DIRECTORY_KIND, ORG_DIRECTORY_KEY, { op: 'list', page: 1, page_size: 10 })).toMatchObject({ total: 1 });
    const records = structuredClone([...h.w.records(ORGANIZATION_KIND, 'org_1')]);
    h.step(create);
    expect([...h.w.records(ORGANIZATION_KIND, 'org_1')]).toEqual(records);
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
    h.step(create);
    h.step({ op: 'add_member', user_id: 'u2', role: 'member' });
    h.step({ op: 'set_role', user_id: 'u2', role: 'admin' });
    h.step({ op: 'remove_member', user_id: 'u2' });
    const seqs = h.w.log.filter((d) => d.kind === USER_ORGS_KIND && callOf(d).op === 'sync').map((d) => (callOf(d) as UserOrgSync).seq);
    expect(seqs).toEqual([1, 2, 3, 4]);
    expect(h.w.state<UserOrgsState>(USER_ORGS_KIND, 'u2').orgs.get('org_1')).toMatchObject({ role: null, seq: 4 });
  });

  it('SSO policy applies to non-exempt members only', () => {
    const h = harness();
    h.step(create);
    h.step({ op: 'add_member', user_id: 'u2', role: 'member' });
    const policy = (user_id: string) => h.w.reply(USER_ORGS_KIND, user_id, { op: 'sso_policy' }).enforced_by;
    expect(policy('u2')).toBeNull();
    const view = h.step({ op: 'set_sso', sso_enforced: true, sso_exempt_user_ids: ['u_owner', 'u_owner'] }).reply;
    expect(view).toMatchObject({ sso_enforced: true, sso_exempt_user_ids: ['u_owner'] });
    // The policy reached every member's index before the reply.
    expect(policy('u2')).toEqual({ org_id: 'org_1', name: 'Acme' });
    expect(policy('u_owner')).toBeNull();
    expect(policy('not-a-member')).toBeNull();
    h.step({ op: 'update', name: 'Acme 2' });
    expect(policy('u2')).toEqual({ org_id: 'org_1', name: 'Acme 2' });
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
    expect(created.reply).toMatchObject({ org_name: 'Acme', invitation: { invitation_id: 'inv_1', email: 'bob@example.com', role: 'admin', expires_at_ms: T0 + 7 * DAY } });
    expect(invitationAlarm(h.state)).toEqual({ name: INVITATION_ALARM, due_ms: T0 + 7 * DAY + INVITATION_RETENTION_MS });
    expect(h.w.log.find((d) => d.kind === 'org-invitation-index')).toMatchObject({ key: 'bob@example.com', message: { op: 'flow-call', call: { op: 'reserve' } } });
    const accept = { op: 'accept_invitation' as const, invitation_id: 'inv_1', user_id: 'u_bob' };
    // The user actor's account as of the ask: its e-mail and whether it is verified.
    const as = (email: string, email_verified: boolean) => {
      h.user('u_bob', email, email_verified);
      return accept;
    };
    // Another address: not found; unverified without a token: forbidden; a wrong token: forbidden.
    expect(h.code(as('eve@example.com', true))).toBe('invitation_not_found');
    expect(h.code(as('bob@example.com', false))).toBe('forbidden');
    expect(h.code({ ...as('bob@example.com', true), token_hash: 'wrong' })).toBe('forbidden');
    // No account: the user actor's not_found.
    expect(h.code({ ...accept, user_id: 'u_nobody' })).toBe('not_found');
    const accepted = h.step({ ...as('BOB@example.com', false), token_hash: 'hash-inv_1' });
    expect(accepted.reply.member).toMatchObject({ user_id: 'u_bob', role: 'admin' });
    expect(accepted.reply.organization.member_count).toBe(2);
    expect(h.code(as('bob@example.com', true))).toBe('invitation_not_found');

    invite('inv_2', 'carol@example.com');
    h.user('u_c', 'carol@example.com', true);
    h.advance(7 * DAY);
    expect(h.step({ op: 'list_invitations' }).reply.invitations).toEqual([]);
    expect(h.code({ op: 'accept_invitation', invitation_id: 'inv_2', user_id: 'u_c' })).toBe('invitation_expired');
    h.advance(INVITATION_RETENTION_MS);
    h.step({ op: '$alarm', name: INVITATION_ALARM, due_ms: h.now });
    expect(invitationAlarm(h.state)).toEqual({ name: INVITATION_ALARM, due_ms: null });
    expect(h.code({ op: 'accept_invitation', invitation_id: 'inv_2', user_id: 'u_c' })).toBe('invitation_not_found');
  });

  it('re-inviting an address replaces its invitation; revoke and decline remove it', () => {
    const h = harness();
    h.step(create);
    const invite = (id: string) => h.step({ op: 'invite', invitation_id: id, email: 'd@example.com', role: 'member', token_hash: id, ttl_ms: DAY, by: by('u_owner') });
    invite('a');
    invite('b');
    expect(h.w.log.filter((d) => d.kind === 'org-invitation-index').map((d) => callOf(d).replaces.map((r: { invitation_id: string }) => r.invitation_id))).toEqual([[], ['a']]);
    expect(h.step({ op: 'list_invitations' }).reply.invitations.map((i: { invitation_id: string }) => i.invitation_id)).toEqual(['b']);
    expect(h.code({ op: 'invite', invitation_id: 'o', email: 'o@example.com', role: 'owner', token_hash: 'o', ttl_ms: DAY, by: { user_id: 'u_owner', platform_admin: false } })).toBeUndefined();
    expect(h.step({ op: 'revoke_invitation', invitation_id: 'b', by: by('u_owner') }).reply).toMatchObject({ revoked: true, invitation: { email: 'd@example.com' } });
    expect(h.code({ op: 'revoke_invitation', invitation_id: 'b', by: by('u_owner') })).toBe('invitation_not_found');
    h.user('u_o', 'o@example.com', false);
    expect(h.code({ op: 'decline_invitation', invitation_id: 'o', user_id: 'u_o' })).toBe('forbidden');
    h.user('u_o', 'O@example.com', true);
    expect(h.step({ op: 'decline_invitation', invitation_id: 'o', user_id: 'u_o' }).reply).toEqual({ declined: true });
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
    h.step({ op: 'delete', by: by('u_owner') });
    expect(h.w.reply(ORG_DIRECTORY_KIND, ORG_DIRECTORY_KEY, { op: 'list', page: 1, page_size: 10 })).toMatchObject({ total: 0 });
    expect(h.userOrgs('u2')).toEqual([]);
    expect(h.userOrgs('u_owner')).toEqual([]);
    h.reload();
    expect(h.code({ op: 'get' })).toBe('not_found');
    expect(h.code({ op: 'get_member', user_id: 'u2' })).toBe('not_found');
    expect(h.code(create)).toBe('conflict');
    expect(h.w.reply(USER_ORGS_KIND, 'u2', { op: 'sso_policy' }).enforced_by).toBeNull();
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
      { numRuns: 60 },
    );
  });
});

describe('user-orgs index', () => {
  const sync = (org_id: string, role: OrgRole | null, seq: number, rev = seq, name = 'Org'): UserOrgSync => ({
    op: 'sync', org_id, role, joined_at_ms: T0, seq, rev, name, sso_enforced: false, sso_exempt: false,
  });
  it('applies syncs by seq (membership) and rev (name, policy): repeated and late syncs change nothing', () => {
    let state = loadUserOrgs('u', []);
    const ctx = fixedContext(T0);
    const step = (message: Parameters<typeof stepUserOrgs>[1]) => stepUserOrgs(state, message, ctx);
    expect(step(sync('o1', 'member', 2)).reply).toEqual({ applied: true });
    expect(step(sync('o1', null, 1)).reply).toEqual({ applied: false });
    expect(step(sync('o1', 'member', 2)).reply).toEqual({ applied: false });
    // A newer summary alone renames without touching the membership.
    expect(step(sync('o1', null, 1, 5, 'Renamed')).reply).toEqual({ applied: true });
    step(sync('o2', 'owner', 1));
    expect(step({ op: 'list' }).reply).toMatchObject({ memberships: [{ org_id: 'o1', org_name: 'Renamed', role: 'member' }, { org_id: 'o2', role: 'owner' }] });
    const removed = step(sync('o1', null, 3, 6));
    state = loadUserOrgs('u', removed.writes!.map((w) => [w.subkey, w.value] as [string, unknown]).concat([['o2', state.orgs.get('o2')]]));
    expect(step({ op: 'list' }).reply).toMatchObject({ memberships: [{ org_id: 'o2' }] });
  });

  it('answers a sync sent as a flow-call to the organization that waits for it, applied or not', () => {
    const state = loadUserOrgs('u', []);
    const reply_to = { kind: ORGANIZATION_KIND, key: 'o1', flow_id: 'f1', step: 'ack' };
    for (const applied of [true, false]) {
      expect(stepUserOrgs(state, { op: 'flow-call', call: sync('o1', 'member', 1), reply_to }, fixedContext(T0)).sends).toEqual([
        { kind: ORGANIZATION_KIND, key: 'o1', message: { op: 'flow-answer', flow_id: 'f1', step: 'ack', ok: true, reply: { applied } } },
      ]);
    }
  });

  it('a slot at USER_ORGS_MAX is refused: ok false, 409 conflict', () => {
    const state = loadUserOrgs('u', []);
    const ctx = fixedContext(T0);
    for (let i = 0; i < USER_ORGS_MAX; i++) stepUserOrgs(state, { op: 'reserve', org_id: `o${i}`, flow_id: `f${i}`, capped: true }, ctx);
    const reply_to = { kind: ORGANIZATION_KIND, key: 'ox', flow_id: 'fx', step: 'reserve' };
    const refused = stepUserOrgs(state, { op: 'flow-call', call: { op: 'reserve', org_id: 'ox', flow_id: 'fx', capped: true }, reply_to }, ctx);
    expect(refused.writes ?? []).toEqual([]);
    expect(refused.sends?.[0].message).toMatchObject({ op: 'flow-answer', flow_id: 'fx', step: 'reserve', ok: false, error: { code: 'conflict' } });
    // Uncapped (an admin's create) goes beyond.
    expect(stepUserOrgs(state, { op: 'flow-call', call: { op: 'reserve', org_id: 'ox', flow_id: 'fx', capped: false }, reply_to }, ctx).sends?.[0].message).toMatchObject({ ok: true, reply: { reserved: true } });
  });

  it('the SSO policy is the first enforcing, non-exempt membership', () => {
    const state = loadUserOrgs('u', []);
    const ctx = fixedContext(T0);
    stepUserOrgs(state, { ...sync('o1', 'member', 1), sso_enforced: true, sso_exempt: true }, ctx);
    expect(stepUserOrgs(state, { op: 'sso_policy' }, ctx).reply).toEqual({ enforced_by: null });
    stepUserOrgs(state, { ...sync('o2', 'member', 1, 1, 'Strict'), sso_enforced: true }, ctx);
    expect(stepUserOrgs(state, { op: 'sso_policy' }, ctx).reply).toEqual({ enforced_by: { org_id: 'o2', name: 'Strict' } });
    stepUserOrgs(state, { ...sync('o2', null, 2, 2, 'Strict'), sso_enforced: true }, ctx);
    expect(stepUserOrgs(state, { op: 'sso_policy' }, ctx).reply).toEqual({ enforced_by: null });
  });
});

describe('invitation index', () => {
  const entry = { invitation_id: 'i1', org_id: 'o1', role: 'member' as const, invited_by: 'u', created_at_ms: T0, expires_at_ms: T0 + DAY };
  const reserve = (e = entry, replaces: { invitation_id: string; expires_at_ms: number }[] = []) => ({ op: 'reserve' as const, entry: e, replaces });
  it('adds, lists, removes with a tombstone, hides expired, prunes after retention', () => {
    const state = loadInvitationIndex('e', []);
    expect(stepInvitationIndex(state, reserve(), fixedContext(T0)).reply).toEqual({ added: true });
    expect(stepInvitationIndex(state, { op: 'list' }, fixedContext(T0)).reply).toEqual({ invitations: [entry] });
    expect(stepInvitationIndex(state, { op: 'list' }, fixedContext(T0 + DAY)).reply).toEqual({ invitations: [] });
    expect(stepInvitationIndex(state, { op: 'get', invitation_id: 'i1' }, fixedContext(T0 + DAY)).reply).toEqual({ invitation: entry });
    stepInvitationIndex(state, { op: 'remove', invitation_id: 'i1', expires_at_ms: entry.expires_at_ms }, fixedContext(T0));
    expect(stepInvitationIndex(state, reserve(), fixedContext(T0)).reply).toEqual({ added: false });
    expect(stepInvitationIndex(state, { op: 'get', invitation_id: 'i1' }, fixedContext(T0)).reply).toEqual({ invitation: null });
    const pruned = stepInvitationIndex(state, { op: 'list' }, fixedContext(T0 + DAY + INVITATION_RETENTION_MS));
    expect(pruned.writes).toEqual([{ subkey: 'i1', value: undefined }]);
    expect(state.entries.size).toBe(0);
  });

  it('a reserve replaces the same organization\'s invitation in its turn, and a late reserve of a removed one adds nothing', () => {
    const state = loadInvitationIndex('e', []);
    stepInvitationIndex(state, reserve(), fixedContext(T0));
    const second = { ...entry, invitation_id: 'i2' };
    expect(stepInvitationIndex(state, reserve(second, [{ invitation_id: 'i1', expires_at_ms: entry.expires_at_ms }]), fixedContext(T0)).reply).toEqual({ added: true });
    expect(stepInvitationIndex(state, { op: 'list' }, fixedContext(T0)).reply).toEqual({ invitations: [second] });
    // Removed (replaced) before its own reserve arrived: answered ok, never listed.
    stepInvitationIndex(state, { op: 'remove', invitation_id: 'i3', expires_at_ms: T0 + DAY }, fixedContext(T0));
    stepInvitationIndex(state, reserve({ ...entry, invitation_id: 'i3' }), fixedContext(T0));
    expect(stepInvitationIndex(state, { op: 'list' }, fixedContext(T0)).reply).toEqual({ invitations: [second] });
  });

  it('at INVITATIONS_PER_EMAIL_MAX a reserve is refused (ok false) and its removals stand', () => {
    const state = loadInvitationIndex('e', []);
    const ctx = fixedContext(T0);
    for (let i = 0; i < INVITATIONS_PER_EMAIL_MAX; i++) expect(stepInvitationIndex(state, reserve({ ...entry, invitation_id: `x${i}`, org_id: `other${i}` }), ctx).reply).toEqual({ added: true });
    expect(stepInvitationIndex(state, reserve(), ctx).reply).toBeInstanceOf(FlowRefusal);
    // o1 re-invites the address (replacing i1, which the index never held): refused, the tombstone of i1 is written all the same.
    const reply_to = { kind: ORGANIZATION_KIND, key: 'o1', flow_id: 'f', step: 'index' };
    const refused = stepInvitationIndex(state, { op: 'flow-call', call: reserve({ ...entry, invitation_id: 'i2' }, [{ invitation_id: 'i1', expires_at_ms: entry.expires_at_ms }]), reply_to }, ctx);
    expect(refused.sends).toEqual([{ kind: ORGANIZATION_KIND, key: 'o1', message: { op: 'flow-answer', flow_id: 'f', step: 'index', ok: false, error: { code: 'conflict', message: expect.any(String) } } }]);
    expect(refused.writes).toEqual([{ subkey: 'i1', value: expect.objectContaining({ removed: true }) }]);
  });
});

describe('org directory', () => {
  it('claims unique slugs (answering the flow), lists by revision and frees the slug on delete', () => {
    const state = loadOrgDirectory('global', []);
    const ctx = fixedContext(T0);
    const claimed = stepOrgDirectory(state, { op: 'claim', org_id: 'org_1', slug: 'Acme' }, ctx);
    expect(claimed.reply).toEqual({ claimed: true, slug: 'acme' });
    expect(codeOf(() => stepOrgDirectory(state, { op: 'claim', org_id: 'org_2', slug: 'acme' }, ctx))).toBe('org_slug_taken');
    const reply_to = { kind: ORGANIZATION_KIND, key: 'org_2', flow_id: 'f2', step: 'claim' };
    expect(stepOrgDirectory(state, { op: 'flow-call', call: { op: 'claim', org_id: 'org_2', slug: 'acme' }, reply_to }, ctx).sends).toEqual([
      { kind: ORGANIZATION_KIND, key: 'org_2', message: { op: 'flow-answer', flow_id: 'f2', step: 'claim', ok: false, error: { code: 'org_slug_taken', message: expect.any(String) } } },
    ]);
    const org = { org_id: 'org_1', name: 'Acme', slug: 'acme', created_by: 'u', created_at_ms: T0, updated_at_ms: T0, logo_url: null, metadata: {}, sso_enforced: false, sso_exempt_user_ids: [], member_count: 1 };
    stepOrgDirectory(state, { op: 'sync', org_id: 'org_1', rev: 2, slug: 'acme', org: { ...org, name: 'Acme 2' } }, ctx);
    expect(stepOrgDirectory(state, { op: 'sync', org_id: 'org_1', rev: 1, slug: 'acme', org }, ctx).reply).toEqual({ applied: false });
    expect(stepOrgDirectory(state, { op: 'list', q: 'acme 2', page: 1, page_size: 10 }, ctx).reply).toMatchObject({ total: 1 });
    expect(stepOrgDirectory(state, { op: 'list', sso_enforced: true, page: 1, page_size: 10 }, ctx).reply).toMatchObject({ total: 0 });
    stepOrgDirectory(state, { op: 'sync', org_id: 'org_1', rev: 3, slug: 'acme', org: null }, ctx);
    expect(stepOrgDirectory(state, { op: 'list', page: 1, page_size: 10 }, ctx).reply).toMatchObject({ total: 0 });
    expect(stepOrgDirectory(state, { op: 'claim', org_id: 'org_2', slug: 'acme' }, ctx).reply).toEqual({ claimed: true, slug: 'acme' });
  });
});
