import { describe, expect, it } from 'vitest';
import { LeaderLog } from '../../cluster/replication/leader-log.js';
import { decideAppend, decideSnapshot, EMPTY_VERSION, fenceAt, type LogEntry } from '../../cluster/replication/partition-log.js';
import { electionCandidates } from '../../cluster/election.js';

const op = (n: number) => [{ type: 'put' as const, key: ['s', 0, 'k', String(n)], value: n }];
const entry = (epoch: number, seq: number, prevEpoch: number): LogEntry => ({ partition: 0, epoch, seq, prevEpoch, ops: op(seq) });

describe('follower rules (partition-log)', () => {
  it('applies the next entry of the same history and raises the fence', () => {
    const d = decideAppend({ fence: 3, epoch: 3, seq: 4 }, entry(5, 5, 3));
    expect(d).toEqual({ kind: 'apply', version: { fence: 5, epoch: 5, seq: 5 } });
  });

  it('refuses an entry from a leader older than the fence', () => {
    expect(decideAppend({ fence: 7, epoch: 3, seq: 4 }, entry(5, 5, 3))).toEqual({ kind: 'stale_leader', fence: 7 });
  });

  it('asks for a snapshot on a gap, a repeat, or a different history at the same position', () => {
    expect(decideAppend({ fence: 3, epoch: 3, seq: 4 }, entry(3, 6, 3)).kind).toBe('mismatch');
    expect(decideAppend({ fence: 3, epoch: 3, seq: 4 }, entry(3, 4, 3)).kind).toBe('mismatch');
    // Same seq, but this replica's entry 4 came from epoch 2 while the leader's came from epoch 3.
    expect(decideAppend({ fence: 3, epoch: 2, seq: 4 }, entry(3, 5, 3)).kind).toBe('mismatch');
  });

  it('takes a snapshot from the current leader only', () => {
    expect(decideSnapshot({ fence: 9, epoch: 9, seq: 2 }, 8, { epoch: 8, seq: 10 })).toEqual({ kind: 'stale_leader', fence: 9 });
    expect(decideSnapshot({ fence: 9, epoch: 9, seq: 2 }, 11, { epoch: 9, seq: 10 })).toEqual({ kind: 'apply', version: { fence: 11, epoch: 9, seq: 10 } });
  });

  it('fences on election without moving the log position', () => {
    expect(fenceAt({ fence: 2, epoch: 2, seq: 8 }, 12)).toEqual({ fence: 12, epoch: 2, seq: 8 });
    expect(fenceAt({ fence: 20, epoch: 2, seq: 8 }, 12).fence).toBe(20);
  });
});

describe('LeaderLog', () => {
  it('acknowledges an entry only when local and every in-sync follower have it', () => {
    const log = new LeaderLog(0, 10, EMPTY_VERSION);
    log.addCatchingUp('b');
    log.acked('b', 0);
    expect(log.isCaughtUp('b')).toBe(true);
    log.markInSync('b');
    const e1 = log.append(op(1), 0);
    expect(e1).toMatchObject({ epoch: 10, seq: 1, prevEpoch: 0 });
    expect(log.localCommitted(1).acked).toEqual([]);
    expect(log.acked('b', 1).acked).toEqual([1]);
  });

  it('does not wait for a catching-up follower, and waits for it once in sync', () => {
    const log = new LeaderLog(0, 10, { fence: 10, epoch: 4, seq: 7 });
    log.addCatchingUp('c');
    log.append(op(8), 0);
    expect(log.localCommitted(8).acked).toEqual([8]);
    expect(log.isCaughtUp('c')).toBe(false);
    log.acked('c', 8);
    expect(log.isCaughtUp('c')).toBe(true);
    log.markInSync('c');
    log.append(op(9), 0);
    expect(log.localCommitted(9).acked).toEqual([]);
    expect(log.acked('c', 9).acked).toEqual([9]);
  });

  it('names laggards after the timeout and settles their entries once demoted', () => {
    const log = new LeaderLog(0, 3, EMPTY_VERSION);
    log.addCatchingUp('b');
    log.markInSync('b');
    log.append(op(1), 100);
    log.localCommitted(1);
    expect(log.laggards(150, 100)).toEqual([]);
    expect(log.laggards(200, 100)).toEqual(['b']);
    expect(log.demoteFollower('b').acked).toEqual([1]);
    expect(log.followers.get('b')?.mode).toBe('catching_up');
    log.append(op(2), 300);
    expect(log.localCommitted(2).acked).toEqual([2]);
  });

  it('fails every pending entry when leadership is lost', () => {
    const log = new LeaderLog(0, 3, EMPTY_VERSION);
    log.append(op(1), 0);
    log.append(op(2), 0);
    expect(log.abandon()).toEqual([1, 2]);
    expect(log.pendingCount).toBe(0);
  });

  it('chains entries across an epoch change (prevEpoch is the previous leader)', () => {
    const log = new LeaderLog(0, 20, { fence: 20, epoch: 11, seq: 40 });
    expect(log.append(op(41), 0)).toMatchObject({ epoch: 20, seq: 41, prevEpoch: 11 });
    expect(log.append(op(42), 0)).toMatchObject({ epoch: 20, seq: 42, prevEpoch: 20 });
  });
});

describe('LeaderLog: minimum in-sync copies (MIN_IN_SYNC_REPLICAS)', () => {
  const inSync = (log: LeaderLog, ...nodes: string[]) => {
    for (const node of nodes) {
      log.addCatchingUp(node);
      log.acked(node, log.lastSequence);
      log.markInSync(node);
    }
  };

  it('defaults to 1: the leader alone accepts writes', () => {
    const log = new LeaderLog(0, 1, EMPTY_VERSION);
    expect(log.minInSync).toBe(1);
    expect(log.inSyncCopies()).toBe(1);
    expect(log.acceptsWrites()).toBe(true);
    log.append(op(1), 0);
    expect(log.localCommitted(1)).toEqual({ acked: [1], short: [] });
  });

  it('refuses writes while the in-sync set, leader included, is smaller than the minimum', () => {
    const log = new LeaderLog(0, 1, EMPTY_VERSION, 2);
    expect(log.acceptsWrites()).toBe(false);
    // A catching-up follower does not count.
    log.addCatchingUp('b');
    expect(log.inSyncCopies()).toBe(1);
    expect(log.acceptsWrites()).toBe(false);
    // Appending anyway is a programmer error: the caller must refuse first (nothing written).
    expect(() => log.append(op(1), 0)).toThrow(/fewer than 2/);
    expect(log.lastSequence).toBe(0);
    expect(log.pendingCount).toBe(0);
    log.acked('b', 0);
    log.markInSync('b');
    expect(log.inSyncCopies()).toBe(2);
    expect(log.acceptsWrites()).toBe(true);
  });

  it('acknowledges an entry once the leader and enough in-sync followers hold it', () => {
    const log = new LeaderLog(0, 1, EMPTY_VERSION, 2);
    inSync(log, 'b', 'c');
    log.append(op(1), 0);
    expect(log.localCommitted(1)).toEqual({ acked: [], short: [] });
    expect(log.acked('b', 1)).toEqual({ acked: [], short: [] });
    expect(log.acked('c', 1)).toEqual({ acked: [1], short: [] });
  });

  it('acknowledges with enough copies even when another in-sync follower leaves before answering', () => {
    const log = new LeaderLog(0, 1, EMPTY_VERSION, 2);
    inSync(log, 'b', 'c');
    log.append(op(1), 0);
    log.localCommitted(1);
    log.acked('b', 1);
    // c leaves the in-sync set (recorded in etcd): leader + b still make 2 copies.
    expect(log.demoteFollower('c')).toEqual({ acked: [1], short: [] });
    expect(log.acceptsWrites()).toBe(true);
  });

  it('reports an entry whose only other copy left before acknowledging as short, then refuses writes', () => {
    const log = new LeaderLog(0, 1, EMPTY_VERSION, 2);
    inSync(log, 'b');
    log.append(op(1), 0);
    log.append(op(2), 0);
    log.localCommitted(1);
    log.localCommitted(2);
    expect(log.acked('b', 1)).toEqual({ acked: [1], short: [] });
    // b dies before acknowledging 2; its removal is recorded in etcd.
    expect(log.removeFollower('b')).toEqual({ acked: [], short: [2] });
    expect(log.pendingCount).toBe(0);
    expect(log.inSyncCopies()).toBe(1);
    expect(log.acceptsWrites()).toBe(false);
  });

  it('reports short only after the local commit too (an entry waits for its own copy first)', () => {
    const log = new LeaderLog(0, 1, EMPTY_VERSION, 2);
    inSync(log, 'b');
    log.append(op(1), 0);
    expect(log.demoteFollower('b')).toEqual({ acked: [], short: [] });
    expect(log.localCommitted(1)).toEqual({ acked: [], short: [1] });
  });

  it('accepts writes again once a new follower has caught up and is in sync', () => {
    const log = new LeaderLog(0, 1, { fence: 1, epoch: 1, seq: 5 }, 2);
    log.addCatchingUp('c');
    expect(log.acceptsWrites()).toBe(false);
    log.acked('c', 5);
    expect(log.isCaughtUp('c')).toBe(true);
    log.markInSync('c');
    expect(log.acceptsWrites()).toBe(true);
    log.append(op(6), 0);
    log.localCommitted(6);
    expect(log.acked('c', 6)).toEqual({ acked: [6], short: [] });
  });

  it('refuses a minimum below 1', () => {
    expect(() => new LeaderLog(0, 1, EMPTY_VERSION, 0)).toThrow(/minInSync/);
  });
});

describe('election candidates', () => {
  const members = [
    { node_id: 'a', draining: false },
    { node_id: 'b', draining: false },
    { node_id: 'c', draining: true },
  ];

  it('lets any live member take a partition that never had a leader, draining ones last', () => {
    const order = electionCandidates(5, members, undefined);
    expect(order.sort()).toEqual(['a', 'b', 'c']);
    expect(electionCandidates(5, members, undefined).at(-1)).toBe('c');
  });

  it('lets only live in-sync replicas take a partition that had one', () => {
    expect(electionCandidates(5, members, { epoch: 9, leader: 'x', replicas: ['x', 'b'] })).toEqual(['b']);
    expect(electionCandidates(5, members, { epoch: 9, leader: 'x', replicas: ['x'] })).toEqual([]);
  });
});
