import { describe, expect, it } from 'vitest';
import type { WriteOp } from '../../runtime/index.js';
import { leadingWith, replicatorWith } from '../helpers/replicator-world.js';
import { keys } from '../../runtime/storage-keys.js';
import type { LogEntry } from '../../cluster/replication/partition-log.js';
import type { ReplicateMessage } from '../../cluster/transport/frames.js';

/**
 * What a node writes besides the data: each partition's version (its log
 * position) goes to disk once per commit, however many entries of it the
 * commit carries; and a leader keeps in memory only the entries a snapshot's
 * tail may still need.
 */

const put = (p: number, key: string): WriteOp => ({ type: 'put', key: keys.snapshot(p, 'counter', key), value: { n: 1 } });
const isVersion = (op: WriteOp) => op.key[0] === 'v';

/** Leads partitions 0 and 1 at epoch 1. */
const leading = (commitDelayMs: number) => leadingWith(commitDelayMs, [0, 1]);

describe('replicator: partition versions', () => {
  it('a leader commit carrying several entries of a partition writes its version once, the last entry’s', async () => {
    const { local, clock, replicator } = await leading(4);
    void replicator.commit([put(0, 'a')]);
    // Behind the commit in flight: three entries of partition 0, one of partition 1.
    const behind = [replicator.commit([put(0, 'b')]), replicator.commit([put(0, 'c')]), replicator.commit([put(1, 'x')]), replicator.commit([put(0, 'd')])];
    await local.release(0);
    clock.advance(4);
    expect(local.commits).toHaveLength(2);
    const ops = local.commits[1].ops;
    expect(ops.filter((op) => !isVersion(op)).map((op) => `${String(op.key[1])}:${String(op.key[3])}`)).toEqual(['0:b', '0:c', '1:x', '0:d']);
    expect(ops.filter(isVersion)).toEqual([
      { type: 'put', key: keys.version(0), value: { fence: 1, epoch: 1, seq: 4 } },
      { type: 'put', key: keys.version(1), value: { fence: 1, epoch: 1, seq: 1 } },
    ]);
    await local.release(1);
    await Promise.all(behind);
    expect(local.get(keys.version(0))).toEqual({ fence: 1, epoch: 1, seq: 4 });
  });

  it('a follower applying several entries of a partition in one commit writes its version once', async () => {
    const { local, replicator } = replicatorWith(0);
    const append = (seq: number, key: string): ReplicateMessage => {
      const entry: LogEntry = { partition: 0, epoch: 1, seq, prevEpoch: seq === 1 ? 0 : 1, ops: [put(0, key)] };
      return { t: 'append', entry };
    };
    const replies = replicator.applyFrame([append(1, 'a'), append(2, 'b'), append(3, 'c')]);
    for (let turn = 0; turn < 5 && local.commits.length === 0; turn++) await Promise.resolve();
    expect(local.commits).toHaveLength(1);
    expect(local.commits[0].ops.filter(isVersion)).toEqual([{ type: 'put', key: keys.version(0), value: { fence: 1, epoch: 1, seq: 3 } }]);
    await local.release(0);
    expect(await replies).toEqual([{ t: 'ack', partition: 0, seq: 3, epoch: 1 }]);
    expect(local.get(keys.version(0))).toEqual({ fence: 1, epoch: 1, seq: 3 });
  });
});

describe('replicator: the entries a leader keeps for a snapshot tail', () => {
  it('lets go of entries once they are durable here, keeping a few behind the last', async () => {
    const { local, replicator } = await leading(0);
    const recent = () => (replicator as unknown as { led: Map<number, { recent: LogEntry[] }> }).led.get(0)!.recent;
    for (let i = 0; i < 500; i++) {
      const acked = replicator.commit([put(0, `k${i}`)]);
      await local.release(local.commits.length - 1);
      await acked;
    }
    // Was the last 4,096 entries whatever their state.
    expect(recent().length).toBeLessThanOrEqual(64);
    expect(recent().at(-1)?.seq).toBe(500);
    // An entry not yet durable here stays, whatever its age.
    void replicator.commit([put(0, 'pending')]);
    expect(recent().at(-1)?.seq).toBe(501);
  });
});
