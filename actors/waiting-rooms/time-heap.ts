/**
 * A binary min-heap of (time, id) entries. Entries are never updated in
 * place: the owner pushes a new entry and treats an entry whose time no
 * longer matches its record as stale when it surfaces (lazy deletion), and
 * rebuilds the heap when stale entries dominate.
 */
export interface TimedId {
  at: number;
  id: string;
}

export class TimeHeap {
  private items: TimedId[] = [];

  get size(): number {
    return this.items.length;
  }

  push(at: number, id: string): void {
    const items = this.items;
    items.push({ at, id });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent].at <= items[i].at) break;
      [items[parent], items[i]] = [items[i], items[parent]];
      i = parent;
    }
  }

  peek(): TimedId | undefined {
    return this.items[0];
  }

  pop(): TimedId | undefined {
    const items = this.items;
    if (items.length === 0) return undefined;
    const top = items[0];
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < items.length && items[left].at < items[smallest].at) smallest = left;
        if (right < items.length && items[right].at < items[smallest].at) smallest = right;
        if (smallest === i) break;
        [items[smallest], items[i]] = [items[i], items[smallest]];
        i = smallest;
      }
    }
    return top;
  }

  /** Replaces the content with `entries` (sorted, O(n log n)). */
  rebuild(entries: TimedId[]): void {
    const sorted = entries.slice().sort((a, b) => a.at - b.at);
    // A sorted array is a valid min-heap.
    this.items = sorted;
  }

  clear(): void {
    this.items = [];
  }
}
