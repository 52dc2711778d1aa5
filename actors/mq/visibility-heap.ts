/**
 * A binary min-heap of (visible_at, seq) entries: the queue's messages that
 * become receivable later (delayed, or in flight until their visibility
 * timeout). Entries are never updated in place: a message whose visibility
 * changes gets a new entry, and an entry that no longer matches its message
 * is stale and skipped by the owner when it surfaces (lazy deletion).
 */
export interface VisibilityEntry {
  at: number;
  seq: number;
}

export class VisibilityHeap {
  private items: VisibilityEntry[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): VisibilityEntry | undefined {
    return this.items[0];
  }

  clear(): void {
    this.items = [];
  }

  push(at: number, seq: number): void {
    const items = this.items;
    items.push({ at, seq });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent].at <= items[i].at) break;
      [items[parent], items[i]] = [items[i], items[parent]];
      i = parent;
    }
  }

  pop(): VisibilityEntry | undefined {
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
}
