import { ServiceError, type RecordsActorDefinition, type SnapshotActorDefinition, type Store, type StoreKey, type WriteOp } from '../../runtime/index.js';

/** Small actor kinds that exercise the runtime's contract in tests. */

export interface CounterState {
  count: number;
  history: string[];
}

export type CounterMessage =
  | { op: 'add'; by: number; note?: string }
  | { op: 'get' }
  | { op: 'fail' }
  | { op: 'crash' }
  | { op: 'set-alarm'; name: string; at: number }
  | { op: 'cancel-alarm'; name: string }
  | { op: 'forward'; to: string; by: number }
  | { op: 'emit'; type: string };

/** A counter that records alarm firings and forwards through the outbox. */
export const counterActor: SnapshotActorDefinition<CounterState, CounterMessage, unknown> = {
  kind: 'counter',
  storage: 'snapshot',
  initial: () => ({ count: 0, history: [] }),
  step(state, message, context) {
    switch (message.op) {
      case 'add':
        return { state: { count: state.count + message.by, history: message.note ? [...state.history, message.note] : state.history }, reply: state.count + message.by };
      case 'get':
        return { state, reply: state };
      case 'fail':
        throw new ServiceError('conflict', 'refused');
      case 'crash':
        throw new Error('a defect');
      case 'set-alarm':
        return { state, alarms: [{ name: message.name, due_ms: message.at }], reply: true };
      case 'cancel-alarm':
        return { state, alarms: [{ name: message.name, due_ms: null }], reply: true };
      case 'forward':
        return {
          state: { ...state, history: [...state.history, `sent:${message.to}`] },
          sends: [{ kind: 'counter', key: message.to, message: { op: 'add', by: message.by, note: `from:${context.key}` } }],
          reply: true,
        };
      case 'emit':
        return { state, events: [{ type: message.type, data: { key: context.key } }], reply: true };
      case '$alarm':
        return { state: { ...state, history: [...state.history, `alarm:${message.name}@${message.due_ms}`] } };
    }
  },
};

export interface BagState {
  items: Map<string, number>;
}

export type BagMessage = { op: 'put'; item: string; value: number } | { op: 'remove'; item: string } | { op: 'list' } | { op: 'corrupt' };

/** A `records` actor: one stored record per item. 'corrupt' mutates, then throws a defect. */
export const bagActor: RecordsActorDefinition<BagState, BagMessage, unknown> = {
  kind: 'bag',
  storage: 'records',
  load(_key, records) {
    const items = new Map<string, number>();
    for (const [subkey, value] of records) items.set(subkey, value as number);
    return { items };
  },
  step(state, message) {
    switch (message.op) {
      case 'put':
        state.items.set(message.item, message.value);
        return { state, writes: [{ subkey: message.item, value: message.value }], reply: state.items.size };
      case 'remove':
        state.items.delete(message.item);
        return { state, writes: [{ subkey: message.item, value: undefined }], reply: state.items.size };
      case 'list':
        return { state, reply: Object.fromEntries(state.items) };
      case 'corrupt':
        state.items.set('garbage', -1);
        throw new Error('defect after mutation');
      case '$alarm':
        return { state };
    }
  },
};

/** Wraps a store: counts commits, can hold them open or make them fail. */
export class ControlledStore implements Store {
  commits = 0;
  /** Point reads (an activation's load reads its snapshot once). */
  reads = 0;
  failNext = false;
  private held: { ops: readonly WriteOp[]; release: () => void }[] = [];
  holdCommits = false;

  constructor(private readonly inner: Store) {}

  get(key: StoreKey): unknown {
    this.reads++;
    return this.inner.get(key);
  }
  range(start: StoreKey, end: StoreKey) {
    return this.inner.range(start, end);
  }
  count(start: StoreKey, end: StoreKey): number {
    return this.inner.count(start, end);
  }
  async commit(ops: readonly WriteOp[]): Promise<void> {
    this.commits++;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('disk on fire');
    }
    if (this.holdCommits) await new Promise<void>((release) => this.held.push({ ops, release }));
    return this.inner.commit(ops);
  }
  releaseHeld(): void {
    const held = this.held;
    this.held = [];
    for (const h of held) h.release();
  }
  heldCount(): number {
    return this.held.length;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
