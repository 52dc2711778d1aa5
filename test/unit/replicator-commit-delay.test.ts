import { describe, expect, it } from 'vitest';
import type { WriteOp } from '../../runtime/index.js';
import { leadingWith, replicatorWith } from '../helpers/replicator-world.js';
import { keys } from '../../runtime/storage-keys.js';
import { FULL_BATCH_OPS } from '../../cluster/replication/commit-lane.js';
import type { LogEntry } from '../../cluster/replication/partition-log.js';
import type { ReplicateMessage } from '../../cluster/transport/frames.js';

/**
 * REPLICATION_COMMIT_DELAY_MS: under load a node waits before its next local
 * commit so that the commit carries more; a commit with nothing behind it is
 * never delayed. A store that holds every commit until the test releases it
 * (HeldStore) stands for LMDB's fsync.
 */

const put = (key: string): WriteOp => ({ type: 'put', key: keys.snapshot(0, 'counter', key), value: { n: 1 } });

/** Leads partition 0 at epoch 1. */
const leading = (commitDelayMs: number, deposed?: (p: number) => void) => leadingWith(commitDelayMs, [0], deposed);

function settledFlag(promise: Promise<void>) {
  const flag = { done: false };
  void promise.then(() => (flag.done = true));
  return flag;
}

describe('replicator: the commit delay on a leader', () => {
  it('starts a commit with nothing behind it at once', async () => {
    const { local, clock } = await leading(4).then((w) => ({ ...w, acked: w.replicator.commit([put('a')]) }));
    expect(local.commits).toHaveLength(1);
    await local.release(0);
    expect(clock.pendingTimerCount()).toBe(0);
  });

  it('under load, waits the delay, then writes everything that waited in one commit', async () => {
    const { local, clock, replicator } = await leading(4);
    const first = settledFlag(replicator.commit([put('a')]));
    expect(local.commits).toHaveLength(1);
    const second = settledFlag(replicator.commit([put('b')]));
    const third = settledFlag(replicator.commit([put('c')]));
    await local.release(0);
    expect(first.done).toBe(true);
    // b and c wait behind it: no commit yet, one timer for the delay.
    expect(local.commits).toHaveLength(1);
    clock.advance(3);
    expect(local.commits).toHaveLength(1);
    clock.advance(1);
    expect(local.commits).toHaveLength(2);
    const written = local.commits[1].ops.map((op) => op.key[3]);
    expect(written).toEqual(expect.arrayContaining(['b', 'c']));
    expect(second.done || third.done).toBe(false);
    await local.release(1);
    expect(second.done && third.done).toBe(true);
  });

  it('ends the delay once the entries waiting for it carry a full batch of operations', async () => {
    const { local, clock, replicator } = await leading(4);
    const started = clock.now();
    void replicator.commit([put('a')]);
    void replicator.commit([put('b')]);
    await local.release(0);
    expect(local.commits).toHaveLength(1);
    // One operation waits; the lane waits its delay. Commits made meanwhile join the same batch.
    for (let i = 1; i < FULL_BATCH_OPS - 1; i++) void replicator.commit([put(`k${i}`)]);
    expect(local.commits).toHaveLength(1);
    void replicator.commit([put('last')]);
    expect(local.commits).toHaveLength(2);
    // No time passed: the batch, not the timer, started it.
    expect(clock.now()).toBe(started);
    const written = local.commits[1].ops.filter((op) => op.key[0] === 's');
    expect(written).toHaveLength(FULL_BATCH_OPS);
  });

  it('with REPLICATION_COMMIT_DELAY_MS=0, the next commit starts as soon as the last one is done', async () => {
    const { local, replicator } = await leading(0);
    void replicator.commit([put('a')]);
    void replicator.commit([put('b')]);
    await local.release(0);
    expect(local.commits).toHaveLength(2);
  });
});

describe('replicator: the commit delay on a follower', () => {
  const append = (seq: number, key: string): ReplicateMessage => {
    const entry: LogEntry = { partition: 0, epoch: 1, seq, prevEpoch: seq === 1 ? 0 : 1, ops: [put(key)] };
    return { t: 'append', entry };
  };

  it('applies a lone frame at once and gathers the frames that wait behind a commit after the delay', async () => {
    const { local, clock, replicator } = replicatorWith(4);
    const first = replicator.applyFrame([append(1, 'a')]);
    for (let turn = 0; turn < 5 && local.commits.length === 0; turn++) await Promise.resolve();
    expect(local.commits).toHaveLength(1);
    const second = replicator.applyFrame([append(2, 'b')]);
    const third = replicator.applyFrame([append(3, 'c')]);
    await local.release(0);
    expect(await first).toEqual([{ t: 'ack', partition: 0, seq: 1, epoch: 1 }]);
    expect(local.commits).toHaveLength(1);
    clock.advance(4);
    for (let turn = 0; turn < 5 && local.commits.length === 1; turn++) await Promise.resolve();
    expect(local.commits).toHaveLength(2);
    await local.release(1);
    expect(await second).toEqual([{ t: 'ack', partition: 0, seq: 2, epoch: 1 }]);
    expect(await third).toEqual([{ t: 'ack', partition: 0, seq: 3, epoch: 1 }]);
  });
});

describe('replicator: leader entries and follower frames share the commit lane', () => {
  const appendTo = (partition: number, seq: number, key: string): ReplicateMessage => {
    const entry: LogEntry = { partition, epoch: 1, seq, prevEpoch: seq === 1 ? 0 : 1, ops: [{ type: 'put', key: keys.snapshot(partition, 'counter', key), value: { n: 1 } }] };
    return { t: 'append', entry };
  };

  it('writes a leader entry and a follower frame that wait behind a commit in one commit, after the delay', async () => {
    // Leads partition 0, follows partition 1.
    const { local, clock, replicator } = await leading(4);
    const led = settledFlag(replicator.commit([put('a')]));
    expect(local.commits).toHaveLength(1);
    const leaderNext = settledFlag(replicator.commit([put('b')]));
    const followed = replicator.applyFrame([appendTo(1, 1, 'x')]);
    for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    // Both wait behind the commit in flight.
    expect(local.commits).toHaveLength(1);
    await local.release(0);
    expect(led.done).toBe(true);
    clock.advance(4);
    for (let turn = 0; turn < 5 && local.commits.length === 1; turn++) await Promise.resolve();
    expect(local.commits).toHaveLength(2);
    const written = local.commits[1].ops.map((op) => `${String(op.key[1])}:${String(op.key[3])}`);
    expect(written).toEqual(expect.arrayContaining(['0:b', '1:x']));
    await local.release(1);
    expect(leaderNext.done).toBe(true);
    expect(await followed).toEqual([{ t: 'ack', partition: 1, seq: 1, epoch: 1 }]);
  });

  it('starts a follower frame at once when the lane is idle, even while this node leads other partitions', async () => {
    const { local, replicator } = await leading(4);
    const followed = replicator.applyFrame([appendTo(1, 1, 'x')]);
    for (let turn = 0; turn < 5 && local.commits.length === 0; turn++) await Promise.resolve();
    expect(local.commits).toHaveLength(1);
    await local.release(0);
    expect(await followed).toEqual([{ t: 'ack', partition: 1, seq: 1, epoch: 1 }]);
  });

  it('a failed shared commit fails both: the leader gives its partition up, the follower frame is refused', async () => {
    const deposed: number[] = [];
    const { local, replicator } = await leading(0, (p) => deposed.push(p));
    const first = settledFlag(replicator.commit([put('a')]));
    const leaderNext = replicator.commit([put('b')]);
    const followed = replicator.applyFrame([appendTo(1, 1, 'x')]);
    for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    await local.release(0);
    expect(first.done).toBe(true);
    for (let turn = 0; turn < 5 && local.commits.length === 1; turn++) await Promise.resolve();
    expect(local.commits).toHaveLength(2);
    await local.fail(1, new Error('disk full'));
    await expect(followed).rejects.toThrow('disk full');
    expect(deposed).toEqual([0]);
    // The leader entry's outcome is unknown to its client: it fails (the partition was given up).
    replicator.stopLeading(0);
    await expect(leaderNext).rejects.toThrow();
  });
});
