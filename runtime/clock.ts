import { MinHeap } from './min-heap.js';

/**
 * Time is an input (as in etcd-io/raft's Tick): every actor turn, alarm and
 * passivation check reads time through a Clock, never Date.now(), so tests can
 * drive time by hand and never sleep.
 */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `callback` once, no earlier than `delay_ms` from now. */
  setTimer(delay_ms: number, callback: () => void): TimerHandle;
}

export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }

  setTimer(delay_ms: number, callback: () => void): TimerHandle {
    // Node caps setTimeout at 2^31-1 ms; longer waits re-arm in steps.
    const step_ms = Math.min(Math.max(0, delay_ms), 2_147_000_000);
    const due = Date.now() + delay_ms;
    let handle: NodeJS.Timeout | undefined = setTimeout(() => {
      handle = undefined;
      if (Date.now() >= due - 1) callback();
      else inner = this.setTimer(due - Date.now(), callback);
    }, step_ms);
    handle.unref?.();
    let inner: TimerHandle | undefined;
    return {
      cancel() {
        if (handle) clearTimeout(handle);
        inner?.cancel();
      },
    };
  }
}

interface ManualTimer {
  due_ms: number;
  sequence: number;
  callback: () => void;
  cancelled: boolean;
  fired: boolean;
}

/** A clock that moves only when a test says so. */
export class ManualClock implements Clock {
  private current_ms: number;
  /** Pending timers in (due, creation) order; cancelled ones are dropped when they surface. */
  private readonly timers = new MinHeap<ManualTimer>((a, b) => a.due_ms < b.due_ms || (a.due_ms === b.due_ms && a.sequence < b.sequence));
  private sequence = 0;
  private pending = 0;

  constructor(start_ms = Date.UTC(2026, 0, 1)) {
    this.current_ms = start_ms;
  }

  now(): number {
    return this.current_ms;
  }

  setTimer(delay_ms: number, callback: () => void): TimerHandle {
    const timer: ManualTimer = {
      due_ms: this.current_ms + Math.max(0, delay_ms),
      sequence: this.sequence++,
      callback,
      cancelled: false,
      fired: false,
    };
    this.timers.push(timer);
    this.pending++;
    const clock = this;
    return {
      cancel() {
        if (timer.cancelled || timer.fired) return;
        timer.cancelled = true;
        clock.pending--;
      },
    };
  }

  /** Moves time forward, firing every timer that falls due, in due order. */
  advance(delta_ms: number): void {
    const target_ms = this.current_ms + delta_ms;
    while (this.fireNext(target_ms));
    this.current_ms = target_ms;
  }

  /**
   * Fires the earliest timer due at or before `until_ms`, moving time to its
   * due time; false if there is none. Lets a driver run something between
   * timers (the cluster simulation lets promise continuations run).
   */
  fireNext(until_ms: number): boolean {
    for (;;) {
      const next = this.timers.peek();
      if (!next || next.due_ms > until_ms) return false;
      this.timers.pop();
      if (next.cancelled) continue;
      next.fired = true;
      this.pending--;
      this.current_ms = Math.max(this.current_ms, next.due_ms);
      next.callback();
      return true;
    }
  }

  set(time_ms: number): void {
    this.advance(Math.max(0, time_ms - this.current_ms));
  }

  pendingTimerCount(): number {
    return this.pending;
  }
}
