/**
 * A Fenwick (binary indexed) tree of small non-negative counts over positions
 * 0..length-1 that grows at the end. Prefix sums, point updates, appends and
 * k-th selection are O(log n); building from a list of values is O(n).
 *
 * tree[i] (1-based) holds the sum of positions (i - lowbit(i), i], which does
 * not depend on the length, so growing is a copy and an append computes its
 * node from the nodes below it.
 */
export class Fenwick {
  private tree: Int32Array;
  private size = 0;

  constructor(capacity = 16) {
    this.tree = new Int32Array(Math.max(2, capacity + 1));
  }

  /** A tree over `values` (each 0 or a small count), in O(n). */
  static from(values: ArrayLike<number>): Fenwick {
    const fenwick = new Fenwick(values.length);
    const tree = fenwick.tree;
    const n = values.length;
    for (let i = 1; i <= n; i++) tree[i] += values[i - 1];
    for (let i = 1; i <= n; i++) {
      const parent = i + (i & -i);
      if (parent <= n) tree[parent] += tree[i];
    }
    fenwick.size = n;
    return fenwick;
  }

  /** A tree of `length` zeros. */
  static zeros(length: number): Fenwick {
    const fenwick = new Fenwick(length);
    fenwick.size = length;
    return fenwick;
  }

  get length(): number {
    return this.size;
  }

  /** Appends a position holding `value`. */
  push(value: number): void {
    if (this.size + 1 >= this.tree.length) {
      const grown = new Int32Array(this.tree.length * 2);
      grown.set(this.tree);
      this.tree = grown;
    }
    const i = ++this.size;
    let sum = value;
    const low = i - (i & -i);
    for (let j = i - 1; j > low; j -= j & -j) sum += this.tree[j];
    this.tree[i] = sum;
  }

  /** Adds `delta` at 0-based `position`. */
  add(position: number, delta: number): void {
    for (let i = position + 1; i <= this.size; i += i & -i) this.tree[i] += delta;
  }

  /** Sum of positions 0..position (inclusive); -1 gives 0. */
  prefix(position: number): number {
    let sum = 0;
    for (let i = Math.min(position + 1, this.size); i > 0; i -= i & -i) sum += this.tree[i];
    return sum;
  }

  /** The smallest 0-based position whose prefix sum reaches k (k >= 1), or -1. */
  findKth(k: number): number {
    if (k < 1) return -1;
    let position = 0;
    let step = 1;
    while (step * 2 <= this.size) step *= 2;
    for (; step > 0; step >>= 1) {
      const next = position + step;
      if (next <= this.size && this.tree[next] < k) {
        position = next;
        k -= this.tree[next];
      }
    }
    return position < this.size ? position : -1;
  }
}
