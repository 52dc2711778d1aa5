import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextEscalationMs, nextSteps } from '../../actors/rituals/escalation.js';
import type { EscalationStep } from '../../actors/rituals/messages.js';

/** Escalation timing, pure (docs/api/rituals.md, "Check-ins and escalation"). */
const step = (after_missed_seconds: number): EscalationStep => ({ action: 'notify', after_missed_seconds, webhook_ids: [], pubsub_channel: 'p' });
const steps = [step(30), step(120)];

describe('escalation timing', () => {
  it('a part missed at base + interval escalates at missed + after_missed_seconds, step by step', () => {
    const part = { part_id: 'a', last_checkin_ms: null, steps_fired: 0, performed: false };
    expect(nextSteps(1_000, 60_000, steps, [part])).toEqual([{ part_id: 'a', step: 0, missed_at_ms: 61_000, due_ms: 91_000 }]);
    expect(nextSteps(1_000, 60_000, steps, [{ ...part, steps_fired: 1 }])[0]).toMatchObject({ step: 1, due_ms: 181_000 });
    expect(nextSteps(1_000, 60_000, steps, [{ ...part, steps_fired: 2 }])).toEqual([]);
  });

  it('a check-in moves the base; a performed part and a ritual without interval never escalate', () => {
    expect(nextEscalationMs(0, 60_000, steps, [{ part_id: 'a', last_checkin_ms: 50_000, steps_fired: 0, performed: false }])).toBe(140_000);
    expect(nextEscalationMs(0, 60_000, steps, [{ part_id: 'a', last_checkin_ms: null, steps_fired: 0, performed: true }])).toBeNull();
    expect(nextEscalationMs(0, 0, steps, [{ part_id: 'a', last_checkin_ms: null, steps_fired: 0, performed: false }])).toBeNull();
  });

  it('the earliest due step comes first, and never before its part missed a check-in', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 86_400 }),
        fc.array(fc.record({ last: fc.option(fc.integer({ min: 0, max: 1e9 })), fired: fc.integer({ min: 0, max: 2 }), performed: fc.boolean() }), { maxLength: 8 }),
        (interval_s, raw) => {
          const parts = raw.map((p, i) => ({ part_id: `p${i}`, last_checkin_ms: p.last, steps_fired: p.fired, performed: p.performed }));
          const due = nextSteps(0, interval_s * 1000, steps, parts);
          for (let i = 1; i < due.length; i++) expect(due[i]!.due_ms).toBeGreaterThanOrEqual(due[i - 1]!.due_ms);
          for (const entry of due) {
            const part = parts.find((p) => p.part_id === entry.part_id)!;
            expect(part.performed).toBe(false);
            expect(entry.missed_at_ms).toBe((part.last_checkin_ms ?? 0) + interval_s * 1000);
            expect(entry.due_ms).toBe(entry.missed_at_ms + steps[part.steps_fired]!.after_missed_seconds * 1000);
          }
          expect(due.length).toBe(parts.filter((p) => !p.performed && p.steps_fired < steps.length).length);
        },
      ),
    );
  });
});
