import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ActorSend, AlarmChange, TurnContext } from '../../runtime/index.js';
import { loadIndex, stepIndex, TOMBSTONE_ALARM, type IndexState } from '../../actors/liveness/index-state.js';
import {
  LIVENESS_INDEX_KIND,
  livenessActorKey,
  livenessIndexKey,
  livenessPolicy as policy,
  type IndexListView,
  type IndexMessage,
  type IndexQuery,
  type LivenessMessage,
  type UptimeView,
} from '../../actors/liveness/messages.js';
import { loadEntity, stepLiveness, type EntityState } from '../../actors/liveness/state.js';

const T0 = Date.UTC(2026, 0, 1);
const S = 1000;
const H = 3600 * S;

/** The index step with a fixed clock and a map standing in for its records. */
class IndexHarness {
  readonly key = livenessIndexKey('tenant-a');
  readonly records = new Map<string, unknown>();
  readonly alarms = new Map<string, number>();
  state: IndexState = loadIndex(this.key, []);

  step(message: IndexMessage | IndexQuery | { op: '$alarm'; name: string; due_ms: number }, now: number) {
    const context: TurnContext = { now, kind: LIVENESS_INDEX_KIND, key: this.key, request_id: null, newId: () => 'x' };
    const result = stepIndex(this.state, message as IndexMessage, context);
    this.state = result.state;
    for (const write of result.writes ?? []) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, structuredClone(write.value));
    }
    for (const change of result.alarms ?? []) this.applyAlarm(change);
    return result;
  }

  list(now: number, query: Partial<IndexQuery> = {}): IndexListView {
    return this.step({ op: 'list', range_ms: 24 * H, limit: 100, ...query }, now).reply as IndexListView;
  }

  reload(): void {
    const entries = [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    this.state = loadIndex(this.key, entries.map(([k, v]) => [k, structuredClone(v)] as [string, unknown]));
  }

  private applyAlarm(change: AlarmChange) {
    if (change.due_ms === null) this.alarms.delete(change.name);
    else this.alarms.set(change.name, change.due_ms);
  }
}

function upsert(entity_id: string, fields: Partial<Extract<IndexMessage, { op: 'upsert' }>> = {}): IndexMessage {
  return { op: 'upsert', entity_id, incarnation: 'inc-1', seq: 1, first_seen_ms: T0, last_seen_ms: T0, alive: true, history_start_ms: null, ...fields };
}

describe('liveness index', () => {
  it('lists entities by id with alive, last_seen_ms and uptime over the range; filters and limit', () => {
    const index = new IndexHarness();
    index.step(upsert('b'), T0);
    index.step(upsert('a'), T0);
    index.step(upsert('c'), T0);
    // c went dead at T0 + 30 s and is still dead; a had a 10-minute outage.
    index.step(upsert('c', { seq: 2, alive: false, outage: [T0 + 30 * S, -1] }), T0 + 30 * S);
    index.step(upsert('a', { seq: 2, alive: false, outage: [T0 + 10 * 60 * S, -1] }), T0 + 10 * 60 * S);
    index.step(upsert('a', { seq: 3, alive: true, last_seen_ms: T0 + 20 * 60 * S, outage: [T0 + 10 * 60 * S, T0 + 20 * 60 * S] }), T0 + 20 * 60 * S);
    const now = T0 + H;
    const all = index.list(now);
    expect(all.total_matched).toBe(3);
    expect(all.entities).toEqual([
      { entity_id: 'a', alive: true, last_seen_ms: T0 + 20 * 60 * S, uptime: 83.3333 },
      { entity_id: 'b', alive: true, last_seen_ms: T0, uptime: 100 },
      { entity_id: 'c', alive: false, last_seen_ms: T0, uptime: 0.8333 },
    ]);
    expect(index.list(now, { alive: false }).entities.map((e) => e.entity_id)).toEqual(['c']);
    expect(index.list(now, { alive: true }).entities.map((e) => e.entity_id)).toEqual(['a', 'b']);
    expect(index.list(now, { uptime_below: 90 }).entities.map((e) => e.entity_id)).toEqual(['a', 'c']);
    expect(index.list(now, { uptime_below: 83.3333 }).entities.map((e) => e.entity_id)).toEqual(['c']);
    expect(index.list(now, { limit: 1 })).toEqual({ entities: [all.entities[0]], total_matched: 3 });
    expect(index.list(now, { limit: 0 })).toEqual({ entities: [], total_matched: 3 });
    // A 30-minute range starts after a's outage.
    expect(index.list(now, { range_ms: 30 * 60 * S }).entities[0].uptime).toBe(100);
    index.reload();
    expect(index.list(now)).toEqual(all);
  });

  it('ignores an older sequence for the scalar fields, and never undoes an outage end', () => {
    const index = new IndexHarness();
    index.step(upsert('x', { seq: 3, alive: true, last_seen_ms: T0 + 100 * S, outage: [T0 + 40 * S, T0 + 100 * S] }), T0 + 100 * S);
    // The dead message (seq 2) arrives late.
    index.step(upsert('x', { seq: 2, alive: false, last_seen_ms: T0 + 10 * S, outage: [T0 + 40 * S, -1] }), T0 + 101 * S);
    const [entry] = index.list(T0 + 200 * S).entities;
    expect(entry).toMatchObject({ alive: true, last_seen_ms: T0 + 100 * S });
    expect(entry.uptime).toBe(70); // 60 s down out of 200 s
  });

  it('removes an entity; a late message of the removed incarnation does not bring it back; a new incarnation does', () => {
    const index = new IndexHarness();
    index.step(upsert('x'), T0);
    index.step({ op: 'remove', entity_id: 'x', incarnation: 'inc-1' }, T0 + S);
    expect(index.list(T0 + S).total_matched).toBe(0);
    expect(index.alarms.get(TOMBSTONE_ALARM)).toBe(T0 + S + policy.index_tombstone_retention_ms);
    index.step(upsert('x', { seq: 5 }), T0 + 2 * S);
    expect(index.list(T0 + 2 * S).total_matched).toBe(0);
    index.step(upsert('x', { incarnation: 'inc-2', first_seen_ms: T0 + 3 * S, last_seen_ms: T0 + 3 * S }), T0 + 3 * S);
    expect(index.list(T0 + 3 * S).entities).toEqual([{ entity_id: 'x', alive: true, last_seen_ms: T0 + 3 * S, uptime: 100 }]);
    expect([...index.records.keys()]).toEqual(['e:x']);
    // A message of the first incarnation after the second exists changes nothing either.
    index.step(upsert('x', { seq: 9, alive: false }), T0 + 4 * S);
    expect(index.list(T0 + 4 * S).entities[0].alive).toBe(true);
  });

  it('a remove of an older incarnation leaves the current one, and tombstones expire by alarm', () => {
    const index = new IndexHarness();
    index.step(upsert('x', { incarnation: 'inc-2', first_seen_ms: T0 + 5 * S }), T0 + 5 * S);
    index.step({ op: 'remove', entity_id: 'x', incarnation: 'inc-1' }, T0 + 6 * S);
    expect(index.list(T0 + 6 * S).total_matched).toBe(1);
    expect(index.records.has('t:x')).toBe(true);
    const due_ms = index.alarms.get(TOMBSTONE_ALARM)!;
    index.alarms.delete(TOMBSTONE_ALARM);
    index.step({ op: '$alarm', name: TOMBSTONE_ALARM, due_ms }, due_ms);
    expect(index.records.has('t:x')).toBe(false);
    expect(index.alarms.has(TOMBSTONE_ALARM)).toBe(false);
  });
});

describe('liveness index fed by entity actors', () => {
  /** Entities whose outbox messages are delivered to the index, in order. */
  function fleet() {
    const index = new IndexHarness();
    const entities = new Map<string, { state: EntityState; alarms: Map<string, number> }>();
    let ids = 0;
    const deliver = (sends: ActorSend[] | undefined, now: number) => {
      for (const send of sends ?? []) {
        // Events also go to the tenant's webhooks; this test follows the index only.
        if (send.kind === 'webhook-subscriptions') continue;
        expect(send).toMatchObject({ kind: LIVENESS_INDEX_KIND, key: index.key });
        index.step(send.message as IndexMessage, now);
      }
    };
    const step = (entity_id: string, message: LivenessMessage | { op: '$alarm'; name: string; due_ms: number }, now: number) => {
      let entity = entities.get(entity_id);
      if (!entity) entities.set(entity_id, (entity = { state: loadEntity(livenessActorKey('tenant-a', entity_id), []), alarms: new Map() }));
      const result = stepLiveness(entity.state, message as LivenessMessage, {
        now,
        kind: 'liveness',
        key: livenessActorKey('tenant-a', entity_id),
        request_id: null,
        newId: (prefix = '') => `${prefix}${++ids}`,
      });
      entity.state = result.state;
      for (const change of result.alarms ?? []) {
        if (change.due_ms === null) entity.alarms.delete(change.name);
        else entity.alarms.set(change.name, change.due_ms);
      }
      deliver(result.sends, now);
      return result.reply;
    };
    const runUntil = (now: number) => {
      for (;;) {
        let next: [string, string, number] | undefined;
        for (const [id, entity] of entities) for (const [name, due] of entity.alarms) if (due <= now && (!next || due < next[2])) next = [id, name, due];
        if (!next) return;
        entities.get(next[0])!.alarms.delete(next[1]);
        step(next[0], { op: '$alarm', name: next[1], due_ms: next[2] }, next[2]);
      }
    };
    return { index, step, runUntil };
  }

  it('agrees with every entity on alive and 24h uptime once alarms have run (property)', () => {
    const beat = fc.record({ entity: fc.constantFrom('e1', 'e2', 'e3'), gap_ms: fc.oneof(fc.integer({ min: 0, max: 20 * S }), fc.integer({ min: 20 * S, max: 2 * H })) });
    fc.assert(
      fc.property(fc.array(beat, { minLength: 1, maxLength: 80 }), fc.integer({ min: 0, max: 3 * H }), (beats, tail_ms) => {
        const { index, step, runUntil } = fleet();
        let now = T0;
        const seen = new Set<string>();
        for (const b of beats) {
          now += b.gap_ms;
          runUntil(now);
          step(b.entity, { op: 'heartbeat', grace_ms: 30 * S }, now);
          seen.add(b.entity);
        }
        now += tail_ms;
        runUntil(now);
        const listed = index.list(now).entities;
        expect(listed.map((e) => e.entity_id)).toEqual([...seen].sort());
        for (const brief of listed) {
          const own = step(brief.entity_id, { op: 'uptime', windows: [{ name: '24h', ms: 24 * H }] }, now) as UptimeView;
          const status = step(brief.entity_id, { op: 'status' }, now) as { alive: boolean };
          expect(brief.uptime).toBe(own.uptime['24h'].percentage);
          expect(brief.alive).toBe(status.alive);
        }
      }),
      { numRuns: 80 },
    );
  });
});
