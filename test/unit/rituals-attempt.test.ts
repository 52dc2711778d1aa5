import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { initialAttempt, isTerminal, stepAttempt, type AttemptState } from '../../actors/rituals/attempt-state.js';
import { checkDefinition } from '../../actors/rituals/definition.js';
import type { AttemptMessage, PerformReply, RecordMessage, RitualDefinition } from '../../actors/rituals/messages.js';
import { orderViolation } from '../../actors/rituals/quorum.js';
import { ServiceError, type TurnResult } from '../../runtime/index.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The attempt state machine, pure (docs/api/rituals.md, "Attempt states"). */
const KEY = JSON.stringify(['tenant', 'att1']);
const users = { a: 'ua', b: 'ub', c: 'uc' } as const;

function definition(over: Record<string, unknown> = {}): RitualDefinition {
  const input = checkDefinition({
    name: 'r',
    parts: Object.entries(users).map(([part_id, assigned_to]) => ({ part_id, assigned_to })),
    window_ms: 1_000,
    arm_ttl_seconds: 60,
    ...over,
  });
  return { ...input, ritual_def_id: 'def1', created_by: 'ua', created_at_ms: 0, updated_at_ms: 0, version: 1 };
}

function step(state: AttemptState, message: AttemptMessage | { op: '$alarm'; name: string; due_ms: number }, now: number): TurnResult<AttemptState, unknown> {
  return stepAttempt(state, message as AttemptMessage, fixedContext(now, 'ritual-attempt', KEY));
}
function armed(def: RitualDefinition, rehearsal = false): AttemptState {
  return step(initialAttempt(), { op: 'arm', tenant: 'tenant', caller: { user_id: 'ua', admin: false }, definition: def, rehearsal }, 0).state;
}
const perform = (part_id: keyof typeof users, user: string = users[part_id]) => ({ op: 'perform' as const, caller: { user_id: user, admin: false }, part_id });
const records = (result: TurnResult<AttemptState, unknown>) => (result.sends ?? []).filter((s) => s.kind === 'ritual-record').map((s) => s.message as RecordMessage);

describe('attempt state machine', () => {
  it('arm sets the deadline and its alarm; a stranger cannot perform; the quorum completes', () => {
    let state = armed(definition());
    expect(state.record).toMatchObject({ status: 'armed', deadline_ms: 60_000 });
    expect(codeOf(() => step(state, perform('a', 'ub'), 1))).toBe('ritual_not_assignee');
    state = step(state, perform('a'), 100).state;
    expect(state.record).toMatchObject({ status: 'performing', window_open_ms: 100, window_close_ms: 1_100 });
    state = step(state, perform('b'), 500).state;
    const last = step(state, perform('c'), 1_100);
    expect(last.state.record!.status).toBe('completed');
    expect((last.reply as PerformReply).report).toMatchObject({ outcome: 'completed', spread_ms: 1_000 });
    expect(last.alarms!.every((alarm) => alarm.due_ms === null)).toBe(true);
    expect(records(last).map((m) => m.op)).toEqual(['outcome', 'attempt']);
  });

  it('the window alarm fails it short of the quorum; a late part is recorded by how much until the deadline', () => {
    let state = armed(definition());
    state = step(state, perform('a'), 0).state;
    const closed = step(state, { op: '$alarm', name: 'window', due_ms: 1_001 }, 1_001);
    expect(closed.state.record!.report).toMatchObject({ reason: 'window_closed', late: [{ part_id: 'b', late_by_ms: null }, { part_id: 'c', late_by_ms: null }] });
    const late = step(closed.state, perform('b'), 1_500);
    expect(late.reply).toMatchObject({ status: 'failed', late_by_ms: 500 });
    expect(records(late)[0]).toEqual({ op: 'late', attempt_id: 'att1', part_id: 'b', late_by_ms: 500, near_miss: true });
    expect(codeOf(() => step(late.state, perform('c'), 60_000))).toBe('ritual_attempt_closed');
  });

  it('the deadline fails an attempt nobody performed; rehearsals send no analytics', () => {
    const state = armed(definition(), true);
    const result = step(state, { op: '$alarm', name: 'deadline', due_ms: 60_000 }, 60_000);
    expect(result.state.record).toMatchObject({ status: 'failed', report: { reason: 'deadline' } });
    expect(records(result).map((m) => m.op)).toEqual(['attempt']);
  });

  it('a countdown holds performances until the window opens and publishes to the topic', () => {
    let state = armed(definition({ announce_channel: 'go' }));
    const result = step(state, { op: 'countdown', caller: { user_id: 'uc', admin: false }, seconds: 3, channel: null }, 1_000);
    expect(result.reply).toMatchObject({ channel: 'go', window_open_ms: 4_000, window_close_ms: 5_000 });
    expect(result.sends!.some((s) => s.kind === 'mq-topic')).toBe(true);
    state = result.state;
    expect(codeOf(() => step(state, perform('a'), 3_999))).toBe('ritual_window_not_open');
    expect(step(state, perform('a'), 4_000).state.record!.status).toBe('performing');
    expect(codeOf(() => step(state, { op: 'countdown', caller: { user_id: 'uc', admin: false }, seconds: 3, channel: null }, 1_000))).toBe('ritual_attempt_state');
    expect(codeOf(() => step(state, { op: 'countdown', caller: { user_id: 'stranger', admin: false }, seconds: 3, channel: null }, 1_000))).toBe('forbidden');
  });

  it('escalation fires through webhooks and the topic at its time, and a check-in starts it over', () => {
    const def = definition({ checkin_interval_seconds: 10, escalation: [{ after_missed_seconds: 5, webhook_ids: ['wh1'], pubsub_channel: 'pager' }] });
    let state = armed(def);
    expect(state.record && step(state, { op: 'checkin', caller: { user_id: 'ua', admin: false }, part_id: 'a' }, 9_000).reply).toEqual({
      attempt_id: 'att1', part_id: 'a', next_deadline_ms: 19_000, status: 'armed',
    });
    state = step(state, { op: 'checkin', caller: { user_id: 'ua', admin: false }, part_id: 'a' }, 9_000).state;
    const fired = step(state, { op: '$alarm', name: 'escalate', due_ms: 15_000 }, 15_000);
    expect(fired.state.record!.escalations.map((e) => e.part_id)).toEqual(['b', 'c']);
    const kinds = fired.sends!.map((s) => s.kind);
    expect(kinds.filter((k) => k === 'webhook-subscriptions')).toHaveLength(2);
    expect(kinds.filter((k) => k === 'mq-topic')).toHaveLength(2);
    expect(fired.alarms!.find((a) => a.name === 'escalate')!.due_ms).toBe(24_000);
  });

  it('property: any sequence of performs, check-ins and time keeps the invariants; refusals change nothing', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('perform' as const), part: fc.constantFrom('a', 'b', 'c'), honest: fc.boolean() }),
      fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 1_500 }) }),
    );
    fc.assert(
      fc.property(fc.constantFrom('forward', 'reverse', 'any_order'), fc.integer({ min: 1, max: 3 }), fc.array(op, { maxLength: 30 }), (mode, required, ops) => {
        let state = armed(definition({ mode, quorum: { required, of: 3 } }));
        let now = 0;
        let wasTerminal = false;
        for (const next of ops) {
          if (next.kind === 'wait') {
            now += next.ms;
            state = step(state, { op: '$alarm', name: 'window', due_ms: now }, now).state;
          } else {
            const part = next.part as keyof typeof users;
            const before = JSON.stringify(state);
            try {
              state = step(state, perform(part, next.honest ? users[part] : 'stranger'), now).state;
              expect(next.honest).toBe(true);
            } catch (error) {
              if (!(error instanceof ServiceError)) throw error;
              expect(JSON.stringify(state)).toBe(before);
            }
          }
          const record = state.record!;
          if (wasTerminal) expect(isTerminal(record)).toBe(true);
          wasTerminal = isTerminal(record);
          const order = record.performances.map((p) => p.part_id);
          order.forEach((part, i) => expect(orderViolation(record.definition, order.slice(0, i), part)).toBeNull());
          if (record.status === 'completed') {
            expect(record.performances.length).toBe(required);
            expect(record.report!.spread_ms!).toBeLessThanOrEqual(1_000);
          }
          if (record.status === 'failed') expect(record.performances.length).toBeLessThan(required);
        }
      }),
    );
  });
});
