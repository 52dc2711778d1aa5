import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { expectError, startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { creditUsd, joinOrg, orgApiKey } from '../helpers/org-tenant.js';
import { settle } from '../helpers/runtime.js';

/**
 * Auctions selling an item of the items area over the real socket
 * (docs/api/auctions.md "Items", docs/api/items.md "Locks and transfers"):
 * two members of an organization with org API keys; alice sells a sword
 * from her stall, bob bids; time moved with a manual clock.
 */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let org_id: string;
const keys = { alice: '', bob: '' };
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const DOMAIN = 'rpg';
const items = (path: string) => `/api/v1/items/${DOMAIN}${path}`;
const clock = () => t.clock as ManualClock;
const at = (seconds: number) => new Date(clock().now() + seconds * 1000).toISOString();

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

async function contents(container_id: string) {
  return ok(await t.request('GET', items(`/containers/${container_id}`), { token: keys.alice })).contents as any[];
}

let counter = 0;
async function stall(): Promise<{ container_id: string; sword: string }> {
  const container_id = `stall-${++counter}`;
  ok(await t.request('POST', items('/containers'), { token: keys.alice, body: { container_id, owner_id: alice.user_id } }), 201);
  const granted = ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id, definition_id: 'sword', quantity: 1 } }));
  return { container_id, sword: granted.items[0].item_id };
}

const listing = (from: { container_id: string; sword: string }, extra: Record<string, unknown> = {}) => ({
  item_id: from.sword,
  item_domain: DOMAIN,
  item_container_id: from.container_id,
  start_time: at(-1),
  end_time: at(3600),
  starting_price: 100,
  bid_increment: 10,
  ...extra,
});

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  [alice, bob] = await Promise.all([t.newUser('alice'), t.newUser('bob')]);
  const adminToken = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
  org_id = ok(await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Auction House' } }), 201).org_id;
  await joinOrg(t, org_id, alice, bob);
  for (const [name, user] of [['alice', alice], ['bob', bob]] as const) keys[name] = await orgApiKey(t, org_id, user, 'auctions');
  await creditUsd(t, adminToken, org_id, bob, 10_000, 'fund-bob');
  ok(await t.request('POST', items('/definitions'), { token: keys.alice, body: { definition_id: 'sword', name: 'Sword', max_stack: 1, default_durability: 50 } }), 201);
});
afterAll(async () => {
  await t?.destroy();
});

describe('auctions of items', () => {
  it('creating locks the item; close settles funds and moves the item to the winner, item_transferred: true', async () => {
    const from = await stall();
    const created = ok(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(from) }), 201);
    const locked = (await contents(from.container_id))[0];
    expect(locked).toMatchObject({ item_id: from.sword, state: 'locked', locked_by: [{ lock_id: `${created.auction_id}.item`, holder: { area: 'auctions', ref: created.auction_id } }] });
    const got = ok(await t.request('GET', `/api/v1/auctions/${created.auction_id}`, { token: keys.bob }));
    expect(got).toMatchObject({ item_id: from.sword, item_domain: DOMAIN, item_container_id: from.container_id, item_quantity: 1 });

    const bid = ok(await t.request('POST', `/api/v1/auctions/${created.auction_id}/bids`, { token: keys.bob, body: { amount: 150 } }));
    expect(bid.accepted).toBe(true);
    const closed = ok(await t.request('POST', `/api/v1/auctions/${created.auction_id}/close`, { token: keys.alice }));
    expect(closed.settlement).toMatchObject({ status: 'settled', winner_id: bob.user_id, funds_settled: true, item_transferred: true, item_transfer_reason: null, item_container_id: `auction:${created.auction_id}` });

    expect(await contents(from.container_id)).toEqual([]);
    const delivery = ok(await t.request('GET', items(`/containers/auction:${created.auction_id}`), { token: keys.bob }));
    expect(delivery).toMatchObject({ owner_id: bob.user_id, slots: 1, parent_container_id: null });
    expect(delivery.contents).toMatchObject([{ item_id: from.sword, owner_id: bob.user_id, definition_id: 'sword', durability: { current: 50, max: 50 }, state: 'normal' }]);
    const seller = ok(await t.request('GET', '/api/v1/ledger/me', { token: keys.alice }));
    expect(seller.balances).toMatchObject([{ currency: 'USD', balance: 150 }]);
  });

  it('a grant topping up a partly locked stack answers it locked, and it stays locked until the lock is released', async () => {
    ok(await t.request('POST', items('/definitions'), { token: keys.alice, body: { definition_id: 'ore', name: 'Ore', max_stack: 20 } }), 201);
    const container_id = `stall-${++counter}`;
    ok(await t.request('POST', items('/containers'), { token: keys.alice, body: { container_id, owner_id: alice.user_id } }), 201);
    const stack = ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id, definition_id: 'ore', quantity: 10 } })).items[0];
    const created = ok(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing({ container_id, sword: stack.item_id }, { item_quantity: 4 }) }), 201);
    expect((await contents(container_id))[0]).toMatchObject({ item_id: stack.item_id, quantity: 10, state: 'locked', locked_quantity: 4 });

    const granted = ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id, definition_id: 'ore', quantity: 1 } }));
    expect(granted.items).toMatchObject([{ item_id: stack.item_id, quantity: 11, state: 'locked' }]);
    // The grant's answer carries the state only; the contents also show the lock.
    expect(granted.items[0].locked_quantity).toBeUndefined();
    expect((await contents(container_id))[0]).toMatchObject({ item_id: stack.item_id, quantity: 11, state: 'locked', locked_quantity: 4 });

    ok(await t.request('PUT', `/api/v1/auctions/${created.auction_id}/status`, { token: keys.alice, body: { status: 'cancelled' } }));
    await until(async () => (await contents(container_id))[0]?.state === 'normal', 'the lock released');
    const free = ok(await t.request('POST', items('/grant'), { token: keys.alice, body: { container_id, definition_id: 'ore', quantity: 1 } }));
    expect(free.items).toMatchObject([{ item_id: stack.item_id, quantity: 12, state: 'normal' }]);
  });

  it('refuses an item the seller does not own or that is locked, with nothing created', async () => {
    const from = await stall();
    expectError(await t.request('POST', '/api/v1/auctions', { token: keys.bob, body: listing(from) }), 404, 'items_item_not_found');
    expectError(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(from, { item_container_id: undefined }) }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(from, { item_quantity: 2 }) }), 409, 'items_insufficient_inputs');
    // Nothing stayed locked, and the item can be listed now.
    await until(async () => (await contents(from.container_id))[0].state === 'normal', 'no lock left');
    ok(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(from) }), 201);
    expectError(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(from) }), 409, 'auction_item_conflict');
    // A client cannot create a container in the auction delivery namespace.
    expectError(await t.request('POST', items('/containers'), { token: keys.alice, body: { container_id: 'auction:x' } }), 400, 'BAD_REQUEST');
  });

  it('no winner at the end (alarm) and a cancellation release the lock: the item stays with the seller', async () => {
    const quiet = await stall();
    const unsold = ok(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(quiet, { end_time: at(60) }) }), 201);
    const cancelled = await stall();
    const withdrawn = ok(await t.request('POST', '/api/v1/auctions', { token: keys.alice, body: listing(cancelled) }), 201);
    clock().advance(61_000);
    await until(async () => (await t.request('GET', `/api/v1/auctions/${unsold.auction_id}`, { token: keys.alice })).body.status === 'settled', 'ended by alarm');
    const settled = ok(await t.request('GET', `/api/v1/auctions/${unsold.auction_id}`, { token: keys.alice }));
    expect(settled.settlement).toMatchObject({ winner_id: null, item_transferred: false, item_transfer_reason: expect.stringMatching(/lock was released/) });
    await until(async () => (await contents(quiet.container_id))[0]?.state === 'normal', 'unsold item unlocked');

    const put = ok(await t.request('PUT', `/api/v1/auctions/${withdrawn.auction_id}/status`, { token: keys.alice, body: { status: 'cancelled' } }));
    expect(put.settlement).toMatchObject({ item_transferred: false, item_transfer_reason: expect.stringMatching(/lock was released/) });
    await until(async () => (await contents(cancelled.container_id))[0]?.state === 'normal', 'cancelled item unlocked');
    expect((await contents(cancelled.container_id))[0].item_id).toBe(cancelled.sword);
  });
});
