import { MinHeap } from './min-heap.js';

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
  private readonly heap = new MinHeap<ScheduledAlarm>((a, b) => a.fire_ms < b.fire_ms);

  get size(): number {
    return this.heap.size;
  }

  peek(): ScheduledAlarm | undefined {
    return this.heap.peek();
  }

  push(alarm: ScheduledAlarm): void {
    this.heap.push(alarm);
  }

  pop(): ScheduledAlarm | undefined {
    return this.heap.pop();
  }

  clear(): void {
    this.heap.clear();
  }
}
