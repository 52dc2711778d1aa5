import type { WriteOp } from '../../runtime/index.js';

/**
 * The replicated log of one partition, as each replica stores it: every
 * committed batch of writes is an entry numbered by `seq` and stamped with
 * the epoch of the leader that made it (the etcd revision of its leadership
 * key). Pure rules, shared by the real replication code and the seeded
 * simulation (test/cluster/simulation).
 */

/** What a replica has of a partition. Stored with the partition's data (key ['v', p]) in the same LMDB commit. */
export interface PartitionVersion {
  /** The highest leader epoch this replica has accepted; older leaders are refused. */
  fence: number;
  /** Epoch and sequence number of the last entry applied (0, 0: none). */
  epoch: number;
  seq: number;
}

export const EMPTY_VERSION: PartitionVersion = { fence: 0, epoch: 0, seq: 0 };

export interface LogEntry {
  partition: number;
  /** The epoch of the leader that made this entry. */
  epoch: number;
  seq: number;
  /** Epoch of the entry at seq - 1: a replica applies an entry only on top of the same history (Raft's log matching). */
  prevEpoch: number;
  ops: WriteOp[];
}

export type AppendDecision =
  | { kind: 'apply'; version: PartitionVersion }
  /** The sender's epoch is older than one this replica has accepted: it is no longer leader. */
  | { kind: 'stale_leader'; fence: number }
  /** Not the next entry of this replica's history: the leader must send a snapshot. */
  | { kind: 'mismatch'; version: PartitionVersion };

export function decideAppend(version: PartitionVersion, entry: LogEntry): AppendDecision {
  if (entry.epoch < version.fence) return { kind: 'stale_leader', fence: version.fence };
  if (entry.seq !== version.seq + 1 || entry.prevEpoch !== version.epoch) return { kind: 'mismatch', version };
  return { kind: 'apply', version: { fence: entry.epoch, epoch: entry.epoch, seq: entry.seq } };
}

export type SnapshotDecision = { kind: 'apply'; version: PartitionVersion } | { kind: 'stale_leader'; fence: number };

/** A snapshot replaces the partition wholesale with the leader's state at `at`. */
export function decideSnapshot(version: PartitionVersion, leaderEpoch: number, at: { epoch: number; seq: number }): SnapshotDecision {
  if (leaderEpoch < version.fence) return { kind: 'stale_leader', fence: version.fence };
  return { kind: 'apply', version: { fence: leaderEpoch, epoch: at.epoch, seq: at.seq } };
}

/** On winning an election: raise the fence so that the previous leader's late entries are refused here too. */
export function fenceAt(version: PartitionVersion, epoch: number): PartitionVersion {
  return { ...version, fence: Math.max(version.fence, epoch) };
}
