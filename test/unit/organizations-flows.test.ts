import { describe, expect, it } from 'vitest';
import { organizationActors } from '../../actors/organizations/actor.js';
import { retrySlug, stepOrganizationFlows, type OrgFlow } from '../../actors/organizations/flows.js';
import {
  DERIVED_SLUG_RETRIES,
  INVITATION_INDEX_KIND,
  INVITATIONS_PER_EMAIL_MAX,
  ORG_DIRECTORY_KEY,
  ORG_DIRECTORY_KIND,
  ORGANIZATION_KIND,
  USER_ORGS_KIND,
  USER_ORGS_MAX,
  type OrganizationMessage,
} from '../../actors/organizations/messages.js';
import { loadOrganization, type OrganizationState } from '../../actors/organizations/state.js';
import { slotsTaken, type UserOrgsState } from '../../actors/organizations/user-orgs-state.js';
import { DIRECTORY_KEY, DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { accountsStubActors } from '../helpers/accounts-stub.js';
import { actorWorld, callOf, type Delivery } from '../helpers/actor-world.js';
import { fixedContext } from '../helpers/step.js';

/**
 * The organizations flows (actors/organizations/flows.ts) step by step, in a
 * pure actor world: which messages each step sends (flow-calls,
 * actors/flow-call.ts), when the ask is answered (only once the indexes have
 * the change), the caps held in one turn, and the compensations. The accounts
 * actors the flows ask (user `get`, directory `lookup`) are stand-ins
 * (test/helpers/accounts-stub.ts).
 */
const T0 = 1_700_000_000_000;
const DAY = 24 * 3600 * 1000;
const by = (user_id: string) => ({ user_id, platform_admin: false });

const createOf = (org_id: string, extra: Partial<Extract<OrganizationMessage, { op: 'create' }>> = {}): OrganizationMessage => ({
  op: 'create', org_id, name: 'Acme Corp', created_by: 'u1', capped: true, ...extra,
});
const world = () => actorWorld([...organizationActors, ...accountsStubActors], T0);
const isOp = (kind: string, op: string) => (d: Delivery) => d.kind === kind && callOf(d).op === op;
const replyTo = (org_id: string, step: string) => ({ kind: ORGANIZATION_KIND, key: org_id, flow_id: expect.any(String), step });
const slots = (w: ReturnType<typeof world>, user_id: string) => slotsTaken(w.state<UserOrgsState>(USER_ORGS_KIND, user_id));

describe('create flow', () => {
  it('holds the slot, claims the slug, creates, and answers only when user-orgs and the directory have it', () => {
    const w = world();
    const ask = w.send(ORGANIZATION_KIND, 'org_1', createOf('org_1', { slug: 'Acme' }));
    expect(ask.outcome()).toEqual({ deferred: true });
    expect(w.queue).toEqual([
      { kind: USER_ORGS_KIND, key: 'u1', message: { op: 'flow-call', call: { op: 'reserve', org_id: 'org_1', flow_id: expect.any(String), capped: true }, reply_to: replyTo('org_1', 'reserve') } },
    ]);
    w.deliverNext(); // user-orgs holds the slot
    expect(slots(w, 'u1')).toBe(1);
    expect(w.queue).toEqual([{ kind: ORGANIZATION_KIND, key: 'org_1', message: { op: 'flow-answer', flow_id: expect.any(String), step: 'reserve', ok: true, reply: { reserved: true } } }]);
    w.deliverNext(); // the answer -> claim
    expect(w.queue).toEqual([{ kind: ORG_DIRECTORY_KIND, key: ORG_DIRECTORY_KEY, message: { op: 'flow-call', call: { op: 'claim', org_id: 'org_1', slug: 'acme' }, reply_to: replyTo('org_1', 'claim') } }]);
    w.deliverNext(); // the directory claims
    w.deliverNext(); // the answer -> the organization exists, syncs out
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1').meta).toMatchObject({ slug: 'acme' });
    expect(w.queue.map((d) => [d.kind, callOf(d).op, d.message.reply_to?.step])).toEqual([[USER_ORGS_KIND, 'sync', 'ack'], [ORG_DIRECTORY_KIND, 'sync', 'ack']]);
    w.deliverNext();
    w.deliverNext();
    w.deliverNext(); // first ack
    expect(ask.outcome().deferred).toBe(true);
    w.deliverNext(); // second ack: the answer
    expect(ask.outcome()).toEqual({ reply: expect.objectContaining({ org_id: 'org_1', slug: 'acme', member_count: 1 }), deferred: false });
    expect(w.queue).toEqual([]);
    // Nothing of the flow is left behind, and the slot is the membership now.
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1').flows.size).toBe(0);
    expect(w.reply(USER_ORGS_KIND, 'u1', { op: 'list' }).memberships).toEqual([{ org_id: 'org_1', org_name: 'Acme Corp', role: 'owner', joined_at_ms: T0 }]);
    expect(slots(w, 'u1')).toBe(1);
  });

  it('a derived slug that is taken is retried with a random suffix', () => {
    const w = world();
    w.reply(ORGANIZATION_KIND, 'org_1', createOf('org_1'));
    const second = w.reply(ORGANIZATION_KIND, 'org_2', createOf('org_2', { created_by: 'u2' }));
    expect(second.slug).toMatch(/^acme-corp-[a-z0-9]+$/);
    expect(w.log.filter(isOp(ORG_DIRECTORY_KIND, 'claim')).map((d) => callOf(d).slug)).toEqual(['acme-corp', 'acme-corp', second.slug]);
  });

  it('compensation: a chosen slug that is taken gives the held slot back before answering org_slug_taken', () => {
    const w = world();
    w.reply(ORGANIZATION_KIND, 'org_1', createOf('org_1', { slug: 'acme' }));
    const ask = w.send(ORGANIZATION_KIND, 'org_2', createOf('org_2', { slug: 'ACME' }));
    w.deliverNext(); // reserve
    expect(slots(w, 'u1')).toBe(2);
    w.deliverNext(); // the answer -> claim
    w.deliverNext(); // claim refused
    w.deliverNext(); // ok: false (org_slug_taken) -> release, awaited
    expect(w.queue).toEqual([{ kind: USER_ORGS_KIND, key: 'u1', message: { op: 'flow-call', call: expect.objectContaining({ op: 'release', org_id: 'org_2' }), reply_to: replyTo('org_2', 'ack') } }]);
    expect(ask.outcome().deferred).toBe(true);
    w.drain();
    expect(ask.outcome()).toEqual({ code: 'org_slug_taken', deferred: false });
    expect(slots(w, 'u1')).toBe(1);
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_2').meta).toBeNull();
    expect(w.records(ORGANIZATION_KIND, 'org_2').size).toBe(0);
  });

  it('compensation: a derived slug still taken after every retry gives the slot back', () => {
    const w = world();
    const ask = w.send(ORGANIZATION_KIND, 'org_2', createOf('org_2'));
    w.deliverNext(); // reserve
    w.deliverNext(); // the answer -> claim
    // The directory refuses every slug tried (standing in for it).
    const tried: string[] = [];
    for (let i = 0; i <= DERIVED_SLUG_RETRIES; i++) {
      const claim = w.discard(isOp(ORG_DIRECTORY_KIND, 'claim'));
      tried.push(callOf(claim).slug);
      const { flow_id, step } = claim.message.reply_to;
      w.inject(ORGANIZATION_KIND, 'org_2', { op: 'flow-answer', flow_id, step, ok: false, error: { code: 'org_slug_taken', message: 'taken' } });
    }
    expect(tried[0]).toBe('acme-corp');
    expect(new Set(tried).size).toBe(1 + DERIVED_SLUG_RETRIES);
    for (const slug of tried.slice(1)) expect(slug).toMatch(/^acme-corp-[a-z0-9]+$/);
    expect(w.queue.map((d) => callOf(d).op)).toEqual(['release']);
    w.drain();
    expect(ask.outcome().code).toBe('org_slug_taken');
    expect(slots(w, 'u1')).toBe(0);
  });

  it('the cap: concurrent creations by one user at USER_ORGS_MAX - 1 take exactly the last slot', () => {
    const w = world();
    for (let i = 0; i < USER_ORGS_MAX - 1; i++) w.reply(ORGANIZATION_KIND, `org_${i}`, createOf(`org_${i}`, { slug: `s${i}` }));
    // Ten creations start before any of their steps is delivered.
    const asks = Array.from({ length: 10 }, (_, i) => w.send(ORGANIZATION_KIND, `new_${i}`, createOf(`new_${i}`, { slug: `new${i}` })));
    w.drain();
    const outcomes = asks.map((a) => a.outcome());
    expect(outcomes.filter((o) => o.reply)).toHaveLength(1);
    expect(outcomes.filter((o) => o.code === 'conflict')).toHaveLength(9);
    expect(w.reply(USER_ORGS_KIND, 'u1', { op: 'list' }).memberships).toHaveLength(USER_ORGS_MAX);
    // A refused creation left nothing: no organization, no slug.
    const refused = asks.findIndex((a) => a.outcome().code);
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, `new_${refused}`).meta).toBeNull();
    expect(w.ask(ORGANIZATION_KIND, 'again', createOf('again', { slug: `new${refused}`, created_by: 'u9' })).reply).toMatchObject({ slug: `new${refused}` });
  });

  it('an uncapped creation (an admin for an owner) holds a slot beyond the cap', () => {
    const w = world();
    for (let i = 0; i < USER_ORGS_MAX; i++) w.reply(ORGANIZATION_KIND, `org_${i}`, createOf(`org_${i}`, { slug: `s${i}` }));
    expect(w.code(ORGANIZATION_KIND, 'capped', createOf('capped', { slug: 'capped' }))).toBe('conflict');
    expect(w.reply(ORGANIZATION_KIND, 'admin', createOf('admin', { slug: 'admin', created_by: 'root', owner_user_id: 'u1', capped: false }))).toMatchObject({ created_by: 'root' });
  });

  it('a flow record survives a reload between steps, and the flow goes on', () => {
    const w = world();
    const ask = w.send(ORGANIZATION_KIND, 'org_1', createOf('org_1'));
    w.deliverNext();
    const flows = w.reload(ORGANIZATION_KIND, 'org_1') as OrganizationState;
    expect([...flows.flows.values()].map((f: OrgFlow) => f.kind)).toEqual(['create']);
    w.drain();
    expect(ask.outcome().reply).toMatchObject({ slug: 'acme-corp' });
  });
});

describe('invitation flow', () => {
  const setup = () => {
    const w = world();
    w.reply(ORGANIZATION_KIND, 'org_a', createOf('org_a', { slug: 'a' }));
    return w;
  };
  const inviteOf = (invitation_id: string, email = 'x@example.com', extra: Record<string, unknown> = {}): OrganizationMessage => ({
    op: 'invite', invitation_id, email, role: 'member', token_hash: `h-${invitation_id}`, ttl_ms: DAY, by: by('u1'), ...extra,
  } as OrganizationMessage);

  it('looks the address up, then the index holds the invitation in the turn that counts the address, and the reply waits for it', () => {
    const w = setup();
    const ask = w.send(ORGANIZATION_KIND, 'org_a', inviteOf('i1', ' X@Example.com '));
    expect(ask.outcome().deferred).toBe(true);
    expect(w.queue).toEqual([{ kind: DIRECTORY_KIND, key: DIRECTORY_KEY, message: { op: 'flow-call', call: { op: 'lookup', login: 'x@example.com' }, reply_to: replyTo('org_a', 'lookup') } }]);
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_a').invitations.size).toBe(0);
    w.deliverNext(); // the directory looks up
    w.deliverNext(); // the answer -> recorded, the index asked
    expect(w.queue).toEqual([{ kind: INVITATION_INDEX_KIND, key: 'x@example.com', message: { op: 'flow-call', call: expect.objectContaining({ op: 'reserve', replaces: [] }), reply_to: replyTo('org_a', 'index') } }]);
    w.drain();
    expect(ask.outcome().reply).toMatchObject({ org_name: 'Acme Corp', invitation: { invitation_id: 'i1', org_id: 'org_a' } });
    expect(w.reply(INVITATION_INDEX_KIND, 'x@example.com', { op: 'list' }).invitations).toHaveLength(1);
  });

  it('role checks happen in the organization turn; "already a member" on the directory\'s answer', () => {
    const w = setup();
    w.reply(ORGANIZATION_KIND, 'org_a', { op: 'add_member', user_id: 'm', role: 'member' });
    // Refused before anything is asked.
    expect(w.send(ORGANIZATION_KIND, 'org_a', inviteOf('i1', 'x@example.com', { by: by('m') })).outcome().code).toBe('forbidden');
    expect(w.send(ORGANIZATION_KIND, 'org_a', inviteOf('i1', 'x@example.com', { by: by('stranger') })).outcome().code).toBe('not_found');
    expect(w.queue).toEqual([]);
    // The address is the member's account: refused on the lookup's answer, nothing recorded or indexed.
    w.inject(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'put', login: 'x@example.com', user_id: 'm' });
    expect(w.code(ORGANIZATION_KIND, 'org_a', inviteOf('i1', 'x@example.com'))).toBe('conflict');
    expect(w.log.some(isOp(INVITATION_INDEX_KIND, 'reserve'))).toBe(false);
    const org = w.state<OrganizationState>(ORGANIZATION_KIND, 'org_a');
    expect([org.invitations.size, org.flows.size]).toEqual([0, 0]);
    // Another account's address is invited.
    w.inject(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'put', login: 'y@example.com', user_id: 'not-a-member' });
    expect(w.ask(ORGANIZATION_KIND, 'org_a', inviteOf('i2', 'y@example.com')).reply).toMatchObject({ invitation: { invitation_id: 'i2' } });
  });

  it('the per-address cap: concurrent invitations from other organizations at the last place, exactly one is held', () => {
    const w = world();
    const orgs = INVITATIONS_PER_EMAIL_MAX + 9;
    for (let i = 0; i < orgs; i++) w.reply(ORGANIZATION_KIND, `org_${i}`, createOf(`org_${i}`, { slug: `s${i}`, capped: false }));
    for (let i = 0; i < INVITATIONS_PER_EMAIL_MAX - 1; i++) w.reply(ORGANIZATION_KIND, `org_${i}`, inviteOf(`i${i}`));
    const asks = Array.from({ length: 10 }, (_, k) => {
      const i = INVITATIONS_PER_EMAIL_MAX - 1 + k;
      return { org_id: `org_${i}`, ask: w.send(ORGANIZATION_KIND, `org_${i}`, inviteOf(`i${i}`)) };
    });
    w.drain();
    const held = asks.filter((a) => a.ask.outcome().reply);
    expect(held).toHaveLength(1);
    expect(asks.filter((a) => a.ask.outcome().code === 'conflict')).toHaveLength(9);
    expect(w.reply(INVITATION_INDEX_KIND, 'x@example.com', { op: 'list' }).invitations).toHaveLength(INVITATIONS_PER_EMAIL_MAX);
    // Compensation: a refused invitation is gone from its organization too.
    for (const { org_id, ask } of asks) {
      const pending = w.reply(ORGANIZATION_KIND, org_id, { op: 'list_invitations' }).invitations;
      expect(pending).toHaveLength(ask.outcome().reply ? 1 : 0);
    }
    // Re-inviting from an organization that has a pending invitation replaces it, even at the cap.
    expect(w.ask(ORGANIZATION_KIND, 'org_0', inviteOf('again')).reply).toBeDefined();
    expect(w.reply(INVITATION_INDEX_KIND, 'x@example.com', { op: 'list' }).invitations).toHaveLength(INVITATIONS_PER_EMAIL_MAX);
  });

  it('two re-invitations of one address in flight leave the organization and the index agreeing', () => {
    const w = setup();
    const first = w.send(ORGANIZATION_KIND, 'org_a', inviteOf('i1'));
    const second = w.send(ORGANIZATION_KIND, 'org_a', inviteOf('i2'));
    for (let i = 0; i < 4; i++) w.deliverNext(); // both lookups and their answers: both recorded
    // The second's reserve (which removes i1) reaches the index first.
    w.deliver((d) => d.kind === INVITATION_INDEX_KIND && callOf(d).entry.invitation_id === 'i2');
    w.drain();
    expect(first.outcome().reply).toBeDefined();
    expect(second.outcome().reply).toBeDefined();
    const inOrg = w.reply(ORGANIZATION_KIND, 'org_a', { op: 'list_invitations' }).invitations.map((i: { invitation_id: string }) => i.invitation_id);
    const inIndex = w.reply(INVITATION_INDEX_KIND, 'x@example.com', { op: 'list' }).invitations.map((i: { invitation_id: string }) => i.invitation_id);
    expect(inOrg).toEqual(['i2']);
    expect(inIndex).toEqual(['i2']);
  });
});

describe('accept flow', () => {
  const setup = () => {
    const w = world();
    w.reply(ORGANIZATION_KIND, 'org_a', createOf('org_a', { slug: 'a' }));
    w.reply(ORGANIZATION_KIND, 'org_a', { op: 'invite', invitation_id: 'inv', email: 'bob@example.com', role: 'admin', token_hash: 'h', ttl_ms: DAY, by: by('u1') });
    w.inject(USER_KIND, 'bob', { op: 'put', email: 'Bob@example.com', email_verified: true });
    return w;
  };
  const accept = { op: 'accept_invitation' as const, invitation_id: 'inv', user_id: 'bob' };

  it('asks the user actor for the proof, holds the new member\'s slot, then uses the invitation up and answers when the indexes have it', () => {
    const w = setup();
    const ask = w.send(ORGANIZATION_KIND, 'org_a', accept);
    expect(w.queue).toEqual([{ kind: USER_KIND, key: 'bob', message: { op: 'flow-call', call: { op: 'get' }, reply_to: replyTo('org_a', 'user') } }]);
    w.deliverNext(); // the user actor answers
    w.deliverNext(); // e-mail and verification checked -> the slot
    expect(w.queue).toEqual([{ kind: USER_ORGS_KIND, key: 'bob', message: { op: 'flow-call', call: expect.objectContaining({ op: 'reserve', capped: true }), reply_to: replyTo('org_a', 'reserve') } }]);
    w.drain();
    expect(ask.outcome().reply).toMatchObject({ member: { user_id: 'bob', role: 'admin' }, organization: { member_count: 2 } });
    expect(w.reply(USER_ORGS_KIND, 'bob', { op: 'list' }).memberships).toMatchObject([{ org_id: 'org_a', role: 'admin' }]);
    expect(w.reply(INVITATION_INDEX_KIND, 'bob@example.com', { op: 'list' }).invitations).toEqual([]);
    expect(w.reply(ORG_DIRECTORY_KIND, ORG_DIRECTORY_KEY, { op: 'list', page: 1, page_size: 5 }).organizations[0].member_count).toBe(2);
  });

  it('at USER_ORGS_MAX the invitee gets 409 conflict and the invitation stays', () => {
    const w = setup();
    for (let i = 0; i < USER_ORGS_MAX; i++) w.reply(ORGANIZATION_KIND, `org_${i}`, createOf(`org_${i}`, { slug: `s${i}`, created_by: 'bob' }));
    expect(w.code(ORGANIZATION_KIND, 'org_a', accept)).toBe('conflict');
    expect(w.reply(ORGANIZATION_KIND, 'org_a', { op: 'list_invitations' }).invitations).toHaveLength(1);
    expect(slots(w, 'bob')).toBe(USER_ORGS_MAX);
  });

  it('compensation: the invitation revoked while the slot was being held gives the slot back', () => {
    const w = setup();
    const ask = w.send(ORGANIZATION_KIND, 'org_a', accept);
    for (let i = 0; i < 3; i++) w.deliverNext(); // the user, its answer, the slot held
    expect(slots(w, 'bob')).toBe(1);
    w.reply(ORGANIZATION_KIND, 'org_a', { op: 'revoke_invitation', invitation_id: 'inv', by: by('u1') });
    w.drain();
    expect(ask.outcome()).toEqual({ code: 'invitation_not_found', deferred: false });
    expect(slots(w, 'bob')).toBe(0);
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_a').members.has('bob')).toBe(false);
  });

  it('compensation: an invitation that expired while the slot was being held answers invitation_expired', () => {
    const w = setup();
    const ask = w.send(ORGANIZATION_KIND, 'org_a', accept);
    for (let i = 0; i < 3; i++) w.deliverNext();
    expect(slots(w, 'bob')).toBe(1);
    w.advance(DAY);
    w.drain();
    expect(ask.outcome().code).toBe('invitation_expired');
    expect(slots(w, 'bob')).toBe(0);
  });

  it('an existing member keeps their role and takes no slot', () => {
    const w = setup();
    w.reply(ORGANIZATION_KIND, 'org_a', { op: 'add_member', user_id: 'bob', role: 'member' });
    const ask = w.send(ORGANIZATION_KIND, 'org_a', accept);
    w.drain();
    expect(ask.outcome().reply.member).toMatchObject({ role: 'member' });
    expect(w.log.some((d) => isOp(USER_ORGS_KIND, 'reserve')(d) && d.key === 'bob')).toBe(false);
  });

  it('the proof is the user actor\'s answer: another address is not found, unverified needs the token', () => {
    const w = setup();
    w.inject(USER_KIND, 'bob', { op: 'put', email: 'bob@elsewhere.com', email_verified: true });
    expect(w.code(ORGANIZATION_KIND, 'org_a', accept)).toBe('invitation_not_found');
    w.inject(USER_KIND, 'bob', { op: 'put', email: 'bob@example.com', email_verified: false });
    expect(w.code(ORGANIZATION_KIND, 'org_a', accept)).toBe('forbidden');
    expect(w.code(ORGANIZATION_KIND, 'org_a', { ...accept, token_hash: 'h' })).toBeUndefined();
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_a').flows.size).toBe(0);
  });

  it('an unknown invitation is refused before the user actor is asked', () => {
    const w = setup();
    expect(w.send(ORGANIZATION_KIND, 'org_a', { ...accept, invitation_id: 'nope' }).outcome().code).toBe('invitation_not_found');
    expect(w.send(ORGANIZATION_KIND, 'org_a', { op: 'decline_invitation', invitation_id: 'nope', user_id: 'bob' }).outcome().code).toBe('invitation_not_found');
    expect(w.queue).toEqual([]);
  });

  it('decline asks the user actor for the same proof, then drops the invitation and awaits the index', () => {
    const w = setup();
    const decline = { op: 'decline_invitation' as const, invitation_id: 'inv', user_id: 'bob' };
    const ask = w.send(ORGANIZATION_KIND, 'org_a', decline);
    expect(w.queue).toEqual([{ kind: USER_KIND, key: 'bob', message: { op: 'flow-call', call: { op: 'get' }, reply_to: replyTo('org_a', 'user') } }]);
    w.deliverNext();
    w.deliverNext(); // the answer: proof checked, the invitation dropped, the index's removal awaited
    expect(w.queue).toEqual([{ kind: INVITATION_INDEX_KIND, key: 'bob@example.com', message: { op: 'flow-call', call: expect.objectContaining({ op: 'remove', invitation_id: 'inv' }), reply_to: replyTo('org_a', 'ack') } }]);
    expect(ask.outcome().deferred).toBe(true);
    w.drain();
    expect(ask.outcome()).toEqual({ reply: { declined: true }, deferred: false });
    expect(w.reply(INVITATION_INDEX_KIND, 'bob@example.com', { op: 'list' }).invitations).toEqual([]);
  });
});

describe('the accounts reads are steps of the flows', () => {
  const admin = { user_id: 'root', platform_admin: true };

  it('an admin\'s create checks the owner\'s account first; an unknown one is 404 with nothing held', () => {
    const w = world();
    const ask = w.send(ORGANIZATION_KIND, 'org_1', createOf('org_1', { created_by: 'root', owner_user_id: 'u_gone', capped: false, check_owner: true }));
    expect(w.queue).toEqual([{ kind: USER_KIND, key: 'u_gone', message: { op: 'flow-call', call: { op: 'get' }, reply_to: replyTo('org_1', 'user') } }]);
    w.drain();
    expect(ask.outcome()).toEqual({ code: 'not_found', deferred: false });
    expect(w.log.some(isOp(USER_ORGS_KIND, 'reserve'))).toBe(false);
    expect(w.records(ORGANIZATION_KIND, 'org_1').size).toBe(0);
    w.inject(USER_KIND, 'u_here', { op: 'put', email: 'h@example.com', email_verified: true });
    expect(w.reply(ORGANIZATION_KIND, 'org_2', createOf('org_2', { created_by: 'root', owner_user_id: 'u_here', capped: false, check_owner: true }))).toMatchObject({ created_by: 'root', member_count: 1 });
    expect(w.reply(USER_ORGS_KIND, 'u_here', { op: 'list' }).memberships).toMatchObject([{ org_id: 'org_2', role: 'owner' }]);
  });

  it('an admin\'s add-member checks the organization, then the account', () => {
    const w = world();
    const add = (user_id: string): OrganizationMessage => ({ op: 'add_member', user_id, role: 'member', by: admin, check_user: true });
    // No organization: refused before the user actor is asked.
    expect(w.send(ORGANIZATION_KIND, 'org_x', add('u_any')).outcome().code).toBe('not_found');
    expect(w.queue).toEqual([]);
    w.reply(ORGANIZATION_KIND, 'org_a', createOf('org_a', { slug: 'a' }));
    expect(w.code(ORGANIZATION_KIND, 'org_a', add('u_gone'))).toBe('not_found');
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_a').members.has('u_gone')).toBe(false);
    w.inject(USER_KIND, 'u_here', { op: 'put', email: 'h@example.com', email_verified: false });
    expect(w.reply(ORGANIZATION_KIND, 'org_a', add('u_here'))).toMatchObject({ user_id: 'u_here', role: 'member' });
    // The single turn's rules still apply on the answer (the last owner).
    w.inject(USER_KIND, 'u1', { op: 'put', email: 'u1@example.com', email_verified: true });
    expect(w.code(ORGANIZATION_KIND, 'org_a', { ...add('u1') })).toBe('last_owner');
    expect(w.reply(USER_ORGS_KIND, 'u_here', { op: 'list' }).memberships).toMatchObject([{ org_id: 'org_a', role: 'member' }]);
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_a').flows.size).toBe(0);
  });

  it('another area\'s flow-call cannot start one of the organization\'s flows', () => {
    const state = loadOrganization('org_a', []);
    const reply_to = { kind: 'scim-directory', key: 'org_a', flow_id: 'f', step: 'add-member' };
    const call = (message: OrganizationMessage) => () => stepOrganizationFlows(state, { op: 'flow-call', call: message, reply_to }, fixedContext(T0, ORGANIZATION_KIND, 'org_a'));
    expect(call({ op: 'add_member', user_id: 'u', role: 'member', check_user: true })).toThrow(/flow cannot be called/);
    expect(call({ op: 'decline_invitation', invitation_id: 'i', user_id: 'u' })).toThrow(/flow cannot be called/);
  });
});

describe('single-turn changes await their index updates', () => {
  it('member add, role change, removal and leave answer after user-orgs and the directory acknowledge', () => {
    const w = world();
    w.reply(ORGANIZATION_KIND, 'org_a', createOf('org_a', { slug: 'a' }));
    const steps: OrganizationMessage[] = [
      { op: 'add_member', user_id: 'm', role: 'member', by: { user_id: 'root', platform_admin: true } },
      { op: 'set_role', user_id: 'm', role: 'admin', by: by('u1') },
      { op: 'remove_member', user_id: 'm', by: by('m') },
    ];
    for (const message of steps) {
      const ask = w.send(ORGANIZATION_KIND, 'org_a', message);
      expect(ask.outcome().deferred).toBe(true);
      expect(w.queue.map((d) => [d.kind, callOf(d).op, d.message.reply_to.step])).toEqual([[USER_ORGS_KIND, 'sync', 'ack'], [ORG_DIRECTORY_KIND, 'sync', 'ack']]);
      w.drain();
      expect(ask.outcome().reply).toBeDefined();
    }
    expect(w.reply(USER_ORGS_KIND, 'm', { op: 'list' }).memberships).toEqual([]);
  });

  it('a change that sends nothing answers at once; a refused one sends nothing', () => {
    const w = world();
    w.reply(ORGANIZATION_KIND, 'org_a', createOf('org_a', { slug: 'a' }));
    expect(w.send(ORGANIZATION_KIND, 'org_a', { op: 'add_member', user_id: 'u1', role: 'owner' }).outcome().deferred).toBe(false);
    expect(w.send(ORGANIZATION_KIND, 'org_a', { op: 'remove_member', user_id: 'u1', by: by('u1') }).outcome().code).toBe('last_owner');
    expect(w.queue).toEqual([]);
  });

  it('an answer nobody waits for changes nothing', () => {
    const state = loadOrganization('org_a', []);
    const result = stepOrganizationFlows(state, { op: 'flow-answer', flow_id: 'unknown', step: 'ack', ok: true, reply: null }, fixedContext(T0, ORGANIZATION_KIND, 'org_a'));
    expect(result.writes ?? []).toEqual([]);
    expect(result.replies ?? []).toEqual([]);
  });

  it('an answer to a step its flow is no longer at (late, repeated) is ignored', () => {
    const w = world();
    const ask = w.send(ORGANIZATION_KIND, 'org_1', createOf('org_1'));
    const reserve = w.discard(isOp(USER_ORGS_KIND, 'reserve'));
    const { flow_id } = reserve.message.reply_to;
    w.inject(ORGANIZATION_KIND, 'org_1', { op: 'flow-answer', flow_id, step: 'claim', ok: true, reply: { claimed: true, slug: 'acme-corp' } });
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1').meta).toBeNull();
    expect(w.queue).toEqual([]);
    w.inject(USER_ORGS_KIND, 'u1', reserve.message);
    w.drain();
    expect(ask.outcome().reply).toMatchObject({ slug: 'acme-corp' });
  });
});

describe('retrySlug', () => {
  it('keeps a slug valid: 40 characters of the name and a lower-case suffix', () => {
    const slug = retrySlug('A'.repeat(80), { ...fixedContext(T0), newId: () => 'AbC-_dEf123XYZ' });
    expect(slug).toBe(`${'a'.repeat(40)}-abcdef12`);
    expect(slug).toMatch(/^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/);
  });
});
