import { handshakeActors } from '../actors/handshake/actor.js';
import { HANDSHAKE_SESSION_KIND, handshakePolicy, handshakeSessionKey, type SessionMessage, type SessionView } from '../actors/handshake/messages.js';
import { ledgerActors } from '../actors/ledger/actor.js';
import { LEDGER_ACCOUNT_KIND, ledgerAccountKey, type AccountView, type LedgerAccountMessage } from '../actors/ledger/messages.js';
import { startBenchRuntime, type BenchRuntime } from './support/runtime.js';
import { runScenarios } from './support/scenarios.js';
import { percentile } from './support/stats.js';
import type { BenchRow } from './types.js';

/**
 * Handshake target (issue 16): 1,000 concurrent sessions settling with no
 * hold leaked (the ledger's holds return to zero). Through the in-process
 * runtime on real LMDB (fsync per commit) with the SystemClock: every
 * session is created with an opening offer, accepted, staged by both
 * parties (a ledger hold each), and confirmed by both, all 1,000 at once;
 * a second scenario rolls half of them back by cancel instead. Then every
 * account is read: no open hold, and the money moved exactly as the swaps say.
 */
const AREA = 'handshake';
const SESSIONS = Number(process.env.BENCH_HANDSHAKE_SESSIONS ?? 1_000);
const TENANT = 'org_bench';
const DOMAIN = 'bench';
const FUNDS = 1_000_000;
const policy = {
  max_rounds: handshakePolicy.max_rounds.default,
  offer_ttl_seconds: handshakePolicy.offer_ttl_seconds.default,
  session_ttl_seconds: handshakePolicy.session_ttl_seconds.default,
  settlement_timeout_seconds: handshakePolicy.settlement_timeout_seconds.default,
};

const initiatorOf = (i: number) => `a${i}`;
const responderOf = (i: number) => `b${i}`;
const pays = (i: number) => ({ initiator: 1_000 + (i % 100), responder: 10 + (i % 7) });

async function settleAll(bench: BenchRuntime, run: string, cancelEvery: number): Promise<{ wall_ms: number; latencies: number[]; settled: number; rolled_back: number }> {
  const { runtime } = bench;
  const ask = <R>(session_id: string, message: SessionMessage) => runtime.ask<R>(HANDSHAKE_SESSION_KIND, handshakeSessionKey(TENANT, DOMAIN, session_id), message);
  const latencies: number[] = [];
  let settled = 0;
  let rolled_back = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_unused, i) => {
      const begin = performance.now();
      const session_id = `${run}-${i}`;
      const a = initiatorOf(i);
      const b = responderOf(i);
      const amounts = pays(i);
      const created = await ask<{ session: SessionView }>(session_id, {
        op: 'init',
        init: {
          tenant: TENANT,
          domain: DOMAIN,
          session_id,
          initiator: { id: a, kind: 'auth_user', label: a },
          responder: { id: b, kind: 'auth_user', label: b },
          policy,
          opening_bundle: {
            initiator_gives: { currency_legs: [{ currency_id: 'USD', amount: amounts.initiator }], item_legs: [], terms: [] },
            responder_gives: { currency_legs: [{ currency_id: 'USD', amount: amounts.responder }], item_legs: [], terms: [] },
          },
        },
      });
      await ask(session_id, { op: 'accept', caller: b, offer_id: created.session.active_offer_id! });
      await Promise.all([ask(session_id, { op: 'stage', caller: a }), ask(session_id, { op: 'stage', caller: b })]);
      if (cancelEvery > 0 && i % cancelEvery === 0) {
        await ask(session_id, { op: 'cancel', caller: a });
        rolled_back++;
      } else {
        await ask(session_id, { op: 'confirm', caller: a });
        await ask(session_id, { op: 'confirm', caller: b });
        // The captures go through the outbox: wait for the settlement to report SETTLED.
        for (;;) {
          const view = await ask<SessionView>(session_id, { op: 'get', caller: a });
          if (view.status === 'SETTLED') break;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        settled++;
      }
      latencies.push(performance.now() - begin);
    }),
  );
  return { wall_ms: performance.now() - started, latencies: latencies.sort((x, y) => x - y), settled, rolled_back };
}

/** Reads every account until no hold is open and the credits of the captures have landed; returns the leaked holds and the money error. */
async function audit(bench: BenchRuntime, expected: Map<string, number>): Promise<{ open_holds: number; held: number; money_error: number }> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    let open_holds = 0;
    let held = 0;
    let money_error = 0;
    for (const [user_id, balance] of expected) {
      const view = await bench.runtime.ask<AccountView>(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, user_id), { op: 'get', tenant: TENANT, user_id } satisfies LedgerAccountMessage);
      open_holds += view.holds.length;
      const usd = view.balances.find((entry) => entry.currency === 'USD');
      held += usd?.held ?? 0;
      money_error += Math.abs((usd?.balance ?? 0) - balance);
    }
    if ((open_holds === 0 && money_error === 0) || Date.now() > deadline) return { open_holds, held, money_error };
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function run(): Promise<BenchRow[]> {
  let bench: BenchRuntime | undefined;
  const expected = new Map<string, number>();
  try {
    bench = await startBenchRuntime([...ledgerActors, ...handshakeActors]);
    const runtime = bench.runtime;
    await Promise.all(
      Array.from({ length: SESSIONS }, async (_unused, i) => {
        for (const user_id of [initiatorOf(i), responderOf(i)]) {
          await runtime.ask(LEDGER_ACCOUNT_KIND, ledgerAccountKey(TENANT, user_id), { op: 'credit', tenant: TENANT, user_id, reference: 'seed', currency: 'USD', amount: FUNDS, by: 'bench' } satisfies LedgerAccountMessage);
          expected.set(user_id, FUNDS);
        }
      }),
    );
    const scenario = (name: string, run: string, cancelEvery: number) => ({
      name,
      run: async (): Promise<BenchRow[]> => {
        const result = await settleAll(bench!, run, cancelEvery);
        for (let i = 0; i < SESSIONS; i++) {
          if (cancelEvery > 0 && i % cancelEvery === 0) continue;
          const amounts = pays(i);
          expected.set(initiatorOf(i), expected.get(initiatorOf(i))! - amounts.initiator + amounts.responder);
          expected.set(responderOf(i), expected.get(responderOf(i))! + amounts.initiator - amounts.responder);
        }
        const checked = await audit(bench!, expected);
        const p = (q: number) => percentile(result.latencies, q).toFixed(1);
        return [
          {
            area: AREA,
            scenario: `${name}: sessions/s`,
            value: Math.round((SESSIONS / result.wall_ms) * 1000),
            unit: 'sessions/s',
            note: `${SESSIONS} at once in ${(result.wall_ms / 1000).toFixed(2)} s; ${result.settled} settled, ${result.rolled_back} rolled back; per session (create..SETTLED) p50 ${p(50)} ms, p99 ${p(99)} ms`,
          },
          {
            area: AREA,
            scenario: `${name}: holds left open`,
            value: checked.open_holds,
            unit: 'holds',
            note: `target 0 (held ${checked.held} minor units); balances off by ${checked.money_error} minor units in total (target 0)`,
          },
        ];
      },
    });
    return await runScenarios(AREA, [scenario(`${SESSIONS.toLocaleString('en')} sessions settle`, 'settle', 0), scenario(`${SESSIONS.toLocaleString('en')} sessions, every 2nd cancelled`, 'mixed', 2)]);
  } finally {
    await bench?.destroy();
  }
}
