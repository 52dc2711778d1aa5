import type { WriteOp } from '../../../runtime/index.js';
import { EMPTY_VERSION, type PartitionVersion } from '../../../cluster/replication/partition-log.js';
import type { Rng } from './prng.js';
import type { Scheduler } from './scheduler.js';

/**
 * A node's disk: per partition its PartitionVersion and its counters. It
 * survives crashes. Commits go through a CommitQueue (one at a time, a few
 * ms each, atomic); a commit may fail (the node then crashes), and a crash
 * makes a random prefix of the commits in flight durable (LMDB may or may
 * not have finished them).
 */
export interface PartState {
  version: PartitionVersion;
  data: Map<string, number>;
}

export interface Mutation {
  p: number;
  /** Replace the partition's data wholesale (snapshot). */
  replace?: Map<string, number>;
  ops?: WriteOp[];
  version: PartitionVersion;
}

const EMPTY: PartState = { version: EMPTY_VERSION, data: new Map() };

export class DurableStore {
  private readonly parts = new Map<number, PartState>();

  /** `onCommit` sees each partition's state after each commit (the replica-agreement check). */
  constructor(private readonly onCommit: (p: number, state: PartState) => void = () => undefined) {}

  /** The committed state of p (do not mutate). */
  read(p: number): PartState {
    return this.parts.get(p) ?? EMPTY;
  }

  apply(mutations: Mutation[]): void {
    for (const m of mutations) {
      const old = this.read(m.p);
      const data = new Map(m.replace ?? old.data);
      for (const op of m.ops ?? []) {
        const counter = String(op.key[2]);
        if (op.type === 'put') data.set(counter, op.value as number);
        else data.delete(counter);
      }
      const state = { version: m.version, data };
      this.parts.set(m.p, state);
      this.onCommit(m.p, state);
    }
  }
}

interface Pending {
  mutations: Mutation[];
  done: () => void;
}

export class CommitQueue {
  private readonly queue: Pending[] = [];
  private busy = false;
  private dead = false;
  private readonly idleWaiters: (() => void)[] = [];

  constructor(
    private readonly sched: Scheduler,
    private readonly rng: Rng,
    private readonly store: DurableStore,
    private readonly failRate: () => number,
    /** The commit failed: the node crashes. */
    private readonly onFail: () => void,
    /** Runs a completion callback in the node's process (queued while it is paused, dropped if it crashed). */
    private readonly post: (fn: () => void) => void,
  ) {}

  commit(mutations: Mutation[], done: () => void): void {
    this.queue.push({ mutations, done });
    this.next();
  }

  idle(): boolean {
    return this.queue.length === 0 && !this.busy;
  }

  /** Runs fn (in the node's process) once every commit issued so far is done. */
  whenIdle(fn: () => void): void {
    if (this.idle()) fn();
    else this.idleWaiters.push(fn);
  }

  /** The process died: a random prefix of the commits in flight reached the disk. */
  crash(): void {
    if (this.dead) return;
    this.dead = true;
    const n = this.rng.int(0, this.queue.length);
    for (let i = 0; i < n; i++) this.store.apply(this.queue[i].mutations);
    this.queue.length = 0;
  }

  private next(): void {
    if (this.busy || this.dead || this.queue.length === 0) return;
    this.busy = true;
    this.sched.after(this.rng.int(1, 3), () => {
      if (this.dead) return;
      const head = this.queue[0];
      if (this.rng.chance(this.failRate())) {
        this.sched.trace('store: commit failed');
        this.dead = true;
        this.queue.length = 0;
        this.onFail();
        return;
      }
      // The disk has it now, even if the process is paused; the process learns when it runs.
      this.store.apply(head.mutations);
      this.queue.shift();
      this.busy = false;
      this.post(() => {
        head.done();
        if (this.idle()) for (const w of this.idleWaiters.splice(0)) w();
      });
      this.next();
    });
  }
}
