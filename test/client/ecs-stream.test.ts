import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ManualClock } from '../../runtime/index.js';
import { createPlatformClient, openClientEcsStream, type EcsSnapshot, type EcsTick, type PlatformClient, type Tokens } from '../../clients/typescript/src/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/**
 * The client's ECS stream helper against a real node: it reconnects after its
 * connection is cut and after a node restart, and resumes from the last tick
 * it applied, so its handler sees every tick once and in order.
 */

/** A TCP relay in front of the node: the network between the client and the node, which a test can cut. */
function startRelay(target: () => number): Promise<{ url: string; cut(): void; freeze(): void; close(): Promise<void> }> {
  const open = new Set<Socket>();
  const pairs = new Set<[Socket, Socket]>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(target(), '127.0.0.1');
    const pair: [Socket, Socket] = [inbound, outbound];
    pairs.add(pair);
    inbound.on('close', () => pairs.delete(pair));
    for (const socket of [inbound, outbound]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => undefined);
    }
    inbound.pipe(outbound).on('close', () => inbound.destroy());
    outbound.pipe(inbound).on('close', () => outbound.destroy());
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      resolve({
        url: `http://127.0.0.1:${port}`,
        cut: () => {
          for (const socket of open) socket.destroy();
        },
        // The open connections stop carrying bytes, without a close (a half-open connection); new ones work.
        freeze: () => {
          for (const [inbound, outbound] of pairs) {
            inbound.unpipe(outbound);
            outbound.unpipe(inbound);
            inbound.pause();
            outbound.pause();
          }
          pairs.clear();
        },
        close: () =>
          new Promise<void>((done) => {
            for (const socket of open) socket.destroy();
            server.close(() => done());
          }),
      });
    }),
  );
}

let t: TestNode;
let relay: Awaited<ReturnType<typeof startRelay>>;
let token: string;
let api: PlatformClient;
/** While set, the stream's client cannot read its token, so it cannot reconnect: ticks happen while it is away. */
let gate: Promise<void> | null = null;
let openGate: () => void = () => undefined;
beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  relay = await startRelay(() => Number(new URL(t.url).port));
  let tokens: Tokens | null = null;
  api = createPlatformClient({
    baseUrl: relay.url,
    tokens: {
      get: async () => {
        await gate;
        return tokens;
      },
      set: (next) => {
        tokens = next;
      },
    },
  });
  const registered = await api.post('/api/v1/auth/register', { body: { email: 'ecs@example.com', username: 'ecsclient', password: 'correct horse battery' } });
  token = registered.access_token;
});
afterAll(async () => {
  await relay?.close();
  await t?.destroy();
});

const base = '/api/v1/ecs/arena/coordinator';

function closeGate(): void {
  gate = new Promise((resolve) => {
    openGate = () => {
      gate = null;
      resolve();
    };
  });
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** One tick of the index (the node's clock is manual), with the given changes made before it. */
async function tickWith(mutations: object[] = []): Promise<number> {
  if (mutations.length > 0) {
    const res = await t.request('POST', `${base}/mutations`, { token, body: { mutations } });
    expect(res.body.succeeded, res.text).toBe(mutations.length);
  }
  const before = (await t.request('GET', base, { token })).body.tick;
  (t.clock as ManualClock).advance(50);
  for (let polls = 0; polls < 300; polls++) {
    await settle();
    const now = (await t.request('GET', base, { token })).body.tick;
    if (now > before) return now;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('no tick');
}

describe('ECS stream helper', () => {
  it('reconnects after a cut connection and a node restart, resuming from the last tick it applied', async () => {
    await t.request('POST', `${base}/start`, { token, body: { tick_rate_ms: 50 } });
    await tickWith([{ entity_id: 'ship', op: 'create', components: { x: 0 } }]);

    const snapshots: EcsSnapshot[] = [];
    const ticks: EcsTick[] = [];
    const connections: boolean[] = [];
    let sockets = 0;
    const stream = openClientEcsStream(api, {
      index: 'arena',
      WebSocket: class extends WebSocket {
        constructor(url: string) {
          super(url);
          sockets++;
        }
      },
      onSnapshot: (snapshot) => snapshots.push(snapshot),
      onTick: (tick) => ticks.push(tick),
      onConnectionChange: (connected) => connections.push(connected),
      reconnect: { minDelayMs: 20, maxDelayMs: 200 },
    });
    try {
      // First connection: the whole index, then its ticks.
      await until(() => snapshots.length === 1, 'the snapshot');
      expect(snapshots[0]).toEqual({ tick: 1, entities: [{ entity_id: 'ship', version: 1, components: { x: 0 } }] });
      await tickWith([{ entity_id: 'ship', expected_version: 1, components: { x: 1 } }]);
      await until(() => ticks.length === 1, 'tick 2');

      // The connection is cut; ticks 3 to 5 happen before the client is back.
      closeGate();
      relay.cut();
      await until(() => connections.at(-1) === false, 'the lost connection');
      for (let x = 2; x <= 4; x++) await tickWith([{ entity_id: 'ship', expected_version: x, components: { x } }]);
      openGate();
      await until(() => ticks.length === 4, 'the missed ticks');
      expect(connections).toEqual([true, false, true]);

      // The node restarts (its sockets are closed with 1001); ticks happen after it is back, before the client is.
      closeGate();
      const stoppedAt = (t.clock as ManualClock).now();
      await t.stop();
      t = await startTestNode({ clock: 'manual', dataDir: t.dataDir });
      // Its clock starts at the real time, which can be behind the first clock (moved 50 ms a tick, faster
      // than real time): moved just past it, so the next tick's advance reaches the tick alarm.
      const restarted = t.clock as ManualClock;
      restarted.advance(Math.max(1, stoppedAt + 1 - restarted.now()));
      await tickWith([{ entity_id: 'ship', expected_version: 5, components: { x: 5 } }]);
      await tickWith([{ entity_id: 'ship', op: 'delete', expected_version: 6 }]);
      openGate();
      await tickWith();
      await until(() => ticks.length >= 7, 'the ticks after the restart');
      expect(connections.slice(-2)).toEqual([false, true]);
      expect(sockets).toBeGreaterThanOrEqual(3);

      // Every tick once, in order, with no gap, across both reconnects.
      const numbers = ticks.map((tick) => tick.tick);
      expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, i) => i + 2));
      expect(stream.lastTick).toBe(numbers.at(-1));
      const shipChanges = ticks.flatMap((tick) => tick.changes.filter((change) => change.entity_id === 'ship'));
      expect(shipChanges.map((change) => [change.op, change.version])).toEqual([
        ['upsert', 2],
        ['upsert', 3],
        ['upsert', 4],
        ['upsert', 5],
        ['upsert', 6],
        ['delete', 7],
      ]);
      expect(snapshots).toHaveLength(1);
    } finally {
      stream.close();
    }
  }, 60_000);

  it('replaces a connection that went silent without a close (heartbeat), and resumes', async () => {
    const ticks: number[] = [];
    const connections: boolean[] = [];
    const stream = openClientEcsStream(api, {
      index: 'arena',
      start: 'live',
      WebSocket,
      heartbeatMs: 200,
      onTick: (tick) => ticks.push(tick.tick),
      onConnectionChange: (connected) => connections.push(connected),
      reconnect: { minDelayMs: 20, maxDelayMs: 200 },
    });
    try {
      await until(() => connections.length === 1 && stream.lastTick !== null, 'the first connection');
      const first = stream.lastTick!;
      await tickWith();
      await until(() => ticks.length === 1, 'a live tick');
      relay.freeze();
      await tickWith();
      await tickWith();
      await until(() => connections.length === 3, 'the replaced connection');
      expect(connections).toEqual([true, false, true]);
      await tickWith();
      await until(() => ticks.length === 4, 'the ticks missed while silent, then live');
      expect(ticks).toEqual([first + 1, first + 2, first + 3, first + 4]);
    } finally {
      stream.close();
    }
  });

  it('connects with a token it refreshes when the stored access token has expired', async () => {
    const sent: string[] = [];
    const late = createPlatformClient({
      baseUrl: t.url,
      fetch: async (request) => {
        const response = await fetch(request);
        sent.push(`${request.method} ${new URL(request.url).pathname} ${response.status}`);
        return response;
      },
    });
    await late.post('/api/v1/auth/register', { body: { email: 'late@example.com', username: 'lateecs', password: 'correct horse battery' } });
    // Past the access token's lifetime (900 s): the first upgrade is refused with 401. (Last in this file: every
    // token issued so far expires here, the one tickWith uses included.)
    (t.clock as ManualClock).advance(901_000);
    sent.length = 0;
    const hellos: number[] = [];
    const stream = openClientEcsStream(late, {
      index: 'late',
      start: 'live',
      WebSocket,
      onHello: (hello) => hellos.push(hello.tick),
      onTick: () => undefined,
      reconnect: { minDelayMs: 20, maxDelayMs: 200 },
    });
    try {
      await until(() => hellos.length === 1, 'the hello of the second connection');
      expect(sent).toEqual(['GET /api/v1/auth/me 401', 'POST /api/v1/auth/refresh 200', 'GET /api/v1/auth/me 200']);
      expect(hellos).toEqual([0]);
      expect(stream.lastTick).toBe(0);
    } finally {
      stream.close();
    }
  });
});
