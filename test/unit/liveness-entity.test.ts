import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isServiceError, type AlarmChange, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  ANOMALIES_KEPT,
  ANOMALY_EVENT,
  LIVENESS_INDEX_KIND,
  livenessActorKey,
  livenessIndexKey,
  livenessPolicy as policy,
  parseWindow,
  STATUS_CHANGED_EVENT,
  type AggregationView,
  type AnomaliesView,
  type HistoryView,
  type LatencyView,
  type LivenessMessage,
  type LivenessReply,
  type StatusView,
  type UptimeView,
} from '../../actors/liveness/messages.js';
import { latencyAnomaly, loadEntity, STATUS_ALARM, stepLiveness, type EntityState } from '../../actors/liveness/state.js';

const T0 = Date.UTC(2026, 0, 1); // aligned to the hour
const S = 1000;
const MIN = 60 * S;
const H = 60 * MIN;

/**
 * Drives the pure liveness step with a fixed clock and keeps its record
 * writes and alarms the way the runtime would, so tests can reload the state
 * from "storage" and fire alarms by hand. No runtime, no disk.
 */
class EntityHarness {
  readonly key: string;
  readonly records = new Map<string, unknown>();
  readonly alarms = new Map<string, number>();
  state: EntityState;
  private ids = 0;

  constructor(
    readonly tenant = 'tenant-a',
    readonly entity_id = 'device-1',
  ) {
    this.key = livenessActorKey(tenant, entity_id);
    this.state = loadEntity(this.key, []);
  }

  context(now: number): TurnContext {
    return { now, kind: 'liveness', key: this.key, request_id: null, newId: (prefix = '') => `${prefix}${++this.ids}` };
  }

  step(message: LivenessMessage | { op: '$alarm'; name: string; due_ms: number }, now: number): TurnResult<EntityState, LivenessReply> {
    const result = stepLiveness(this.state, message as LivenessMessage, this.context(now));
    this.state = result.state;
    for (const write of result.writes ?? []) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, structuredClone(write.value));
    }
    for (const change of result.alarms ?? []) this.applyAlarm(change);
    return result;
  }

  heartbeat(now: number, options: { client_timestamp_ms?: number; metadata?: Record<string, unknown>; labels?: Record<string, string>; grace_ms?: number } = {}) {
    return this.step({ op: 'heartbeat', grace_ms: options.grace_ms ?? 30_000, ...options }, now);
  }

  /** A heartbeat whose latency sample is exactly `latency_ms`. */
  heartbeatWithLatency(now: number, latency_ms: number) {
    return this.heartbeat(now, { client_timestamp_ms: now - latency_ms });
  }

  /** Fires the named alarm if it is due at `now` (as the runtime would, clearing it first). */
  fireAlarm(name: string, now: number) {
    const due_ms = this.alarms.get(name);
    if (due_ms === undefined || due_ms > now) return undefined;
    this.alarms.delete(name);
    return this.step({ op: '$alarm', name, due_ms }, Math.max(now, due_ms));
  }

  /** Fires every alarm due up to `now`, in due order (what the runtime does as time passes). */
  runUntil(now: number): void {
    for (let guard = 0; guard < 10_000; guard++) {
      let next: [string, number] | undefined;
      for (const entry of this.alarms) if (entry[1] <= now && (!next || entry[1] < next[1])) next = entry;
      if (!next) return;
      this.fireAlarm(next[0], next[1]);
    }
    throw new Error('alarm loop');
  }

  read<T>(message: LivenessMessage, now: number): T {
    return this.step(message, now).reply as T;
  }

  /** A fresh activation from the stored records (subkey order, as LMDB gives them). */
  reload(): EntityState {
    const entries = [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    this.state = loadEntity(this.key, entries.map(([subkey, value]) => [subkey, structuredClone(value)] as [string, unknown]));
    return this.state;
  }

  private applyAlarm(change: AlarmChange): void {
    if (change.due_ms === null) this.alarms.delete(change.name);
    else this.alarms.set(change.name, change.due_ms);
  }
}

function statusEvents(result: { events?: { type: string; data: unknown }[] }) {
  return (result.events ?? []).filter((e) => e.type === STATUS_CHANGED_EVENT).map((e) => e.data as { old_status: string; new_status: string; changed_at_ms: number; entity_id: string; tenant: string });
}

function uptime(h: EntityHarness, now: number, ...windows: string[]) {
  const parsed = windows.map((name) => ({ name, ms: (parseWindow(name) as { ms: number }).ms }));
  return h.read<UptimeView>({ op: 'uptime', windows: parsed }, now).uptime;
}

function aggregate(h: EntityHarness, now: number, aggregation: AggregationView['aggregation'], series: AggregationView['series'], range_ms: number, bucket_ms: number) {
  return h.read<AggregationView>({ op: 'aggregate', aggregation, series, range_ms, bucket_ms }, now);
}

describe('liveness entity: heartbeats and status', () => {
  it('creates the entity on its first heartbeat: ack, event, index message, status alarm, O(1) writes', () => {
    const h = new EntityHarness('tenant-a', 'device-1');
    const result = h.heartbeat(T0, { client_timestamp_ms: T0 - 40, metadata: { region: 'eu' }, labels: { env: 'prod' } });
    expect(result.reply).toEqual({ alive: true, entity_id: 'device-1', client_timestamp_ms: T0 - 40, network_delay_ms: 40, server_timestamp_ms: T0 });
    expect(statusEvents(result)).toEqual([expect.objectContaining({ entity_id: 'device-1', tenant: 'tenant-a', old_status: 'unknown', new_status: 'alive', changed_at_ms: T0, labels: { env: 'prod' } })]);
    expect(result.sends).toEqual([
      { kind: LIVENESS_INDEX_KIND, key: livenessIndexKey('tenant-a'), message: expect.objectContaining({ op: 'upsert', entity_id: 'device-1', alive: true, seq: 1, last_seen_ms: T0 }) },
      // The same event, durably to the tenant's webhooks (docs/api/webhooks.md), its id fixed here.
      {
        kind: 'webhook-subscriptions',
        key: JSON.stringify(['tenant-a']),
        message: { op: 'publish', event: { id: expect.stringMatching(/^evt_/), type: 'entity.status_changed', timestamp_ms: T0, data: statusEvents(result)[0] } },
      },
    ]);
    expect(result.alarms).toEqual([{ name: STATUS_ALARM, due_ms: T0 + 30 * S }]);
    expect((result.writes ?? []).map((w) => w.subkey).sort()).toEqual(['info', 'meta', 'r:' + '1'.padStart(11, '0')]);
    const status = h.read<StatusView>({ op: 'status' }, T0 + S);
    expect(status).toMatchObject({
      alive: true,
      entity_id: 'device-1',
      labels: { env: 'prod' },
      metadata: { region: 'eu' },
      last_seen_server_ms: T0,
      last_seen_client_ms: T0 - 40,
      latency_ms: 40,
      network_delay_ms: 40,
    });
    expect(status.summary).toMatchObject({ status: 'alive', first_seen_ms: T0, grace_ms: 30 * S, dead_after_ms: T0 + 30 * S, heartbeat_count: 1 });
  });

  it('a steady heartbeat writes only its sample: no meta, alarm or index traffic', () => {
    const h = new EntityHarness();
    h.heartbeat(T0, { metadata: { a: 1 } });
    const second = h.heartbeat(T0 + 2 * S, { metadata: { a: 1 } });
    expect((second.writes ?? []).map((w) => w.subkey)).toEqual([expect.stringMatching(/^r:/)]);
    expect(second.alarms).toEqual([]);
    expect(second.sends).toEqual([]);
    expect(second.events).toEqual([]);
  });

  it('is alive strictly before last_seen + grace, dead from then on, even before the alarm runs', () => {
    const h = new EntityHarness();
    h.heartbeat(T0);
    expect(h.read<StatusView>({ op: 'status' }, T0 + 30 * S - 1).alive).toBe(true);
    const dead = h.read<StatusView>({ op: 'status' }, T0 + 30 * S);
    expect(dead.alive).toBe(false);
    expect(dead.summary.status).toBe('dead');
    expect(dead.summary.status_since_ms).toBe(T0 + 30 * S);
  });

  it('the status alarm turns the entity dead at last_seen + grace and publishes it; the next heartbeat revives it', () => {
    const h = new EntityHarness();
    h.heartbeat(T0);
    h.heartbeat(T0 + 10 * S);
    h.heartbeat(T0 + 20 * S);
    // The alarm armed at the first heartbeat falls due early and re-arms, silently.
    const early = h.fireAlarm(STATUS_ALARM, T0 + 30 * S)!;
    expect(early.events ?? []).toEqual([]);
    expect(early.alarms).toEqual([{ name: STATUS_ALARM, due_ms: T0 + 50 * S }]);
    const dead = h.fireAlarm(STATUS_ALARM, T0 + 50 * S)!;
    expect(statusEvents(dead)).toEqual([expect.objectContaining({ old_status: 'alive', new_status: 'dead', changed_at_ms: T0 + 50 * S })]);
    expect(dead.sends?.[0].message).toMatchObject({ op: 'upsert', alive: false, outage: [T0 + 50 * S, -1], last_seen_ms: T0 + 20 * S });
    expect(h.records.get('o:' + (T0 + 50 * S).toString(36).padStart(11, '0'))).toBeNull();
    expect(h.alarms.has(STATUS_ALARM)).toBe(false);

    const back = h.heartbeat(T0 + 80 * S);
    expect(statusEvents(back)).toEqual([expect.objectContaining({ old_status: 'dead', new_status: 'alive', changed_at_ms: T0 + 80 * S })]);
    expect(back.sends?.[0].message).toMatchObject({ alive: true, outage: [T0 + 50 * S, T0 + 80 * S] });
    expect(h.alarms.get(STATUS_ALARM)).toBe(T0 + 110 * S);
    expect(uptime(h, T0 + 80 * S, '1h')['1h']).toEqual({ percentage: 62.5, outages: 1, downtime_seconds: 30 });
  });

  it('a heartbeat past the grace window before the alarm ran publishes both transitions and records the gap', () => {
    const h = new EntityHarness();
    h.heartbeat(T0);
    const late = h.heartbeat(T0 + 100 * S);
    expect(statusEvents(late).map((e) => [e.old_status, e.new_status, e.changed_at_ms])).toEqual([
      ['alive', 'dead', T0 + 30 * S],
      ['dead', 'alive', T0 + 100 * S],
    ]);
    // The stale alarm now only re-arms.
    const stale = h.fireAlarm(STATUS_ALARM, T0 + 100 * S)!;
    expect(statusEvents(stale)).toEqual([]);
    expect(uptime(h, T0 + 100 * S, '1h')['1h']).toEqual({ percentage: 30, outages: 1, downtime_seconds: 70 });
  });

  it('uses the grace window of the latest heartbeat', () => {
    const h = new EntityHarness();
    h.heartbeat(T0, { grace_ms: 5 * S });
    expect(h.read<StatusView>({ op: 'status' }, T0 + 5 * S).alive).toBe(false);
    h.heartbeat(T0 + 6 * S, { grace_ms: 60 * S });
    expect(h.read<StatusView>({ op: 'status' }, T0 + 50 * S).alive).toBe(true);
  });

  it('keeps metadata and labels until a heartbeat replaces them, writing them only on change', () => {
    const h = new EntityHarness();
    h.heartbeat(T0, { metadata: { v: 1 }, labels: { a: 'x' } });
    h.heartbeat(T0 + S);
    expect(h.read<StatusView>({ op: 'status' }, T0 + S)).toMatchObject({ metadata: { v: 1 }, labels: { a: 'x' } });
    const changed = h.heartbeat(T0 + 2 * S, { metadata: { v: 2 } });
    expect(changed.writes?.some((w) => w.subkey === 'info')).toBe(true);
    expect(h.read<StatusView>({ op: 'status' }, T0 + 2 * S)).toMatchObject({ metadata: { v: 2 }, labels: { a: 'x' } });
  });

  it('tells the index about status changes only, not about every heartbeat', () => {
    const h = new EntityHarness();
    // Only the index's messages count here (status changes also publish to webhooks).
    const indexSends = (result: { sends?: { kind: string }[] }) => (result.sends ?? []).filter((send) => send.kind === LIVENESS_INDEX_KIND).length;
    let sends = 0;
    for (let t = 0; t <= 600; t += 5) sends += indexSends(h.heartbeat(T0 + t * S));
    expect(sends).toBe(1); // the first heartbeat
    h.runUntil(T0 + 700 * S);
    sends += indexSends(h.heartbeat(T0 + 700 * S));
    expect(sends).toBe(2); // + the revival (the dead turn's message was the alarm's)
    expect(h.read({ op: 'brief' }, T0 + 701 * S)).toEqual({ entity_id: 'device-1', alive: true, last_seen_ms: T0 + 700 * S });
  });

  it('rejects a bad client timestamp and leaves the entity unchanged', () => {
    const h = new EntityHarness();
    h.heartbeat(T0);
    const before = h.read<StatusView>({ op: 'status' }, T0);
    expect(() => h.heartbeat(T0 + S, { client_timestamp_ms: -5 })).toThrowError(/client_timestamp_ms/);
    expect(h.read<StatusView>({ op: 'status' }, T0)).toEqual(before);
  });

  it('reads and delete of an unknown entity are not_found; delete removes every record and alarm', () => {
    const h = new EntityHarness();
    const notFound = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return isServiceError(error) && error.code === 'not_found';
      }
      return false;
    };
    expect(notFound(() => h.read({ op: 'status' }, T0))).toBe(true);
    expect(notFound(() => h.step({ op: 'delete' }, T0))).toBe(true);
    h.heartbeat(T0, { client_timestamp_ms: T0 - 5, labels: { a: 'b' } });
    h.fireAlarm(STATUS_ALARM, T0 + 30 * S);
    h.heartbeat(T0 + 60 * S);
    const deleted = h.step({ op: 'delete' }, T0 + 61 * S);
    expect(h.records.size).toBe(0);
    expect(h.alarms.size).toBe(0);
    expect(deleted.sends?.[0]).toMatchObject({ kind: LIVENESS_INDEX_KIND, message: { op: 'remove', entity_id: 'device-1' } });
    expect(notFound(() => h.read({ op: 'status' }, T0 + 62 * S))).toBe(true);
    // A new heartbeat starts a new incarnation from scratch.
    const again = h.heartbeat(T0 + 70 * S);
    expect(statusEvents(again)[0]).toMatchObject({ old_status: 'unknown', new_status: 'alive' });
    expect(h.read<StatusView>({ op: 'status' }, T0 + 70 * S).summary).toMatchObject({ heartbeat_count: 1, first_seen_ms: T0 + 70 * S });
  });
});

describe('liveness entity: uptime arithmetic on known heartbeat patterns', () => {
  it('counts a gap longer than the grace window as downtime from last_seen + grace to the next heartbeat', () => {
    const h = new EntityHarness();
    // Every 10 s for an hour, silence for 5 minutes, every 10 s for another hour-ish.
    for (let t = 0; t <= 3600; t += 10) {
      h.runUntil(T0 + t * S);
      h.heartbeat(T0 + t * S);
    }
    for (let t = 3900; t <= 7200; t += 10) {
      h.runUntil(T0 + t * S);
      h.heartbeat(T0 + t * S);
    }
    const now = T0 + 7200 * S;
    expect(uptime(h, now, '1h', '24h', '90m')).toEqual({
      '1h': { percentage: 92.5, outages: 1, downtime_seconds: 270 },
      '24h': { percentage: 96.25, outages: 1, downtime_seconds: 270 }, // observed since the first heartbeat: 7200 s
      '90m': { percentage: 95, outages: 1, downtime_seconds: 270 },
    });
    // 60 s of silence: the last 30 s are an outage, before and after the alarm records it.
    const later = now + 60 * S;
    const before = uptime(h, later, '1h')['1h'];
    expect(before).toEqual({ percentage: 92.5, outages: 2, downtime_seconds: 270 });
    h.runUntil(later);
    expect(uptime(h, later, '1h')['1h']).toEqual(before);
    // Windows starting inside an outage count only its part in the window.
    expect(uptime(h, T0 + 3800 * S, '2m')['2m']).toEqual({ percentage: 0, outages: 1, downtime_seconds: 120 });
  });

  it('is 100% with no gap, and 100% for a window with no observed time', () => {
    const h = new EntityHarness();
    for (let t = 0; t <= 600; t += 20) h.heartbeat(T0 + t * S);
    expect(uptime(h, T0 + 600 * S, '1h', '7d')).toEqual({
      '1h': { percentage: 100, outages: 0, downtime_seconds: 0 },
      '7d': { percentage: 100, outages: 0, downtime_seconds: 0 },
    });
    const fresh = new EntityHarness();
    fresh.heartbeat(T0);
    expect(uptime(fresh, T0, '1h')['1h']).toEqual({ percentage: 100, outages: 0, downtime_seconds: 0 });
  });

  it('an entity dead for longer than the window is 0%', () => {
    const h = new EntityHarness();
    h.heartbeat(T0);
    h.runUntil(T0 + 3 * H);
    expect(uptime(h, T0 + 3 * H, '1h')['1h']).toEqual({ percentage: 0, outages: 1, downtime_seconds: 3600 });
  });
});

describe('liveness entity: aggregations and latency', () => {
  function withLatencies(latencies: number[], step_ms = S) {
    const h = new EntityHarness();
    latencies.forEach((latency, i) => h.heartbeatWithLatency(T0 + (i + 1) * step_ms, latency));
    return h;
  }

  it('computes every aggregation over one bucket of known samples', () => {
    const h = withLatencies([10, 20, 30, 40]);
    const now = T0 + 10 * S;
    const expected: Record<string, number> = { avg: 25, sum: 100, min: 10, max: 40, count: 4, first: 10, last: 40, range: 30, 'std.p': 11.18 };
    for (const [aggregation, value] of Object.entries(expected)) {
      const view = aggregate(h, now, aggregation as AggregationView['aggregation'], 'latency', H, H);
      expect(view.bucket_ms).toBe(H);
      expect(view.data).toHaveLength(1);
      expect(view.data[0].timestamp_ms).toBe(T0);
      expect(view.data[0].value).toBeCloseTo(value, 2);
    }
    expect(aggregate(h, now, 'count', 'heartbeat', H, H).data).toEqual([{ timestamp_ms: T0, value: 4 }]);
    expect(aggregate(h, now, 'avg', 'heartbeat', H, H).data).toEqual([{ timestamp_ms: T0, value: 1 }]);
  });

  it('splits into epoch-aligned buckets, leaves empty ones out, and skips heartbeats without latency', () => {
    const h = new EntityHarness();
    h.heartbeatWithLatency(T0 + 1 * S, 10);
    h.heartbeatWithLatency(T0 + 2 * S, 20);
    h.heartbeatWithLatency(T0 + 3 * S, 30);
    h.heartbeat(T0 + 4 * S); // no client timestamp
    h.heartbeatWithLatency(T0 + 9 * S, 90);
    const now = T0 + 10 * S;
    expect(aggregate(h, now, 'avg', 'latency', H, 2 * S).data).toEqual([
      { timestamp_ms: T0, value: 10 },
      { timestamp_ms: T0 + 2 * S, value: 25 },
      { timestamp_ms: T0 + 8 * S, value: 90 },
    ]);
    expect(aggregate(h, now, 'count', 'heartbeat', H, 2 * S).data).toEqual([
      { timestamp_ms: T0, value: 1 },
      { timestamp_ms: T0 + 2 * S, value: 2 },
      { timestamp_ms: T0 + 4 * S, value: 1 },
      { timestamp_ms: T0 + 8 * S, value: 1 },
    ]);
    // range limits the samples: the last 2 s hold only the 90.
    expect(aggregate(h, now, 'count', 'latency', 2 * S, H).data).toEqual([{ timestamp_ms: T0, value: 1 }]);
    expect(aggregate(h, now, 'count', 'latency', 0, H).data).toEqual([]);
  });

  it('latency: current value, stats over the range and the average per bucket', () => {
    const h = withLatencies([10, 20, 30, 40], 30 * MIN);
    const view = h.read<LatencyView>({ op: 'latency', range_ms: 24 * H, bucket_ms: H }, T0 + 2 * H + MIN);
    expect(view.current_ms).toBe(40);
    expect(view.stats).toEqual({ avg: 25, min: 10, max: 40, std_dev: 11.18 });
    // Samples at 00:30, 01:00, 01:30, 02:00.
    expect(view.trend).toEqual([
      { timestamp_ms: T0, avg: 10 },
      { timestamp_ms: T0 + H, avg: 25 },
      { timestamp_ms: T0 + 2 * H, avg: 40 },
    ]);
    h.heartbeat(T0 + 2 * H + 2 * MIN);
    const noLatency = h.read<LatencyView>({ op: 'latency', range_ms: H, bucket_ms: H }, T0 + 2 * H + 2 * MIN);
    expect(noLatency.current_ms).toBeNull();
    expect(noLatency.stats.avg).toBe(35); // 01:30 and 02:00 are in the last hour
  });

  it('treats a negative delay as 0 ms and a delay beyond an hour as a clock error (no latency sample)', () => {
    const h = new EntityHarness();
    h.heartbeat(T0, { client_timestamp_ms: T0 + 25 });
    h.heartbeat(T0 + S, { client_timestamp_ms: T0 + S - 2 * H });
    const status = h.read<StatusView>({ op: 'status' }, T0 + S);
    expect(status.network_delay_ms).toBe(2 * H);
    expect(status.latency_ms).toBeNull();
    expect(aggregate(h, T0 + S, 'count', 'latency', H, H).data).toEqual([{ timestamp_ms: T0, value: 1 }]);
    expect(aggregate(h, T0 + S, 'max', 'latency', H, H).data).toEqual([{ timestamp_ms: T0, value: 0 }]);
  });

  it('past the raw sample bound, answers from the rollups with the bucket rounded to their resolution', () => {
    const h = new EntityHarness();
    const beats = policy.raw_samples_max + 100;
    for (let i = 0; i < beats; i++) h.heartbeatWithLatency(T0 + i * S, i % 2 === 0 ? 10 : 20);
    const now = T0 + (beats - 1) * S;
    const rawKeys = [...h.records.keys()].filter((k) => k.startsWith('r:'));
    expect(rawKeys).toHaveLength(policy.raw_samples_max);
    // The two minute cells whose samples were evicted are now stored.
    expect([...h.records.keys()].filter((k) => k.startsWith('m:'))).toHaveLength(2);
    const hourly = aggregate(h, now, 'count', 'heartbeat', 2 * H, H);
    expect(hourly.data).toEqual([
      { timestamp_ms: T0, value: 3600 },
      { timestamp_ms: T0 + H, value: 100 },
    ]);
    const odd = aggregate(h, now, 'avg', 'latency', 2 * H, 90 * S);
    expect(odd.bucket_ms).toBe(2 * MIN);
    expect(odd.data[0]).toEqual({ timestamp_ms: T0, value: 15 });
    // A range the raw samples cover is answered from them, to the millisecond.
    const recent = aggregate(h, now, 'count', 'heartbeat', 10 * S, 5 * S);
    expect(recent.bucket_ms).toBe(5 * S);
    expect(recent.data.reduce((sum, p) => sum + p.value, 0)).toBe(11);
    // A reload rebuilds the same answers from the records.
    h.reload();
    expect(aggregate(h, now, 'count', 'heartbeat', 2 * H, H)).toEqual(hourly);
    expect(aggregate(h, now, 'avg', 'latency', 2 * H, 90 * S)).toEqual(odd);
  });

  it('keeps hour rollups beyond the minute retention, and bounds the stored records', () => {
    const h = new EntityHarness();
    const step_ms = 2 * S;
    const beats = (8 * H) / step_ms;
    for (let i = 0; i < beats; i++) h.heartbeatWithLatency(T0 + i * step_ms, 5);
    const now = T0 + (beats - 1) * step_ms;
    const view = aggregate(h, now, 'count', 'heartbeat', 8 * H, H);
    expect(view.bucket_ms).toBe(H);
    expect(view.data).toHaveLength(8);
    for (const point of view.data) expect(point.value).toBe(1800);
    const counts = { r: 0, m: 0, h: 0 };
    for (const key of h.records.keys()) if (key[1] === ':') counts[key[0] as 'r' | 'm' | 'h'] += 1;
    expect(counts.r).toBe(policy.raw_samples_max);
    expect(counts.m).toBeLessThanOrEqual(policy.minute_retention_ms / MIN + 1);
    expect(counts.h).toBeLessThanOrEqual(8);
    h.reload();
    expect(aggregate(h, now, 'count', 'heartbeat', 8 * H, H)).toEqual(view);
  });

  it('prunes a dead entity\'s samples by the retention alarm', () => {
    const h = new EntityHarness();
    for (let i = 0; i < 10; i++) h.heartbeatWithLatency(T0 + i * S, 7);
    h.runUntil(T0 + 8 * 24 * H);
    expect([...h.records.keys()].filter((k) => /^[rmh]:/.test(k))).toEqual([]);
    expect(h.read<StatusView>({ op: 'status' }, T0 + 8 * 24 * H)).toMatchObject({ alive: false, last_seen_server_ms: T0 + 9 * S, latency_ms: 7 });
    h.reload();
    expect(h.read<StatusView>({ op: 'status' }, T0 + 8 * 24 * H)).toMatchObject({ alive: false, last_seen_server_ms: T0 + 9 * S, latency_ms: 7 });
    expect(h.read<StatusView>({ op: 'status' }, T0 + 8 * 24 * H).summary.heartbeat_count).toBe(10);
  });
});

describe('liveness entity: history', () => {
  it('returns the latest `limit` samples in [from, to], oldest first, with has_more and total_in_range', () => {
    const h = new EntityHarness();
    for (let i = 0; i < 10; i++) {
      if (i === 4) h.heartbeat(T0 + i * S);
      else h.heartbeatWithLatency(T0 + i * S, i);
    }
    const all = h.read<HistoryView>({ op: 'history', from_ms: null, to_ms: null, limit: 100 }, T0 + 10 * S);
    expect(all.total_in_range).toBe(10);
    expect(all.has_more).toBe(false);
    expect(all.samples[4]).toEqual({ timestamp_ms: T0 + 4 * S, latency_ms: null });
    const page = h.read<HistoryView>({ op: 'history', from_ms: T0 + 2 * S, to_ms: T0 + 7 * S, limit: 3 }, T0 + 10 * S);
    expect(page).toEqual({
      entity_id: 'device-1',
      total_in_range: 6,
      has_more: true,
      samples: [
        { timestamp_ms: T0 + 5 * S, latency_ms: 5 },
        { timestamp_ms: T0 + 6 * S, latency_ms: 6 },
        { timestamp_ms: T0 + 7 * S, latency_ms: 7 },
      ],
    });
    const older = h.read<HistoryView>({ op: 'history', from_ms: T0 + 2 * S, to_ms: T0 + 5 * S - 1, limit: 3 }, T0 + 10 * S);
    expect(older.samples.map((s) => s.timestamp_ms)).toEqual([T0 + 2 * S, T0 + 3 * S, T0 + 4 * S]);
    expect(older.has_more).toBe(false);
    // Default window: the hour before `to`.
    expect(h.read<HistoryView>({ op: 'history', from_ms: null, to_ms: null, limit: 100 }, T0 + H + 3 * S).total_in_range).toBe(7);
    expect(() => h.read({ op: 'history', from_ms: T0 + 5 * S, to_ms: T0, limit: 1 }, T0 + 10 * S)).toThrowError(/from/);
  });
});

describe('liveness entity: anomaly rule', () => {
  const steady = Array.from({ length: 30 }, (_, i) => 50 + (i % 3) - 1); // 49, 50, 51, ...

  it('needs at least anomaly_samples_min samples', () => {
    expect(latencyAnomaly(steady.slice(0, policy.anomaly_samples_min - 1), 500)).toBeNull();
    expect(latencyAnomaly(steady.slice(0, policy.anomaly_samples_min), 500)).not.toBeNull();
  });

  it('flags |latency - mean| > 4 * max(std_dev, 1 ms, 5% of mean), both directions', () => {
    // mean 50, std_dev 0.816: the floor is 5% of 50 = 2.5 ms, so the threshold is 10 ms.
    expect(latencyAnomaly(steady, 60)).toBeNull();
    expect(latencyAnomaly(steady, 60.5)).toMatchObject({ direction: 'high', mean_ms: 50, window_samples: 30, z_score: 4.2 });
    expect(latencyAnomaly(steady, 39)).toMatchObject({ direction: 'low' });
    const noisy = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? 20 : 80)); // mean 50, std_dev 30
    expect(latencyAnomaly(noisy, 160)).toBeNull();
    expect(latencyAnomaly(noisy, 171)).toMatchObject({ direction: 'high' });
  });

  it('publishes entity.liveness_anomaly from the heartbeat that carries the outlier', () => {
    const h = new EntityHarness('tenant-z', 'sensor');
    steady.forEach((latency, i) => h.heartbeatWithLatency(T0 + i * S, latency));
    const quiet = h.heartbeatWithLatency(T0 + 30 * S, 52);
    expect((quiet.events ?? []).filter((e) => e.type === ANOMALY_EVENT)).toEqual([]);
    const spike = h.heartbeatWithLatency(T0 + 31 * S, 400);
    const anomalies = (spike.events ?? []).filter((e) => e.type === ANOMALY_EVENT);
    expect(anomalies).toHaveLength(1);
    expect(anomalies[0].data).toMatchObject({ entity_id: 'sensor', tenant: 'tenant-z', latency_ms: 400, direction: 'high', timestamp_ms: T0 + 31 * S });
  });

  it('keeps the newest anomalies for the administrators\' list, across a reload, and forgets them on delete', () => {
    const h = new EntityHarness('tenant-z', 'sensor');
    steady.forEach((latency, i) => h.heartbeatWithLatency(T0 + i * S, latency));
    h.heartbeatWithLatency(T0 + 30 * S, 400);
    // Sixty steady samples push the outlier out of the window; then a low one.
    for (let i = 0; i < 60; i++) h.heartbeatWithLatency(T0 + (31 + i) * S, steady[i % 30]!);
    h.heartbeatWithLatency(T0 + 91 * S, 1);
    const view = h.read<AnomaliesView>({ op: 'anomalies' }, T0 + 92 * S);
    expect(view.anomaly_count).toBe(2);
    expect(view.anomalies.map((a) => [a.timestamp_ms, a.direction])).toEqual([
      [T0 + 91 * S, 'low'],
      [T0 + 30 * S, 'high'],
    ]);
    h.reload();
    expect(h.read<AnomaliesView>({ op: 'anomalies' }, T0 + 92 * S)).toEqual(view);
    for (let i = 0; i < ANOMALIES_KEPT + 5; i++) {
      for (let j = 0; j < 60; j++) h.heartbeatWithLatency(T0 + (100 + i * 70 + j) * S, steady[j % 30]!);
      h.heartbeatWithLatency(T0 + (100 + i * 70 + 65) * S, 900);
    }
    const many = h.read<AnomaliesView>({ op: 'anomalies' }, T0 + 2 * H);
    expect(many.anomalies[0]!.latency_ms).toBe(900);
    expect(many.anomalies).toHaveLength(ANOMALIES_KEPT);
    expect(many.anomaly_count).toBeGreaterThanOrEqual(ANOMALIES_KEPT + 5);
    h.step({ op: 'delete' }, T0 + 2 * H);
    expect(h.records.has('anomalies')).toBe(false);
  });
});

describe('liveness entity: a reload from the records gives the same answers', () => {
  it('holds for random heartbeat patterns, gaps, latencies and alarms (property)', () => {
    const action = fc.record({
      gap_ms: fc.oneof(fc.integer({ min: 0, max: 5 * S }), fc.integer({ min: 5 * S, max: 45 * S }), fc.integer({ min: 45 * S, max: 3 * H })),
      latency: fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined }),
      reload: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(action, { minLength: 1, maxLength: 60 }), (actions) => {
        const h = new EntityHarness();
        let now = T0 + 123;
        for (const a of actions) {
          now += a.gap_ms;
          h.runUntil(now);
          if (a.latency === undefined) h.heartbeat(now);
          else h.heartbeatWithLatency(now, a.latency);
          const probe = now + a.gap_ms;
          const reads = (): unknown[] => [
            h.read({ op: 'status' }, probe),
            uptime(h, probe, '1h', '24h', '7d'),
            aggregate(h, probe, 'avg', 'latency', 24 * H, H),
            aggregate(h, probe, 'count', 'heartbeat', 7 * 24 * H, 10 * MIN),
            aggregate(h, probe, 'std.p', 'latency', 2 * H, 7 * MIN),
            h.read({ op: 'history', from_ms: null, to_ms: null, limit: 50 }, probe),
          ];
          const before = reads();
          if (a.reload) {
            h.reload();
            expect(reads()).toEqual(before);
          }
        }
      }),
      { numRuns: 60 },
    );
  });
});
