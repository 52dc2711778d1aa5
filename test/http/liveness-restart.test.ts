import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock, type PublishedEvent } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/**
 * Liveness across a graceful restart on the same data directory: samples,
 * rollups, outages and the status alarms survive; an alarm that fell due
 * while the node was down fires when it comes back.
 */
const T = Date.UTC(2026, 0, 1, 12);
const clock = new ManualClock(T);
const nodes: TestNode[] = [];

afterAll(async () => {
  for (const node of nodes) await node.stop().catch(() => undefined);
  if (nodes[0]) rmSync(nodes[0].dataDir, { recursive: true, force: true });
});

async function start(dataDir?: string): Promise<{ node: TestNode; events: PublishedEvent[] }> {
  const node = await startTestNode({ clock, dataDir });
  nodes.push(node);
  const events: PublishedEvent[] = [];
  node.node.runtime.events.on('event', (event: PublishedEvent) => events.push(event));
  return { node, events };
}

async function until(condition: () => boolean | Promise<boolean>, what: string) {
  for (let i = 0; i < 500; i++) {
    if (await condition()) return;
    clock.advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const deadEvents = (events: PublishedEvent[]) =>
  events.filter((e) => e.type === 'entity.status_changed' && (e.data as { new_status: string }).new_status === 'dead').map((e) => e.data as { entity_id: string; changed_at_ms: number });

describe('liveness restart', () => {
  it('keeps samples and status alarms across a restart', async () => {
    const first = await start();
    const user = await first.node.newUser('restart');
    const beat = (node: TestNode, entity_id: string, latency_ms: number) =>
      node.request('POST', '/api/v1/liveness', { token: user.token, body: { entity_id, client_timestamp_ms: clock.now() - latency_ms } });

    // steady: one heartbeat a second for 100 s; lapsed stops after 80 s.
    for (let i = 0; i < 100; i++) {
      const replies = await Promise.all([beat(first.node, 'steady', 10 + (i % 5)), ...(i <= 80 ? [beat(first.node, 'lapsed', 50)] : [])]);
      for (const reply of replies) expect(reply.status).toBe(200);
      clock.advance(1000);
    }
    await settle();
    const reads = ['/history?limit=1000', '/aggregations?range=3600&bucket=60&aggregation=std.p', '/aggregations?series=heartbeat&aggregation=count&range=3600&bucket=10', '/latency?range=3600&bucket=60'];
    const get = (node: TestNode, path: string) => node.request('GET', path, { token: user.token });
    const before = await Promise.all(reads.map((path) => get(first.node, `/api/v1/liveness/steady${path}`)));
    expect(before[0].body.total_in_range).toBe(100);
    expect(deadEvents(first.events)).toEqual([]);

    // Down from T+100 s to T+120 s: lapsed's alarm (T+110 s) falls due meanwhile.
    await first.node.stop();
    clock.advance(20_000);
    const second = await start(first.node.dataDir);
    await until(() => deadEvents(second.events).length === 1, 'the overdue alarm of lapsed');
    expect(deadEvents(second.events)).toEqual([expect.objectContaining({ entity_id: 'lapsed', changed_at_ms: T + 110_000 })]);

    const after = await Promise.all(reads.map((path) => get(second.node, `/api/v1/liveness/steady${path}`)));
    for (let i = 0; i < reads.length; i++) {
      expect(after[i].status, after[i].text).toBe(200);
      expect(after[i].body, reads[i]).toEqual(before[i].body);
    }

    // steady's alarm (last heartbeat T+99 s, grace 30 s) survived too: no read or heartbeat needed.
    clock.advance(T + 128_999 - clock.now());
    await settle();
    expect(deadEvents(second.events)).toHaveLength(1);
    clock.advance(1);
    await until(() => deadEvents(second.events).length === 2, 'the alarm of steady');
    expect(deadEvents(second.events)[1]).toMatchObject({ entity_id: 'steady', changed_at_ms: T + 129_000 });

    await until(async () => (await get(second.node, '/api/v1/liveness?alive=false')).body.total_matched === 2, 'both dead in the index');
    const uptime = await get(second.node, '/api/v1/liveness/lapsed/uptime?windows=1h');
    // Observed since the first heartbeat (129 s), down since T+110 s.
    expect(uptime.body.uptime['1h']).toEqual({ percentage: 85.2713, outages: 1, downtime_seconds: 19 });
  });
});
