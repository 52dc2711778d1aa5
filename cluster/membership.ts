import { EventEmitter } from 'node:events';
import type { RuntimeLogger } from '../runtime/index.js';
import type { ClusterKeys, MemberRecord } from './etcd-keys.js';
import { sleep, type ClusterClock, type Coordination, type CoordinationLease } from './ports.js';
import { SyncedPrefix } from './synced-prefix.js';

/** A lost lease is revoked with up to this many attempts, this far apart (about the longest etcd outage worth covering: 10 s). */
const REVOKE_ATTEMPTS_MAX = 40;
const REVOKE_RETRY_MS = 250;

/**
 * This node's place in the cluster: a lease in etcd, kept alive, with the
 * member record under it; and the list of live members, watched.
 *
 * The node also keeps its own idea of when the lease may have expired (time
 * the last successful keep-alive was *sent* + TTL, minus a margin), on the
 * monotonic clock. A node that was paused (SIGSTOP) or cut off sees that
 * deadline pass as soon as it runs again, and stops serving before it could
 * answer from stale state, without waiting to hear from etcd.
 *
 * The member list is a SyncedPrefix: re-read in full after its watch breaks
 * or the lease is re-granted (`view`).
 *
 * Emits 'change' when the member list changes, 'lost' when the lease is
 * gone (the node then re-joins with a new lease, holding nothing), and
 * 'granted' once it holds a new lease after such a loss.
 */
export class Membership extends EventEmitter {
  private lease?: CoordinationLease;
  private leaseIdValue = '';
  /** The id of `lease` (kept after it is lost, for puts under it that must then fail). */
  private grantedLeaseId = '';
  private validUntil = 0;
  /** Send times of keep-alives not yet answered, oldest first. */
  private firedAt: number[] = [];
  readonly view: SyncedPrefix;
  /** Record writes, one at a time and in order (a later one carries the latest record). */
  private writing: Promise<void> = Promise.resolve();
  private readonly memberMap = new Map<string, MemberRecord>();
  private record: MemberRecord;
  private stopped = false;
  private rejoining = false;

  constructor(
    private readonly client: Coordination,
    private readonly clock: ClusterClock,
    private readonly keys: ClusterKeys,
    self: MemberRecord,
    private readonly ttlSeconds: number,
    private readonly logger: RuntimeLogger,
  ) {
    super();
    this.record = { ...self, view_fresh: false, view_revision: 0 };
    this.view = new SyncedPrefix(
      client,
      clock,
      keys.membersPrefix,
      {
        reset: (kvs) => {
          this.memberMap.clear();
          for (const kv of kvs) this.applyPut(kv.value);
          // Our own record may be missing from a read made while the lease was being replaced.
          if (this.leaseIdValue !== '' && !this.memberMap.has(this.record.node_id)) this.memberMap.set(this.record.node_id, this.record);
          this.emit('change');
        },
        put: (kv) => {
          this.applyPut(kv.value);
          this.emit('change');
        },
        delete: (kv) => {
          const id = kv.key.slice(this.keys.membersPrefix.length);
          this.memberMap.delete(id);
          this.emit('change');
        },
      },
      logger,
      'members',
    );
  }

  get selfId(): string {
    return this.record.node_id;
  }

  get leaseId(): string {
    return this.leaseIdValue;
  }

  get draining(): boolean {
    return this.record.draining;
  }

  /** True while this node's lease surely still exists in etcd. */
  leaseValid(): boolean {
    return this.leaseIdValue !== '' && this.clock.monotonicNow() < this.validUntil;
  }

  members(): Map<string, MemberRecord> {
    return this.memberMap;
  }

  async join(): Promise<void> {
    await this.grantLease();
    await this.view.start();
  }

  async setDraining(): Promise<void> {
    this.record = { ...this.record, draining: true };
    this.memberMap.set(this.record.node_id, this.record);
    await this.writeRecord();
    this.emit('change');
  }

  /** Publishes whether this node's view of etcd is fresh (ClusterNode decides), in its member record. */
  async setView(fresh: boolean, revision: number): Promise<void> {
    if (this.record.view_fresh === fresh && (!fresh || this.record.view_revision === revision)) return;
    this.record = { ...this.record, view_fresh: fresh, view_revision: revision };
    if (this.leaseIdValue !== '') this.memberMap.set(this.record.node_id, this.record);
    await this.writeRecord().catch((error: unknown) => this.logger.debug({ err: error }, 'member record update failed (the next resync writes it)'));
  }

  /** Writes the current record under the lease, after any write in progress (so the last one written is the latest). */
  private writeRecord(): Promise<void> {
    const write = this.writing.then(async () => {
      if (!this.lease) return;
      await this.client.put(this.keys.member(this.record.node_id), JSON.stringify(this.record), this.grantedLeaseId);
    });
    this.writing = write.catch(() => undefined);
    return write;
  }

  /** Revokes the lease: the member record (and any leadership key left) disappear at once. */
  async leave(): Promise<void> {
    this.stopped = true;
    await this.view.stop();
    const lease = this.lease;
    this.lease = undefined;
    this.leaseIdValue = '';
    if (lease) await lease.revoke().catch((error: unknown) => this.logger.warn({ err: error }, 'lease revoke failed'));
  }

  private applyPut(raw: string): void {
    try {
      const member = JSON.parse(raw) as MemberRecord;
      this.memberMap.set(member.node_id, member);
    } catch (error) {
      this.logger.warn({ err: error }, 'unreadable member record');
    }
  }

  private async grantLease(): Promise<void> {
    const started = this.clock.monotonicNow();
    this.firedAt = [];
    const lease: CoordinationLease = this.client.lease(this.ttlSeconds, {
      // A keep-alive answered renews the lease from when it was *sent* (etcd
      // renewed it somewhere between send and answer): the earliest bound.
      fired: () => {
        this.firedAt.push(this.clock.monotonicNow());
      },
      succeeded: () => {
        const sentAt = this.firedAt.shift();
        if (sentAt !== undefined) this.validUntil = Math.max(this.validUntil, sentAt + this.ttlSeconds * 1000 * 0.9);
      },
      // A new or failed keep-alive stream: requests sent on the old one will never
      // be answered; dropping their times keeps the queue aligned with answers.
      failed: () => {
        this.firedAt = [];
      },
      established: () => {
        this.firedAt = [];
      },
      lost: (error: unknown) => {
        if (this.lease !== lease) return;
        this.logger.warn({ err: error }, 'etcd lease lost; re-joining with a new lease');
        this.leaseIdValue = '';
        this.validUntil = 0;
        this.emit('lost');
        // The client gives a lease up after 2 TTLs without an answer, but etcd
        // extends every lease when it restarts: the old lease (and the leader
        // keys under it) may outlive the outage. Revoke it, so that its
        // partitions are free at once rather than one TTL after etcd's return.
        void this.revokeLost(lease);
        if (!this.stopped && !this.rejoining) void this.rejoin();
      },
    });
    this.lease = lease;
    try {
      this.leaseIdValue = await lease.grant();
    } catch (error) {
      // Stop this lease object's own retries: the caller decides when to try again.
      this.lease = undefined;
      lease.release();
      throw error;
    }
    this.grantedLeaseId = this.leaseIdValue;
    this.validUntil = started + this.ttlSeconds * 1000 * 0.9;
    // A new lease: the view is re-read before it counts as fresh again.
    this.record = { ...this.record, view_fresh: false, view_revision: 0, lease_id: this.grantedLeaseId };
    await this.writeRecord();
    this.memberMap.set(this.record.node_id, this.record);
  }

  /** Revokes a lease the client gave up on, retrying while etcd is away (bounded: after that its TTL ends it). */
  private async revokeLost(lease: CoordinationLease): Promise<void> {
    for (let attempt = 0; attempt < REVOKE_ATTEMPTS_MAX && !this.stopped; attempt++) {
      try {
        await lease.revoke();
        return;
      } catch {
        await sleep(this.clock, REVOKE_RETRY_MS);
      }
    }
  }

  /** One re-join loop at a time, however many leases report themselves lost. */
  private async rejoin(): Promise<void> {
    this.rejoining = true;
    try {
      for (let attempt = 0; !this.stopped; attempt++) {
        try {
          await this.grantLease();
          this.emit('granted');
          this.emit('change');
          return;
        } catch (error) {
          if (attempt % 10 === 0) this.logger.warn({ err: error, attempt }, 're-join failed; retrying');
          await sleep(this.clock, Math.min(2000, 100 * 2 ** attempt));
        }
      }
    } finally {
      this.rejoining = false;
    }
  }
}
