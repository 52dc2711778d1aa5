import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Resume from a tick that left the bounded ring: the client gets a snapshot, then the live ticks. */

let t: TestNode;
let token: string;
beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  token = (await t.newUser('ecsgap')).token;
});
afterAll(() => t.destroy());

const base = '/api/v1/ecs/gap/coordinator';

async function tick() {
  const before = (await t.request('GET', base, { token })).body.tick;
  (t.clock as ManualClock).advance(50);
  for (let polls = 0; polls < 300; polls++) {
    await settle();
    if ((await t.request('GET', base, { token })).body.tick > before) return;
  }
  throw new Error('no tick');
}

describe('ECS resume past the ring', () => {
  it('answers a resume from a tick the ring no longer holds with a snapshot, then goes on live', async () => {
    await t.request('POST', `${base}/start`, { token, body: { tick_rate_ms: 50 } });
    // 400 entities of ~1.9 KiB changed every tick: the 8 MiB ring holds about 10 such ticks.
    const filler = 'y'.repeat(1_900);
    const versions = new Map<string, number>();
    for (let round = 0; round < 13; round++) {
      const mutations = Array.from({ length: 400 }, (_, i) => {
        const entity_id = `n${i}`;
        const version = versions.get(entity_id);
        return version === undefined ? { entity_id, op: 'create', components: { filler } } : { entity_id, expected_version: version, components: { round } };
      });
      const res = await t.request('POST', `${base}/mutations`, { token, body: { mutations } });
      expect(res.status, res.text).toBe(200);
      for (const result of res.body.results) versions.set(result.entity_id, result.new_version);
      await tick();
    }
    const status = (await t.request('GET', base, { token })).body;
    expect(status.tick).toBe(13);
    expect(status.oldest_tick).toBeGreaterThan(0);

    const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}${base}/ws?token=${encodeURIComponent(token)}`);
    const messages: any[] = [];
    ws.on('message', (data) => messages.push(JSON.parse(data.toString())));
    await new Promise((resolve) => ws.once('open', resolve));
    const waitFor = async (count: number) => {
      for (let i = 0; i < 250 && messages.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    await waitFor(1);
    expect(messages[0]).toMatchObject({ type: 'hello', tick: 13, oldest_tick: status.oldest_tick });
    ws.send(JSON.stringify({ type: 'resume', tick: 0 }));
    await waitFor(2);
    expect(messages[1]).toMatchObject({ type: 'snapshot', tick: 13, part: 1, parts: 1 });
    expect(messages[1].entities).toHaveLength(400);
    expect(messages[1].entities.find((e: any) => e.entity_id === 'n7')).toMatchObject({ version: 13, components: { filler, round: 12 } });
    // A resume inside the ring replays exactly the missed ticks.
    ws.send(JSON.stringify({ type: 'resume', tick: 12 }));
    await waitFor(3);
    expect(messages[2]).toMatchObject({ type: 'tick', tick: 13 });
    await tick();
    await waitFor(4);
    expect(messages[3]).toMatchObject({ type: 'tick', tick: 14, changes: [] });
    ws.close();
  }, 60_000);
});
