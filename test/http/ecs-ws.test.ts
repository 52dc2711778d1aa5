import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** The ECS coordinator's WebSocket stream, with a real `ws` client over a real socket. */

let t: TestNode;
let token: string;
const clock = () => t.clock as ManualClock;
const BUFFER_MAX = 64 * 1024;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { ecsWsBufferMaxBytes: BUFFER_MAX } });
  token = (await t.newUser('ecsws')).token;
});
afterAll(() => t.destroy());

const base = (index: string) => `/api/v1/ecs/${index}/coordinator`;
const wsUrl = (index: string, query = `?token=${encodeURIComponent(token)}`) => `${t.url.replace(/^http/, 'ws')}${base(index)}/ws${query}`;

/** A client that queues every message, so a test can await them in order. */
class Client {
  readonly messages: any[] = [];
  private waiters: (() => void)[] = [];
  closed: { code: number; reason: string } | null = null;
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.messages.push(JSON.parse(data.toString()));
      this.wake();
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.wake();
    });
  }
  private wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }
  /** Removes and returns the first queued message matching `match`, waiting up to `ms`. */
  async next(match: (message: any) => boolean = () => true, ms = 5_000): Promise<any> {
    const deadline = Date.now() + ms;
    for (;;) {
      const at = this.messages.findIndex(match);
      if (at >= 0) return this.messages.splice(at, 1)[0];
      if (Date.now() > deadline) throw new Error(`no matching message; queued: ${JSON.stringify(this.messages).slice(0, 500)}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }
  async waitClosed(ms = 5_000) {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) await new Promise<void>((resolve) => this.waiters.push(resolve) && setTimeout(resolve, 50));
    return this.closed;
  }
  send(value: unknown) {
    this.ws.send(typeof value === 'string' ? value : JSON.stringify(value));
  }
}

async function connect(index: string, options: { query?: string; headers?: Record<string, string> } = {}): Promise<Client> {
  const ws = new WebSocket(wsUrl(index, options.query), { headers: options.headers });
  const client = new Client(ws);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return client;
}

/** The HTTP status of a refused upgrade. */
function refusedStatus(index: string, query: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(index, query), { headers });
    ws.once('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('open', () => reject(new Error('the upgrade was accepted')));
    ws.once('error', () => undefined);
  });
}

/** Advances the clock by one period per tick and waits until `index` has committed each tick. */
async function tick(index: string, times = 1, rate = 50) {
  for (let i = 0; i < times; i++) {
    const before = (await t.request('GET', base(index), { token })).body.tick;
    clock().advance(rate);
    for (let polls = 0; polls < 200; polls++) {
      await settle();
      if ((await t.request('GET', base(index), { token })).body.tick > before) break;
    }
  }
}

const post = (index: string, path: string, body?: unknown) => t.request('POST', `${base(index)}${path}`, { token, body });

describe('ECS WebSocket stream', () => {
  it('says hello with the current tick, then streams every tick in order with its changes', async () => {
    await post('w1', '/start', { tick_rate_ms: 50 });
    await tick('w1', 2);
    const client = await connect('w1');
    const hello = await client.next((m) => m.type === 'hello');
    expect(hello).toMatchObject({ type: 'hello', index: 'w1', tick: 2, running: true, tick_rate_ms: 50 });
    const created = await post('w1', '/mutations', { mutations: [{ entity_id: 'ship-1', op: 'create', components: { pos: { x: 1, y: 2 } } }] });
    expect(created.body.results[0]).toMatchObject({ success: true, new_version: 1 });
    await tick('w1');
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({
      type: 'tick',
      tick: 3,
      changes: [{ entity_id: 'ship-1', op: 'upsert', version: 1, components: { pos: { x: 1, y: 2 } } }],
    });
    await post('w1', '/mutations', { mutations: [{ entity_id: 'ship-1', expected_version: 1, components: { hp: 10 } }] });
    await tick('w1', 2);
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({ tick: 4, changes: [{ entity_id: 'ship-1', version: 2, components: { pos: { x: 1, y: 2 }, hp: 10 } }] });
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({ tick: 5, changes: [] });
    const status = await t.request('GET', base('w1'), { token });
    expect(status.body).toMatchObject({ connected_systems: 1, tick: 5 });
    client.ws.close();
    await client.waitClosed();
    await settle();
    await post('w1', '/stop');
  });

  it('accepts the Authorization header; refuses a bad or missing token with 401 before the upgrade', async () => {
    const client = await connect('w2', { query: '', headers: { authorization: `Bearer ${token}` } });
    expect(await client.next((m) => m.type === 'hello')).toMatchObject({ tick: 0, running: false });
    client.ws.close();
    expect(await refusedStatus('w2', '?token=not-a-token')).toBe(401);
    expect(await refusedStatus('w2', '')).toBe(401);
    // A plain GET is not an upgrade.
    const plain = await t.request('GET', `${base('w2')}/ws`, { token });
    expect(plain.status).toBe(426);
    expect(plain.body).toMatchObject({ statusCode: 426, code: 'upgrade_required', error: 'Upgrade Required' });
  });

  it('resumes from a tick: replays the ring in order, then goes on live without gaps', async () => {
    await post('w3', '/start', { tick_rate_ms: 50 });
    for (let i = 1; i <= 3; i++) {
      await post('w3', '/mutations', { mutations: [{ entity_id: `e${i}`, op: 'create', components: { n: i } }] });
      await tick('w3');
    }
    const client = await connect('w3');
    expect(await client.next((m) => m.type === 'hello')).toMatchObject({ tick: 3 });
    client.send({ type: 'resume', tick: 1 });
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({ tick: 2, changes: [{ entity_id: 'e2' }] });
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({ tick: 3, changes: [{ entity_id: 'e3' }] });
    await tick('w3');
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({ tick: 4 });
    client.send({ type: 'resume', tick: 99 });
    expect(await client.next((m) => m.type === 'error')).toMatchObject({ code: 'resume_ahead', tick: 4 });
    client.send({ type: 'snapshot' });
    const snapshot = await client.next((m) => m.type === 'snapshot');
    expect(snapshot).toMatchObject({ tick: 4, part: 1, parts: 1 });
    expect(snapshot.entities.map((e: any) => e.entity_id).sort()).toEqual(['e1', 'e2', 'e3']);
    await tick('w3');
    expect(await client.next((m) => m.type === 'tick')).toMatchObject({ tick: 5 });
    expect(client.messages.filter((m) => m.type === 'tick')).toEqual([]);
    client.ws.close();
    await post('w3', '/stop');
  });

  it('answers a malformed message with an error and keeps the connection', async () => {
    const client = await connect('w4');
    await client.next((m) => m.type === 'hello');
    client.send('not json');
    expect(await client.next((m) => m.type === 'error')).toMatchObject({ code: 'malformed_message' });
    client.send({ type: 'dance' });
    expect(await client.next((m) => m.type === 'error')).toMatchObject({ code: 'malformed_message' });
    client.send({ type: 'resume', tick: -1 });
    expect(await client.next((m) => m.type === 'error')).toMatchObject({ code: 'malformed_message' });
    client.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    expect(await client.next((m) => m.type === 'error')).toMatchObject({ code: 'malformed_message' });
    client.send({ type: 'ping' });
    expect(await client.next((m) => m.type === 'pong')).toMatchObject({ type: 'pong' });
    expect(client.closed).toBeNull();
    client.ws.close();
  });

  it('closes a client that stops reading with 4001 while another keeps receiving every tick', async () => {
    const index = 'w5';
    await post(index, '/start', { tick_rate_ms: 50 });
    const slow = await connect(index);
    const fast = await connect(index);
    const hello = await fast.next((m) => m.type === 'hello');
    await slow.next((m) => m.type === 'hello');
    (slow.ws as any)._socket.pause();
    const filler = 'x'.repeat(1900);
    const versions = new Map<string, number>();
    let evicted = false;
    let ticks = 0;
    for (let round = 0; round < 30 && !evicted; round++) {
      for (let batch = 0; batch < 4; batch++) {
        const mutations = Array.from({ length: 400 }, (_, i) => {
          const entity_id = `big-${batch}-${i}`;
          const version = versions.get(entity_id);
          return version === undefined
            ? { entity_id, op: 'create', components: { filler, round } }
            : { entity_id, expected_version: version, components: { round } };
        });
        const res = await post(index, '/mutations', { mutations });
        expect(res.status, res.text).toBe(200);
        for (const result of res.body.results) versions.set(result.entity_id, result.new_version);
      }
      await tick(index);
      ticks++;
      const status = await t.request('GET', base(index), { token });
      evicted = status.body.connected_systems === 1;
    }
    expect(evicted).toBe(true);
    for (let i = 1; i <= ticks; i++) expect(await fast.next((m) => m.type === 'tick', 10_000)).toMatchObject({ tick: hello.tick + i });
    (slow.ws as any)._socket.resume();
    expect(await slow.waitClosed(10_000)).toMatchObject({ code: 4001, reason: 'slow_consumer' });
    expect(fast.closed).toBeNull();
    fast.ws.close();
    await post(index, '/stop');
  }, 60_000);
});
