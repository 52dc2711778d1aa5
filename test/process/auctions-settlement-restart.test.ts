import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';

/**
 * SIGKILL of a node while auctions settle (docs/api/auctions.md,
 * "Settlement"): each auction sells one of alice's swords (an item of the
 * items area, locked in her stall); closes are sent for a group of auctions at once and the node is
 * killed a moment later, mid-settlement (three rounds, three moments). After the restart each auction
 * either settles (its settlement goes on from its durable state: the
 * capture and the seller's credit happen exactly once) or is still open
 * with its leader's hold intact, exactly as before; closing those then
 * settles them too. In the end every winner paid exactly its final price,
 * the seller received exactly their sum, no hold is left and no money was
 * made or lost, and every sword is exactly once in its winner's delivery
 * container (none left in the stall, none twice, no lock left).
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const ADMIN = { ADMIN_EMAIL: 'root@example.com', ADMIN_PASSWORD: 'admin password 1' };
const AUCTIONS = 16;
const FUNDS = 100_000;

describe('auction settlement across a SIGKILL', () => {
  it('funds end exactly once with their new owners, or exactly as before', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-auctions-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir, env: ADMIN });
    const register = async (name: string) => {
      const res = await call(server, 'POST', '/api/v1/auth/register', { body: { email: `${name}@example.com`, username: name, password: 'correct horse battery' } });
      expect(res.status).toBe(201);
      return { token: res.body.access_token as string, user_id: res.body.user.id as string, email: `${name}@example.com` };
    };
    const alice = await register('alice');
    const bob = await register('bob');
    const carol = await register('carol');
    const admin = (await call(server, 'POST', '/api/v1/auth/login', { body: { login: ADMIN.ADMIN_EMAIL, password: ADMIN.ADMIN_PASSWORD } })).body.access_token as string;
    const org_id = (await call(server, 'POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Crash House' } })).body.org_id as string;
    for (const member of [bob, carol]) {
      const invite = await call(server, 'POST', `/api/v1/orgs/${org_id}/invitations`, { token: alice.token, body: { email: member.email, role: 'member' } });
      expect((await call(server, 'POST', `/api/v1/auth/invitations/${invite.body.id}/accept`, { token: member.token, body: { token: invite.body.token } })).status).toBe(200);
    }
    const key = async (user: { token: string }) => (await call(server, 'POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'k', scopes: ['*'], org_id } })).body.key as string;
    const seller = await key(alice);
    const bidders = [{ user: bob, key: await key(bob) }, { user: carol, key: await key(carol) }];
    for (const { user } of bidders) {
      const credit = await call(server, 'POST', '/api/v1/ledger/credits', { token: admin, body: { tenant: org_id, user_id: user.user_id, currency: 'USD', amount: FUNDS, reference: `seed-${user.user_id}` } });
      expect(credit.status).toBe(201);
    }

    const items = '/api/v1/items/crash';
    expect((await call(server, 'POST', `${items}/definitions`, { token: seller, body: { definition_id: 'sword', name: 'Sword', max_stack: 1 } })).status).toBe(201);
    expect((await call(server, 'POST', `${items}/containers`, { token: seller, body: { container_id: 'stall', owner_id: alice.user_id, slots: AUCTIONS } })).status).toBe(201);
    const granted = await call(server, 'POST', `${items}/grant`, { token: seller, body: { container_id: 'stall', definition_id: 'sword', quantity: AUCTIONS } });
    expect(granted.status).toBe(200);
    const swords = (granted.body.items as { item_id: string }[]).map((item) => item.item_id);
    const ids: string[] = [];
    for (let i = 0; i < AUCTIONS; i++) {
      const created = await call(server, 'POST', '/api/v1/auctions', {
        token: seller,
        body: { item_id: swords[i], item_domain: 'crash', item_container_id: 'stall', start_time: new Date().toISOString(), end_time: new Date(Date.now() + 3_600_000).toISOString(), starting_price: 100, bid_increment: 5 },
      });
      expect(created.status).toBe(201);
      ids.push(created.body.auction_id);
      const first = bidders[i % 2];
      const second = bidders[(i + 1) % 2];
      expect((await call(server, 'POST', `/api/v1/auctions/${created.body.auction_id}/bids`, { token: first.key, body: { amount: 100 + i } })).body.accepted).toBe(true);
      expect((await call(server, 'POST', `/api/v1/auctions/${created.body.auction_id}/proxy-bid`, { token: second.key, body: { max_amount: 500 + i } })).body.success).toBe(true);
    }

    // Three rounds: close a group of auctions at once and kill the node while their settlements run,
    // a little later each round (before any close is read, mid-way, just after the first answers).
    const rounds: { ids: string[]; kill: () => Promise<unknown> }[] = [
      { ids: ids.slice(0, 5), kill: () => new Promise((resolve) => setTimeout(resolve, 5)) },
      { ids: ids.slice(5, 10), kill: () => new Promise((resolve) => setTimeout(resolve, 25)) },
      { ids: ids.slice(10), kill: () => Promise.resolve() },
    ];
    const report: string[] = [];
    for (const [index, round] of rounds.entries()) {
      const closes = round.ids.map((id) => call(server, 'POST', `/api/v1/auctions/${id}/close`, { token: seller }).catch(() => null));
      await (index === 2 ? Promise.race([Promise.race(closes), new Promise((resolve) => setTimeout(resolve, 1_000))]) : round.kill());
      expect((await server.stop('SIGKILL')).signal).toBe('SIGKILL');
      await Promise.all(closes);
      server = await startServerProcess({ dataDir, port: server.port, env: ADMIN });
      const statuses: string[] = [];
      for (const id of round.ids) {
        const view = (await call(server, 'GET', `/api/v1/auctions/${id}`, { token: seller })).body;
        statuses.push(view.status);
        if (view.status === 'open') {
          // Exactly as before: the leader still leads, with its hold; closing now settles it.
          expect(view.high_bidder).not.toBeNull();
          expect((await call(server, 'POST', `/api/v1/auctions/${id}/close`, { token: seller })).status).toBe(200);
        }
      }
      const count = (status: string) => statuses.filter((s) => s === status).length;
      report.push(`round ${index + 1}: ${count('settled')} settled, ${count('ended')} mid-settlement, ${count('open')} untouched`);
    }
    const settled = await until(async () => {
      const views = await Promise.all(ids.map(async (id) => (await call(server, 'GET', `/api/v1/auctions/${id}`, { token: seller })).body));
      return views.every((view) => view.status === 'settled' && view.settlement.funds_settled && view.settlement.item_transferred) && views;
    }, 'every settlement to finish after the restart');

    const paid = new Map<string, number>();
    let sold = 0;
    for (const view of settled) {
      expect(view.winner_id).not.toBeNull();
      paid.set(view.winner_id, (paid.get(view.winner_id) ?? 0) + view.final_price);
      sold += view.final_price;
    }
    const account = async (user_id: string) => (await call(server, 'GET', `/api/v1/ledger/accounts/${org_id}/${user_id}`, { token: admin })).body;
    await until(async () => (await account(alice.user_id)).balances[0]?.balance === sold, 'the seller credits');
    for (const { user } of bidders) {
      const view = await account(user.user_id);
      expect(view.balances).toEqual([{ currency: 'USD', balance: FUNDS - (paid.get(user.user_id) ?? 0), held: 0, available: FUNDS - (paid.get(user.user_id) ?? 0) }]);
      expect(view.holds).toEqual([]);
    }
    expect((await account(alice.user_id)).balances).toEqual([{ currency: 'USD', balance: sold, held: 0, available: sold }]);
    // Conservation: what the bidders lost, the seller got, once.
    expect(sold).toBe([...paid.values()].reduce((a, b) => a + b, 0));
    // Each sword is in its winner's delivery container, once; the stall is empty.
    for (const [i, view] of settled.entries()) {
      const delivery = (await call(server, 'GET', `${items}/containers/auction:${view.auction_id}`, { token: seller })).body;
      expect(delivery.owner_id).toBe(view.winner_id);
      expect(delivery.contents.map((item: { item_id: string; state: string }) => [item.item_id, item.state])).toEqual([[swords[i], 'normal']]);
    }
    expect((await call(server, 'GET', `${items}/containers/stall`, { token: seller })).body.contents).toEqual([]);
    console.log(`auctions settlement restart, at each restart: ${report.join('; ')}`);
    await server.stop('SIGTERM');
  }, 120_000);
});
