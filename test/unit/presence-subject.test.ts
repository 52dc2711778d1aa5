import { describe, expect, it } from 'vitest';
import {
  initialSubjectIndex,
  PRESENCE_SUBJECT_KIND,
  stepSubjectIndex,
  SUBJECT_CONTEXTS_MAX,
  type SubjectIndexState,
  type SubjectSeenMessage,
} from '../../actors/presence/subject-state.js';

/** The subject index's pure step: newest report wins, last_seen never goes back, bounded. */
const T0 = Date.UTC(2026, 0, 1);
const context = { now: T0, kind: PRESENCE_SUBJECT_KIND, key: '["t","alice"]', request_id: null, newId: () => 'x' };

function seen(overrides: Partial<SubjectSeenMessage> = {}): SubjectSeenMessage {
  return {
    op: 'seen',
    context_id: 'room-1',
    context_kind: 'room',
    subject_kind: 'user',
    last_seen_ms: T0,
    last_state: 'available',
    online: true,
    reported_ms: T0,
    ...overrides,
  };
}

function apply(state: SubjectIndexState, ...messages: SubjectSeenMessage[]): SubjectIndexState {
  for (const message of messages) state = stepSubjectIndex(state, message, context).state;
  return state;
}

describe('subject index', () => {
  it('starts empty and records one entry per context', () => {
    const state = apply(initialSubjectIndex(), seen(), seen({ context_id: 'doc-9', context_kind: 'document', last_seen_ms: T0 + 5 }));
    expect(state.subject_kind).toBe('user');
    expect(Object.keys(state.contexts).sort()).toEqual(['doc-9', 'room-1']);
    expect(stepSubjectIndex(state, { op: 'get' }, context).reply).toBe(state);
  });

  it('a later report replaces state and online; last_seen only moves forward', () => {
    let state = apply(initialSubjectIndex(), seen({ last_seen_ms: T0 + 100, reported_ms: T0 + 100 }));
    state = apply(state, seen({ last_seen_ms: T0 + 50, last_state: 'busy', online: false, reported_ms: T0 + 200 }));
    expect(state.contexts['room-1']).toEqual({ context_kind: 'room', last_seen_ms: T0 + 100, last_state: 'busy', online: false, reported_ms: T0 + 200 });
  });

  it('a report arriving late (older reported_ms) cannot undo a newer one', () => {
    let state = apply(initialSubjectIndex(), seen({ last_seen_ms: T0 + 300, online: false, reported_ms: T0 + 300 }));
    const same = stepSubjectIndex(state, seen({ last_seen_ms: T0 + 100, online: true, reported_ms: T0 + 100 }), context);
    expect(same.state).toBe(state);
    state = apply(state, seen({ last_seen_ms: T0 + 400, online: true, last_state: 'thinking', reported_ms: T0 + 250 }));
    expect(state.contexts['room-1']).toMatchObject({ last_seen_ms: T0 + 400, online: false, last_state: 'available' });
  });

  it('never mutates the previous state (snapshot storage)', () => {
    const before = apply(initialSubjectIndex(), seen());
    const frozen = JSON.stringify(before);
    apply(before, seen({ context_id: 'other', reported_ms: T0 + 1 }), seen({ reported_ms: T0 + 2, last_seen_ms: T0 + 2 }));
    expect(JSON.stringify(before)).toBe(frozen);
  });

  it(`keeps at most ${SUBJECT_CONTEXTS_MAX} contexts, dropping the one seen longest ago`, () => {
    let state = initialSubjectIndex();
    for (let i = 0; i <= SUBJECT_CONTEXTS_MAX; i++) state = apply(state, seen({ context_id: `c${i}`, last_seen_ms: T0 + (i === 0 ? 1000 : i), reported_ms: T0 + i }));
    expect(Object.keys(state.contexts)).toHaveLength(SUBJECT_CONTEXTS_MAX);
    expect(state.contexts.c0).toBeDefined();
    expect(state.contexts.c1).toBeUndefined();
  });
});
