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
}

/** A clock that moves only when a test says so. */
export class ManualClock implements Clock {
  private current_ms: number;
  private timers: ManualTimer[] = [];
  private sequence = 0;

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
    };
    this.timers.push(timer);
    return {
      cancel() {
        timer.cancelled = true;
      },
    };
  }

  /** Moves time forward, firing every timer that falls due, in due order. */
  advance(delta_ms: number): void {
    const target_ms = this.current_ms + delta_ms;
    for (;;) {
      this.timers = this.timers.filter((t) => !t.cancelled);
      this.timers.sort((a, b) => a.due_ms - b.due_ms || a.sequence - b.sequence);
      const next = this.timers[0];
      if (!next || next.due_ms > target_ms) break;
      this.timers.shift();
      this.current_ms = Math.max(this.current_ms, next.due_ms);
      next.callback();
    }
    this.current_ms = target_ms;
  }

  set(time_ms: number): void {
    this.advance(Math.max(0, time_ms - this.current_ms));
  }

  pendingTimerCount(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }
}
