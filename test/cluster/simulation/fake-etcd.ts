import type { Rng } from './prng.js';
import type { Scheduler } from './scheduler.js';

/**
 * A linearizable in-memory etcd on the fake clock: revisions, leases with a
 * TTL (a lease not kept alive for TTL expires and deletes its keys), and
 * transactions comparing create / mod revisions. Watch notifications reach
 * watchers after a random small delay, in order (nodes learn of changes late).
 * Requests are applied at the instant they reach it; the node side adds the
 * network delays.
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
  prefix: string;
  deliver: (event: WatchEvent) => void;
  lastAt: number;
  cancelled: boolean;
}

export class FakeEtcd {
  revision = 1;
  private readonly kvs = new Map<string, KeyValue>();
  private readonly leases = new Map<number, LeaseState>();
  private readonly watchers = new Set<Watcher>();
  private nextLease = 1;

  constructor(
    private readonly sched: Scheduler,
    private readonly rng: Rng,
    private readonly watchDelayMaxMs: number,
  ) {}

  get(key: string): KeyValue | undefined {
    return this.kvs.get(key);
  }

  range(prefix: string): KeyValue[] {
    return [...this.kvs.values()].filter((kv) => kv.key.startsWith(prefix)).map((kv) => ({ ...kv }));
  }

  leaseAlive(id: number): boolean {
    return this.leases.has(id);
  }

  grant(ttlMs: number): number {
    const id = this.nextLease++;
    const lease: LeaseState = { ttlMs, expiresAt: this.sched.now + ttlMs, keys: new Set() };
    this.leases.set(id, lease);
    this.scheduleExpiry(id, lease);
    return id;
  }

  /** Renews the lease from now; false if it no longer exists. */
  keepAlive(id: number): boolean {
    const lease = this.leases.get(id);
    if (!lease) return false;
    lease.expiresAt = this.sched.now + lease.ttlMs;
    return true;
  }

  revoke(id: number): void {
    const lease = this.leases.get(id);
    if (lease) this.expire(id, lease);
  }

  txn(compares: Compare[], ops: TxnOp[]): TxnResult {
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

  /** Watches keys under prefix from the next revision on. */
  watch(prefix: string, deliver: (event: WatchEvent) => void): Watcher {
    const watcher: Watcher = { prefix, deliver, lastAt: this.sched.now, cancelled: false };
    this.watchers.add(watcher);
    return watcher;
  }

  cancel(watcher: Watcher): void {
    watcher.cancelled = true;
    this.watchers.delete(watcher);
  }

  private notify(event: WatchEvent): void {
    for (const w of this.watchers) {
      if (!event.kv.key.startsWith(w.prefix)) continue;
      w.lastAt = Math.max(w.lastAt, this.sched.now + this.rng.int(1, this.watchDelayMaxMs));
      this.sched.at(w.lastAt, () => {
        if (!w.cancelled) w.deliver(event);
      });
    }
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
