import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { partitionOf } from '../../runtime/index.js';
import { ECS_INDEX_KIND, ecsIndexKey } from '../../actors/ecs/messages.js';
import { startCluster, type ClusterHandle } from '../helpers/cluster.js';
import { call, clusterStatus, registerUser, sleep } from './support/client.js';

/**
 * The ECS tick stream across nodes: a client connected to any node receives
 * the ticks of an index led elsewhere, in order and without gaps, also across
 * the leader's SIGKILL.
 */
const PARTITIONS = 16;
const base = (index: string) => `/api/v1/ecs/${index}/coordinator`;

interface Subscriber {
  nodeId: string;
  ws: WebSocket;
  ticks: { tick: number; changes: any[] }[];
  hello: any;
  closed: boolean;
}

function subscribe(url: string, nodeId: string, index: string, token: string): Promise<Subscriber> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${base(index)}/ws?token=${encodeURIComponent(token)}`);
  const subscriber: Subscriber = { nodeId, ws, ticks: [], hello: null, closed: false };
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString());
    if (message.type === 'hello') subscriber.hello = message;
    if (message.type === 'tick') subscriber.ticks.push({ tick: message.tick, changes: message.changes });
  });
  ws.on('close', () => (subscriber.closed = true));
  ws.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(subscriber));
    ws.once('error', reject);
  });
}

function expectConsecutive(subscriber: Subscriber): void {
  const numbers = subscriber.ticks.map((t) => t.tick);
  for (let i = 1; i < numbers.length; i++) expect(numbers[i], `${subscriber.nodeId}: ${numbers.slice(Math.max(0, i - 3), i + 2)}`).toBe(numbers[i - 1]! + 1);
  if (subscriber.hello && numbers.length > 0) expect(numbers[0]).toBe(subscriber.hello.tick + 1);
}

describe('cluster: the ECS tick stream', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('every node streams every tick of an index led by one of them, in order, also across the leader\'s SIGKILL', async () => {
    const [first] = cluster.nodes;
    const { token, userId } = await registerUser(first!.url, 'ecs');
    const index = 'arena';
    const p = partitionOf(ECS_INDEX_KIND, ecsIndexKey(userId, index), PARTITIONS);
    const leaderId = (await clusterStatus(first!.url))!.partitions[p]!.leader;
    const leader = cluster.nodes.find((n) => n.nodeId === leaderId)!;
    const others = cluster.nodes.filter((n) => n !== leader);
    expect(others.length).toBe(2);

    const started = await call(others[0]!.url, 'POST', `${base(index)}/start`, token, { tick_rate_ms: 100 });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const subscribers = await Promise.all(cluster.nodes.map((n) => subscribe(n.url, n.nodeId, index, token)));
    await sleep(500);
    const mutated = await call(others[1]!.url, 'POST', `${base(index)}/mutations`, token, { mutations: [{ entity_id: 'hero', op: 'create', components: { hp: 10 } }] });
    expect(mutated.body.results[0].success).toBe(true);
    await sleep(1_500);
    const status = await call(others[0]!.url, 'GET', base(index), token);
    expect(status.body.connected_systems).toBe(3);

    for (const subscriber of subscribers) {
      expectConsecutive(subscriber);
      const carrying = subscriber.ticks.find((t) => t.changes.some((c) => c.entity_id === 'hero'));
      expect(carrying?.tick, subscriber.nodeId).toBe(mutated.body.tick);
    }

    // The leader dies: the other nodes' subscribers go on from the new leader with no gap.
    await leader.kill('SIGKILL');
    const survivors = subscribers.filter((s) => s.nodeId !== leader.nodeId);
    const before = survivors.map((s) => s.ticks.length);
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && survivors.some((s, i) => s.ticks.length < before[i]! + 10)) await sleep(200);
    for (const [i, subscriber] of survivors.entries()) {
      expect(subscriber.closed, subscriber.nodeId).toBe(false);
      expect(subscriber.ticks.length, subscriber.nodeId).toBeGreaterThanOrEqual(before[i]! + 10);
      expectConsecutive(subscriber);
    }
    for (const subscriber of subscribers) subscriber.ws.terminate();
  }, 90_000);
});
