import type {
  Coordination,
  CoordinationCompare,
  CoordinationKeyValue,
  CoordinationLease,
  CoordinationOp,
  CoordinationWatch,
  CoordinationWatchHandlers,
  LeaseEvents,
} from '../../../cluster/ports.js';
import type { Rng } from './prng.js';
import type { Scheduler } from './scheduler.js';
import type { SimProcess } from './process.js';

/**
 * A linearizable in-memory etcd on the fake clock: revisions, leases with a
 * TTL (a lease not kept alive for TTL expires and deletes its keys), and
 * transactions comparing create / mod revisions. Watch notifications reach
 * watchers after a random small delay, in order (nodes learn of changes late).
 * Requests are applied at the instant they reach it; FakeEtcdClient (one per
 * node process, the cluster's Coordination port) adds the network delays and
 * keeps the leases alive as the etcd3 client does.
 */
export interface KeyValue {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  lease: number;
}

export interface WatchEvent {
  type: 'put' | 'delete';
  kv: KeyValue;
}

export interface Compare {
  key: string;
  target: 'create' | 'mod';
  equals: number;
}

export type TxnOp = { put: string; value: string; lease?: number } | { del: string };

export interface TxnResult {
  succeeded: boolean;
  revision: number;
}

interface LeaseState {
  ttlMs: number;
  expiresAt: number;
  keys: Set<string>;
}

export interface Watcher {
  /** A prefix, or one key when `exact`. */
  prefix: string;
  exact: boolean;
  deliver: (event: WatchEvent) => void;
  lastAt: number;
  cancelled: boolean;
}

/** What etcd served, for the scale run's figures. */
export interface EtcdCounters {
  /** Requests that write (txn with ops, grant, keep-alive, revoke; a keep-alive is a write to the lease store). */
  writes: number;
  keepalives: number;
  reads: number;
  /** Watch events delivered, over every watcher. */
  watchEvents: number;
}

/** Events kept for watches that start at an older revision (a watch created after a range, from its revision + 1). */
const HISTORY_MAX = 200_000;

export class FakeEtcd {
  revision = 1;
  private readonly kvs = new Map<string, KeyValue>();
  private readonly leases = new Map<number, LeaseState>();
  private readonly watchers = new Set<Watcher>();
  private readonly history: { revision: number; event: WatchEvent }[] = [];
  private nextLease = 1;
  readonly counters: EtcdCounters = { writes: 0, keepalives: 0, reads: 0, watchEvents: 0 };

  constructor(
    private readonly sched: Scheduler,
    private readonly rng: Rng,
    private readonly watchDelayMaxMs: number,
  ) {}

  get(key: string): KeyValue | undefined {
    return this.kvs.get(key);
  }

  range(prefix: string): KeyValue[] {
    this.counters.reads++;
    return [...this.kvs.values()].filter((kv) => kv.key.startsWith(prefix)).map((kv) => ({ ...kv }));
  }

  leaseAlive(id: number): boolean {
    return this.leases.has(id);
  }

  grant(ttlMs: number): number {
    this.counters.writes++;
    const id = this.nextLease++;
    const lease: LeaseState = { ttlMs, expiresAt: this.sched.now + ttlMs, keys: new Set() };
    this.leases.set(id, lease);
    this.scheduleExpiry(id, lease);
    return id;
  }

  /** Renews the lease from now; false if it no longer exists. */
  keepAlive(id: number): boolean {
    this.counters.keepalives++;
    const lease = this.leases.get(id);
    if (!lease) return false;
    lease.expiresAt = this.sched.now + lease.ttlMs;
    return true;
  }

  revoke(id: number): void {
    this.counters.writes++;
    const lease = this.leases.get(id);
    if (lease) this.expire(id, lease);
  }

  txn(compares: Compare[], ops: TxnOp[]): TxnResult {
    if (ops.length > 0) this.counters.writes++;
    for (const c of compares) {
      const kv = this.kvs.get(c.key);
      const actual = kv ? (c.target === 'create' ? kv.createRevision : kv.modRevision) : 0;
      if (actual !== c.equals) return { succeeded: false, revision: this.revision };
    }
    // A put under a lease that no longer exists fails the whole request, as in etcd.
    for (const op of ops) if ('put' in op && op.lease !== undefined && !this.leases.has(op.lease)) return { succeeded: false, revision: this.revision };
    if (ops.length === 0) return { succeeded: true, revision: this.revision };
    const revision = ++this.revision;
    for (const op of ops) {
      if ('put' in op) {
        const old = this.kvs.get(op.put);
        if (old && old.lease) this.leases.get(old.lease)?.keys.delete(op.put);
        const kv: KeyValue = { key: op.put, value: op.value, createRevision: old?.createRevision ?? revision, modRevision: revision, lease: op.lease ?? 0 };
        this.kvs.set(op.put, kv);
        if (op.lease) this.leases.get(op.lease)!.keys.add(op.put);
        this.notify({ type: 'put', kv: { ...kv } });
      } else {
        const old = this.kvs.get(op.del);
        if (!old) continue;
        this.kvs.delete(op.del);
        if (old.lease) this.leases.get(old.lease)?.keys.delete(op.del);
        this.notify({ type: 'delete', kv: { ...old, modRevision: revision } });
      }
    }
    return { succeeded: true, revision };
  }

  /** Watches keys under prefix (or the one key, `exact`) from `fromRevision` on (default: the next revision). */
  watch(prefix: string, exact: boolean, fromRevision: number | undefined, deliver: (event: WatchEvent) => void): Watcher {
    const watcher: Watcher = { prefix, exact, deliver, lastAt: this.sched.now, cancelled: false };
    if (fromRevision !== undefined && fromRevision <= this.revision) {
      for (const { revision, event } of this.history) if (revision >= fromRevision && matches(watcher, event.kv.key)) this.deliverTo(watcher, event);
    }
    this.watchers.add(watcher);
    return watcher;
  }

  cancel(watcher: Watcher): void {
    watcher.cancelled = true;
    this.watchers.delete(watcher);
  }

  private notify(event: WatchEvent): void {
    this.history.push({ revision: event.kv.modRevision, event });
    if (this.history.length > HISTORY_MAX) this.history.splice(0, this.history.length - HISTORY_MAX / 2);
    for (const w of this.watchers) if (matches(w, event.kv.key)) this.deliverTo(w, event);
  }

  private deliverTo(w: Watcher, event: WatchEvent): void {
    w.lastAt = Math.max(w.lastAt, this.sched.now + this.rng.int(1, this.watchDelayMaxMs));
    this.sched.at(w.lastAt, () => {
      if (w.cancelled) return;
      this.counters.watchEvents++;
      w.deliver(event);
    });
  }

  private scheduleExpiry(id: number, lease: LeaseState): void {
    this.sched.at(lease.expiresAt, () => {
      if (this.leases.get(id) !== lease) return;
      if (lease.expiresAt <= this.sched.now) this.expire(id, lease);
      else this.scheduleExpiry(id, lease);
    });
  }

  private expire(id: number, lease: LeaseState): void {
    this.leases.delete(id);
    if (lease.keys.size === 0) return;
    const revision = ++this.revision;
    for (const key of lease.keys) {
      const old = this.kvs.get(key);
      if (!old) continue;
      this.kvs.delete(key);
      this.notify({ type: 'delete', kv: { ...old, modRevision: revision } });
    }
    this.sched.trace(`etcd: lease ${id} expired, deleted ${[...lease.keys].join(',')}`);
  }
}

function matches(w: Watcher, key: string): boolean {
  return w.exact ? key === w.prefix : key.startsWith(w.prefix);
}

function toPort(kv: KeyValue): CoordinationKeyValue {
  return { key: kv.key, value: kv.value, create_revision: kv.createRevision, mod_revision: kv.modRevision };
}

/**
 * One node process's etcd client (the Coordination port): each request
 * reaches etcd after a small delay and its answer comes back after another,
 * both in order, and answers and watch events run in the process (queued
 * while it is paused, dropped once it crashed). Leases are kept alive every
 * TTL/3 on the process's clock, as etcd3's autoKeepAlive does.
 */
export class FakeEtcdClient implements Coordination {
  private lastToEtcd = 0;
  private lastFromEtcd = 0;
  private readonly watchers = new Set<Watcher>();
  /** Watches whose owner re-reads after a break (they have `interrupted`): broken by disconnect(). */
  private readonly interruptible = new Map<Watcher, CoordinationWatchHandlers>();
  /** Until then, requests fail (the connection to etcd is down). */
  private blindUntil = 0;

  /**
   * @param lostAnswers During an outage, half of the writes reach etcd and
   *   are applied, but their answer is lost: the caller sees the same error as
   *   for a write that never got there (a deadline or UNAVAILABLE after the
   *   request left, as a real client can), so it cannot tell whether it
   *   happened.
   */
  constructor(
    private readonly etcd: FakeEtcd,
    private readonly process: SimProcess,
    private readonly lostAnswers = false,
  ) {}

  /**
   * The connection to etcd drops for `ms`: every watch stream breaks (their
   * owners are told, as etcd3 emits 'disconnected'), and requests sent
   * meanwhile fail, keep-alives included (a drop longer than the TTL costs
   * the lease). Watches without an `interrupted` handler resume on their own
   * (etcd3 does that), so they are left alone.
   */
  disconnect(ms: number): void {
    const { sched } = this.process;
    this.blindUntil = Math.max(this.blindUntil, sched.now + ms);
    const inc = this.process.incarnation;
    for (const [watcher, handlers] of this.interruptible) {
      this.etcd.cancel(watcher);
      this.watchers.delete(watcher);
      this.interruptible.delete(watcher);
      sched.after(this.process.rng.int(1, 20), () => this.process.post(inc, () => handlers.interrupted?.(new Error('watch stream dropped'))));
    }
  }

  /** The process crashed: its watches end with it. */
  crashed(): void {
    for (const w of this.watchers) this.etcd.cancel(w);
    this.watchers.clear();
    this.interruptible.clear();
  }

  /** `write`: a write that may be applied with its answer lost during an outage (see lostAnswers). */
  private call<T>(op: (etcd: FakeEtcd) => T, write = false): Promise<T> {
    const { sched, rng } = this.process;
    return new Promise<T>((resolve, reject) => {
      const inc = this.process.incarnation;
      if (sched.now < this.blindUntil) {
        if (write && this.lostAnswers && rng.chance(0.5)) {
          // Reaches etcd (and is applied there); the answer never comes back.
          sched.after(rng.int(1, 4), () => {
            try {
              op(this.etcd);
            } catch {
              // failed in etcd too: nothing was applied
            }
          });
        }
        sched.after(rng.int(1, 10), () => this.process.post(inc, () => reject(new Error('14 UNAVAILABLE: etcd unreachable'))));
        return;
      }
      this.lastToEtcd = Math.max(this.lastToEtcd, sched.now + rng.int(1, 4));
      sched.at(this.lastToEtcd, () => {
        let result: { ok: true; value: T } | { ok: false; error: unknown };
        try {
          result = { ok: true, value: op(this.etcd) };
        } catch (error) {
          result = { ok: false, error };
        }
        this.lastFromEtcd = Math.max(this.lastFromEtcd, sched.now + rng.int(1, 4));
        sched.at(this.lastFromEtcd, () =>
          this.process.post(inc, () => {
            if (result.ok) resolve(result.value);
            else reject(result.error);
          }),
        );
      });
    });
  }

  range(prefix: string): Promise<{ kvs: CoordinationKeyValue[]; revision: number }> {
    return this.call((etcd) => ({ kvs: etcd.range(prefix).map(toPort), revision: etcd.revision }));
  }

  get(key: string): Promise<string | undefined> {
    return this.call((etcd) => {
      etcd.counters.reads++;
      return etcd.get(key)?.value;
    });
  }

  put(key: string, value: string, lease?: string): Promise<void> {
    return this.call((etcd) => {
      const result = etcd.txn([], [{ put: key, value, lease: lease === undefined ? undefined : Number(lease) }]);
      if (!result.succeeded) throw new Error('etcdserver: requested lease not found');
    }, true);
  }

  delete(key: string): Promise<void> {
    return this.call((etcd) => {
      etcd.txn([], [{ del: key }]);
    }, true);
  }

  txn(compares: CoordinationCompare[], ops: CoordinationOp[]): Promise<{ succeeded: boolean; revision: number }> {
    return this.call((etcd) =>
      etcd.txn(
        compares,
        ops.map((op) => (op.type === 'delete' ? { del: op.key } : { put: op.key, value: op.value, lease: op.lease === undefined ? undefined : Number(op.lease) })),
      ),
      true,
    );
  }

  async watch(target: { prefix: string } | { key: string }, fromRevision: number | undefined, handlers: CoordinationWatchHandlers): Promise<CoordinationWatch> {
    const inc = this.process.incarnation;
    const watcher = await this.call((etcd) =>
      etcd.watch('prefix' in target ? target.prefix : target.key, !('prefix' in target), fromRevision, (event) =>
        this.process.post(inc, () => (event.type === 'put' ? handlers.put(toPort(event.kv)) : handlers.delete(toPort(event.kv)))),
      ),
    );
    if (inc !== this.process.incarnation) this.etcd.cancel(watcher);
    else {
      this.watchers.add(watcher);
      if (handlers.interrupted) this.interruptible.set(watcher, handlers);
    }
    return {
      cancel: async () => {
        this.etcd.cancel(watcher);
        this.watchers.delete(watcher);
        this.interruptible.delete(watcher);
      },
    };
  }

  lease(ttlSeconds: number, events: LeaseEvents): CoordinationLease {
    const ttlMs = ttlSeconds * 1000;
    let id: number | undefined;
    let released = false;
    const keepAlive = () => {
      if (released || id === undefined) return;
      events.fired();
      const lease = id;
      this.call((etcd) => etcd.keepAlive(lease)).then(
        (alive) => {
          if (released) return;
          if (alive) {
            events.succeeded();
            return;
          }
          released = true;
          events.lost(new Error(`lease ${lease} not found`));
        },
        () => {
          // Not answered (etcd unreachable): the stream fails; the next keep-alive goes on a new one.
          if (!released) {
            events.failed();
            events.established();
          }
        },
      );
      this.process.clock.setTimer(Math.floor(ttlMs / 3), keepAlive);
    };
    return {
      grant: async () => {
        id = await this.call((etcd) => etcd.grant(ttlMs));
        this.process.clock.setTimer(Math.floor(ttlMs / 3), keepAlive);
        events.established();
        return String(id);
      },
      revoke: async () => {
        released = true;
        if (id !== undefined) {
          const lease = id;
          await this.call((etcd) => etcd.revoke(lease));
        }
      },
      release: () => {
        released = true;
      },
    };
  }

  close(): void {
    for (const w of this.watchers) this.etcd.cancel(w);
    this.watchers.clear();
    this.interruptible.clear();
  }
}
