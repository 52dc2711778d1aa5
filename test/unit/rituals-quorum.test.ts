import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkDefinition } from '../../actors/rituals/definition.js';
import { effectiveOrder, orderViolation, partsSkipped, spreadOf } from '../../actors/rituals/quorum.js';
import { codeOf } from '../helpers/step.js';

/** Ritual ordering and quorum, pure (docs/api/rituals.md, "Modes and ordering"). */
const ordering = ['a', 'b', 'c', 'd', 'e'];

/** Accepts `sequence` one performance at a time; true when none is refused. */
function accepted(mode: 'forward' | 'reverse' | 'any_order', sequence: string[]): boolean {
  const done: string[] = [];
  for (const part of sequence) {
    if (orderViolation({ ordering, mode }, done, part) !== null) return false;
    done.push(part);
  }
  return true;
}

const subsequence = fc.shuffledSubarray(ordering, { minLength: 1 }).chain((parts) => fc.shuffledSubarray(parts, { minLength: parts.length, maxLength: parts.length }));

describe('ordering', () => {
  it('forward accepts exactly the sequences increasing in the ordering (parts may be skipped)', () => {
    fc.assert(
      fc.property(subsequence, (sequence) => {
        const positions = sequence.map((part) => ordering.indexOf(part));
        const increasing = positions.every((p, i) => i === 0 || p > positions[i - 1]!);
        expect(accepted('forward', sequence)).toBe(increasing);
      }),
    );
  });

  it('counts the parts a performance would skip: those before it, or before the latest performed part, not yet performed', () => {
    expect(partsSkipped({ ordering, mode: 'forward' }, [], 'a')).toEqual([]);
    expect(partsSkipped({ ordering, mode: 'forward' }, [], 'c')).toEqual(['a', 'b']);
    expect(partsSkipped({ ordering, mode: 'forward' }, ['a', 'c'], 'd')).toEqual(['b']);
    expect(partsSkipped({ ordering, mode: 'reverse' }, [], 'd')).toEqual(['e']);
    expect(partsSkipped({ ordering, mode: 'any_order' }, [], 'e')).toEqual([]);
    // With every part required (quorum of all), only the first part in the order may open: a skip could never complete.
    fc.assert(
      fc.property(fc.constantFrom(...ordering), (part) => {
        expect(partsSkipped({ ordering, mode: 'forward' }, [], part).length === 0).toBe(part === 'a');
      }),
    );
  });

  it('reverse accepts exactly the sequences decreasing in the ordering', () => {
    fc.assert(
      fc.property(subsequence, (sequence) => {
        const positions = sequence.map((part) => ordering.indexOf(part));
        expect(accepted('reverse', sequence)).toBe(positions.every((p, i) => i === 0 || p < positions[i - 1]!));
      }),
    );
  });

  it('any_order accepts every sequence', () => {
    fc.assert(fc.property(subsequence, (sequence) => accepted('any_order', sequence)));
  });

  it('names the part that blocks an out-of-order performance', () => {
    expect(orderViolation({ ordering, mode: 'forward' }, ['a', 'c'], 'b')).toBe('c');
    expect(orderViolation({ ordering, mode: 'reverse' }, ['e'], 'd')).toBeNull();
    expect(effectiveOrder({ ordering, mode: 'reverse' })).toEqual(['e', 'd', 'c', 'b', 'a']);
  });

  it('spread is the distance between the first and the last performance', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1e12 }), { minLength: 1, maxLength: 20 }), (times) => {
        const spread = spreadOf(times.map((server_ts_ms, i) => ({ part_id: String(i), performed_by: 'u', server_ts_ms })));
        expect(spread).toBe(Math.max(...times) - Math.min(...times));
      }),
    );
    expect(spreadOf([])).toBeNull();
  });
});

describe('definition checks', () => {
  const parts = [
    { part_id: 'a', assigned_to: 'u1' },
    { part_id: 'b', assigned_to: 'u2' },
  ];
  it('fills defaults: ordering = parts, quorum = all, forward, no check-ins', () => {
    expect(checkDefinition({ name: 'n', parts, window_ms: 10 })).toMatchObject({
      ordering: ['a', 'b'], quorum: { required: 2, of: 2 }, mode: 'forward', checkin_interval_seconds: 0, arm_ttl_seconds: 3600, escalation: [], on_complete: null,
    });
  });
  it('sorts escalation steps by after_missed_seconds', () => {
    const def = checkDefinition({
      name: 'n', parts, window_ms: 10, checkin_interval_seconds: 5,
      escalation: [{ after_missed_seconds: 60, pubsub_channel: 'x' }, { after_missed_seconds: 0, webhook_ids: ['w'] }],
    });
    expect(def.escalation.map((s) => s.after_missed_seconds)).toEqual([0, 60]);
  });
  it('refuses what relates fields badly', () => {
    expect(codeOf(() => checkDefinition({ name: 'n', parts, window_ms: 10, quorum: { required: 3, of: 2 } }))).toBe('BAD_REQUEST');
    expect(codeOf(() => checkDefinition({ name: 'n', parts, window_ms: 10, ordering: ['a', 'a'] }))).toBe('BAD_REQUEST');
    expect(codeOf(() => checkDefinition({ name: 'n', parts: [...parts, parts[0]!], window_ms: 10 }))).toBe('BAD_REQUEST');
    expect(codeOf(() => checkDefinition({ name: 'n', parts, window_ms: 10, escalation: [{ after_missed_seconds: 1, webhook_ids: ['w'] }] }))).toBe('BAD_REQUEST');
    expect(codeOf(() => checkDefinition({ name: 'n', parts, window_ms: 10, on_complete: {} }))).toBe('BAD_REQUEST');
  });
});
