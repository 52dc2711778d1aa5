import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyMutation, mergeComponents } from '../../actors/ecs/mutations.js';
import { pushTick, ticksSince } from '../../actors/ecs/tick-ring.js';
import { loadIndex, stepIndex, type IndexState } from '../../actors/ecs/state.js';
import { COMPONENTS_BYTES_MAX, type EcsMessage, type TickRecord, type TicksReply } from '../../actors/ecs/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

const record = (tick: number, bytes = 10): TickRecord => ({ tick, at_ms: tick, changes: [], bytes });

describe('ECS mutation and version rules', () => {
  it('creates at version 1, updates with the expected version, deletes with a versioned tombstone change', () => {
    const created = applyMutation({ entity_id: 'a', op: 'create', components: { hp: 3 } }, undefined, 0);
    expect(created.result).toEqual({ entity_id: 'a', success: true, new_version: 1, current_version: 0, error: null });
    const updated = applyMutation({ entity_id: 'a', op: 'update', expected_version: 1, components: { hp: null, mp: 2 } }, created.entity!, 1);
    expect(updated.result.new_version).toBe(2);
    expect(updated.entity).toEqual({ version: 2, components: { mp: 2 } });
    const deleted = applyMutation({ entity_id: 'a', op: 'delete', expected_version: 2 }, updated.entity!, 1);
    expect(deleted.change).toEqual({ entity_id: 'a', op: 'delete', version: 3 });
    expect(deleted.entity).toBeNull();
  });

  it('fails a stale version, an unknown entity, a duplicate create, a missing version and an oversized entity, each on its own', () => {
    const entity = { version: 4, components: {} };
    expect(applyMutation({ entity_id: 'a', op: 'update', expected_version: 3 }, entity, 1).result).toMatchObject({ success: false, error: 'version_conflict', current_version: 4, new_version: null });
    expect(applyMutation({ entity_id: 'b', op: 'update', expected_version: 1 }, undefined, 1).result.error).toBe('entity_not_found');
    expect(applyMutation({ entity_id: 'b', op: 'delete', expected_version: 1 }, undefined, 1).result.error).toBe('entity_not_found');
    expect(applyMutation({ entity_id: 'a', op: 'create' }, entity, 1).result.error).toBe('entity_exists');
    expect(applyMutation({ entity_id: 'a', op: 'update' }, entity, 1).result.error).toBe('version_required');
    expect(applyMutation({ entity_id: 'c', op: 'create', components: { big: 'x'.repeat(COMPONENTS_BYTES_MAX) } }, undefined, 1).result.error).toBe('components_too_large');
    expect(applyMutation({ entity_id: 'c', op: 'create' }, undefined, 10_000).result.error).toBe('index_full');
  });

  it('merge removes null components and keeps the rest', () => {
    expect(mergeComponents({ a: 1, b: 2 }, { b: null, c: 3 })).toEqual({ a: 1, c: 3 });
  });

  it('property: a version only moves through successful mutations, one step each', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ op: fc.constantFrom('create', 'update', 'delete') as fc.Arbitrary<'create' | 'update' | 'delete'>, expected: fc.integer({ min: 0, max: 6 }) }), { maxLength: 40 }), (steps) => {
        let entity: { version: number; components: Record<string, unknown> } | undefined;
        for (const step of steps) {
          const before = entity?.version ?? 0;
          const outcome = applyMutation({ entity_id: 'e', op: step.op, expected_version: step.expected, components: { v: step.expected } }, entity, entity ? 1 : 0);
          if (!outcome.result.success) {
            expect(outcome.change).toBeNull();
            continue;
          }
          if (step.op !== 'create') expect(step.expected).toBe(before);
          expect(outcome.result.new_version).toBe(step.op === 'create' ? 1 : before + 1);
          entity = outcome.entity ?? undefined;
        }
      }),
    );
  });
});

describe('ECS tick ring', () => {
  it('keeps at most the tick limit and the byte limit, always the newest tick', () => {
    const ring: TickRecord[] = [];
    for (let tick = 1; tick <= 10; tick++) pushTick(ring, record(tick), { ticks: 4, bytes: 1_000 });
    expect(ring.map((r) => r.tick)).toEqual([7, 8, 9, 10]);
    const evicted = pushTick(ring, record(11, 950), { ticks: 4, bytes: 1_000 });
    expect(evicted.map((r) => r.tick)).toEqual([7]);
    expect(ring.map((r) => r.tick)).toEqual([8, 9, 10, 11]);
    pushTick(ring, record(12, 10), { ticks: 4, bytes: 1_000 });
    expect(ring.map((r) => r.tick)).toEqual([9, 10, 11, 12]);
    pushTick(ring, record(13, 5_000), { ticks: 4, bytes: 1_000 });
    expect(ring.map((r) => r.tick)).toEqual([13]);
  });

  it('answers the ticks after a cursor, nothing when up to date, and a gap when they left the ring', () => {
    const ring = [record(5), record(6), record(7)];
    expect(ticksSince(ring, 7, 4)).toEqual({ gap: false, ticks: ring });
    expect(ticksSince(ring, 7, 6)).toEqual({ gap: false, ticks: [ring[2]] });
    expect(ticksSince(ring, 7, 7)).toEqual({ gap: false, ticks: [] });
    expect(ticksSince(ring, 7, 3)).toEqual({ gap: true });
    expect(ticksSince(ring, 7, 5, 1)).toEqual({ gap: false, ticks: [ring[1]] });
  });

  it('property: a reader that follows the ring sees every tick once, in order, or a gap', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 60 }), (pattern) => {
        const ring: TickRecord[] = [];
        let current = 0;
        let cursor = 0;
        const seen: number[] = [];
        for (const ticksBeforeRead of pattern) {
          for (let i = 0; i < ticksBeforeRead; i++) pushTick(ring, record(++current), { ticks: 8, bytes: 1e9 });
          const answer = ticksSince(ring, current, cursor, 3);
          if (answer.gap) {
            expect(cursor).toBeLessThan(ring[0]!.tick - 1);
            cursor = current;
            seen.length = 0;
            continue;
          }
          for (const entry of answer.ticks) {
            expect(entry.tick).toBe(cursor + 1);
            cursor = entry.tick;
            seen.push(entry.tick);
          }
        }
      }),
    );
  });
});

describe('ECS index actor', () => {
  const fresh = () => loadIndex('k', []);
  const step = (state: IndexState, message: EcsMessage, now = 1_000, request_id: string | null = null) => stepIndex(state, message, { ...fixedContext(now), request_id });

  it('start arms the tick alarm within bounds; a tick commits the pending changes and answers waiting followers', () => {
    const state = fresh();
    expect(codeOf(() => step(state, { op: 'start', tick_rate_ms: 5 }))).toBe('BAD_REQUEST');
    const started = step(state, { op: 'start', tick_rate_ms: 100 });
    expect(started.alarms).toEqual([{ name: 'tick', due_ms: 1_100 }]);
    const mutated = step(state, { op: 'mutations', mutations: [{ entity_id: 'a', op: 'create', components: { x: 1 } }, { entity_id: 'b', op: 'update', expected_version: 1 }] });
    expect(mutated.reply).toMatchObject({ succeeded: 1, failed: 1, tick: 1 });
    const waiting = step(state, { op: 'ticks_since', since: 0, wait: true, node_id: 'n1', connections: 3 }, 1_050, 'req-1');
    expect(waiting.defer).toBe(true);
    const ticked = stepIndex(state, { op: '$alarm', name: 'tick', due_ms: 1_100 }, fixedContext(1_100));
    expect(ticked.alarms).toEqual([{ name: 'tick', due_ms: 1_200 }]);
    const reply = ticked.replies![0]!.reply as TicksReply;
    expect(ticked.replies![0]!.request_id).toBe('req-1');
    expect(reply.ticks).toEqual([{ tick: 1, at_ms: 1_100, changes: [{ entity_id: 'a', op: 'upsert', version: 1, components: { x: 1 } }], bytes: expect.any(Number) }]);
    expect(ticked.writes!.some((w) => w.subkey === 'p/a' && w.value === undefined)).toBe(true);
    expect(step(state, { op: 'status' }, 1_100).reply).toMatchObject({ running: true, tick: 1, connected_systems: 3, entities: 1 });
    // A late restart skips the missed ticks rather than bursting.
    const late = stepIndex(state, { op: '$alarm', name: 'tick', due_ms: 1_200 }, fixedContext(9_000));
    expect(late.alarms).toEqual([{ name: 'tick', due_ms: 9_100 }]);
  });

  it('stop cancels the alarm; a stale tick does nothing; connection reports expire', () => {
    const state = fresh();
    step(state, { op: 'start' });
    step(state, { op: 'connections', node_id: 'n1', connections: 2 }, 1_000);
    expect(step(state, { op: 'stop' }).alarms).toEqual([{ name: 'tick', due_ms: null }]);
    expect(stepIndex(state, { op: '$alarm', name: 'tick', due_ms: 1_050 }, fixedContext(1_050)).writes).toBeUndefined();
    expect(step(state, { op: 'status' }, 40_000).reply).toMatchObject({ running: false, tick: 0, connected_systems: 0 });
  });

  it('a node waiting twice gets its older wait answered at once', () => {
    const state = fresh();
    step(state, { op: 'ticks_since', since: 0, wait: true, node_id: 'n1' }, 1_000, 'r1');
    const second = step(state, { op: 'ticks_since', since: 0, wait: true, node_id: 'n1' }, 1_000, 'r2');
    expect(second.defer).toBe(true);
    expect(second.replies!.map((r) => r.request_id)).toEqual(['r1']);
  });

  it('reloads from its records: entities, pending changes, the ring and the tick', () => {
    const state = fresh();
    step(state, { op: 'start', tick_rate_ms: 20 });
    const records = new Map<string, unknown>();
    const apply = (writes: { subkey: string; value: unknown }[] = []) => {
      for (const w of writes) w.value === undefined ? records.delete(w.subkey) : records.set(w.subkey, w.value);
    };
    apply(step(state, { op: 'start', tick_rate_ms: 30 }).writes);
    apply(step(state, { op: 'mutations', mutations: [{ entity_id: 'a', op: 'create' }] }).writes);
    apply(stepIndex(state, { op: '$alarm', name: 'tick', due_ms: 1_030 }, fixedContext(1_030)).writes);
    apply(step(state, { op: 'mutations', mutations: [{ entity_id: 'a', op: 'update', expected_version: 1, components: { y: 1 } }] }).writes);
    const reloaded = loadIndex('k', [...records].sort(([a], [b]) => (a < b ? -1 : 1)));
    expect(reloaded.meta).toMatchObject({ running: true, tick: 1, tick_rate_ms: 30 });
    expect(reloaded.entities.get('a')).toEqual({ version: 2, components: { y: 1 } });
    expect([...reloaded.pending.keys()]).toEqual(['a']);
    expect(reloaded.ring.map((r) => r.tick)).toEqual([1]);
  });
});
