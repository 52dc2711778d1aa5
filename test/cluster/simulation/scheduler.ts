import { ManualClock } from '../../../runtime/index.js';

/**
 * The fake clock and the event queue: events run in (time, insertion order),
 * time is an integer number of milliseconds. After each event every promise
 * continuation it caused runs (the queue of microtasks is drained) before the
 * next event, so the production code's async steps happen "at" the event's
 * instant, in a replayable order. Also keeps a short trace of notable events
 * for failure messages.
 */
export class Scheduler {
  /** The runtime's ManualClock holds the event queue: events are its timers, fired one at a time. */
  private readonly clock = new ManualClock(0);
  private readonly traceRing: string[] = [];
  private traceNext = 0;
  eventsRun = 0;

  constructor(private readonly traceSize = Number(process.env.SIM_TRACE ?? 60)) {}

  /** Simulated milliseconds since the start of the run. */
  get now(): number {
    return this.clock.now();
  }

  at(time: number, run: () => void): void {
    this.clock.setTimer(Math.max(0, Math.floor(time) - this.now), run);
  }

  after(delay: number, run: () => void): void {
    this.at(this.now + delay, run);
  }

  /**
   * Runs events until the queue is empty or the next one is after `until`;
   * the clock ends at `until`. `check` runs after each event (and its
   * continuations): a failure it throws stops the run.
   */
  async runUntil(until: number, check?: () => void): Promise<void> {
    while (this.clock.fireNext(until)) {
      this.eventsRun++;
      await drainMicrotasks();
      check?.();
    }
    this.clock.set(until);
  }

  trace(line: string): void {
    if (this.traceRing.length < this.traceSize) this.traceRing.push(`${this.now}ms ${line}`);
    else this.traceRing[this.traceNext] = `${this.now}ms ${line}`;
    this.traceNext = (this.traceNext + 1) % this.traceSize;
  }

  traceTail(): string[] {
    if (this.traceRing.length < this.traceSize) return [...this.traceRing];
    return [...this.traceRing.slice(this.traceNext), ...this.traceRing.slice(0, this.traceNext)];
  }
}

/** Resolves after every microtask queued so far (and every one those queue) has run. */
function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
