import type { SnapshotActorDefinition } from '../../runtime/index.js';

/**
 * The benchmark's small actor: a counter stored as one snapshot record.
 * `add` returns a new state (so the runtime writes the snapshot, once per
 * batch); `get` returns the state unchanged (a read: nothing to commit).
 */
export interface CounterState {
  count: number;
}

export type CounterMessage = { op: 'add'; by: number } | { op: 'get' };

export const COUNTER_KIND = 'bench-counter';

export const counterActor: SnapshotActorDefinition<CounterState, CounterMessage, number> = {
  kind: COUNTER_KIND,
  storage: 'snapshot',
  initial: () => ({ count: 0 }),
  step(state, message) {
    if (message.op === 'add') {
      const next = { count: state.count + message.by };
      return { state: next, reply: next.count };
    }
    return { state, reply: state.count };
  },
};

export const ADD_ONE: CounterMessage = Object.freeze({ op: 'add', by: 1 });
export const GET: CounterMessage = Object.freeze({ op: 'get' });
