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

/** Moves the clock one tick of `index` (a coordinator path) and waits for it. */
async function tick(index = base) {
  const before = (await t.request('GET', index, { token })).body.tick;
  (t.clock as ManualClock).advance(50);
  for (let polls = 0; polls < 300; polls++) {
    await settle();
    if ((await t.request('GET', index, { token })).body.tick > before) return;
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
    // A resume after hello: the resumed marker, then the snapshot (tick 0 left the ring).
    ws.send(JSON.stringify({ type: 'resume', tick: 0 }));
    await waitFor(3);
    expect(messages[1]).toEqual({ type: 'resumed', tick: 0 });
    expect(messages[2]).toMatchObject({ type: 'snapshot', tick: 13, part: 1, parts: 1 });
    expect(messages[2].entities).toHaveLength(400);
    expect(messages[2].entities.find((e: any) => e.entity_id === 'n7')).toMatchObject({ version: 13, components: { filler, round: 12 } });
    // A resume inside the ring replays exactly the missed ticks.
    ws.send(JSON.stringify({ type: 'resume', tick: 12 }));
    await waitFor(5);
    expect(messages[3]).toEqual({ type: 'resumed', tick: 12 });
    expect(messages[4]).toMatchObject({ type: 'tick', tick: 13 });
    await tick();
    await waitFor(6);
    expect(messages[5]).toMatchObject({ type: 'tick', tick: 14, changes: [] });
    ws.close();
  }, 60_000);
});

describe('ECS resume without a race against the live stream', () => {
  const index = '/api/v1/ecs/race/coordinator';
  const tickRace = () => tick(index);
  function connect(query = '') {
    const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}${index}/ws?token=${encodeURIComponent(token)}${query}`);
    const messages: any[] = [];
    ws.on('message', (data) => messages.push(JSON.parse(data.toString())));
    const waitFor = async (count: number) => {
      for (let i = 0; i < 250 && messages.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(messages.length, JSON.stringify(messages)).toBeGreaterThanOrEqual(count);
    };
    return { ws, messages, waitFor };
  }
  /** The ticks a client applies: those after the last hello or resumed marker, which must follow it one by one. */
  function applied(messages: any[]): number[] {
    const last = messages.findLastIndex((m) => m.type === 'hello' || m.type === 'resumed');
    const ticks = messages.slice(last + 1).filter((m) => m.type === 'tick').map((m) => m.tick);
    ticks.forEach((tick, i) => expect(tick, JSON.stringify(messages)).toBe(messages[last].tick + 1 + i));
    return ticks;
  }

  it('starts the stream at the resume query parameter: hello names it and the missed ticks follow in order', async () => {
    await t.request('POST', `${index}/start`, { token, body: { tick_rate_ms: 50 } });
    for (let i = 0; i < 5; i++) await tickRace();
    const now = (await t.request('GET', index, { token })).body.tick;
    const { ws, messages, waitFor } = connect('&resume=2');
    await waitFor(1 + (now - 2));
    expect(messages[0]).toMatchObject({ type: 'hello', tick: 2 });
    expect(applied(messages)).toEqual(Array.from({ length: now - 2 }, (_, i) => 3 + i));
    await tickRace();
    await waitFor(2 + (now - 2));
    expect(messages.at(-1)).toMatchObject({ type: 'tick', tick: now + 1 });
    ws.close();
  }, 60_000);

  it('a resume ahead of the index in the query is an error, and the stream goes on live', async () => {
    const now = (await t.request('GET', index, { token })).body.tick;
    const { ws, messages, waitFor } = connect(`&resume=${now + 100}`);
    await waitFor(2);
    expect(messages[0]).toMatchObject({ type: 'hello', tick: now });
    expect(messages[1]).toMatchObject({ type: 'error', code: 'resume_ahead', tick: now });
    ws.close();
  }, 60_000);

  it('a resume message sent on open is taken before hello, or marked: no tick applied twice or out of order', async () => {
    const now = (await t.request('GET', index, { token })).body.tick;
    const { ws, messages, waitFor } = connect();
    ws.once('open', () => ws.send(JSON.stringify({ type: 'resume', tick: now - 3 })));
    await waitFor(1);
    await tickRace();
    await tickRace();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(applied(messages)).toEqual([now - 2, now - 1, now, now + 1, now + 2]);
    ws.close();
  }, 60_000);

  it('a resume after live ticks went out is answered with a resumed marker, then the replay in order', async () => {
    const now = (await t.request('GET', index, { token })).body.tick;
    const { ws, messages, waitFor } = connect();
    await waitFor(1);
    expect(messages[0]).toMatchObject({ type: 'hello', tick: now });
    await tickRace();
    await waitFor(2);
    expect(messages[1]).toMatchObject({ type: 'tick', tick: now + 1 });
    ws.send(JSON.stringify({ type: 'resume', tick: now - 2 }));
    await waitFor(3 + 3);
    expect(messages[2]).toEqual({ type: 'resumed', tick: now - 2 });
    expect(applied(messages)).toEqual([now - 1, now, now + 1]);
    await tickRace();
    await waitFor(7);
    expect(applied(messages)).toEqual([now - 1, now, now + 1, now + 2]);
    ws.close();
  }, 60_000);
});
