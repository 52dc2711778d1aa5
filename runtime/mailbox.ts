/**
 * A FIFO with O(1) push and shift that never copies on every dequeue: a
 * moving head over an array, compacted once the consumed prefix dominates.
 * The runtime enforces the bound (limits.mailbox_messages_max) before push.
 */
export class Mailbox<T> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** Removes and returns up to `count` items from the front. */
  take(count: number): T[] {
    const available = this.items.length - this.head;
    if (available <= count && this.head === 0) {
      const all = this.items;
      this.items = [];
      return all;
    }
    const end = this.head + Math.min(count, available);
    const taken = this.items.slice(this.head, end);
    this.head = end;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return taken;
  }

  /** Puts items back at the front, keeping their order. */
  unshiftAll(front: T[]): void {
    if (front.length === 0) return;
    this.items = front.concat(this.items.slice(this.head));
    this.head = 0;
  }
}
