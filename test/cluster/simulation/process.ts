import type { ClusterClock, TimerHandle } from '../../../cluster/ports.js';
import type { Rng } from './prng.js';
import type { Scheduler } from './scheduler.js';

/** What the wall clock reads at simulated time 0. */
export const EPOCH_MS = Date.UTC(2026, 0, 1);

/**
 * A node's operating-system process: everything that reaches the node (its
 * timers, network deliveries, etcd answers and watch events, disk
 * completions) runs through post(), which drops it if the process crashed
 * since (another incarnation) and queues it while the process is paused
 * (SIGSTOP), to run in order on resume.
 */
export class SimProcess {
  status: 'down' | 'up' | 'paused' = 'down';
  incarnation = 0;
  private inbox: (() => void)[] = [];
  /** Resumed, still running what queued up while paused (one event each, so promise continuations run in between). */
  private draining = false;
  /** Monotonic time lost while paused, if the clock stops then (fault `clock_stops_while_paused`). */
  private frozenMs = 0;
  private pausedAt = 0;
  readonly clock: ClusterClock;

  constructor(
    readonly id: string,
    readonly sched: Scheduler,
    readonly rng: Rng,
    private readonly clockStopsWhilePaused = false,
  ) {
    const process = this;
    this.clock = {
      now: () => EPOCH_MS + sched.now,
      monotonicNow: () => sched.now - process.frozenMs,
      setTimer(delay_ms: number, callback: () => void): TimerHandle {
        let cancelled = false;
        const inc = process.incarnation;
        sched.after(Math.max(0, Math.ceil(delay_ms)), () => process.post(inc, () => !cancelled && callback()));
        return {
          cancel() {
            cancelled = true;
          },
        };
      },
    };
  }

  /** Runs fn in this process: dropped if it crashed since `inc`, queued while paused. */
  post(inc: number, fn: () => void): void {
    if (inc !== this.incarnation || this.status === 'down') return;
    if (this.status === 'paused' || this.draining) this.inbox.push(fn);
    else fn();
  }

  start(): number {
    this.incarnation++;
    this.status = 'up';
    this.inbox = [];
    this.draining = false;
    return this.incarnation;
  }

  crash(): void {
    this.status = 'down';
    this.incarnation++;
    this.inbox = [];
    this.draining = false;
  }

  pause(): void {
    if (this.status !== 'up') return;
    this.status = 'paused';
    this.pausedAt = this.sched.now;
  }

  resume(): void {
    if (this.status !== 'paused') return;
    this.status = 'up';
    if (this.clockStopsWhilePaused) this.frozenMs += this.sched.now - this.pausedAt;
    this.drainInbox(this.incarnation);
  }

  private drainInbox(inc: number): void {
    this.draining = this.inbox.length > 0;
    if (!this.draining) return;
    this.sched.at(this.sched.now, () => {
      if (inc !== this.incarnation) return;
      if (this.status !== 'up') {
        this.draining = false;
        return;
      }
      this.inbox.shift()!();
      this.drainInbox(inc);
    });
  }
}
