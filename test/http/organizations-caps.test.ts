import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INVITATIONS_PER_EMAIL_MAX, USER_ORGS_MAX } from '../../actors/organizations/messages.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/**
 * The caps of docs/api/organizations.md under concurrency, over the real
 * socket: USER_ORGS_MAX organizations per user and INVITATIONS_PER_EMAIL_MAX
 * pending invitations per address are counted and taken in one actor turn
 * (actors/organizations/flows.ts), so requests racing for the last place
 * cannot both get it. The documented values are used: each test fills up to
 * the last place, then fires ten requests at it at once.
 */
let t: TestNode;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
});
afterAll(async () => {
  await t?.destroy();
});

const BATCH = 10;

/** Runs `count` requests, BATCH at a time. */
async function inBatches(count: number, run: (i: number) => Promise<TestResponse>): Promise<TestResponse[]> {
  const out: TestResponse[] = [];
  for (let start = 0; start < count; start += BATCH) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(BATCH, count - start) }, (_, k) => run(start + k)))));
  }
  return out;
}

function expectOnlyStatus(responses: TestResponse[], status: number) {
  for (const res of responses) expect(res.status, res.text).toBe(status);
}

/** Exactly one of `responses` succeeded with `status`; the rest are the documented 409 `conflict`. */
function expectOneWinner(responses: TestResponse[], status: number) {
  const won = responses.filter((res) => res.status === status);
  const refused = responses.filter((res) => res.status === 409);
  expect(won, responses.map((res) => `${res.status} ${res.body?.code ?? ''}`).join(', ')).toHaveLength(1);
  expect(refused).toHaveLength(responses.length - 1);
  for (const res of refused) expect(res.body).toMatchObject({ statusCode: 409, code: 'conflict', message: expect.any(String) });
}

describe('organization caps under concurrent requests', () => {
  it(`${BATCH} concurrent creations by a user with ${USER_ORGS_MAX - 1} organizations: exactly one is created`, async () => {
    const owner = await t.newUser('cap');
    const create = (i: number, name = `Cap Org ${i}`) => t.request('POST', '/api/v1/orgs', { token: owner.token, body: { name } });
    expectOnlyStatus(await inBatches(USER_ORGS_MAX - 1, (i) => create(i)), 201);
    // The same derived slug for all ten, so the slug retry runs too while they race for the last slot.
    const racing = await Promise.all(Array.from({ length: BATCH }, () => create(0, 'Last Place')));
    expectOneWinner(racing, 201);
    const mine = await t.request('GET', `/api/v1/orgs?page_size=100`, { token: owner.token });
    expect(mine.body.pagination.total).toBe(USER_ORGS_MAX);
    // The refused ones left nothing behind: the slot count is exact, nothing else gets in.
    const after = await create(0, 'After');
    expect(after.status).toBe(409);
    expect(after.body.code).toBe('conflict');
  });

  it(`${BATCH} concurrent invitations to an address with ${INVITATIONS_PER_EMAIL_MAX - 1} pending: exactly one is created`, async () => {
    const invitee = await t.newUser('inv');
    const owners = [await t.newUser('own'), await t.newUser('own')];
    const orgs: { org_id: string; token: string }[] = [];
    const needed = INVITATIONS_PER_EMAIL_MAX - 1 + BATCH;
    const created = await inBatches(needed, (i) => {
      const owner = owners[i % owners.length];
      return t.request('POST', '/api/v1/orgs', { token: owner.token, body: { name: `Inviter ${i}` } });
    });
    expectOnlyStatus(created, 201);
    created.forEach((res, i) => orgs.push({ org_id: res.body.org_id, token: owners[i % owners.length].token }));
    const invite = (i: number) => t.request('POST', `/api/v1/orgs/${orgs[i].org_id}/invitations`, { token: orgs[i].token, body: { email: invitee.email } });
    expectOnlyStatus(await inBatches(INVITATIONS_PER_EMAIL_MAX - 1, invite), 201);
    const racing = await Promise.all(Array.from({ length: BATCH }, (_, k) => invite(INVITATIONS_PER_EMAIL_MAX - 1 + k)));
    expectOneWinner(racing, 201);
    const pending = await t.request('GET', '/api/v1/auth/invitations', { token: invitee.token });
    expect(pending.status).toBe(200);
    expect(pending.body.invitations).toHaveLength(INVITATIONS_PER_EMAIL_MAX);
    // A refused invitation is not pending in its organization either.
    const refusedAt = racing.findIndex((res) => res.status === 409);
    const listed = await t.request('GET', `/api/v1/orgs/${orgs[INVITATIONS_PER_EMAIL_MAX - 1 + refusedAt].org_id}/invitations`, { token: orgs[INVITATIONS_PER_EMAIL_MAX - 1 + refusedAt].token });
    expect(listed.body.invitations).toEqual([]);
  });
});
