import { describe, expect, it } from 'vitest';
import { ManualClock, type WriteOp } from '../../runtime/index.js';
import { keys } from '../../runtime/storage-keys.js';
import { CommitLane, type LaneWrite } from '../../cluster/replication/commit-lane.js';
import { HeldStore } from '../helpers/held-store.js';

const errors: unknown[] = [];
const logger = { info() {}, warn() {}, debug() {}, error: (fields: unknown) => void errors.push(fields) };
const op = (name: string): WriteOp => ({ type: 'put', key: keys.snapshot(0, 'counter', name), value: 1 });
const names = (ops: readonly WriteOp[]) => ops.map((o) => o.key[3]);

function newLane(delayMs: number, fullBatchOps?: number) {
  const store = new HeldStore();
  const clock = Object.assign(new ManualClock(), { monotonicNow: () => clock.now() });
  return { store, clock, lane: new CommitLane(store, clock, delayMs, logger, fullBatchOps) };
}

/** A write that records its outcome. */
function recorded(ops: WriteOp[], more?: () => boolean): LaneWrite & { outcome?: boolean } {
  const write: LaneWrite & { outcome?: boolean } = { ops: () => ops, done: (ok) => (write.outcome = ok), more };
  return write;
}

describe('CommitLane', () => {
  it('starts a write at once when idle, and commits those that arrive meanwhile together, after the delay', async () => {
    const { store, clock, lane } = newLane(4);
    const a = recorded([op('a')]);
    lane.submit(a);
    expect(store.commits.map((c) => names(c.ops))).toEqual([['a']]);
    const b = recorded([op('b')]);
    const c = recorded([op('c')]);
    lane.submit(b);
    lane.submit(c);
    expect(store.commits).toHaveLength(1);
    await store.release(0);
    expect(a.outcome).toBe(true);
    expect(b.outcome).toBeUndefined();
    clock.advance(3);
    expect(store.commits).toHaveLength(1);
    const d = recorded([op('d')]);
    lane.submit(d);
    clock.advance(1);
    expect(names(store.commits[1].ops)).toEqual(['b', 'c', 'd']);
    await store.release(1);
    expect([b.outcome, c.outcome, d.outcome]).toEqual([true, true, true]);
    // Nothing waited behind it: idle again, the next write starts at once.
    lane.submit(recorded([op('e')]));
    expect(store.commits).toHaveLength(3);
  });

  it('waits the delay when a writer says it has more, even with nothing submitted yet', async () => {
    const { store, clock, lane } = newLane(4);
    let more = true;
    lane.submit(recorded([op('a')], () => more));
    await store.release(0);
    more = false;
    lane.submit(recorded([op('b')]));
    expect(store.commits).toHaveLength(1);
    clock.advance(4);
    expect(store.commits).toHaveLength(2);
  });

  it('with no delay, starts the next commit as soon as the last one is done', async () => {
    const { store, lane } = newLane(0);
    lane.submit(recorded([op('a')]));
    lane.submit(recorded([op('b')]));
    await store.release(0);
    expect(names(store.commits[1].ops)).toEqual(['b']);
  });

  it("reads a write's operations when its commit starts, after the writers of the commit before learned its outcome", async () => {
    const { store, clock, lane } = newLane(4);
    let failedBefore = false;
    lane.submit({ ops: () => [op('a')], done: (ok) => (failedBefore = !ok) });
    const late = recorded([]);
    late.ops = () => (failedBefore ? [] : [op('b')]);
    lane.submit(late);
    await store.fail(0, new Error('disk full'));
    clock.advance(4);
    // Its operations were dropped in the light of the failure: nothing to commit, and it succeeds empty.
    expect(store.commits).toHaveLength(1);
    expect(late.outcome).toBe(true);
  });

  it('fails every write of a failed commit, and goes on with the next', async () => {
    const { store, clock, lane } = newLane(4);
    const a = recorded([op('a')]);
    const b = recorded([op('b')]);
    lane.submit(a);
    lane.submit(b);
    await store.release(0);
    clock.advance(4);
    const c = recorded([op('c')]);
    lane.submit(c);
    await store.fail(1, new Error('disk full'));
    expect(b.outcome).toBe(false);
    clock.advance(4);
    expect(names(store.commits[2].ops)).toEqual(['c']);
    await store.release(2);
    expect(c.outcome).toBe(true);
  });

  it('refuses a write whose operations cannot be read, alone, and does not stay busy when a writer throws on its outcome', async () => {
    const { store, lane } = newLane(0);
    const broken: LaneWrite & { outcome?: boolean } = {
      ops: () => {
        throw new Error('bug');
      },
      done: (ok) => (broken.outcome = ok),
    };
    lane.submit(broken);
    expect(broken.outcome).toBe(false);
    expect(store.commits).toHaveLength(0);
    const before = errors.length;
    lane.submit({
      ops: () => [op('a')],
      done: () => {
        throw new Error('bug in done');
      },
    });
    await store.release(0);
    expect(errors.length).toBe(before + 1);
    lane.submit(recorded([op('b')]));
    expect(store.commits).toHaveLength(2);
  });

  it('skips the delay when a full batch already waits at the end of a commit', async () => {
    const { store, lane } = newLane(4, 3);
    lane.submit(recorded([op('a')]));
    // commit() gives the lane its operations' count; a write without a size hint counts as one.
    void lane.commit([op('b'), op('c')]);
    lane.submit(recorded([op('d')]));
    await store.release(0);
    expect(names(store.commits[1].ops)).toEqual(['b', 'c', 'd']);
  });

  it('ends the delay as soon as the waiting writes grow to a full batch', async () => {
    const { store, clock, lane } = newLane(4, 3);
    lane.submit(recorded([op('a')]));
    const growing: LaneWrite = { ops: () => [op('b'), op('c'), op('d')], done: () => {}, size: () => size };
    let size = 1;
    lane.submit(growing);
    await store.release(0);
    clock.advance(1);
    expect(store.commits).toHaveLength(1);
    size = 2;
    lane.grew();
    expect(store.commits).toHaveLength(1);
    size = 3;
    lane.grew();
    expect(names(store.commits[1].ops)).toEqual(['b', 'c', 'd']);
    // The cancelled timer does not start another commit when its time comes.
    await store.release(1);
    clock.advance(4);
    expect(store.commits).toHaveLength(2);
  });

  it('counts a write submitted during the delay towards the full batch', async () => {
    const { store, lane } = newLane(4, 2);
    lane.submit(recorded([op('a')]));
    lane.submit(recorded([op('b')]));
    await store.release(0);
    expect(store.commits).toHaveLength(1);
    lane.submit(recorded([op('c')]));
    expect(names(store.commits[1].ops)).toEqual(['b', 'c']);
  });
});
