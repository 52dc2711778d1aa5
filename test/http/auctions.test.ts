import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { expectError, startTestNode, type TestNode } from '../helpers/node.js';
import { creditUsd, joinOrg, orgApiKey, usdBalance } from '../helpers/org-tenant.js';
import { settle } from '../helpers/runtime.js';

/**
 * Auctions and the ledger over the real socket (spec doc 2 §4.5;
 * docs/api/auctions.md, docs/api/ledger.md): an organization whose members
 * act with org API keys (alice sells, bob and carol bid), funded by the
 * platform admin's ledger credits; time moved with a manual clock.
 */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let carol: User;
let dave: User;
let adminToken: string;
let org_id: string;
/** Org API keys: the tenant is the organization, the user the member. */
const keys: Record<'alice' | 'bob' | 'carol', string> = { alice: '', bob: '', carol: '' };
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const base = '/api/v1/auctions';
const clock = () => t.clock as ManualClock;
const at = (seconds: number) => new Date(clock().now() + seconds * 1000).toISOString();


async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await check();
    if (value) return value;
    clock().advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}: ${JSON.stringify(await check().catch(String))}`);
}

const join = (owner: User, member: User) => joinOrg(t, org_id, owner, member);

const orgKey = (user: User) => orgApiKey(t, org_id, user, 'auctions');

const fund = (user: User, amount: number) => creditUsd(t, adminToken, org_id, user, amount);

const balance = (token: string) => usdBalance(t, token);

let itemCounter = 0;
async function create(body: Record<string, unknown> = {}, token = keys.alice) {
  const res = await t.request('POST', base, { token, body: { item_id: `item-${++itemCounter}`, start_time: at(0), end_time: at(3600), starting_price: 100, bid_increment: 10, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as { auction_id: string; status: string };
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  [alice, bob, carol, dave] = await Promise.all([t.newUser('alice'), t.newUser('bob'), t.newUser('carol'), t.newUser('dave')]);
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
  const org = await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Auction House' } });
  expect(org.status, org.text).toBe(201);
  org_id = org.body.org_id;
  await join(alice, bob);
  await join(alice, carol);
  [keys.alice, keys.bob, keys.carol] = await Promise.all([orgKey(alice), orgKey(bob), orgKey(carol)]);
  await fund(bob, 10_000);
  await fund(carol, 10_000);
});
afterAll(async () => {
  await t?.destroy();
});

describe('auctions', () => {
  it('a scheduled auction opens by itself; bids hold funds; an outbid bidder is released; the seller closes and is paid', async () => {
    const created = await create({ start_time: at(60), end_time: at(3600), reserve_price: 300 });
    expect(created.status).toBe('scheduled');
    const id = created.auction_id;
    expectError(await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 150 } }), 409, 'auction_not_open');
    clock().advance(60_000);
    await until(async () => (await t.request('GET', `${base}/${id}`, { token: keys.bob })).body.status === 'open', 'the start alarm');

    expectError(await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 50 } }), 409, 'bid_too_low');
    expectError(await t.request('POST', `${base}/${id}/bids`, { token: keys.alice, body: { amount: 150 } }), 403, 'forbidden');
    expectError(await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 20_000 } }), 409, 'insufficient_funds');
    const first = await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 150 } });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ accepted: true, closed: false, current_price: 150, your_bid: 150, leading: true });
    expect(await balance(keys.bob)).toMatchObject({ balance: 10_000, held: 150, available: 9_850 });
    const holds = await t.request('GET', '/api/v1/ledger/me/holds?status=held', { token: keys.bob });
    expect(holds.body.holds[0]).toMatchObject({ amount: 150, status: 'held', purpose: { area: 'auctions', ref: id } });

    // Carol's proxy takes the lead at bob's bid plus one increment; bob's hold is released at once.
    const proxy = await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.carol, body: { max_amount: 400 } });
    expect(proxy.status, proxy.text).toBe(200);
    expect(proxy.body).toMatchObject({ success: true, current_price: 300, max_amount: 400, leading: true });
    expect(await balance(keys.bob)).toMatchObject({ held: 0, available: 10_000 });
    expect(await balance(keys.carol)).toMatchObject({ held: 400 });
    // Bob's plain bid below carol's maximum is answered by her proxy.
    const answered = await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 320 } });
    expect(answered.body).toMatchObject({ accepted: false, current_price: 330, leading: false, high_bidder: carol.user_id });
    expect(await balance(keys.bob)).toMatchObject({ held: 0 });

    const bids = await t.request('GET', `${base}/${id}/bids?limit=2`, { token: keys.bob });
    expect(bids.body.total).toBe(3);
    expect(bids.body.bids.map((b: { amount: number; bidder_id: string }) => [b.bidder_id, b.amount])).toEqual([[carol.user_id, 330], [carol.user_id, 300]]);
    const older = await t.request('GET', `${base}/${id}/bids?before_seq=2`, { token: keys.bob });
    expect(older.body.bids.map((b: { amount: number; seq: number }) => [b.seq, b.amount])).toEqual([[1, 150]]);

    const seen = await t.request('GET', `${base}/${id}`, { token: keys.bob });
    expect(seen.body).toMatchObject({ status: 'open', current_price: 330, high_bidder: carol.user_id, reserve_price: null, reserve_met: true, total_bids: 3 });
    expect((await t.request('GET', `${base}/${id}`, { token: keys.alice })).body.reserve_price).toBe(300);

    expectError(await t.request('POST', `${base}/${id}/close`, { token: keys.bob }), 403, 'forbidden');
    const closed = await t.request('POST', `${base}/${id}/close`, { token: keys.alice });
    expect(closed.status, closed.text).toBe(200);
    expect(closed.body.settlement).toMatchObject({ status: 'settled', winner_id: carol.user_id, final_price: 330, funds_settled: true, reserve_met: true, item_transferred: false });
    expect(closed.body.settlement.item_transfer_reason).toMatch(/item_id is a label/);
    expect(await balance(keys.carol)).toMatchObject({ balance: 9_670, held: 0 });
    await until(async () => (await balance(keys.alice)).balance === 330, 'the seller credit');
    expectError(await t.request('POST', `${base}/${id}/close`, { token: keys.alice }), 409, 'auction_not_open');
    expectError(await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 1_000 } }), 409, 'auction_not_open');
  });

  it('the end alarm settles with no request; a soft close extends a late bid', async () => {
    const { auction_id: id } = await create({ end_time: at(600), soft_close_seconds: 120 });
    clock().advance(550_000);
    const late = await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 100 } });
    expect(late.body).toMatchObject({ accepted: true });
    const extended = await t.request('GET', `${base}/${id}`, { token: keys.bob });
    expect(Date.parse(extended.body.end_time) - Date.parse(extended.body.original_end_time)).toBe(70_000);
    // Past the original end (alarm moved): still open.
    clock().advance(60_000);
    await settle(5);
    expect((await t.request('GET', `${base}/${id}`, { token: keys.bob })).body.status).toBe('open');
    clock().advance(61_000);
    const done = await until(async () => {
      const res = await t.request('GET', `${base}/${id}`, { token: keys.bob });
      return res.body.status === 'settled' && res.body;
    }, 'the end alarm');
    expect(done).toMatchObject({ winner_id: bob.user_id, final_price: 100, settlement: { funds_settled: true } });
  });

  it('buy it now ends the auction at its price (closed: true)', async () => {
    const { auction_id: id } = await create({ buy_it_now_price: 500 });
    const bought = await t.request('POST', `${base}/${id}/bids`, { token: keys.carol, body: { amount: 600 } });
    expect(bought.body).toMatchObject({ accepted: true, closed: true, current_price: 500 });
    const view = await until(async () => {
      const res = await t.request('GET', `${base}/${id}`, { token: keys.carol });
      return res.body.status === 'settled' && res.body;
    }, 'the settlement');
    expect(view).toMatchObject({ winner_id: carol.user_id, final_price: 500 });
  });

  it('the leader raises its own maximum with a proxy bid (the price stays); a plain re-bid by the leader is refused', async () => {
    const { auction_id: id } = await create();
    expect((await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.bob, body: { max_amount: 300 } })).body).toMatchObject({ success: true, current_price: 100 });
    const raised = await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.bob, body: { max_amount: 700 } });
    expect(raised.body).toMatchObject({ success: true, current_price: 100, max_amount: 700, leading: true });
    // The old hold is released at once, the new one covers the new maximum.
    await until(async () => (await balance(keys.bob)).held === 700, 'the old hold to be released');
    expectError(await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 800 } }), 409, 'already_high_bidder');
    expectError(await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.bob, body: { max_amount: 600 } }), 409, 'bid_too_low');
    const deleted = await t.request('DELETE', `${base}/${id}`, { token: keys.alice });
    expect(deleted.body.holds_released).toBe(1);
    await until(async () => (await balance(keys.bob)).held === 0, 'the release on delete');
  });

  it("the leader's refusals name its true minimum (its maximum + 1), and a proxy raise at exactly that minimum is accepted", async () => {
    const { auction_id: id } = await create({ starting_price: 600, bid_increment: 10 });
    expect((await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 600 } })).body).toMatchObject({ accepted: true, current_price: 600 });
    const again = await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 700 } });
    expectError(again, 409, 'already_high_bidder');
    expect(again.body.details).toEqual({ minimum: 601, current_price: 600 });
    expect(again.body.message).toMatch(/max_amount at least 601/);
    const low = await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.bob, body: { max_amount: 600 } });
    expectError(low, 409, 'bid_too_low');
    expect(low.body.details).toEqual({ minimum: 601, current_price: 600 });
    expect((await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.bob, body: { max_amount: 601 } })).body).toMatchObject({ success: true, current_price: 600, leading: true });
    // Another bidder still needs current_price + bid_increment.
    const other = await t.request('POST', `${base}/${id}/bids`, { token: keys.carol, body: { amount: 609 } });
    expectError(other, 409, 'bid_too_low');
    expect(other.body.details).toEqual({ minimum: 610, current_price: 600 });
    expect((await t.request('DELETE', `${base}/${id}`, { token: keys.alice })).body.holds_released).toBe(1);
    await until(async () => (await balance(keys.bob)).held === 0, 'the release on delete');
  });

  it('PUT status follows the state machine, seller or admin only', async () => {
    const { auction_id: id } = await create({ start_time: at(3600), end_time: at(7200) });
    expectError(await t.request('PUT', `${base}/${id}/status`, { token: keys.bob, body: { status: 'open' } }), 403, 'forbidden');
    expectError(await t.request('PUT', `${base}/${id}/status`, { token: keys.alice, body: { status: 'settled' } }), 409, 'auction_invalid_transition');
    expectError(await t.request('PUT', `${base}/${id}/status`, { token: keys.alice, body: { status: 'bogus' } }), 400, 'BAD_REQUEST');
    const opened = await t.request('PUT', `${base}/${id}/status`, { token: keys.alice, body: { status: 'open' } });
    expect(opened.body).toMatchObject({ success: true, status: 'open', settlement: null });
    await t.request('POST', `${base}/${id}/bids`, { token: keys.bob, body: { amount: 200 } });
    const cancelled = await t.request('PUT', `${base}/${id}/status`, { token: keys.alice, body: { status: 'cancelled' } });
    expect(cancelled.body).toMatchObject({ success: true, status: 'cancelled', settlement: { status: 'cancelled', holds_released: 1, winner_id: null } });
    await until(async () => (await balance(keys.bob)).held === 0, 'the release');
    expectError(await t.request('PUT', `${base}/${id}/status`, { token: keys.alice, body: { status: 'open' } }), 409, 'auction_invalid_transition');

    const second = await create();
    const settled = await t.request('PUT', `${base}/${second.auction_id}/status`, { token: keys.alice, body: { status: 'ended' } });
    expect(settled.body).toMatchObject({ success: true, status: 'settled', settlement: { status: 'settled', winner_id: null } });
    const third = await create();
    const empty = await t.request('POST', `${base}/${third.auction_id}/close`, { token: keys.alice });
    expect(empty.body).toMatchObject({ message: 'Settled with no bids; no winner.', settlement: { winner_id: null, funds_settled: false, holds_released: 0 } });
  });

  it('delete releases every bid hold; seller or admin only; then 404', async () => {
    const { auction_id: id } = await create();
    await t.request('POST', `${base}/${id}/proxy-bid`, { token: keys.carol, body: { max_amount: 900 } });
    expect(await balance(keys.carol)).toMatchObject({ held: 900 });
    expectError(await t.request('DELETE', `${base}/${id}`, { token: keys.bob }), 403, 'forbidden');
    const deleted = await t.request('DELETE', `${base}/${id}`, { token: keys.alice });
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toEqual({ auction_id: id, holds_released: 1, message: expect.any(String), status: 'deleted' });
    await until(async () => (await balance(keys.carol)).held === 0, 'the release');
    expectError(await t.request('GET', `${base}/${id}`, { token: keys.alice }), 404, 'not_found');
    expectError(await t.request('DELETE', `${base}/${id}`, { token: keys.alice }), 404, 'not_found');
  });

  it('batch create is all or nothing, capped at max_batch_auctions', async () => {
    const body = (item_id: string) => ({ item_id, start_time: at(0), end_time: at(3600), starting_price: 10, bid_increment: 1 });
    const ok = await t.request('POST', `${base}/batch`, { token: keys.alice, body: { auctions: [body('batch-a'), body('batch-b')] } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.count).toBe(2);
    const conflict = await t.request('POST', `${base}/batch`, { token: keys.alice, body: { auctions: [body('batch-c'), body('batch-a')] } });
    expectError(conflict, 409, 'auction_item_conflict');
    expect(conflict.body.details).toEqual([{ index: 1, item_id: 'batch-a', auction_id: ok.body.auction_ids[0] }]);
    const invalid = await t.request('POST', `${base}/batch`, { token: keys.alice, body: { auctions: [body('batch-d'), { ...body('batch-e'), end_time: at(-10) }] } });
    expectError(invalid, 400, 'BAD_REQUEST');
    expect(invalid.body.details[0].field).toBe('body.auctions.1.end_time');
    expectError(await t.request('POST', `${base}/batch`, { token: keys.alice, body: { auctions: Array.from({ length: 51 }, (_, i) => body(`big-${i}`)) } }), 400, 'BAD_REQUEST');
    const list = await t.request('GET', `${base}?q=batch-&page_size=100`, { token: keys.alice });
    expect(list.body.auctions.map((a: { item_id: string }) => a.item_id).sort()).toEqual(['batch-a', 'batch-b']);
  });

  it('lists with q, status, filter, sort and pages; another tenant sees nothing', async () => {
    await create({ item_id: 'list-cheap', starting_price: 5 });
    await create({ item_id: 'list-dear', starting_price: 5_000 });
    const page = await t.request('GET', `${base}?q=list-&sort_by=current_price&sort_order=asc&page_size=1`, { token: keys.bob });
    expect(page.status, page.text).toBe(200);
    expect(page.body.pagination).toEqual({ page: 1, page_size: 1, total: 2, has_more: true });
    expect(page.body.auctions[0].item_id).toBe('list-cheap');
    const filtered = await t.request('GET', `${base}?status=open&filter=starting_price:gte:1000&filter=item_id:contains:list`, { token: keys.bob });
    expect(filtered.body.auctions.map((a: { item_id: string }) => a.item_id)).toEqual(['list-dear']);
    expectError(await t.request('GET', `${base}?filter=nope:eq:1`, { token: keys.bob }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', `${base}?filter=current_price:gt:abc`, { token: keys.bob }), 400, 'BAD_REQUEST');
    const stranger = await t.request('GET', base, { token: dave.token });
    expect(stranger.body.auctions).toEqual([]);
    const any = page.body.auctions[0].auction_id;
    expectError(await t.request('GET', `${base}/${any}`, { token: dave.token }), 404, 'not_found');
    expectError(await t.request('POST', `${base}/${any}/bids`, { token: dave.token, body: { amount: 100 } }), 404, 'not_found');
  });

  it('refuses bad create bodies with 400 and an item already in a live auction with 409', async () => {
    const good = { item_id: 'dup-item', start_time: at(0), end_time: at(3600), starting_price: 100, bid_increment: 10 };
    expectError(await t.request('POST', base, { token: keys.alice, body: { ...good, end_time: at(-1) } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: keys.alice, body: { ...good, starting_price: 1.25 } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: keys.alice, body: { ...good, reserve_price: 50 } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: keys.alice, body: { ...good, buy_it_now_price: 100 } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: keys.alice, body: { ...good, start_time: 'tomorrow' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: keys.alice, body: { ...good, bid_increment: 0 } }), 400, 'BAD_REQUEST');
    await create(good);
    expectError(await t.request('POST', base, { token: keys.alice, body: good }), 409, 'auction_item_conflict');
    expectError(await t.request('POST', `${base}/nope/bids`, { token: keys.bob, body: { amount: -1 } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/nope/bids`, { token: keys.bob, body: { amount: 100 } }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/nope/bids`, { token: keys.bob }), 404, 'not_found');
    expectError(await t.request('GET', base), 401, 'unauthorized');
  });
});
