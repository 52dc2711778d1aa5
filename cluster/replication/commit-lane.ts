import type { RuntimeLogger, Store, TimerHandle, WriteOp } from '../../runtime/index.js';
import type { ClusterClock } from '../ports.js';

/** One contribution to a node's next local commit. */
export interface LaneWrite {
  /**
   * Its operations, read when the commit that carries it starts, not when it
   * is submitted: a leader drops there the entries of a leadership that ended
   * or of a partition whose earlier commit failed meanwhile.
   */
  ops(): readonly WriteOp[];
  /** Called synchronously when that commit is durable (ok) or has failed, before the lane starts another. */
  done(ok: boolean, error?: unknown): void;
  /** Asked after its commit: does this writer already have more waiting? Then the lane waits its delay first. */
  more?(): boolean;
  /** How many operations it would carry if its commit started now (default 1): a full batch ends the delay. */
  size?(): number;
}

/**
 * Operations waiting that make a commit worth starting without its delay
 * (Kafka's producer does the same with `batch.size` beside `linger.ms`). The
 * delay is there to share an fsync between writes that trickle in; once this
 * many wait, waiting longer only adds latency. A one-node cluster under the
 * write-path load ran 10,090 acquisitions a second with the 4 ms delay after
 * every commit, and 16,930 with this rule, at the same 0.04 fsyncs per
 * acquisition (docs/performance.md, "The commit delay on a busy node").
 */
export const FULL_BATCH_OPS = 32;

/**
 * A node's local commits of replicated data, one at a time: a partition
 * leader's log entries and the frames it applies as a follower go to LMDB
 * together. Separately, the two made two fsyncs where one would do, each
 * some 300 µs of the writer thread's CPU on this machine (docs/performance.md,
 * "Where the cluster's rate goes").
 *
 * A write submitted while the lane is idle starts at once (a lone writer
 * waits for no timer). Under load, when writes already wait at the end of a
 * commit, or a writer says it has more, the lane waits `delayMs` so that the
 * next commit carries everything that arrives meanwhile, unless (or until)
 * `fullBatchOps` operations wait: then the next commit starts at once.
 */
export class CommitLane {
  private busy = false;
  private pending: LaneWrite[] = [];
  /** Set while the lane waits its delay between two commits. */
  private delay: TimerHandle | undefined;

  constructor(
    private readonly store: Pick<Store, 'commit'>,
    private readonly clock: ClusterClock,
    private readonly delayMs: number,
    private readonly logger: RuntimeLogger,
    private readonly fullBatchOps = FULL_BATCH_OPS,
  ) {}

  submit(write: LaneWrite): void {
    this.pending.push(write);
    if (!this.busy) this.start();
    else this.grew();
  }

  /** A pending write took more operations: if the batch is now full, the delay ends. */
  grew(): void {
    if (this.delay !== undefined && this.pendingOps() >= this.fullBatchOps) this.endDelay();
  }

  /** `submit` for a writer that awaits its operations' durability. */
  commit(ops: readonly WriteOp[], more?: () => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      this.submit({ ops: () => ops, done: (ok, error) => (ok ? resolve() : reject(error)), more, size: () => ops.length });
    });
  }

  private start(): void {
    this.busy = true;
    const writes: LaneWrite[] = [];
    const ops: WriteOp[] = [];
    for (const write of this.pending.splice(0)) {
      let own: readonly WriteOp[];
      try {
        own = write.ops();
      } catch (error) {
        // Refused alone: the others' commit goes on, and the lane does not stay busy.
        this.tell(write, false, error);
        continue;
      }
      for (const op of own) ops.push(op);
      writes.push(write);
    }
    if (ops.length === 0) {
      this.finish(writes, true);
      return;
    }
    this.store.commit(ops).then(
      () => this.finish(writes, true),
      (error: unknown) => this.finish(writes, false, error),
    );
  }

  private finish(writes: LaneWrite[], ok: boolean, error?: unknown): void {
    // Writers learn the outcome before the next commit reads their operations.
    for (const write of writes) this.tell(write, ok, error);
    const underLoad = this.pending.length > 0 || writes.some((write) => write.more?.() === true);
    if (underLoad && this.delayMs > 0 && this.pendingOps() < this.fullBatchOps) {
      // busy stays set: what arrives meanwhile joins `pending`.
      this.delay = this.clock.setTimer(this.delayMs, () => this.endDelay());
      return;
    }
    this.next();
  }

  private endDelay(): void {
    this.delay?.cancel();
    this.delay = undefined;
    this.next();
  }

  private pendingOps(): number {
    let ops = 0;
    for (const write of this.pending) ops += write.size?.() ?? 1;
    return ops;
  }

  private tell(write: LaneWrite, ok: boolean, error?: unknown): void {
    try {
      write.done(ok, error);
    } catch (thrown) {
      // One writer's bug must not leave the lane busy for ever (no commit would start again).
      this.logger.error({ err: thrown }, 'commit lane: a writer failed on its outcome');
    }
  }

  private next(): void {
    if (this.pending.length > 0) this.start();
    else this.busy = false;
  }
}
