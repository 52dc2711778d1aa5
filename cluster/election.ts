import { rankNodes } from './placement.js';
import type { IsrRecord } from './etcd-keys.js';

/**
 * Who may take a partition that has no leader, and in what order. Pure: the
 * leadership manager and the seeded simulation share it.
 *
 * - A partition that never had a leader (no in-sync record) holds no data
 *   yet: any live member may take it.
 * - Otherwise only a live member of its in-sync set may: it holds every
 *   acknowledged write. If none is alive the partition waits (unavailable
 *   rather than wrong).
 * - Candidates go in rendezvous order, draining nodes last; candidate r waits
 *   r * step before trying, so the preferred one usually wins without a race,
 *   and the others still step in when it is gone.
 */
export interface MemberView {
  node_id: string;
  draining: boolean;
}

export function electionCandidates(partition: number, members: MemberView[], isr: IsrRecord | undefined): string[] {
  const live = new Map(members.map((m) => [m.node_id, m]));
  const eligible = isr ? isr.replicas.filter((id) => live.has(id)) : [...live.keys()];
  const ranked = rankNodes(partition, eligible);
  return [...ranked.filter((id) => !live.get(id)!.draining), ...ranked.filter((id) => live.get(id)!.draining)];
}

/** This node's place in the queue of candidates (0 = first), or -1 if it may not take the partition. */
export function electionRank(partition: number, self: string, members: MemberView[], isr: IsrRecord | undefined): number {
  return electionCandidates(partition, members, isr).indexOf(self);
}

/** The in-sync record a new leader writes in the same transaction that makes it leader. */
export function isrAfterElection(epoch: number, self: string): IsrRecord {
  return { epoch, leader: self, replicas: [self] };
}
