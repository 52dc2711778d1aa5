import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** A running index keeps ticking after a node restart, and its ring (and pending changes) survive it. */

let t: TestNode | undefined;
afterAll(() => t?.destroy());

const base = '/api/v1/ecs/persist/coordinator';

async function waitForTick(node: TestNode, token: string, tick: number) {
  for (let polls = 0; polls < 300; polls++) {
    await settle();
    const status = await node.request('GET', base, { token });
    if (status.body.tick >= tick) return status.body;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`never reached tick ${tick}`);
}

describe('ECS index across a restart', () => {
  it('keeps ticking from its durable alarm and replays its ring after the restart', async () => {
    t = await startTestNode({ clock: 'manual' });
    const { token } = await t.newUser('ecsr');
    await t.request('POST', `${base}/start`, { token, body: { tick_rate_ms: 50 } });
    for (let tick = 1; tick <= 2; tick++) {
      (t.clock as ManualClock).advance(50);
      await waitForTick(t, token, tick);
    }
    // Applied (and durable) but not yet published by a tick when the node stops.
    const mutated = await t.request('POST', `${base}/mutations`, { token, body: { mutations: [{ entity_id: 'a', op: 'create', components: { x: 1 } }] } });
    expect(mutated.body).toMatchObject({ succeeded: 1, tick: 3 });
    const stoppedAt = (t.clock as ManualClock).now();
    await t.stop();

    // The restarted node's manual clock starts at the real time. That is past the tick alarm's due time
    // (the last tick + 50 ms) only if this test took that long: the first clock was moved 100 ms, which
    // can take less real time. Moved just past it (a manual clock fires due timers when it moves).
    t = await startTestNode({ clock: 'manual', dataDir: t.dataDir });
    const restarted = t.clock as ManualClock;
    restarted.advance(Math.max(1, stoppedAt + 50 + 1 - restarted.now()));
    const after = await waitForTick(t, token, 3);
    expect(after).toMatchObject({ running: true, entities: 1 });
    (t.clock as ManualClock).advance(50);
    await waitForTick(t, token, 4);

    const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}${base}/ws`, { headers: { authorization: `Bearer ${token}` } });
    const messages: any[] = [];
    ws.on('message', (data) => messages.push(JSON.parse(data.toString())));
    await new Promise((resolve) => ws.once('open', resolve));
    for (let i = 0; i < 100 && messages.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    ws.send(JSON.stringify({ type: 'resume', tick: 0 }));
    for (let i = 0; i < 200 && messages.filter((m) => m.type === 'tick').length < 4; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    const ticks = messages.filter((m) => m.type === 'tick');
    expect(ticks.map((m) => m.tick)).toEqual([1, 2, 3, 4]);
    expect(ticks[2].changes).toEqual([{ entity_id: 'a', op: 'upsert', version: 1, components: { x: 1 } }]);
    ws.close();
  });
});
