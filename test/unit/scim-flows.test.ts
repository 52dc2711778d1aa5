import { describe, expect, it } from 'vitest';
import { allActors } from '../../areas.js';
import { World, WORLD_T0 } from '../helpers/flow-world.js';
import { DIRECTORY_KEY, DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import {
  SCIM_DIRECTORY_KIND,
  SCIM_PENDING_LEASE_MS,
  type ScimAttributes,
  type ScimDirectoryMessage,
  type ScimFlowReply,
  type ScimUserRecord,
} from '../../actors/scim/messages.js';
import type { ScimDirectoryState } from '../../actors/scim/state.js';
import type { FlowAnswer } from '../../actors/flow-call.js';

/**
 * The SCIM flows (actors/scim/flows.ts), driven through the real step
 * functions of every kind they touch (test/helpers/flow-world.ts).
 */

const ORG = 'org_1';
const OWNER = 'usr_owner';

function world(): World {
  const w = new World();
  const created = w.ask(ORGANIZATION_KIND, ORG, { op: 'create', org_id: ORG, name: 'Acme', slug: 'acme', created_by: OWNER });
  expect(created).toHaveProperty('reply');
  w.delivered.length = 0;
  return w;
}

function attributes(userName: string): ScimAttributes {
  return { userName, externalId: null, displayName: null, name: null, emails: [] };
}

let counter = 0;
function provision(userName: string, fields: { active?: boolean; email?: string; username?: string; scim_id?: string; user_id?: string } = {}): ScimDirectoryMessage {
  counter++;
  return {
    op: 'user-provision',
    scim_id: fields.scim_id ?? `scim_${counter}`,
    user_id: fields.user_id ?? `usr_${counter}`,
    attributes: attributes(userName),
    active: fields.active ?? true,
    platform: { email: fields.email ?? userName, username: fields.username ?? `u${counter}`, display_name: userName, password_hash: '!unusable' },
    // The verified-domains rule has its own tests (test/unit/scim-hardening.test.ts).
    verified_domains_only: false,
  };
}

function directory(w: World): ScimDirectoryState {
  return w.state<ScimDirectoryState>(SCIM_DIRECTORY_KIND, ORG);
}

describe('SCIM provisioning flow', () => {
  it('reserves, looks up, claims, creates, adds the member and activates: one ask, answered at the end', () => {
    const w = world();
    const outcome = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('ada@acme.example', { user_id: 'usr_ada' }));
    expect(outcome).toHaveProperty('reply');
    const { user, revoked_user_ids } = (outcome as { reply: ScimFlowReply }).reply;
    expect(user).toMatchObject({ userName: 'ada@acme.example', user_id: 'usr_ada', active: true, pending_until_ms: null });
    expect(revoked_user_ids).toEqual([]);
    expect(w.calls()).toEqual(['user-directory:lookup', 'user-directory:claim', 'user:create', 'organization:add_member']);
    expect(directory(w).flows.size).toBe(0);
    // The other actors did their part.
    expect(w.ask(USER_KIND, 'usr_ada', { op: 'get' })).toMatchObject({ reply: { email: 'ada@acme.example', banned: false } });
    expect(w.ask(ORGANIZATION_KIND, ORG, { op: 'get_member', user_id: 'usr_ada' })).toMatchObject({ reply: { role: 'member' } });
    expect(w.ask(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'lookup', login: 'ada@acme.example' })).toEqual({ reply: { user_id: 'usr_ada' } });
  });

  it('an inactive user is banned (and its summary synced) before the record is activated', () => {
    const w = world();
    const outcome = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('kim@acme.example', { user_id: 'usr_kim', active: false }));
    expect((outcome as { reply: ScimFlowReply }).reply).toMatchObject({ user: { active: false }, revoked_user_ids: ['usr_kim'] });
    expect(w.calls()).toEqual(['user-directory:lookup', 'user-directory:claim', 'user:create', 'organization:add_member', 'user:ban', 'user-directory:sync']);
    expect(w.ask(USER_KIND, 'usr_kim', { op: 'get' })).toMatchObject({ reply: { banned: true } });
  });

  it('an e-mail owned by another account: uniqueness, and the reservation is compensated (the userName is free again)', () => {
    const w = world();
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('first@acme.example', { email: 'shared@acme.example' }))).toHaveProperty('reply');
    const second = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('second@acme.example', { email: 'shared@acme.example', scim_id: 'scim_second' }));
    expect(second).toEqual({ error: { code: 'scim_uniqueness', message: 'A platform account with the e-mail shared@acme.example already exists.' } });
    expect(directory(w).users.has('scim_second')).toBe(false);
    expect(directory(w).byUserName.has('second@acme.example')).toBe(false);
    expect(directory(w).flows.size).toBe(0);
    // The compensation freed the name: the same userName can be provisioned now.
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('second@acme.example'))).toHaveProperty('reply');
  });

  it('a claim refused (the username is taken) is uniqueness, with the reservation compensated', () => {
    const w = world();
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('one@acme.example', { username: 'taken' }))).toHaveProperty('reply');
    const clash = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('two@acme.example', { username: 'taken', scim_id: 'scim_two' }));
    expect(clash).toMatchObject({ error: { code: 'scim_uniqueness' } });
    expect(directory(w).users.has('scim_two')).toBe(false);
  });

  it('the user actor refusing the create is a terminal failure: the reservation is compensated and the error answered', () => {
    const w = world();
    // A deleted platform user id cannot be created again.
    w.ask(USER_KIND, 'usr_gone', { op: 'create', user: { id: 'usr_gone', email: 'old@x.example', username: 'old', display_name: 'Old', role: 'user', password_hash: 'x' } });
    w.ask(USER_KIND, 'usr_gone', { op: 'admin-delete' });
    const failed = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('late@acme.example', { user_id: 'usr_gone', scim_id: 'scim_late' }));
    expect(failed).toMatchObject({ error: { code: 'conflict' } });
    expect(directory(w).users.has('scim_late')).toBe(false);
  });

  it('after the platform user exists, a failure keeps the pending record: a retry after the lease resumes with the same ids', () => {
    const w = world();
    w.ask(ORGANIZATION_KIND, ORG, { op: 'delete' });
    const failed = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('bo@acme.example', { user_id: 'usr_bo', scim_id: 'scim_bo' }));
    expect(failed).toMatchObject({ error: { code: 'not_found' } });
    // No compensation past the point of no return: the record is pending, the account exists.
    expect(directory(w).users.get('scim_bo')!.pending_until_ms).not.toBeNull();
    expect(w.ask(USER_KIND, 'usr_bo', { op: 'get' })).toHaveProperty('reply');
    // Within the lease the name is held.
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('bo@acme.example'))).toMatchObject({ error: { code: 'scim_uniqueness' } });

  });

  it('a create stalled past its lease is resumed by a retry with the same ids; the stalled flow is replaced', () => {
    const v = world();
    v.holding.add(ORGANIZATION_KIND);
    const first = v.ask(SCIM_DIRECTORY_KIND, ORG, provision('cy@acme.example', { user_id: 'usr_cy', scim_id: 'scim_cy' }));
    expect(first).toEqual({ error: { code: 'flow_interrupted', message: 'not answered' } }); // the organization is down: the ask times out
    expect(directory(v).flows.size).toBe(1);
    v.now += SCIM_PENDING_LEASE_MS + 1;
    const retried = v.ask(SCIM_DIRECTORY_KIND, ORG, provision('cy@acme.example', { user_id: 'usr_other', scim_id: 'scim_other' }));
    expect(retried).toEqual({ error: { code: 'flow_interrupted', message: 'not answered' } });
    v.holding.clear();
    v.drain();
    const user = directory(v).users.get('scim_cy') as ScimUserRecord;
    expect(user).toMatchObject({ id: 'scim_cy', user_id: 'usr_cy', pending_until_ms: null });
    expect(directory(v).users.has('scim_other')).toBe(false);
    // The resumed flow found the e-mail already its own: no second claim.
    expect(v.calls().filter((call) => call === 'user-directory:claim')).toHaveLength(1);
    expect(directory(v).flows.size).toBe(0);
  });

  it('survives a reload of the directory mid-flow (the flow is a record)', () => {
    const w = world();
    w.holding.add(USER_KIND);
    const message = provision('dee@acme.example', { user_id: 'usr_dee', scim_id: 'scim_dee' });
    const started = w.turn(SCIM_DIRECTORY_KIND, ORG, message, 'req-x');
    expect(started.defer).toBe(true);
    const flowWrite = started.writes!.find((write) => write.subkey.startsWith('f:'))!;
    const userWrite = started.writes!.find((write) => write.subkey.startsWith('u:'))!;
    const definition = allActors.find((d) => d.kind === SCIM_DIRECTORY_KIND)!;
    if (definition.storage !== 'records') throw new Error('scim-directory stores records');
    const reloaded = definition.load(ORG, [[userWrite.subkey, userWrite.value], [flowWrite.subkey, flowWrite.value]]) as ScimDirectoryState;
    expect([...reloaded.flows.values()][0]).toMatchObject({ kind: 'provision', step: 'lookup', request_id: 'req-x', compensations: ['abort-reservation'] });
  });
});

describe('SCIM change and deprovisioning flows', () => {
  function provisioned(w: World, userName: string, user_id: string, scim_id: string): void {
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision(userName, { user_id, scim_id }))).toHaveProperty('reply');
    w.delivered.length = 0;
  }

  it('a deactivation bans the platform user; a rename patches it; nothing remote when nothing changes outside', () => {
    const w = world();
    provisioned(w, 'eve@acme.example', 'usr_eve', 'scim_eve');
    const renamed = w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'scim_eve', change: { displayName: 'Eve E.' } });
    expect((renamed as { reply: ScimFlowReply }).reply).toMatchObject({ user: { displayName: 'Eve E.' }, revoked_user_ids: [] });
    expect(w.calls()).toEqual(['user:admin-patch', 'user-directory:sync']);
    expect(w.ask(USER_KIND, 'usr_eve', { op: 'get' })).toMatchObject({ reply: { display_name: 'Eve E.' } });

    w.delivered.length = 0;
    const off = w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'scim_eve', change: { active: false } });
    expect((off as { reply: ScimFlowReply }).reply).toMatchObject({ user: { active: false }, revoked_user_ids: ['usr_eve'] });
    expect(w.calls()).toEqual(['user:ban', 'user-directory:sync']);

    w.delivered.length = 0;
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'scim_eve', change: {} })).toHaveProperty('reply');
    expect(w.calls()).toEqual([]);
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'scim_eve', change: { active: true } })).toMatchObject({ error: { code: 'scim_mutability' } });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'scim_eve', change: {}, userName: 'other@acme.example' })).toMatchObject({ error: { code: 'scim_mutability' } });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'nope', change: {} })).toMatchObject({ error: { code: 'not_found' } });
  });

  it('a platform user deleted meanwhile is skipped by a change', () => {
    const w = world();
    provisioned(w, 'fay@acme.example', 'usr_fay', 'scim_fay');
    w.ask(USER_KIND, 'usr_fay', { op: 'admin-delete' });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-change', scim_id: 'scim_fay', change: { active: false, displayName: 'Fay' } })).toHaveProperty('reply');
  });

  it('deprovisioning removes the member, deletes the platform user (synced) and the record; a second one is not_found', () => {
    const w = world();
    provisioned(w, 'gus@acme.example', 'usr_gus', 'scim_gus');
    const gone = w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-deprovision', scim_id: 'scim_gus' });
    expect((gone as { reply: ScimFlowReply }).reply).toMatchObject({ user: { id: 'scim_gus' }, revoked_user_ids: ['usr_gus'] });
    expect(w.calls()).toEqual(['organization:remove_member', 'user:admin-delete', 'user-directory:sync']);
    expect(w.ask(ORGANIZATION_KIND, ORG, { op: 'get_member', user_id: 'usr_gus' })).toMatchObject({ error: { code: 'not_found' } });
    expect(w.ask(USER_KIND, 'usr_gus', { op: 'get' })).toMatchObject({ error: { code: 'not_found' } });
    expect(directory(w).users.has('scim_gus')).toBe(false);
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'user-deprovision', scim_id: 'scim_gus' })).toMatchObject({ error: { code: 'not_found' } });
  });
});

describe('SCIM token management flow', () => {
  const create = (by: { user_id: string; platform_admin: boolean }, token_id = 'tok1'): ScimDirectoryMessage => ({
    op: 'token-manage',
    by,
    create: { token_id, name: 'Okta', secret_hash: 'h', expires_at_ms: WORLD_T0 + 86_400_000, minted_by: { kind: 'session', session_id: 'ses_1' } },
  });

  it('the organization answers the role: owner and platform admin may, a member is forbidden, a stranger and an unknown org not_found', () => {
    const w = world();
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, create({ user_id: OWNER, platform_admin: false }))).toMatchObject({ reply: { id: 'tok1', created_by: OWNER } });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, create({ user_id: 'usr_admin', platform_admin: true }, 'tok2'))).toMatchObject({ reply: { id: 'tok2' } });
    w.ask(ORGANIZATION_KIND, ORG, { op: 'add_member', user_id: 'usr_m', role: 'member' });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, create({ user_id: 'usr_m', platform_admin: false }, 'tok3'))).toMatchObject({ error: { code: 'forbidden' } });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, create({ user_id: 'usr_x', platform_admin: false }, 'tok4'))).toEqual({ error: { code: 'not_found', message: 'No such organization.' } });
    expect(w.ask(SCIM_DIRECTORY_KIND, 'org_none', create({ user_id: 'usr_admin', platform_admin: true }, 'tok5'))).toMatchObject({ error: { code: 'not_found' } });
    expect(directory(w).tokens.size).toBe(2);
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'token-manage', by: { user_id: OWNER, platform_admin: false }, revoke: { token_id: 'tok1' } })).toEqual({ reply: { revoked: true } });
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, { op: 'token-manage', by: { user_id: OWNER, platform_admin: false }, revoke: { token_id: 'tok1' } })).toMatchObject({ error: { code: 'not_found' } });
  });
});

describe('flow-call receivers (user, user-directory, organization)', () => {
  it('answer a refusal as ok:false without changing anything, and a success with the reply', () => {
    const w = world();
    const reply_to = { kind: SCIM_DIRECTORY_KIND, key: ORG, flow_id: 'f1', step: 'lookup' };
    const refused = w.turn(USER_KIND, 'usr_none', { op: 'flow-call', call: { op: 'ban', reason: 'r', banned_by: 'b' }, reply_to });
    expect(refused.sends).toEqual([{ kind: SCIM_DIRECTORY_KIND, key: ORG, message: { op: 'flow-answer', flow_id: 'f1', step: 'lookup', ok: false, error: { code: 'not_found', message: 'No such user.' } } satisfies FlowAnswer }]);
    const member = w.turn(ORGANIZATION_KIND, ORG, { op: 'flow-call', call: { op: 'get_member', user_id: OWNER }, reply_to });
    expect(member.sends!.at(-1)!.message).toMatchObject({ op: 'flow-answer', ok: true, reply: { role: 'owner' } });
    const lookup = w.turn(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'flow-call', call: { op: 'lookup', login: 'nobody@x' }, reply_to });
    expect(lookup.sends!.at(-1)!.message).toMatchObject({ op: 'flow-answer', ok: true, reply: { user_id: null } });
  });

  it('an answer to a finished flow, or to another step, is ignored', () => {
    const w = world();
    const before = directory(w);
    const late = w.turn(SCIM_DIRECTORY_KIND, ORG, { op: 'flow-answer', flow_id: 'sf_none', step: 'lookup', ok: true, reply: null } satisfies FlowAnswer);
    expect(late.state).toBe(before);
    expect(late.sends ?? []).toEqual([]);
    expect(late.replies ?? []).toEqual([]);
  });
});
