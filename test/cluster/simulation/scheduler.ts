/**
 * The fake clock and the event queue: events run in (time, insertion order),
 * time is an integer number of milliseconds. After each event every promise
 * continuation it caused runs (the queue of microtasks is drained) before the
 * next event, so the production code's async steps happen "at" the event's
 * instant, in a replayable order. Also keeps a short trace of notable events
 * for failure messages.
 */
interface Event {
  at: number;
  seq: number;
  run: () => void;
}

export class Scheduler {
  now = 0;
  private seq = 0;
  private readonly heap: Event[] = [];
  private readonly traceRing: string[] = [];
  private traceNext = 0;
  eventsRun = 0;

  constructor(private readonly traceSize = Number(process.env.SIM_TRACE ?? 60)) {}

  at(time: number, run: () => void): void {
    this.push({ at: Math.max(this.now, Math.floor(time)), seq: this.seq++, run });
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
    while (this.heap.length > 0 && this.heap[0].at <= until) {
      const event = this.pop();
      this.now = event.at;
      this.eventsRun++;
      event.run();
      await drainMicrotasks();
      check?.();
    }
    this.now = until;
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

  private push(event: Event): void {
    const heap = this.heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i], heap[parent])) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
  }

  private pop(): Event {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && before(heap[l], heap[m])) m = l;
        if (r < heap.length && before(heap[r], heap[m])) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m], heap[i]];
        i = m;
      }
    }
    return top;
  }
}

/** Resolves after every microtask queued so far (and every one those queue) has run. */
function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function before(a: Event, b: Event): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
