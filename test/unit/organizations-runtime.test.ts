import { afterEach, describe, expect, it } from 'vitest';
import { organizationActors } from '../../actors/organizations/actor.js';
import { INVITATION_INDEX_KIND, INVITATION_RETENTION_MS, ORGANIZATION_KIND, USER_ORGS_KIND } from '../../actors/organizations/messages.js';
import { accountsStubActors } from '../helpers/accounts-stub.js';
import { eventually, settle, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

/**
 * The organization actors in the in-process runtime on real LMDB: the outbox
 * keeps user-orgs and the invitation index in step, and the invitation purge
 * alarm survives a restart. Timer intervals are stretched so that advancing
 * the manual clock by weeks stays cheap.
 */
const DAY = 24 * 3600 * 1000;
const limits = { passivate_sweep_interval_ms: 10 * DAY, alarm_window_ms: 40 * DAY };
let rt: TestRuntime | undefined;

afterEach(async () => {
  await rt?.destroy();
  rt = undefined;
});

describe('organization actors in the runtime', () => {
  it('outbox syncs reach user-orgs and the index; the purge alarm fires after a restart', async () => {
    // The invitation flow asks the accounts directory (a stand-in here) for the invited address.
    rt = await startTestRuntime([...organizationActors, ...accountsStubActors], { limits });
    const ask = <T = any>(kind: string, key: string, message: unknown) => rt!.runtime.ask<T>(kind, key, message);
    await ask(ORGANIZATION_KIND, 'org_1', { op: 'create', org_id: 'org_1', name: 'Acme', slug: 'acme', created_by: 'u1' });
    await ask(ORGANIZATION_KIND, 'org_1', { op: 'add_member', user_id: 'u2', role: 'member' });
    await ask(ORGANIZATION_KIND, 'org_1', {
      op: 'invite', invitation_id: 'inv_1', email: 'x@example.com', role: 'member', token_hash: 'h', ttl_ms: DAY, by: { user_id: 'u1', platform_admin: false },
    });
    // Only the outbox delivers these (nobody applied them directly).
    await eventually(async () => {
      expect((await ask(USER_ORGS_KIND, 'u2', { op: 'list' })).memberships).toEqual([{ org_id: 'org_1', org_name: 'Acme', role: 'member', joined_at_ms: expect.any(Number) }]);
      expect((await ask(INVITATION_INDEX_KIND, 'x@example.com', { op: 'list' })).invitations).toHaveLength(1);
    });

    rt = await rt.restart();
    expect((await ask(ORGANIZATION_KIND, 'org_1', { op: 'get' })).member_count).toBe(2);
    rt.clock.advance(DAY + INVITATION_RETENTION_MS + 1000);
    await settle(20);
    await eventually(async () => {
      // The purge removed the expired invitation, so it is now unknown rather than expired.
      await expect(
        ask(ORGANIZATION_KIND, 'org_1', { op: 'accept_invitation', invitation_id: 'inv_1', user_id: 'u3' }),
      ).rejects.toMatchObject({ code: 'invitation_not_found' });
      expect((await ask(INVITATION_INDEX_KIND, 'x@example.com', { op: 'get', invitation_id: 'inv_1' })).invitation).toBeNull();
    });
  });
});
