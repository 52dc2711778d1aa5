import { randomBytes } from 'node:crypto';
import { userActor, USER_KIND } from '../actors/account/actor.js';
import type { NewUser } from '../actors/account/user-state.js';
import { signingKeyActor } from '../actors/system/signing-key.js';
import { TokenService } from '../http/auth/tokens.js';
import { percentile } from './support/stats.js';
import { startBenchRuntime } from './support/runtime.js';
import { runScenarios } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * Issue 4 target: verifying an access token on the request path costs under
 * 50 µs. Through the real runtime (LMDB in a temp dir, SystemClock) with a
 * real signing key and a real user session:
 * - warm: TokenService.verifyAccessToken of a token seen before (cache hit);
 * - cold: a token never seen (cache miss: Ed25519 signature and claims check);
 * - request path: what the bearer hook does for every request with a seen
 *   token: the cached verify plus the user actor's `authenticate` turn (the
 *   revocation check: session live, user not banned or deleted).
 * Per-operation latencies (warm verify is timed in batches of 100 because a
 * single cache hit is close to the timer's resolution).
 */
const AREA = 'token verify';
const TARGET_US = 50;
const WARM_BATCHES = 5_000;
const WARM_BATCH = 100;
const COLD_TOKENS = 2_000;
const PATH_REQUESTS = 50_000;
const SCENARIO_SECONDS_MAX = 15;

function us(ns: bigint | number): number {
  return Number(ns) / 1000;
}

function row(scenario: string, samples_us: number[], note: string): BenchRow {
  samples_us.sort((a, b) => a - b);
  const p50 = percentile(samples_us, 50);
  const p99 = percentile(samples_us, 99);
  return {
    area: AREA,
    scenario,
    value: Number(p50.toFixed(2)),
    unit: 'µs p50',
    note: `p99 ${p99.toFixed(2)} µs, n=${samples_us.length}; ${note}`,
  };
}

async function setUp() {
  const bench = await startBenchRuntime([signingKeyActor, userActor]);
  const tokens = await TokenService.create(bench.runtime, { issuer: 'bench', accessTtlSeconds: 3600, now: () => Date.now() });
  const user: NewUser = {
    id: `usr_bench_${randomBytes(6).toString('hex')}`,
    email: 'bench@example.com',
    username: 'bench-user',
    display_name: 'Bench',
    role: 'user',
    password_hash: 'unused',
  };
  await bench.runtime.ask(USER_KIND, user.id, { op: 'create', user });
  const session = await bench.runtime.ask<{ session_id: string }>(USER_KIND, user.id, {
    op: 'open-session',
    refresh_hash: 'unused',
    ttl_seconds: 3600,
    ip_address: '127.0.0.1',
    user_agent: 'bench',
  });
  return { bench, tokens, user_id: user.id, session_id: session.session_id };
}

export async function run(): Promise<BenchRow[]> {
  const setup = await setUp();
  const { bench, tokens, user_id, session_id } = setup;
  try {
    return await runScenarios(AREA, [
      {
        name: 'verifyAccessToken, warm (cache hit)',
        async run() {
          const { token } = await tokens.signAccessToken(user_id, session_id);
          await tokens.verifyAccessToken(token);
          const samples: number[] = [];
          const deadline = performance.now() + SCENARIO_SECONDS_MAX * 1000;
          for (let b = 0; b < WARM_BATCHES && performance.now() < deadline; b++) {
            const start = process.hrtime.bigint();
            for (let i = 0; i < WARM_BATCH; i++) await tokens.verifyAccessToken(token);
            samples.push(us(process.hrtime.bigint() - start) / WARM_BATCH);
          }
          return [row('verifyAccessToken, warm (cache hit)', samples, `per verify, batches of ${WARM_BATCH}; target < ${TARGET_US} µs`)];
        },
      },
      {
        name: 'verifyAccessToken, cold (signature check)',
        async run() {
          // A distinct sid per token makes every token distinct (tokens signed in the same second would otherwise repeat).
          const all: string[] = [];
          for (let i = 0; i < COLD_TOKENS; i++) all.push((await tokens.signAccessToken(user_id, `${session_id}-${i}`)).token);
          const samples: number[] = [];
          const deadline = performance.now() + SCENARIO_SECONDS_MAX * 1000;
          for (const token of all) {
            if (performance.now() > deadline) break;
            const start = process.hrtime.bigint();
            await tokens.verifyAccessToken(token);
            samples.push(us(process.hrtime.bigint() - start));
          }
          return [row('verifyAccessToken, cold (cache miss: Ed25519 verify)', samples, 'paid once per token per node; later requests hit the cache')];
        },
      },
      {
        name: 'request path: cached verify + session check',
        async run() {
          const { token } = await tokens.signAccessToken(user_id, session_id);
          await tokens.verifyAccessToken(token);
          const samples: number[] = [];
          const deadline = performance.now() + SCENARIO_SECONDS_MAX * 1000;
          for (let i = 0; i < PATH_REQUESTS && performance.now() < deadline; i++) {
            const start = process.hrtime.bigint();
            const claims = await tokens.verifyAccessToken(token);
            await bench.runtime.ask(USER_KIND, claims.sub, { op: 'authenticate', session_id: claims.sid });
            samples.push(us(process.hrtime.bigint() - start));
          }
          return [row('request path: cached verify + user actor session check', samples, `what every bearer request pays (revocation checked each time); target < ${TARGET_US} µs`)];
        },
      },
    ]);
  } finally {
    await bench.destroy();
  }
}
