import type { FakeEtcd } from './fake-etcd.js';
import type { Scheduler } from './scheduler.js';

/**
 * The safety invariants, checked as the run goes. A counter's value is
 * "observed" once a client got it: as the reply to its increment
 * (acknowledged write: a fence token) or to a read.
 * 1. No acknowledged write is lost: a node that becomes leader holds at least
 *    every observed value of the partition's counters.
 * 2. Fence tokens never go backwards: each acknowledged value is greater than
 *    every value observed before (so acknowledged values strictly increase in
 *    acknowledgement order), and a read returns at least every value observed
 *    before it was issued (no stale reads, SIGSTOP included; and no read of a
 *    value that is later lost, since later observations would go below it).
 * 3. A node accepts a write (or serves a read) only while etcd says it holds
 *    the partition's leader key at its epoch, under a live lease — so at most
 *    one node does at any instant — and two leaders never share an epoch.
 * (4, liveness, is checked by run-seed.ts.)
 * 5. Log matching: two replicas whose stores are at the same (epoch, seq) of
 *    a partition hold the same data.
 * 6. Durability asked for (MIN_IN_SYNC_REPLICAS): when a write is
 *    acknowledged, at least that many nodes' disks hold its value.
 */
export class InvariantViolation extends Error {}

interface Observation {
  at: number;
  /** The highest value observed so far (running maximum). */
  value: number;
  what: string;
}

export class Checker {
  /** partition/counter -> running maximum of observed values, with when it rose. */
  private readonly seen = new Map<string, Observation[]>();
  private readonly epochs = new Map<string, string>();
  private readonly states = new Map<string, { digest: string; node: string }>();
  /** node/p -> the counters on that node's disk (counter name -> value). */
  private readonly copies = new Map<string, ReadonlyMap<string, number>>();
  acknowledged = 0;
  reads = 0;
  leaderChanges = 0;
  /** Writes refused with not_enough_replicas (nothing written). */
  refusedWrites = 0;

  constructor(
    private readonly sched: Scheduler,
    private readonly etcd: FakeEtcd,
    private readonly leaderKey: (p: number) => string,
    private readonly minCopies = 1,
  ) {}

  /**
   * The first violation. Recorded, not thrown: the checks run inside the
   * production code's promise continuations, where a throw would be lost;
   * the run stops after the event that recorded it.
   */
  failure?: InvariantViolation;

  private fail(message: string): void {
    this.failure ??= new InvariantViolation(message);
  }

  private history(p: number, counter: string): Observation[] {
    const id = `${p}/${counter}`;
    let list = this.seen.get(id);
    if (!list) this.seen.set(id, (list = []));
    return list;
  }

  /** The highest value of p/counter observed by time `at`, and how. */
  observed(p: number, counter: string, at = Infinity): Observation | undefined {
    const list = this.history(p, counter);
    for (let i = list.length - 1; i >= 0; i--) if (list[i].at <= at) return list[i];
    return undefined;
  }

  private observe(p: number, counter: string, value: number, what: string): void {
    const list = this.history(p, counter);
    const last = list[list.length - 1];
    if (!last || value > last.value) list.push({ at: this.sched.now, value, what });
  }

  /** Invariant 1 (and 3: unique epochs). `data` is what the new leader starts from. */
  onBecomeLeader(p: number, node: string, epoch: number, data: ReadonlyMap<string, number>): void {
    this.leaderChanges++;
    const id = `${p}@${epoch}`;
    const other = this.epochs.get(id);
    if (other !== undefined && other !== node) this.fail(`partition ${p}: ${node} and ${other} both led at epoch ${epoch}`);
    this.epochs.set(id, node);
    const prefix = `${p}/`;
    for (const [key, list] of this.seen) {
      if (!key.startsWith(prefix) || list.length === 0) continue;
      const counter = key.slice(prefix.length);
      const have = data.get(counter) ?? 0;
      const last = list[list.length - 1];
      if (have < last.value) {
        this.fail(`acknowledged write lost: ${node} became leader of partition ${p} at epoch ${epoch} with ${counter}=${have}, but ${last.value} was ${last.what} at ${last.at}ms`);
      }
    }
  }

  /** Invariant 1 at every turn: a serving actor's state is at least every value observed. */
  onState(p: number, counter: string, state: number, node: string): void {
    const last = this.observed(p, counter);
    if (last && state < last.value) this.fail(`acknowledged write lost: ${node} serves ${p}/${counter} from ${state}, but ${last.value} was ${last.what} at ${last.at}ms`);
  }

  /** Invariant 3: `node` serves p at `epoch` now; etcd must agree. */
  onServe(p: number, node: string, epoch: number, what: 'write' | 'read'): void {
    const kv = this.etcd.get(this.leaderKey(p));
    const holderId = kv ? (JSON.parse(kv.value) as { node_id: string }).node_id : undefined;
    if (!kv || holderId !== node || kv.createRevision !== epoch) {
      const holder = kv ? `${holderId}@${kv.createRevision}` : 'nobody';
      this.fail(`${node} served a ${what} on partition ${p} at epoch ${epoch} while etcd says the leader is ${holder}`);
    }
  }

  /** Invariant 2, writes. */
  onAck(p: number, counter: string, value: number, node: string): void {
    const last = this.observed(p, counter);
    if (last && value <= last.value) {
      this.fail(`fence token went backwards: ${node} acknowledged ${p}/${counter}=${value}, but ${last.value} was ${last.what} at ${last.at}ms`);
    }
    this.observe(p, counter, value, `acknowledged by ${node}`);
    this.acknowledged++;
    let holders = 0;
    for (const [id, data] of this.copies) if (id.endsWith(`/${p}`) && (data.get(counter) ?? 0) >= value) holders++;
    if (holders < this.minCopies) {
      this.fail(`acknowledged on too few copies: ${node} acknowledged ${p}/${counter}=${value} held by ${holders} disks, MIN_IN_SYNC_REPLICAS is ${this.minCopies}`);
    }
  }

  /** Invariant 6: what `node`'s disk holds of p's counters after a commit. */
  onCopy(node: string, p: number, counters: ReadonlyMap<string, number>): void {
    this.copies.set(`${node}/${p}`, counters);
  }

  /** Invariant 2, reads. */
  onRead(p: number, counter: string, value: number, issuedAt: number, node: string): void {
    this.reads++;
    const floor = this.observed(p, counter, issuedAt);
    if (floor && value < floor.value) {
      this.fail(`stale read: ${node} answered ${p}/${counter}=${value} to a read issued at ${issuedAt}ms, but ${floor.value} was ${floor.what} at ${floor.at}ms`);
    }
    this.observe(p, counter, value, `read from ${node}`);
  }

  /** Invariant 5: `node` durably holds `data` at `version` of p. */
  onDurable(node: string, p: number, version: { epoch: number; seq: number }, data: ReadonlyMap<string, number>): void {
    const id = `${p}@${version.epoch}/${version.seq}`;
    const digest = [...data]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const known = this.states.get(id);
    if (known === undefined) this.states.set(id, { digest, node });
    else if (known.digest !== digest) {
      this.fail(`replicas diverged: ${node} holds partition ${p} at ${version.epoch}/${version.seq} as {${digest}}, ${known.node} held {${known.digest}}`);
    }
  }
}
