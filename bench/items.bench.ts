import { itemActors } from '../actors/items/actor.js';
import {
  ITEM_CATALOG_KIND,
  ITEM_CONTAINER_KIND,
  itemCatalogKey,
  itemContainerKey,
  type Blueprint,
  type CatalogMessage,
  type ContentsView,
  type ContainerMessage,
  type CraftPlan,
  type CraftResult,
  type GrantPlan,
} from '../actors/items/messages.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorRuntime, LmdbStore, SystemClock, type RuntimeObserver } from '../runtime/index.js';
import { runScenarios } from './support/scenarios.js';
import { percentile } from './support/stats.js';
import type { BenchRow } from './types.js';

/**
 * Crafting through the in-process runtime on real LMDB (fsync per commit),
 * SystemClock, one node: PAIRS distinct (source, target) container pairs in
 * one tenant's domain, IN_FLIGHT crafts at once, each as the route does it:
 * the plan read from the catalog, then the source's flow (reserve in its
 * turn, place in the target through the outbox, commit on the answer; the
 * first craft also claims global_first).
 * Target (issue 14): 5,000 crafts/s, with the item-conservation invariant
 * checked after the run: in every pair, ore + 2 * ingot equals the ore
 * granted, nothing stays reserved, and the ingots total the crafts answered.
 * A grant (one container turn, no outbox step) is measured in the same run for comparison.
 */
const AREA = 'items';
const PAIRS = Number(process.env.BENCH_ITEMS_PAIRS ?? 5_000);
const IN_FLIGHT = Number(process.env.BENCH_ITEMS_IN_FLIGHT ?? 1_000);
const SECONDS = Number(process.env.BENCH_ITEMS_SECONDS ?? 8);
/** Enough ore for every craft a pair can get in the run. */
const ORE_PER_PAIR = 400;
const TENANT = 'bench-tenant';
const DOMAIN = 'bench';

interface Loop {
  done: number;
  latencies_ms: number[];
  elapsed_s: number;
}

/** Keeps IN_FLIGHT asks going for SECONDS; `next(i)` is the i-th ask. */
async function closedLoop(next: (i: number) => Promise<unknown>): Promise<Loop> {
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  const latencies_ms: number[] = [];
  let issued = 0;
  let done = 0;
  const worker = async () => {
    while (performance.now() < deadline) {
      const i = issued++;
      const t0 = performance.now();
      await next(i);
      latencies_ms.push(performance.now() - t0);
      done++;
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  latencies_ms.sort((a, b) => a - b);
  return { done, latencies_ms, elapsed_s: (performance.now() - started) / 1000 };
}

interface BenchRuntime {
  runtime: ActorRuntime;
  /** Commit times (LMDB transaction + fsync, queueing included) while `recording`. */
  commits_ms: number[];
  recording: boolean;
  destroy(): Promise<void>;
}

/** As bench/support/runtime.ts (real LMDB with fsync, SystemClock), plus an observer of commit times. */
async function startRuntime(): Promise<BenchRuntime> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-items-'));
  const bench: BenchRuntime = {
    runtime: undefined as unknown as ActorRuntime,
    commits_ms: [],
    recording: false,
    async destroy() {
      await bench.runtime.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const observer: RuntimeObserver = {
    activated() {},
    passivated() {},
    overloaded() {},
    batch() {},
    commit(_ops, commit_ms) {
      if (bench.recording) bench.commits_ms.push(commit_ms);
    },
  };
  bench.runtime = new ActorRuntime({ store: new LmdbStore({ path: dir }), clock: new SystemClock(), partitionCount: 64, observer });
  for (const definition of itemActors) bench.runtime.register(definition);
  await bench.runtime.start();
  return bench;
}

export async function run(): Promise<BenchRow[]> {
  let bench: BenchRuntime | undefined;
  const catalog = <R>(message: CatalogMessage) => bench!.runtime.ask<R>(ITEM_CATALOG_KIND, itemCatalogKey(TENANT, DOMAIN), message);
  const container = <R>(container_id: string, message: ContainerMessage) => bench!.runtime.ask<R>(ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, container_id), message);
  /** As the route does: the plan read from the catalog, then one ask to the container. */
  const grant = async (container_id: string, definition_id: string, quantity: number) =>
    container(container_id, { op: 'grant', plan: await catalog<GrantPlan>({ op: 'grant_plan', container_id, definition_id, quantity }) });
  const craft = async (source_container_id: string, target_container_id: string, seed: number) =>
    container<CraftResult>(source_container_id, { op: 'craft', plan: await catalog<CraftPlan>({ op: 'craft_plan', blueprint_id, source_container_id, target_container_id, seed }) });
  let blueprint_id = '';
  const crafted = new Map<number, number>();
  try {
    bench = await startRuntime();
    return await runScenarios(AREA, [
      {
        name: `setup: ${PAIRS.toLocaleString('en')} container pairs`,
        async run() {
          await catalog({
            op: 'definitions_create',
            definitions: ['ore', 'ingot', 'gift'].map((definition_id) => ({
              definition_id,
              name: definition_id,
              max_stack: 1000,
              weight_m: 1000,
              volume_m: 0,
              equip_slot: null,
              rarity: 'common',
              tags: [],
              default_durability: null,
              salvage_outputs: [],
            })),
          });
          const blueprint = await catalog<Blueprint>({
            op: 'blueprint_create',
            blueprint: { name: 'smelt', inputs: [{ match: 'definition_id', value: 'ore', quantity: 2 }], outputs: [{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }], context_requirements: null },
          });
          blueprint_id = blueprint.blueprint_id;
          const config = (container_id: string) => ({ container_id, owner_id: null, parent_container_id: null, slots: 20, max_weight_m: null, max_volume_m: null });
          for (let i = 0; i < PAIRS; i += 500) {
            await Promise.all(
              Array.from({ length: Math.min(500, PAIRS - i) }, async (_, k) => {
                await catalog({ op: 'container_create', container: config(`src-${i + k}`) });
                await catalog({ op: 'container_create', container: config(`dst-${i + k}`) });
                await grant(`src-${i + k}`, 'ore', ORE_PER_PAIR);
              }),
            );
          }
          return [];
        },
      },
      {
        name: 'grants (one place step per flow), for comparison',
        async run() {
          const loop = await closedLoop((i) => grant(`dst-${i % PAIRS}`, 'gift', 1));
          return [
            {
              area: AREA,
              scenario: 'grant through the runtime (plan read + container turn)',
              value: Math.round(loop.done / loop.elapsed_s),
              unit: 'grants/s',
              note: `${PAIRS} containers, ${IN_FLIGHT} in flight, ${loop.elapsed_s.toFixed(1)} s; p50 ${percentile(loop.latencies_ms, 50).toFixed(1)} ms, p99 ${percentile(loop.latencies_ms, 99).toFixed(1)} ms; comparison for the craft figure`,
            },
          ];
        },
      },
      {
        name: 'crafts between distinct container pairs',
        async run() {
          bench!.recording = true;
          const loop = await closedLoop(async (i) => {
            const pair = i % PAIRS;
            const result = await craft(`src-${pair}`, `dst-${pair}`, i);
            crafted.set(pair, (crafted.get(pair) ?? 0) + (result.produced.length > 0 ? 1 : 0));
          });
          bench!.recording = false;
          const commits = bench!.commits_ms.sort((a, b) => a - b);
          const rate = loop.done / loop.elapsed_s;
          return [
            {
              area: AREA,
              scenario: 'craft through the runtime (plan read, reserve, place, commit)',
              value: Math.round(rate),
              unit: 'crafts/s',
              note: `${PAIRS} pairs, ${IN_FLIGHT} in flight, ${loop.done} crafts in ${loop.elapsed_s.toFixed(1)} s, reply after every step's commit (fsync); target 5,000/s: ${rate >= 5000 ? 'met' : 'NOT met'}`,
            },
            {
              area: AREA,
              scenario: 'craft latency p50 / p99',
              value: Number(percentile(loop.latencies_ms, 50).toFixed(2)),
              unit: 'ms p50',
              note: `p99 ${percentile(loop.latencies_ms, 99).toFixed(2)} ms (plan read to reply; place call and answer through the outbox)`,
            },
            {
              area: AREA,
              scenario: 'commit (LMDB + fsync) during the crafts, p50',
              value: Number(percentile(commits, 50).toFixed(1)),
              unit: 'ms p50',
              note: `p99 ${percentile(commits, 99).toFixed(1)} ms over ${commits.length} commits; a craft waits for 3 in a row (source, target, source)`,
            },
          ];
        },
      },
      {
        name: 'item conservation after the run',
        async run() {
          let violations = 0;
          let ingots = 0;
          let crafts = 0;
          for (const [, count] of crafted) crafts += count;
          for (let i = 0; i < PAIRS; i++) {
            const [source, target] = await Promise.all(
              [`src-${i}`, `dst-${i}`].map((id) => bench!.runtime.ask<ContentsView>(ITEM_CONTAINER_KIND, itemContainerKey(TENANT, DOMAIN, id), { op: 'contents' })),
            );
            const sum = (view: ContentsView, definition_id: string) => view.items.filter((item) => item.definition_id === definition_id).reduce((s, item) => s + item.quantity, 0);
            const ore = sum(source!, 'ore');
            const ingot = sum(target!, 'ingot');
            ingots += ingot;
            const reserved = source!.usage.weight_m / 1000 - ore;
            if (ore + 2 * ingot !== ORE_PER_PAIR || reserved !== 0 || ingot !== (crafted.get(i) ?? 0)) violations++;
          }
          if (ingots !== crafts) violations++;
          if (violations > 0) throw new Error(`item conservation violated in ${violations} pairs`);
          return [
            {
              area: AREA,
              scenario: 'item conservation violations after the run',
              value: violations,
              unit: 'pairs',
              note: `${PAIRS} pairs checked: ore + 2 x ingot = ${ORE_PER_PAIR}, nothing reserved, ${ingots} ingots = ${crafts} crafts answered`,
            },
          ];
        },
      },
    ]);
  } finally {
    await bench?.destroy();
  }
}
