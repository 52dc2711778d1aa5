import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';

/**
 * SIGKILL of a node while handshake settlements commit (docs/api/handshake.md,
 * "Crashes"): every session swaps money both ways and one of alice's swords
 * (an item leg of the items area) for nothing but money; it is accepted and
 * staged by both parties (the sword locked, bob receiving in his bag) and
 * confirmed by the initiator; then the counterparty's confirmations of a
 * group are sent at once and the node is killed a moment later (three
 * rounds, three moments). After each restart every session is either
 * committed (COMMITTING or SETTLED: its captures and its sword's transfer
 * go on from the durable outbox and apply once), holding room for the sword
 * (then it commits by itself), or still STAGING with both parties' holds and
 * the lock intact, exactly as before; confirming those again commits them.
 * In the end each party's balance moved by exactly the sum of its swaps, no
 * hold, lock or room is left, no money was made or lost, and every sword is
 * in bob's bag exactly once (none left with alice, none twice).
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const ADMIN = { ADMIN_EMAIL: 'root@example.com', ADMIN_PASSWORD: 'admin password 1' };
const SESSIONS = 15;
const FUNDS = 100_000;

describe('handshake settlement across a SIGKILL', () => {
  it('funds end exactly once with their new owners, or exactly as before', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-handshake-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir, env: ADMIN });
    const register = async (name: string) => {
      const res = await call(server, 'POST', '/api/v1/auth/register', { body: { email: `${name}@example.com`, username: name, password: 'correct horse battery' } });
      expect(res.status).toBe(201);
      return { token: res.body.access_token as string, user_id: res.body.user.id as string, email: `${name}@example.com` };
    };
    const alice = await register('alice');
    const bob = await register('bob');
    const admin = (await call(server, 'POST', '/api/v1/auth/login', { body: { login: ADMIN.ADMIN_EMAIL, password: ADMIN.ADMIN_PASSWORD } })).body.access_token as string;
    const org_id = (await call(server, 'POST', '/api/v1/orgs', { token: alice.token, body: { name: 'Crash Market' } })).body.org_id as string;
    const invite = await call(server, 'POST', `/api/v1/orgs/${org_id}/invitations`, { token: alice.token, body: { email: bob.email, role: 'member' } });
    expect((await call(server, 'POST', `/api/v1/auth/invitations/${invite.body.id}/accept`, { token: bob.token, body: { token: invite.body.token } })).status).toBe(200);
    const key = async (user: { token: string }) => (await call(server, 'POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'k', scopes: ['*'], org_id } })).body.key as string;
    const aliceKey = await key(alice);
    const bobKey = await key(bob);
    for (const user of [alice, bob]) {
      const credit = await call(server, 'POST', '/api/v1/ledger/credits', { token: admin, body: { tenant: org_id, user_id: user.user_id, currency: 'USD', amount: FUNDS, reference: `seed-${user.user_id}` } });
      expect(credit.status).toBe(201);
    }

    const base = '/api/v1/handshake/crash';
    const items = '/api/v1/items/crash';
    expect((await call(server, 'POST', `${items}/definitions`, { token: aliceKey, body: { definition_id: 'sword', name: 'Sword', max_stack: 1 } })).status).toBe(201);
    for (const [container_id, owner_id] of [['alice-bag', alice.user_id], ['bob-bag', bob.user_id]]) {
      expect((await call(server, 'POST', `${items}/containers`, { token: aliceKey, body: { container_id, owner_id, slots: 20 } })).status).toBe(201);
    }
    const granted = await call(server, 'POST', `${items}/grant`, { token: aliceKey, body: { container_id: 'alice-bag', definition_id: 'sword', quantity: SESSIONS } });
    expect(granted.status).toBe(200);
    const swords = (granted.body.items as { item_id: string }[]).map((item) => item.item_id);
    const ids: string[] = [];
    let aliceNet = 0;
    for (let i = 0; i < SESSIONS; i++) {
      const alicePays = 1_000 + i;
      const bobPays = 100 + i;
      aliceNet += bobPays - alicePays;
      const created = await call(server, 'POST', `${base}/sessions`, {
        token: aliceKey,
        body: {
          counterparty_id: bob.user_id,
          counterparty_kind: 'auth_user',
          opening_offer: {
            bundle: {
              initiator_gives: { currency_legs: [{ currency_id: 'USD', amount: alicePays }], item_legs: [{ item_id: swords[i], quantity: 1, container_id: 'alice-bag' }] },
              responder_gives: { currency_legs: [{ currency_id: 'USD', amount: bobPays }] },
            },
          },
        },
      });
      expect(created.status).toBe(201);
      const { session_id, active_offer_id } = created.body.session;
      ids.push(session_id);
      const path = `${base}/sessions/${session_id}`;
      expect((await call(server, 'POST', `${path}/offers/${active_offer_id}/accept`, { token: bobKey })).status).toBe(200);
      expect((await call(server, 'POST', `${path}/settlement/stage`, { token: aliceKey })).status).toBe(200);
      expect((await call(server, 'POST', `${path}/settlement/stage`, { token: bobKey, body: { receive_container_id: 'bob-bag' } })).status).toBe(200);
      expect((await call(server, 'POST', `${path}/settlement/confirm`, { token: aliceKey })).body.outcome).toBe('WAITING_FOR_COUNTERPARTY');
    }

    const rounds: { ids: string[]; kill: () => Promise<unknown> }[] = [
      { ids: ids.slice(0, 5), kill: () => new Promise((resolve) => setTimeout(resolve, 10)) },
      { ids: ids.slice(5, 10), kill: () => new Promise((resolve) => setTimeout(resolve, 150)) },
      { ids: ids.slice(10), kill: () => Promise.resolve() },
    ];
    const report: string[] = [];
    for (const [index, round] of rounds.entries()) {
      const confirms = round.ids.map((id) => call(server, 'POST', `${base}/sessions/${id}/settlement/confirm`, { token: bobKey }).catch(() => null));
      await (index === 2 ? Promise.race([Promise.race(confirms), new Promise((resolve) => setTimeout(resolve, 1_000))]) : round.kill());
      expect((await server.stop('SIGKILL')).signal).toBe('SIGKILL');
      await Promise.all(confirms);
      server = await startServerProcess({ dataDir, port: server.port, env: ADMIN });
      const statuses: string[] = [];
      for (const id of round.ids) {
        const path = `${base}/sessions/${id}`;
        // Holding room for the sword when killed: the room's answer comes from the outbox and the commit follows by itself.
        const settlement = await until(async () => {
          const confirmed = await call(server, 'POST', `${path}/settlement/confirm`, { token: aliceKey });
          expect(confirmed.status).toBe(200);
          return confirmed.body.settlement.preparing ? undefined : confirmed.body.settlement;
        }, 'the room to be held');
        statuses.push(settlement.status);
        if (settlement.status === 'STAGING') {
          // Exactly as before: both staged with their holds, alice's confirmation kept; bob's confirm commits it now.
          expect(settlement.initiator_stage).toMatchObject({ staged: true, confirmed: true });
          expect(settlement.responder_stage).toMatchObject({ staged: true, confirmed: false });
          expect((await call(server, 'POST', `${path}/settlement/confirm`, { token: bobKey })).body.outcome).toBe('COMMITTED');
        }
      }
      const count = (status: string) => statuses.filter((s) => s === status).length;
      report.push(`round ${index + 1}: ${count('SETTLED')} settled, ${count('COMMITTING')} committing, ${count('STAGING')} untouched`);
    }
    await until(async () => {
      const views = await Promise.all(ids.map(async (id) => (await call(server, 'GET', `${base}/sessions/${id}`, { token: aliceKey })).body));
      return views.every((view) => view.status === 'SETTLED');
    }, 'every settlement to finish after the restart');
    const account = async (user_id: string) => (await call(server, 'GET', `/api/v1/ledger/accounts/${org_id}/${user_id}`, { token: admin })).body;
    await until(async () => (await account(alice.user_id)).balances[0]?.balance === FUNDS + aliceNet && (await account(bob.user_id)).balances[0]?.balance === FUNDS - aliceNet, 'the credits');
    expect((await account(alice.user_id)).balances).toEqual([{ currency: 'USD', balance: FUNDS + aliceNet, held: 0, available: FUNDS + aliceNet }]);
    expect((await account(bob.user_id)).balances).toEqual([{ currency: 'USD', balance: FUNDS - aliceNet, held: 0, available: FUNDS - aliceNet }]);
    expect((await account(alice.user_id)).holds).toEqual([]);
    expect((await account(bob.user_id)).holds).toEqual([]);
    const bag = async (container_id: string) => (await call(server, 'GET', `${items}/containers/${container_id}`, { token: aliceKey })).body;
    await until(async () => (await bag('bob-bag')).contents.length === SESSIONS, 'every sword in bob\'s bag');
    const bobs = await bag('bob-bag');
    expect(bobs.contents.map((item: { item_id: string }) => item.item_id).sort()).toEqual([...swords].sort());
    expect(bobs.contents.every((item: { owner_id: string; state: string }) => item.owner_id === bob.user_id && item.state === 'normal')).toBe(true);
    expect(bobs.usage.slots_used).toBe(SESSIONS); // no room left held
    expect((await bag('alice-bag')).contents).toEqual([]);
    console.log(`handshake settlement restart, at each restart: ${report.join('; ')}`);
    await server.stop('SIGTERM');
  }, 120_000);
});
