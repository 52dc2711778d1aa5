import { describe, expect, it } from 'vitest';
import type { TurnContext } from '../../runtime/index.js';
import { CLEANUP_ALARM, initialMultiplexFlow, stepMultiplexFlow, type MultiplexFlowState } from '../../actors/presence/flows.js';
import {
  PRESENCE_CONTEXT_KIND,
  PRESENCE_MULTIPLEX_KIND,
  PRESENCE_SUBJECT_KIND,
  presenceContextKey,
  presenceLimits,
  presenceMultiplexKey,
  type HeartbeatReply,
  type MultiplexHeartbeatMessage,
  type MultiplexItem,
  type MultiplexItemResult,
  type MultiplexMessage,
  type PresenceMessage,
} from '../../actors/presence/messages.js';
import { loadPresenceState, stepPresence, type PresenceState } from '../../actors/presence/state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/**
 * The multiplex flow, pure: the coordinator (actors/presence/flows.ts) and
 * the context's multiplex_heartbeat op, with fixed contexts and no runtime.
 */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const TENANT = 'tenant-a';
const FLOW = presenceMultiplexKey(TENANT, 'mx_1');

function flowContext(now = T0, request_id: string | null = 'req-1'): TurnContext {
  return { ...fixedContext(now, PRESENCE_MULTIPLEX_KIND, FLOW), request_id };
}

function heartbeatReply(session_id: string): HeartbeatReply {
  return {
    session_id,
    opened: true,
    admission: 'admitted',
    activity: 'active',
    state: 'available',
    observer: false,
    last_heartbeat_ms: T0,
    expires_ms: T0 + 90_000,
    occupancy: { active: 1, idle: 0, stale: 0, observers: 0, total: 1, available_agents: 0, capacity_remaining: 9_999, occupancy_state: 'open', max_active: 10_000, soft_limit: 8_000 },
  };
}

const ok = (session_id: string): MultiplexItemResult => ({ success: true, heartbeat: heartbeatReply(session_id) });
const invalid: MultiplexItemResult = { success: false, error: 'BAD_REQUEST', message: 'body.items.1.context_id is not a valid context id', status: 400 };

function start(items: MultiplexItem[], context = flowContext()) {
  return stepMultiplexFlow(initialMultiplexFlow(), { op: 'start', items }, context);
}

function result(state: MultiplexFlowState | null, index: number, item: MultiplexItemResult, now = T0 + 5) {
  return stepMultiplexFlow(state, { op: 'multiplex_result', index, result: item }, flowContext(now, null));
}

describe('multiplex coordinator', () => {
  it('start sends one heartbeat per valid item to its context, defers, and sets the cleanup alarm', () => {
    const turn = start([
      { context_id: 'room-1', heartbeat: { subject: { id: 'u', kind: 'user' } } },
      { context_id: 'bad id!', result: invalid },
      { context_id: 'room-2', heartbeat: { session_id: 'ps_9' } },
    ]);
    expect(turn.defer).toBe(true);
    expect(turn.reply).toBeUndefined();
    expect(turn.state).toEqual({ request_id: 'req-1', results: [null, invalid, null], pending: 2 });
    expect(turn.sends).toEqual([
      { kind: PRESENCE_CONTEXT_KIND, key: presenceContextKey(TENANT, 'room-1'), message: { op: 'multiplex_heartbeat', flow: FLOW, index: 0, heartbeat: { subject: { id: 'u', kind: 'user' } } } },
      { kind: PRESENCE_CONTEXT_KIND, key: presenceContextKey(TENANT, 'room-2'), message: { op: 'multiplex_heartbeat', flow: FLOW, index: 2, heartbeat: { session_id: 'ps_9' } } },
    ]);
    expect(turn.alarms).toEqual([{ name: CLEANUP_ALARM, due_ms: T0 + presenceLimits.multiplex_cleanup_ms }]);
  });

  it('answers the deferred ask with every result, in item order, and deletes its state when the last one is in', () => {
    let state = start([
      { context_id: 'room-1', heartbeat: { subject: { id: 'u', kind: 'user' } } },
      { context_id: 'bad id!', result: invalid },
      { context_id: 'room-2', heartbeat: { subject: { id: 'u', kind: 'user' } } },
    ]).state;
    const full: MultiplexItemResult = { success: false, error: 'presence_capacity_full', message: 'The context is full (max_active 1).', status: 409 };
    // Results arrive in any order.
    const first = result(state, 2, full);
    expect(first.replies).toBeUndefined();
    expect(first.state).toEqual({ request_id: 'req-1', results: [null, invalid, full], pending: 1 });
    state = first.state;
    const last = result(state, 0, ok('ps_1'));
    expect(last.state).toBeNull();
    expect(last.replies).toEqual([{ request_id: 'req-1', reply: { results: [ok('ps_1'), invalid, full] } }]);
    expect(last.alarms).toEqual([{ name: CLEANUP_ALARM, due_ms: null }]);
  });

  it('never mutates the previous state (snapshot storage)', () => {
    const state = start([
      { context_id: 'room-1', heartbeat: {} },
      { context_id: 'room-2', heartbeat: {} },
    ]).state;
    const frozen = JSON.stringify(state);
    result(result(state, 0, ok('ps_1')).state, 1, ok('ps_2'));
    expect(JSON.stringify(state)).toBe(frozen);
  });

  it('answers at once, keeping nothing, when every item already failed at the edge', () => {
    const turn = start([{ context_id: 'bad id!', result: invalid }]);
    expect(turn).toEqual({ state: null, reply: { results: [invalid] } });
  });

  it('ignores a result for a filled or unknown item, and one arriving after the flow ended', () => {
    const state = start([
      { context_id: 'room-1', heartbeat: {} },
      { context_id: 'room-2', heartbeat: {} },
    ]).state;
    const once = result(state, 0, ok('ps_1')).state;
    expect(result(once, 0, ok('ps_other')).state).toBe(once);
    expect(result(once, 7, ok('ps_other')).state).toBe(once);
    expect(result(null, 0, ok('ps_1'))).toEqual({ state: null });
  });

  it('the cleanup alarm deletes an unfinished flow, answering the missing items as flow_interrupted', () => {
    const state = result(start([
      { context_id: 'room-1', heartbeat: {} },
      { context_id: 'room-2', heartbeat: {} },
    ]).state, 1, ok('ps_2')).state;
    const due_ms = T0 + presenceLimits.multiplex_cleanup_ms;
    const turn = stepMultiplexFlow(state, { op: '$alarm', name: CLEANUP_ALARM, due_ms }, flowContext(due_ms, null));
    expect(turn.state).toBeNull();
    expect(turn.alarms).toBeUndefined();
    expect(turn.replies).toEqual([{
      request_id: 'req-1',
      reply: { results: [{ success: false, error: 'flow_interrupted', message: expect.any(String), status: 503 }, ok('ps_2')] },
    }]);
    // A flow already finished: the alarm finds nothing.
    expect(stepMultiplexFlow(null, { op: '$alarm', name: CLEANUP_ALARM, due_ms }, flowContext(due_ms, null))).toEqual({ state: null });
  });

  it('refuses a second start of the same flow and an empty or oversized one', () => {
    const state = start([{ context_id: 'room-1', heartbeat: {} }]).state;
    expect(codeOf(() => stepMultiplexFlow(state, { op: 'start', items: [{ context_id: 'room-1', heartbeat: {} }] }, flowContext()))).toBe('conflict');
    expect(codeOf(() => start([]))).toBe('BAD_REQUEST');
    const many = Array.from({ length: presenceLimits.multiplex_items_max + 1 }, (): MultiplexItem => ({ context_id: 'room-1', heartbeat: {} }));
    expect(codeOf(() => start(many))).toBe('BAD_REQUEST');
  });

  it('a start that was not asked (request_id null) finishes without a reply to send', () => {
    const state = start([{ context_id: 'room-1', heartbeat: {} }], flowContext(T0, null)).state;
    expect(result(state, 0, ok('ps_1'))).toEqual({ state: null, replies: undefined, alarms: [{ name: CLEANUP_ALARM, due_ms: null }] });
  });
});

describe('context: multiplex_heartbeat', () => {
  const contextKey = presenceContextKey(TENANT, 'room-1');
  const context = (now = T0) => fixedContext(now, PRESENCE_CONTEXT_KIND, contextKey);

  function room(capacity?: { max_active: number }): PresenceState {
    const state = loadPresenceState(contextKey, []);
    const create: PresenceMessage = { op: 'create', context: { id: 'room-1', kind: 'room', capacity } };
    return stepPresence(state, create, context()).state;
  }

  const item = (index: number, heartbeat: MultiplexHeartbeatMessage['heartbeat']): MultiplexHeartbeatMessage => ({ op: 'multiplex_heartbeat', flow: FLOW, index, heartbeat });

  function answerOf(sends: { kind: string; key: string; message: unknown }[] | undefined) {
    const answers = (sends ?? []).filter((send) => send.kind === PRESENCE_MULTIPLEX_KIND);
    expect(answers).toHaveLength(1);
    expect(answers[0].key).toBe(FLOW);
    return answers[0].message as Extract<MultiplexMessage, { op: 'multiplex_result' }>;
  }

  it('applies the heartbeat and sends its reply back to the coordinator (with the subject report)', () => {
    const state = room();
    const turn = stepPresence(state, item(3, { subject: { id: 'u', kind: 'user' } }), context(T0 + 10));
    expect(turn.reply).toBeUndefined();
    expect(turn.writes).toHaveLength(1);
    expect(turn.sends?.some((send) => send.kind === PRESENCE_SUBJECT_KIND)).toBe(true);
    const answer = answerOf(turn.sends);
    expect(answer).toMatchObject({ op: 'multiplex_result', index: 3, result: { success: true, heartbeat: { opened: true, admission: 'admitted', last_heartbeat_ms: T0 + 10 } } });
    const session_id = (answer.result as { heartbeat: HeartbeatReply }).heartbeat.session_id;
    expect(turn.state.sessions.has(session_id)).toBe(true);
    // A refresh through the flow works the same way.
    const again = stepPresence(turn.state, item(0, { session_id, state: 'busy' }), context(T0 + 20));
    expect(answerOf(again.sends).result).toMatchObject({ success: true, heartbeat: { session_id, opened: false, state: 'busy' } });
  });

  it('turns a rejection into a failed result, changing nothing', () => {
    let state = room({ max_active: 1 });
    state = stepPresence(state, { op: 'heartbeat', heartbeat: { subject: { id: 'occupant', kind: 'user' } } }, context()).state;
    const before = [...state.sessions.keys()];
    const turn = stepPresence(state, item(1, { subject: { id: 'u', kind: 'user' } }), context(T0 + 10));
    expect(turn.writes).toBeUndefined();
    expect(turn.alarms).toBeUndefined();
    expect(answerOf(turn.sends)).toEqual({
      op: 'multiplex_result',
      index: 1,
      result: { success: false, error: 'presence_capacity_full', message: expect.any(String), status: 409 },
    });
    expect(turn.sends).toHaveLength(1);
    expect([...turn.state.sessions.keys()]).toEqual(before);
  });

  it('answers not_found for a context that does not exist', () => {
    const missing = loadPresenceState(presenceContextKey(TENANT, 'nowhere'), []);
    const turn = stepPresence(missing, item(0, { subject: { id: 'u', kind: 'user' } }), fixedContext(T0, PRESENCE_CONTEXT_KIND, presenceContextKey(TENANT, 'nowhere')));
    expect(answerOf(turn.sends).result).toMatchObject({ success: false, error: 'not_found', status: 404 });
  });
});
