import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { expectError, startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { creditUsd, joinOrg, orgApiKey, usdBalance } from '../helpers/org-tenant.js';
import { settle } from '../helpers/runtime.js';

/**
 * Handshake trades with item legs over the real socket (docs/api/handshake.md,
 * "Item legs"; docs/api/items.md, "Locks and transfers"): two members of an
 * organization with org API keys, each owning containers of the items area in
 * the session's domain; stage locks, confirm moves funds and items together,
 * cancel and the deadline (manual clock) give everything back.
 */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let adminToken: string;
let org_id: string;
const keys = { alice: '', bob: '' };
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
// Upper case, as the items area allows: its domains are the handshake's.
const DOMAIN = 'Bazaar';
const base = `/api/v1/handshake/${DOMAIN}`;
const items = (path: string) => `/api/v1/items/${DOMAIN}${path}`;
const clock = () => t.clock as ManualClock;

function ok(res: TestResponse, status = 200) {
  expect(res.status, res.text).toBe(status);
  return res.body;
}


async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await check();
    if (value) return value;
    clock().advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const funds = (token: string) => usdBalance(t, token);

async function contents(container_id: string, token = keys.alice) {
  return ok(await t.request('GET', items(`/containers/${container_id}`), { token })).contents as any[];
}

let counter = 0;
/** A container owned by `owner` with a sword and `ore` units of ore in it; its id, the sword's and the ore stack's item ids. */
async function stocked(owner: User, ore = 30, slots = 10) {
  const container_id = `bag-${++counter}`;
  ok(await t.request('POST', items('/containers'), { token: keys.alice, body: { container_id, owner_id: owner.user_id, slots } }), 201);
  const sword = ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id, definition_id: 'sword', quantity: 1 } })).items[0];
  const stack = ore > 0 ? ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id, definition_id: 'ore', quantity: ore } })).items[0] : null;
  return { container_id, sword: sword.item_id as string, ore: stack?.item_id as string };
}

async function emptyBag(owner: User, slots = 10) {
  const container_id = `bag-${++counter}`;
  ok(await t.request('POST', items('/containers'), { token: keys.alice, body: { container_id, owner_id: owner.user_id, slots } }), 201);
  return container_id;
}

/** Alice gives her sword and 10 ore, Bob gives 500 USD; Bob accepts. */
async function agreed(from: { container_id: string; sword: string; ore: string }) {
  const bundle = {
    initiator_gives: { item_legs: [{ item_id: from.sword, quantity: 1, container_id: from.container_id }, { item_id: from.ore, quantity: 10, container_id: from.container_id }] },
    responder_gives: { currency_legs: [{ currency_id: 'USD', amount: 500 }] },
  };
  const created = ok(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { counterparty_id: bob.user_id, counterparty_kind: 'auth_user', opening_offer: { bundle } } }), 201);
  const session_id = created.session.session_id as string;
  expect(created.opening_offer.bundle.initiator_gives.item_legs).toHaveLength(2);
  ok(await t.request('POST', `${base}/sessions/${session_id}/offers/${created.opening_offer.offer_id}/accept`, { token: keys.bob }));
  return session_id;
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  [alice, bob] = await Promise.all([t.newUser('alice'), t.newUser('bob')]);
  adminToken = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
  org_id = ok(await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Bazaar' } }), 201).org_id;
  await joinOrg(t, org_id, alice, bob);
  for (const [name, user] of [['alice', alice], ['bob', bob]] as const) keys[name] = await orgApiKey(t, org_id, user, 'trade');
  await creditUsd(t, adminToken, org_id, bob, 10_000, 'fund-bob');
  ok(await t.request('POST', items('/definitions'), { token: keys.alice, body: { definition_id: 'sword', name: 'Sword', max_stack: 1, weight: 5, default_durability: 100 } }), 201);
  ok(await t.request('POST', items('/definitions'), { token: keys.alice, body: { definition_id: 'ore', name: 'Ore', max_stack: 50, weight: 1 } }), 201);
});
afterAll(async () => {
  await t?.destroy();
});

describe('handshake item legs', () => {
  it('stage locks the items, confirm by both moves funds and items to their new owners', async () => {
    const from = await stocked(alice);
    const bobBag = await emptyBag(bob);
    const session_id = await agreed(from);
    const before = await funds(keys.bob);

    // Bob receives items: he must name a container he owns.
    expectError(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.bob }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.bob, body: { receive_container_id: from.container_id } }), 404, 'items_container_not_found');
    expectError(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.bob, body: { receive_container_id: 'nope' } }), 404, 'items_container_not_found');

    const staged = ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.alice }));
    expect(staged.initiator_stage).toMatchObject({ staged: true, ledger_hold_ids: [], receive_container_id: null });
    expect(staged.initiator_stage.item_lock_ids).toHaveLength(2);
    // What the owner sees: the items locked, merge and salvage refused.
    const locked = await contents(from.container_id);
    expect(locked.find((item) => item.item_id === from.sword)).toMatchObject({ state: 'locked', locked_quantity: 1, locked_by: [{ quantity: 1, holder: { area: 'handshake' } }] });
    expect(locked.find((item) => item.item_id === from.ore)).toMatchObject({ state: 'locked', locked_quantity: 10, quantity: 30 });
    // A grant may top the locked stack up (30 -> 50, and a new stack of 5); a merge into it is refused.
    const [, extra] = ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id: from.container_id, definition_id: 'ore', quantity: 25 } })).items;
    expectError(await t.request('POST', items('/merge'), { token: keys.alice, body: { container_id: from.container_id, source_item_id: extra.item_id, target_item_id: from.ore } }), 409, 'items_item_locked');

    const bobStaged = ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.bob, body: { receive_container_id: bobBag } }));
    expect(bobStaged.responder_stage).toMatchObject({ staged: true, receive_container_id: bobBag });
    expect(ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/confirm`, { token: keys.alice })).outcome).toBe('WAITING_FOR_COUNTERPARTY');
    const committed = ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/confirm`, { token: keys.bob }));
    expect(committed.outcome).toBe('COMMITTED');

    await until(async () => (await t.request('GET', `${base}/sessions/${session_id}`, { token: keys.alice })).body.status === 'SETTLED', 'settled');
    const bobs = await contents(bobBag, keys.bob);
    expect(bobs.map((item) => [item.definition_id, item.quantity, item.owner_id]).sort()).toEqual([
      ['ore', 10, bob.user_id],
      ['sword', 1, bob.user_id],
    ]);
    expect(bobs.find((item) => item.definition_id === 'sword')).toMatchObject({ item_id: from.sword, durability: { current: 100, max: 100 }, state: 'normal' });
    const alices = await contents(from.container_id);
    expect(alices.map((item) => [item.item_id, item.quantity, item.state])).toEqual([
      [from.ore, 40, 'normal'],
      [extra.item_id, 5, 'normal'],
    ]);
    expect((await funds(keys.bob)).balance).toBe(before.balance - 500);
    expect((await funds(keys.alice)).balance).toBe(500);
  });

  it('cancel rolls back: the holds and locks are released and nothing moves', async () => {
    const from = await stocked(alice);
    const bobBag = await emptyBag(bob);
    const session_id = await agreed(from);
    const before = await funds(keys.bob);
    ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.alice }));
    ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.bob, body: { receive_container_id: bobBag } }));
    expect((await funds(keys.bob)).held).toBe(before.held + 500);
    const cancelled = ok(await t.request('POST', `${base}/sessions/${session_id}/cancel`, { token: keys.bob }));
    expect(cancelled.rolled_back).toBe(true);
    await until(async () => (await contents(from.container_id)).every((item) => item.state === 'normal'), 'locks released');
    await until(async () => (await funds(keys.bob)).held === before.held, 'hold released');
    expect((await contents(from.container_id)).map((item) => item.quantity).sort()).toEqual([1, 30]);
    expect(await contents(bobBag, keys.bob)).toEqual([]);
  });

  it('a receiver without room: confirm answers 409 items_capacity_exceeded and nothing moves; the deadline then rolls everything back', async () => {
    const from = await stocked(alice);
    const tiny = await emptyBag(bob, 1);
    const session_id = await agreed(from);
    const before = await funds(keys.bob);
    ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.alice }));
    ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/stage`, { token: keys.bob, body: { receive_container_id: tiny } }));
    ok(await t.request('POST', `${base}/sessions/${session_id}/settlement/confirm`, { token: keys.bob }));
    expectError(await t.request('POST', `${base}/sessions/${session_id}/settlement/confirm`, { token: keys.alice }), 409, 'items_capacity_exceeded');
    const settlement = ok(await t.request('GET', `${base}/sessions/${session_id}`, { token: keys.alice }));
    expect(settlement.status).toBe('AGREED');
    expect((await contents(tiny, keys.bob))).toEqual([]);

    clock().advance(300_000);
    await until(async () => (await t.request('GET', `${base}/sessions/${session_id}`, { token: keys.alice })).body.status === 'EXPIRED', 'deadline');
    await until(async () => (await contents(from.container_id)).every((item) => item.state === 'normal'), 'locks released by the deadline');
    await until(async () => (await funds(keys.bob)).held === before.held, 'hold released by the deadline');
    expect((await contents(from.container_id)).map((item) => item.quantity).sort()).toEqual([1, 30]);
    expect(await contents(tiny, keys.bob)).toEqual([]);
  });

  it('an item leg the giver does not own refuses the stage with nothing locked', async () => {
    const bobs = await stocked(bob, 0);
    const bundle = {
      initiator_gives: { item_legs: [{ item_id: bobs.sword, quantity: 1, container_id: bobs.container_id }] },
      responder_gives: { terms: [{ key: 'thanks', value: 'yes' }] },
    };
    const created = ok(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { counterparty_id: bob.user_id, counterparty_kind: 'auth_user', opening_offer: { bundle } } }), 201);
    ok(await t.request('POST', `${base}/sessions/${created.session.session_id}/offers/${created.opening_offer.offer_id}/accept`, { token: keys.bob }));
    expectError(await t.request('POST', `${base}/sessions/${created.session.session_id}/settlement/stage`, { token: keys.alice }), 404, 'items_item_not_found');
    expect((await contents(bobs.container_id, keys.bob))[0]).toMatchObject({ state: 'normal', locked_quantity: 0 });
  });
});
