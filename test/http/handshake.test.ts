import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { expectError, startTestNode, type TestNode } from '../helpers/node.js';
import { creditUsd, joinOrg, orgApiKey, usdBalance } from '../helpers/org-tenant.js';
import { settle } from '../helpers/runtime.js';

/**
 * Handshake sessions and their settlement over the real socket (spec doc 2
 * §4.6; docs/api/handshake.md): an organization whose members act with org
 * API keys (alice initiates, bob is the counterparty, carol is a third
 * member), funded by the platform admin's ledger credits; time moved with a
 * manual clock.
 */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
let carol: User;
let outsider: User;
let adminToken: string;
let org_id: string;
const keys: Record<'alice' | 'bob' | 'carol', string> = { alice: '', bob: '', carol: '' };
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const base = '/api/v1/handshake/market';
const clock = () => t.clock as ManualClock;


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

const join = (owner: User, member: User) => joinOrg(t, org_id, owner, member);

const orgKey = (user: User) => orgApiKey(t, org_id, user, 'handshake');

const fund = (user: User, amount: number) => creditUsd(t, adminToken, org_id, user, amount);

const funds = (token: string) => usdBalance(t, token);

const bundle = (alicePays: number, bobPays = 0) => ({
  initiator_gives: { currency_legs: alicePays ? [{ currency_id: 'USD', amount: alicePays }] : [] },
  responder_gives: bobPays ? { currency_legs: [{ currency_id: 'USD', amount: bobPays }] } : { terms: [{ key: 'sword', value: '+3 longsword', binding: true }] },
});

async function open(body: Record<string, unknown> = {}, token = keys.alice, counterparty = () => bob.user_id) {
  const res = await t.request('POST', `${base}/sessions`, { token, body: { counterparty_id: counterparty(), counterparty_kind: 'auth_user', opening_offer: { bundle: bundle(300) }, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body as { session: { session_id: string; active_offer_id: string }; opening_offer: { offer_id: string } };
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  [alice, bob, carol, outsider] = await Promise.all([t.newUser('alice'), t.newUser('bob'), t.newUser('carol'), t.newUser('outsider')]);
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
  const org = await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Trading Post' } });
  expect(org.status, org.text).toBe(201);
  org_id = org.body.org_id;
  await join(alice, bob);
  await join(alice, carol);
  [keys.alice, keys.bob, keys.carol] = await Promise.all([orgKey(alice), orgKey(bob), orgKey(carol)]);
  await fund(alice, 10_000);
  await fund(bob, 10_000);
});
afterAll(async () => {
  await t?.destroy();
});

describe('handshake sessions', () => {
  it('creates a session with a member of the org, with policy defaults and the opening offer', async () => {
    const created = await open();
    expect(created.session).toMatchObject({ status: 'NEGOTIATING', round: 1, initiator: { id: alice.user_id }, responder: { id: bob.user_id, kind: 'auth_user' } });
    expect(created.session).toMatchObject({ policy: { max_rounds: 10, offer_ttl_seconds: 3600, session_ttl_seconds: 86400, settlement_timeout_seconds: 300 } });
    expect(created.opening_offer).toMatchObject({ status: 'OPEN', round: 1, proposed_by: alice.user_id });
    const got = await t.request('GET', `${base}/sessions/${created.session.session_id}`, { token: keys.bob });
    expect(got.status, got.text).toBe(200);
    expect(got.body.session_id).toBe(created.session.session_id);
    // Another member, and another tenant, do not see it.
    expectError(await t.request('GET', `${base}/sessions/${created.session.session_id}`, { token: keys.carol }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/sessions/${created.session.session_id}`, { token: bob.token }), 404, 'not_found');
  });

  it('refuses a counterparty outside the tenant, yourself, a personal tenant, and bad bodies', async () => {
    const body = (counterparty_id: string) => ({ counterparty_id, counterparty_kind: 'auth_user' });
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: body(outsider.user_id) }), 422, 'handshake_counterparty_invalid');
    const self = await t.request('POST', `${base}/sessions`, { token: keys.alice, body: body(alice.user_id) });
    expectError(self, 422, 'handshake_counterparty_invalid');
    expect(self.body.error).toBe('Unprocessable Entity');
    expectError(await t.request('POST', `${base}/sessions`, { token: alice.token, body: body(bob.user_id) }), 422, 'handshake_counterparty_invalid');
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { counterparty_id: bob.user_id, counterparty_kind: 'robot' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { ...body(bob.user_id), policy: { max_rounds: 0 } } }), 400, 'BAD_REQUEST');
    const fraction = { initiator_gives: { currency_legs: [{ currency_id: 'USD', amount: 10.5 }] }, responder_gives: {} };
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { ...body(bob.user_id), opening_offer: { bundle: fraction } } }), 400, 'BAD_REQUEST');
    const twice = { initiator_gives: { currency_legs: [{ currency_id: 'USD', amount: 1 }, { currency_id: 'USD', amount: 2 }] }, responder_gives: {} };
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { ...body(bob.user_id), opening_offer: { bundle: twice } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { ...body(bob.user_id), opening_offer: { bundle: { initiator_gives: {}, responder_gives: {} } } } }), 400, 'BAD_REQUEST');
    // An item leg names its container (docs/api/handshake.md, "Item legs"), once per item and side.
    const noContainer = { initiator_gives: { item_legs: [{ item_id: 'sword', quantity: 1 }] }, responder_gives: {} };
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { ...body(bob.user_id), opening_offer: { bundle: noContainer } } }), 400, 'BAD_REQUEST');
    const leg = { item_id: 'itm_1', quantity: 1, container_id: 'bag' };
    const sameItem = { initiator_gives: { item_legs: [leg, leg] }, responder_gives: {} };
    expectError(await t.request('POST', `${base}/sessions`, { token: keys.alice, body: { ...body(bob.user_id), opening_offer: { bundle: sameItem } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/handshake/Bad Domain!/sessions', { token: keys.alice }), 400, 'BAD_REQUEST');
  });

  it('negotiates: counter, one open offer at a time, reject, withdraw, max rounds', async () => {
    const { session } = await open({ policy: { max_rounds: 3 } });
    const path = `${base}/sessions/${session.session_id}`;
    expectError(await t.request('POST', `${path}/offers`, { token: keys.alice, body: { bundle: bundle(350) } }), 409, 'handshake_offer_open');
    const counter = await t.request('POST', `${path}/offers`, { token: keys.bob, body: { bundle: bundle(400) } });
    expect(counter.status, counter.text).toBe(201);
    expect(counter.body).toMatchObject({ round: 2, in_reply_to: session.active_offer_id, status: 'OPEN' });
    expectError(await t.request('POST', `${path}/offers/${counter.body.offer_id}/reject`, { token: keys.bob }), 403, 'forbidden');
    expectError(await t.request('POST', `${path}/offers/${counter.body.offer_id}/withdraw`, { token: keys.alice }), 403, 'forbidden');
    expectError(await t.request('POST', `${path}/offers/${counter.body.offer_id}/accept`, { token: keys.bob }), 403, 'forbidden');
    expectError(await t.request('POST', `${path}/offers/nope/accept`, { token: keys.alice }), 404, 'not_found');
    const rejected = await t.request('POST', `${path}/offers/${counter.body.offer_id}/reject`, { token: keys.alice });
    expect(rejected.status, rejected.text).toBe(200);
    expect(rejected.body.status).toBe('REJECTED');
    expectError(await t.request('POST', `${path}/offers/${counter.body.offer_id}/accept`, { token: keys.alice }), 409, 'handshake_offer_not_open');
    const third = await t.request('POST', `${path}/offers`, { token: keys.alice, body: { bundle: bundle(380) } });
    expect(third.status, third.text).toBe(201);
    const withdrawn = await t.request('POST', `${path}/offers/${third.body.offer_id}/withdraw`, { token: keys.alice });
    expect(withdrawn.body.status).toBe('WITHDRAWN');
    expectError(await t.request('POST', `${path}/offers`, { token: keys.bob, body: { bundle: bundle(1) } }), 409, 'handshake_invalid_state');
    const after = await t.request('GET', path, { token: keys.alice });
    expect(after.body).toMatchObject({ status: 'EXPIRED', closed_reason: 'max_rounds', round: 3 });
    const concessions = await t.request('GET', `${path}/history?view=concessions`, { token: keys.bob });
    expect(concessions.status, concessions.text).toBe(200);
    expect(concessions.body.offers.map((offer: { status: string }) => offer.status)).toEqual(['COUNTERED', 'REJECTED', 'WITHDRAWN']);
    expect(concessions.body.concessions[1].deltas[0]).toMatchObject({ party_id: alice.user_id, currency_deltas: [{ currency_id: 'USD', delta: 100 }] });
    const transcript = await t.request('GET', `${path}/history`, { token: keys.alice });
    expect(transcript.body).toMatchObject({ view: 'transcript', concessions: [] });
    expect(transcript.body.offers).toHaveLength(3);
  });

  it('expires an offer and the session by alarm', async () => {
    const { session, opening_offer } = await open({ policy: { offer_ttl_seconds: 60, session_ttl_seconds: 120 } });
    const path = `${base}/sessions/${session.session_id}`;
    clock().advance(61_000);
    await until(async () => (await t.request('GET', `${path}/history`, { token: keys.alice })).body.offers[0].status === 'EXPIRED', 'offer expiry');
    expectError(await t.request('POST', `${path}/offers/${opening_offer.offer_id}/accept`, { token: keys.bob }), 409, 'handshake_offer_not_open');
    clock().advance(60_000);
    await until(async () => (await t.request('GET', path, { token: keys.alice })).body.status === 'EXPIRED', 'session expiry');
  });

  it('lists the caller\'s sessions with status filter and sort; mine=false is for admins', async () => {
    await until(async () => {
      const res = await t.request('GET', `${base}/sessions?status=NEGOTIATING&sort_by=round&sort_order=asc&page_size=2`, { token: keys.bob });
      return res.status === 200 && res.body.pagination.total >= 1 && res.body.sessions.every((s: { status: string }) => s.status === 'NEGOTIATING') && res;
    }, 'list');
    const mine = await t.request('GET', `${base}/sessions`, { token: keys.carol });
    expect(mine.body.pagination.total).toBe(0);
    expectError(await t.request('GET', `${base}/sessions?mine=false`, { token: keys.carol }), 403, 'forbidden');
  });
});

describe('handshake settlement', () => {
  it('stage, confirm (waiting then committed), and the funds change owners exactly once', async () => {
    const before = { alice: await funds(keys.alice), bob: await funds(keys.bob) };
    const { session } = await open({ opening_offer: { bundle: bundle(500, 200) } });
    const path = `${base}/sessions/${session.session_id}`;
    expectError(await t.request('POST', `${path}/settlement/stage`, { token: keys.alice }), 409, 'handshake_invalid_state');
    const accepted = await t.request('POST', `${path}/offers/${session.active_offer_id}/accept`, { token: keys.bob });
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.body).toMatchObject({ status: 'STAGING', accepted_offer_id: session.active_offer_id });
    expect(Date.parse(accepted.body.deadline_at)).toBe(clock().now() + 300_000);
    expectError(await t.request('POST', `${path}/settlement/confirm`, { token: keys.alice }), 409, 'handshake_not_staged');
    const staged = await t.request('POST', `${path}/settlement/stage`, { token: keys.alice });
    expect(staged.status, staged.text).toBe(200);
    expect(staged.body.initiator_stage).toMatchObject({ staged: true, ledger_hold_ids: [expect.any(String)] });
    expect((await funds(keys.alice)).held).toBe(before.alice.held + 500);
    const waiting = await t.request('POST', `${path}/settlement/confirm`, { token: keys.alice, body: {} });
    expect(waiting.body.outcome).toBe('WAITING_FOR_COUNTERPARTY');
    expect((await t.request('POST', `${path}/settlement/stage`, { token: keys.bob })).status).toBe(200);
    const committed = await t.request('POST', `${path}/settlement/confirm`, { token: keys.bob });
    expect(committed.status, committed.text).toBe(200);
    expect(committed.body.outcome).toBe('COMMITTED');
    expectError(await t.request('POST', `${path}/cancel`, { token: keys.alice }), 409, 'handshake_invalid_state');
    await until(async () => (await t.request('GET', path, { token: keys.alice })).body.status === 'SETTLED', 'settled');
    expect((await t.request('POST', `${path}/settlement/confirm`, { token: keys.alice })).body).toMatchObject({ outcome: 'ALREADY_CONFIRMED', settlement: { status: 'SETTLED', holds_captured: 2 } });
    await until(async () => (await funds(keys.bob)).balance === before.bob.balance + 300, 'credit');
    expect(await funds(keys.alice)).toMatchObject({ balance: before.alice.balance - 300, held: before.alice.held });
    expect(await funds(keys.bob)).toMatchObject({ balance: before.bob.balance + 300, held: before.bob.held });
  });

  it('a stage the ledger cannot cover is 409 insufficient_funds and holds nothing', async () => {
    const { session } = await open({ opening_offer: { bundle: bundle(1_000_000) } });
    const path = `${base}/sessions/${session.session_id}`;
    await t.request('POST', `${path}/offers/${session.active_offer_id}/accept`, { token: keys.bob });
    const held = (await funds(keys.alice)).held;
    expectError(await t.request('POST', `${path}/settlement/stage`, { token: keys.alice }), 409, 'insufficient_funds');
    await until(async () => (await funds(keys.alice)).held === held, 'no hold left');
    const cancelled = await t.request('POST', `${path}/cancel`, { token: keys.bob });
    expect(cancelled.body).toMatchObject({ rolled_back: true, session: { status: 'CANCELLED' } });
  });

  it('cancel rolls back the staged holds; the deadline alarm and the sweep roll back overdue settlements', async () => {
    const held = (await funds(keys.alice)).held;
    const first = await open();
    const path = `${base}/sessions/${first.session.session_id}`;
    await t.request('POST', `${path}/offers/${first.session.active_offer_id}/accept`, { token: keys.bob });
    await t.request('POST', `${path}/settlement/stage`, { token: keys.alice });
    expect((await funds(keys.alice)).held).toBe(held + 300);
    const cancelled = await t.request('POST', `${path}/cancel`, { token: keys.alice });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ rolled_back: true, session_id: first.session.session_id });
    await until(async () => (await funds(keys.alice)).held === held, 'released');
    const settlement = await t.request('POST', `${path}/settlement/confirm`, { token: keys.alice });
    expectError(settlement, 409, 'handshake_invalid_state');

    const second = await open({ policy: { settlement_timeout_seconds: 10 } });
    const path2 = `${base}/sessions/${second.session.session_id}`;
    await t.request('POST', `${path2}/offers/${second.session.active_offer_id}/accept`, { token: keys.bob });
    await t.request('POST', `${path2}/settlement/stage`, { token: keys.alice });
    const none = await t.request('POST', `${base}/settlements/sweep`, { token: keys.carol });
    expect(none.status, none.text).toBe(200);
    expect(none.body.cancelled).toBe(0);
    clock().advance(10_000);
    await until(async () => (await t.request('GET', path2, { token: keys.alice })).body.status === 'EXPIRED', 'deadline');
    await until(async () => (await funds(keys.alice)).held === held, 'released by the deadline');
    const swept = await t.request('POST', `${base}/settlements/sweep`, { token: keys.alice });
    expect(swept.body).toMatchObject({ cancelled: 0, message: expect.any(String) });
  });
});
