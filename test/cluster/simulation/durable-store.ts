import { storageKeys, type Store, type StoreKey, type WriteOp } from '../../../runtime/index.js';
import { EMPTY_VERSION, type PartitionVersion } from '../../../cluster/replication/partition-log.js';
import type { SimProcess } from './process.js';

/**
 * A node's disk and the runtime Store the cluster code reads and commits
 * through (LMDB's role). The disk survives crashes. Commits go one at a time,
 * a few ms each (some stall for seconds when the run asks for it),
 * atomically; a commit may fail (nothing of it is written and the caller
 * gets the error, as when LMDB cannot commit); a crash makes a
 * random prefix of the commits in flight durable (LMDB may or may not have
 * finished them). Reads see what is committed.
 */
function compareKeys(a: StoreKey, b: StoreKey): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i];
    const y = b[i];
    if (x === y) continue;
    if (typeof x === typeof y) return x < y ? -1 : 1;
    return typeof x === 'number' ? -1 : 1;
  }
  return a.length - b.length;
}

/** Keys are bucketed by partition (key[1] of every partition table) so a range touches one bucket. */
function bucketOf(key: StoreKey): number | string {
  return typeof key[1] === 'number' ? key[1] : 'meta';
}

export class Disk {
  private readonly buckets = new Map<number | string, Map<string, { key: StoreKey; value: unknown }>>();
  commits = 0;

  /** `onCommit` sees each partition's version and counters after each commit that touched it (the replica-agreement check). */
  constructor(private readonly onCommit: (p: number, version: PartitionVersion, data: Map<string, number>) => void = () => undefined) {}

  get(key: StoreKey): unknown {
    return this.buckets.get(bucketOf(key))?.get(JSON.stringify(key))?.value;
  }

  range(start: StoreKey, end: StoreKey): { key: StoreKey; value: unknown }[] {
    const buckets = bucketOf(start) === bucketOf(end) ? [this.buckets.get(bucketOf(start))] : [...this.buckets.values()];
    const found: { key: StoreKey; value: unknown }[] = [];
    for (const bucket of buckets) {
      if (!bucket) continue;
      for (const entry of bucket.values()) if (compareKeys(entry.key, start) >= 0 && compareKeys(entry.key, end) < 0) found.push(entry);
    }
    return found.sort((a, b) => compareKeys(a.key, b.key));
  }

  apply(ops: readonly WriteOp[]): void {
    this.commits++;
    const touched = new Set<number>();
    for (const op of ops) {
      const b = bucketOf(op.key);
      let bucket = this.buckets.get(b);
      if (!bucket) this.buckets.set(b, (bucket = new Map()));
      if (op.type === 'put') bucket.set(JSON.stringify(op.key), { key: op.key, value: op.value });
      else bucket.delete(JSON.stringify(op.key));
      if (typeof b === 'number') touched.add(b);
    }
    for (const p of touched) this.onCommit(p, this.version(p), this.counters(p));
  }

  version(p: number): PartitionVersion {
    return (this.get(storageKeys.version(p)) as PartitionVersion | undefined) ?? EMPTY_VERSION;
  }

  /** The counters of p (snapshot records of the simulation's counter actor): actor key -> value. */
  counters(p: number): Map<string, number> {
    const data = new Map<string, number>();
    for (const { key, value } of this.buckets.get(p)?.values() ?? []) if (key[0] === 's') data.set(String(key[3]), value as number);
    return data;
  }
}

interface Pending {
  ops: readonly WriteOp[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** One process's view of its disk: the runtime Store port. A new one per incarnation. */
export class SimStore implements Store {
  private readonly queue: Pending[] = [];
  private busy = false;
  private dead = false;

  constructor(
    private readonly disk: Disk,
    private readonly process: SimProcess,
    /** Probability that a commit fails (now). */
    private readonly failRate: () => number,
    private readonly onFail: () => void = () => undefined,
    /** How long the next commit stalls (0: its usual 1-3 ms). */
    private readonly stallMs: () => number = () => 0,
    /** Every commit queued when one starts goes with it, answered in one event (SimConfig.groupCommits). */
    private readonly grouped = false,
  ) {}

  get(key: StoreKey): unknown {
    return this.disk.get(key);
  }

  range(start: StoreKey, end: StoreKey): Iterable<{ key: StoreKey; value: unknown }> {
    return this.disk.range(start, end);
  }

  count(start: StoreKey, end: StoreKey): number {
    return this.disk.range(start, end).length;
  }

  commit(ops: readonly WriteOp[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ops, resolve, reject });
      this.next();
    });
  }

  async close(): Promise<void> {}

  /** The process died: a random prefix of the commits in flight reached the disk. */
  crash(): void {
    if (this.dead) return;
    this.dead = true;
    const n = this.process.rng.int(0, this.queue.length);
    for (let i = 0; i < n; i++) this.disk.apply(this.queue[i].ops);
    this.queue.length = 0;
  }

  private next(): void {
    if (this.busy || this.dead || this.queue.length === 0) return;
    this.busy = true;
    const { sched, rng } = this.process;
    const inc = this.process.incarnation;
    const stall = this.stallMs();
    if (stall > 0) sched.trace(`${this.process.id}: store commit stalls ${stall} ms`);
    const count = this.grouped ? this.queue.length : 1;
    sched.after(stall > 0 ? stall : rng.int(1, 3), () => {
      if (this.dead) return;
      const group = this.queue.splice(0, count);
      this.busy = false;
      if (rng.chance(this.failRate())) {
        sched.trace(`${this.process.id}: store commit failed`);
        this.onFail();
        this.process.post(inc, () => {
          for (const head of group) head.reject(new Error('simulated store failure: commit not written'));
        });
      } else {
        // The disk has it now, even if the process is paused; the process learns when it runs.
        for (const head of group) this.disk.apply(head.ops);
        this.process.post(inc, () => {
          for (const head of group) head.resolve();
        });
      }
      this.next();
    });
  }
}
