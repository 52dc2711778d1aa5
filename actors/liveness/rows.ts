import { assert } from '../../runtime/index.js';

/**
 * A deque of fixed-width numeric rows in one Float64Array ring: append at the
 * back, drop at the front, read by position. A time series of an entity is a
 * few thousand rows, so rows are packed (8 bytes a number, no object per
 * sample); capacity grows by doubling up to `capacity_max`.
 */
export class Rows {
  private data: Float64Array;
  private head = 0;
  private count = 0;
  private capacity: number;

  constructor(
    readonly width: number,
    readonly capacity_max: number,
    capacity_initial = 8,
  ) {
    this.capacity = Math.min(capacity_initial, capacity_max);
    this.data = new Float64Array(this.capacity * width);
  }

  get length(): number {
    return this.count;
  }

  get(index: number, column: number): number {
    return this.data[this.offset(index) + column];
  }

  set(index: number, column: number, value: number): void {
    this.data[this.offset(index) + column] = value;
  }

  /** Appends a row (NaN-filled) and returns its index. */
  push(): number {
    assert(this.count < this.capacity_max, 'Rows full: drop a row before pushing');
    if (this.count === this.capacity) this.grow();
    const index = this.count++;
    this.data.fill(NaN, this.offset(index), this.offset(index) + this.width);
    return index;
  }

  /** Drops the oldest row. */
  shift(): void {
    assert(this.count > 0, 'Rows empty');
    this.head = (this.head + 1) % this.capacity;
    this.count--;
  }

  clear(): void {
    this.head = 0;
    this.count = 0;
  }

  /** First index whose `column` value is >= `value` (rows ascending in that column). */
  lowerBound(column: number, value: number): number {
    let low = 0;
    let high = this.count;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.get(middle, column) < value) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  private offset(index: number): number {
    return ((this.head + index) % this.capacity) * this.width;
  }

  private grow(): void {
    const capacity = Math.min(this.capacity * 2, this.capacity_max);
    const data = new Float64Array(capacity * this.width);
    for (let i = 0; i < this.count; i++) {
      const from = this.offset(i);
      data.set(this.data.subarray(from, from + this.width), i * this.width);
    }
    this.data = data;
    this.capacity = capacity;
    this.head = 0;
  }
}
