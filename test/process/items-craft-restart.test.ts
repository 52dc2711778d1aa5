import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';

/**
 * SIGKILL of a node in the middle of crafts (docs/api/items.md, "Crafting"):
 * after the restart every craft that had started ends with its inputs
 * consumed and its outputs produced, or neither. Each pair of containers
 * starts with 20 ore; a craft turns 2 ore into 1 ingot, so once nothing is
 * reserved any more, ore + 2 * ingot is 20 in every pair.
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const PAIRS = 40;
const CRAFTS_PER_PAIR = 10;
const ORE_PER_PAIR = 2 * CRAFTS_PER_PAIR;
const KILL_AFTER_ANSWERS = 20;

function quantityOf(container: { contents: { definition_id: string; quantity: number }[] }, definition_id: string): number {
  return container.contents.filter((item) => item.definition_id === definition_id).reduce((sum, item) => sum + item.quantity, 0);
}

describe('crafting across a SIGKILL', () => {
  it('applies both the inputs and the outputs of every craft, or neither', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-items-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir });
    const registered = await call(server, 'POST', '/api/v1/auth/register', { body: { email: 'smith@example.com', username: 'smith', password: 'correct horse battery' } });
    expect(registered.status).toBe(201);
    const token = registered.body.access_token as string;
    const api = (path: string) => `/api/v1/items/forge${path}`;

    expect((await call(server, 'POST', api('/definitions/batch'), { token, body: { definitions: [
      { definition_id: 'ore', name: 'Ore', max_stack: 1000, weight: 1 },
      { definition_id: 'ingot', name: 'Ingot', max_stack: 1000, weight: 1 },
    ] } })).status).toBe(201);
    const blueprint = await call(server, 'POST', api('/blueprints'), { token, body: { name: 'Smelt', inputs: [{ value: 'ore', quantity: 2 }], outputs: [{ definition_id: 'ingot', quantity: 1 }] } });
    expect(blueprint.status).toBe(201);
    for (let i = 0; i < PAIRS; i++) {
      expect((await call(server, 'POST', api('/containers'), { token, body: { container_id: `src-${i}` } })).status).toBe(201);
      expect((await call(server, 'POST', api('/containers'), { token, body: { container_id: `dst-${i}` } })).status).toBe(201);
      expect((await call(server, 'POST', api('/grant'), { token, body: { container_id: `src-${i}`, definition_id: 'ore', quantity: ORE_PER_PAIR } })).status).toBe(200);
    }

    // Every craft at once; the node is killed once some have answered, with the rest in flight.
    let answered = 0;
    const outcomes: (number | 'cut')[] = [];
    const crafts = [];
    for (let round = 0; round < CRAFTS_PER_PAIR; round++) {
      for (let i = 0; i < PAIRS; i++) {
        crafts.push(
          call(server, 'POST', api('/craft'), { token, body: { blueprint_id: blueprint.body.blueprint_id, source_container_id: `src-${i}`, target_container_id: `dst-${i}` } })
            .then((res) => {
              outcomes.push(res.status);
              // Killed from the answer's callback, not a poll: the rest are surely still in flight.
              if (++answered === KILL_AFTER_ANSWERS) server.child.kill('SIGKILL');
            })
            .catch(() => outcomes.push('cut')),
        );
      }
    }
    await until(() => answered >= KILL_AFTER_ANSWERS, 'the first crafts to answer');
    const exit = await server.stop('SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    await Promise.all(crafts);
    const succeeded = outcomes.filter((outcome) => outcome === 200).length;
    expect(succeeded).toBeGreaterThanOrEqual(KILL_AFTER_ANSWERS);
    // Some crafts were cut off by the kill: the test really killed mid-way.
    expect(outcomes.filter((outcome) => outcome === 'cut').length).toBeGreaterThan(0);

    server = await startServerProcess({ dataDir, port: server.port });
    const pairs = await until(async () => {
      const views = [];
      for (let i = 0; i < PAIRS; i++) {
        const source = await call(server, 'GET', api(`/containers/src-${i}`), { token });
        const target = await call(server, 'GET', api(`/containers/dst-${i}`), { token });
        // Settled: nothing reserved any more (usage counts reserved units, contents do not).
        if (source.body.usage.weight !== quantityOf(source.body, 'ore')) return false;
        views.push({ ore: quantityOf(source.body, 'ore'), ingot: quantityOf(target.body, 'ingot'), stray: quantityOf(source.body, 'ingot') + quantityOf(target.body, 'ore') });
      }
      return views;
    }, 'every craft in flight to end');
    let ingots = 0;
    for (const pair of pairs) {
      expect(pair.ore + 2 * pair.ingot).toBe(ORE_PER_PAIR);
      expect(pair.stray).toBe(0);
      ingots += pair.ingot;
    }
    // Every craft answered 200 before the kill is there; crafts cut off may have completed too.
    expect(ingots).toBeGreaterThanOrEqual(succeeded);

    // The node crafts on after the restart.
    const after = await call(server, 'POST', api('/craft'), { token, body: { blueprint_id: blueprint.body.blueprint_id, source_container_id: 'src-0', target_container_id: 'dst-0' } });
    expect([200, 409]).toContain(after.status);
    await server.stop('SIGTERM');
  }, 120_000);
});
