import { EventEmitter } from 'node:events';
import type { RuntimeLogger } from '../runtime/index.js';
import { electionRank, isrAfterElection } from './election.js';
import { parsePartitionKey, type ClusterKeys, type IsrRecord, type LeaderRecord } from './etcd-keys.js';
import type { Membership } from './membership.js';
import { every, type ClusterClock, type Coordination, type CoordinationKeyValue, type TimerHandle } from './ports.js';
import { SyncedPrefix } from './synced-prefix.js';

export interface LeaderView extends LeaderRecord {
  /** Create revision of the leader key: the partition's epoch. */
  epoch: number;
}

interface IsrView {
  record: IsrRecord;
  modRevision: number;
}

/**
 * Who leads each partition, as etcd says, and this node's part in it.
 *
 * A leader holds `partitions/<p>/leader` under its lease; the key's create
 * revision is the epoch. Elections are etcd transactions that succeed only
 * if the key is absent and the in-sync record is the one the candidate
 * read, so two nodes can never both win, and only an in-sync replica can
 * (cluster/election.ts decides who may try, and in what order).
 *
 * Emits 'acquired' (p, epoch) when this node wins a partition, 'lost' (p)
 * when it no longer holds it (key deleted, replaced, or lease lost), and
 * 'changed' (p) on any change of a partition's leader (routers wake up).
 */
export class Leadership extends EventEmitter {
  private readonly leaders = new Map<number, LeaderView>();
  private readonly isrs = new Map<number, IsrView>();
  /** Partitions this node holds the key of: p -> epoch. */
  private readonly held = new Map<number, number>();
  private readonly noLeaderSince = new Map<number, number>();
  private readonly attempting = new Set<number>();
  /** Keys of ours this node no longer serves, being deleted (at most one delete per partition at a time). */
  private readonly deletingOrphans = new Set<number>();
  /** The partitions prefix, re-read in full after its watch breaks or the lease is re-granted. */
  readonly view: SyncedPrefix;
  private timer?: TimerHandle;
  private stopped = false;
  /** While false, this node takes no partition (drain, shutdown). */
  private electionsEnabled = true;

  constructor(
    private readonly client: Coordination,
    private readonly clock: ClusterClock,
    private readonly keys: ClusterKeys,
    private readonly membership: Membership,
    private readonly partitionCount: number,
    private readonly self: LeaderRecord,
    private readonly logger: RuntimeLogger,
    private readonly electionStepMs = 150,
  ) {
    super();
    this.setMaxListeners(0);
    this.view = new SyncedPrefix(
      client,
      clock,
      keys.partitionsPrefix,
      { reset: (kvs, revision) => this.reset(kvs, revision), put: (kv) => this.applyPut(kv), delete: (kv) => this.applyDelete(kv) },
      logger,
      'partitions',
    );
  }

  async start(): Promise<void> {
    await this.view.start();
    this.membership.on('lost', () => {
      for (const p of [...this.held.keys()]) this.drop(p, 'lease lost');
    });
    this.timer = every(this.clock, 50, () => this.tick());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.view.stop();
  }

  setElectionsEnabled(enabled: boolean): void {
    this.electionsEnabled = enabled;
  }

  leaderOf(p: number): LeaderView | undefined {
    return this.leaders.get(p);
  }

  isrOf(p: number): IsrRecord | undefined {
    return this.isrs.get(p)?.record;
  }

  /** The epoch of p if this node holds its key (and its lease is surely alive), else undefined. */
  heldEpoch(p: number): number | undefined {
    if (!this.membership.leaseValid()) return undefined;
    return this.held.get(p);
  }

  heldPartitions(): number[] {
    return [...this.held.keys()];
  }

  /** Every partition has a known leader. */
  allLed(): boolean {
    return this.leaders.size === this.partitionCount;
  }

  /** This node gives p up: deletes its key if it still holds it (handoff; the in-sync record stays). */
  async release(p: number): Promise<void> {
    const epoch = this.held.get(p);
    if (epoch === undefined) return;
    this.held.delete(p);
    await this.deleteKey(p, epoch);
  }

  /**
   * Gives p up if this node still holds it at `epoch`, whether or not the
   * lease is surely alive (a leadership that could not be taken up must not
   * stay held once the lease is trusted again: nobody would serve p).
   */
  async releaseEpoch(p: number, epoch: number): Promise<void> {
    if (this.held.get(p) !== epoch) return;
    await this.release(p);
  }

  private async deleteKey(p: number, epoch: number): Promise<void> {
    await this.client
      .txn([{ key: this.keys.leader(p), target: 'create', equals: epoch }], [{ type: 'delete', key: this.keys.leader(p) }])
      .catch((error: unknown) => this.logger.warn({ err: error, partition: p }, 'leadership release failed; the lease will end it'));
  }

  /** Records p's in-sync set, if this node still leads p at `epoch`. Resolves false if it does not. */
  async updateIsr(p: number, epoch: number, replicas: string[]): Promise<boolean> {
    const record: IsrRecord = { epoch, leader: this.self.node_id, replicas };
    const result = await this.client.txn(
      [{ key: this.keys.leader(p), target: 'create', equals: epoch }],
      [{ type: 'put', key: this.keys.isr(p), value: JSON.stringify(record) }],
    );
    if (result.succeeded) this.isrs.set(p, { record, modRevision: result.revision });
    return result.succeeded;
  }

  private tick(): void {
    if (this.stopped || !this.electionsEnabled || !this.membership.leaseValid()) {
      // A lease that may have expired: whatever we hold may be someone else's by now.
      // Stop serving at once; and if the lease was in fact still alive (a long
      // pause shorter than the TTL), give the keys up so that the partitions do
      // not stay held by a node that no longer serves them.
      if (!this.membership.leaseValid()) {
        for (const [p, epoch] of [...this.held]) {
          this.drop(p, 'lease may have expired');
          void this.deleteKey(p, epoch);
        }
      }
      return;
    }
    const now = this.clock.monotonicNow();
    const members = [...this.membership.members().values()].map((m) => ({ node_id: m.node_id, draining: m.draining }));
    for (let p = 0; p < this.partitionCount; p++) {
      const leader = this.leaders.get(p);
      // A key of ours that this node stopped serving (lease doubt while etcd was
      // away, a release that failed): etcd kept the lease alive through the
      // outage, so nothing else would ever free the partition.
      if (leader && leader.node_id === this.self.node_id && !this.held.has(p) && !this.attempting.has(p)) void this.deleteOrphan(p, leader.epoch);
      if (leader || this.attempting.has(p)) continue;
      const rank = electionRank(p, this.self.node_id, members, this.isrs.get(p)?.record);
      if (rank < 0) continue;
      const since = this.noLeaderSince.get(p) ?? now;
      if (now - since < rank * this.electionStepMs) continue;
      void this.tryElection(p);
    }
  }

  private async deleteOrphan(p: number, epoch: number): Promise<void> {
    if (this.deletingOrphans.has(p)) return;
    this.deletingOrphans.add(p);
    try {
      await this.deleteKey(p, epoch);
    } finally {
      this.deletingOrphans.delete(p);
    }
  }

  private async tryElection(p: number): Promise<void> {
    this.attempting.add(p);
    /** The epoch of the key this attempt won, if it did. */
    let won: number | undefined;
    try {
      const isr = this.isrs.get(p);
      const leaseId = this.membership.leaseId;
      if (!leaseId) return;
      // The epoch is the revision of this transaction; the in-sync record
      // written with it names the epoch, so it is computed after, below.
      const result = await this.client.txn(
        [
          { key: this.keys.leader(p), target: 'create', equals: 0 },
          isr ? { key: this.keys.isr(p), target: 'mod', equals: isr.modRevision } : { key: this.keys.isr(p), target: 'create', equals: 0 },
        ],
        [{ type: 'put', key: this.keys.leader(p), value: JSON.stringify(this.self), lease: leaseId }],
      );
      if (!result.succeeded) return;
      const epoch = result.revision;
      this.leaders.set(p, { ...this.self, epoch });
      this.noLeaderSince.delete(p);
      this.held.set(p, epoch);
      won = epoch;
      const recorded = await this.updateIsr(p, epoch, isrAfterElection(epoch, this.self.node_id).replicas);
      if (!recorded) {
        this.drop(p, 'lost leadership while recording the in-sync set');
        return;
      }
      this.logger.info({ partition: p, epoch }, 'partition leadership acquired');
      this.emit('acquired', p, epoch);
      this.emit('changed', p);
    } catch (error) {
      this.logger.warn({ err: error, partition: p }, 'election attempt failed');
      // The key was won but the in-sync record failed (etcd became unreachable
      // in between): this node never took the partition up ('acquired' was not
      // emitted), so it must not keep the key either, or nobody would serve p
      // for as long as its lease lives (found by the seeded simulation with
      // etcd outages). Not held any more, the key is deleted by tick() (a key
      // of ours this node does not hold), and the election runs again.
      if (won !== undefined && this.held.get(p) === won) this.held.delete(p);
    } finally {
      this.attempting.delete(p);
    }
  }

  private drop(p: number, reason: string): void {
    if (!this.held.has(p)) return;
    this.held.delete(p);
    this.logger.warn({ partition: p, reason }, 'partition leadership lost');
    this.emit('lost', p);
  }

  private applyPut(kv: CoordinationKeyValue): void {
    const parsed = parsePartitionKey(this.keys, kv.key);
    if (!parsed) return;
    const [p, what] = parsed;
    try {
      if (what === 'leader') {
        const record = JSON.parse(kv.value) as LeaderRecord;
        const epoch = kv.create_revision;
        const held = this.held.get(p);
        if (held !== undefined && held !== epoch) this.drop(p, 'another leader took the partition');
        this.leaders.set(p, { ...record, epoch });
        this.noLeaderSince.delete(p);
      } else {
        const record = JSON.parse(kv.value) as IsrRecord;
        const modRevision = kv.mod_revision;
        const known = this.isrs.get(p);
        if (!known || known.modRevision < modRevision) this.isrs.set(p, { record, modRevision });
      }
    } catch (error) {
      this.logger.warn({ err: error, key: kv.key }, 'unreadable partition record');
    }
    this.emit('changed', p);
  }

  /**
   * A full read at `revision` replaces what was known: a leader or in-sync
   * record absent from it is gone, unless this node learned it after that
   * revision (its own election or in-sync write answered later).
   */
  private reset(kvs: CoordinationKeyValue[], revision: number): void {
    const leaderKeys = new Set<number>();
    const isrKeys = new Set<number>();
    for (const kv of kvs) {
      const parsed = parsePartitionKey(this.keys, kv.key);
      if (!parsed) continue;
      (parsed[1] === 'leader' ? leaderKeys : isrKeys).add(parsed[0]);
      // Learned after the read (this node's own election): newer than the read's.
      if (parsed[1] === 'leader' && (this.leaders.get(parsed[0])?.epoch ?? 0) > revision) continue;
      this.applyPut(kv);
    }
    const now = this.clock.monotonicNow();
    for (let p = 0; p < this.partitionCount; p++) {
      const leader = this.leaders.get(p);
      if (!leaderKeys.has(p) && (!leader || leader.epoch <= revision)) {
        if (leader) {
          this.leaders.delete(p);
          this.drop(p, 'leadership key gone (re-read)');
          this.emit('changed', p);
        }
        if (!this.noLeaderSince.has(p)) this.noLeaderSince.set(p, now);
      }
      const isr = this.isrs.get(p);
      if (!isrKeys.has(p) && isr && isr.modRevision <= revision) this.isrs.delete(p);
    }
  }

  private applyDelete(kv: CoordinationKeyValue): void {
    const parsed = parsePartitionKey(this.keys, kv.key);
    if (!parsed) return;
    const [p, what] = parsed;
    if (what === 'leader') {
      this.leaders.delete(p);
      this.noLeaderSince.set(p, this.clock.monotonicNow());
      this.drop(p, 'leadership key deleted');
    } else this.isrs.delete(p);
    this.emit('changed', p);
  }
}
