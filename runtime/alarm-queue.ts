/**
 * In-memory schedule of the durable alarms (the durable copy lives in the
 * store). A binary min-heap ordered by fire time; entries that were replaced
 * or cancelled are skipped lazily when they surface.
 */
export interface ScheduledAlarm {
  fire_ms: number;
  due_ms: number;
  partition: number;
  kind: string;
  key: string;
  name: string;
}

export class AlarmQueue {
  private heap: ScheduledAlarm[] = [];

  get size(): number {
    return this.heap.length;
  }

  peek(): ScheduledAlarm | undefined {
    return this.heap[0];
  }

  push(alarm: ScheduledAlarm): void {
    const heap = this.heap;
    heap.push(alarm);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent].fire_ms <= heap[i].fire_ms) break;
      [heap[parent], heap[i]] = [heap[i], heap[parent]];
      i = parent;
    }
  }

  pop(): ScheduledAlarm | undefined {
    const heap = this.heap;
    if (heap.length === 0) return undefined;
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && heap[left].fire_ms < heap[smallest].fire_ms) smallest = left;
        if (right < heap.length && heap[right].fire_ms < heap[smallest].fire_ms) smallest = right;
        if (smallest === i) break;
        [heap[smallest], heap[i]] = [heap[i], heap[smallest]];
        i = smallest;
      }
    }
    return top;
  }

  clear(): void {
    this.heap = [];
  }
}
