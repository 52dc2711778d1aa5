/**
 * A binary min-heap ordered by `before` (strictly earlier). The runtime's
 * alarm schedule and ManualClock's timers use it; so does the cluster
 * simulation's event queue, through ManualClock. Actors use it for their
 * time-ordered schedules (job queues, message visibility, waiting-room
 * sessions): there entries are never removed from the middle; an owner marks
 * an entry stale and skips it when it surfaces (lazy deletion), and may
 * `rebuild` when stale entries dominate.
 */
export class MinHeap<T> {
  private items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const heap = this.items;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(heap[i], heap[parent])) break;
      [heap[parent], heap[i]] = [heap[i], heap[parent]];
      i = parent;
    }
  }

  /** Replaces the content with `items` (heapified in O(n); the array is copied). */
  rebuild(items: readonly T[]): void {
    this.items = items.slice();
    for (let i = (this.items.length >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  pop(): T | undefined {
    const heap = this.items;
    if (heap.length === 0) return undefined;
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      this.siftDown(0);
    }
    return top;
  }

  private siftDown(from: number): void {
    const heap = this.items;
    let i = from;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < heap.length && this.before(heap[left], heap[smallest])) smallest = left;
      if (right < heap.length && this.before(heap[right], heap[smallest])) smallest = right;
      if (smallest === i) break;
      [heap[smallest], heap[i]] = [heap[i], heap[smallest]];
      i = smallest;
    }
  }

  clear(): void {
    this.items = [];
  }
}
