/**
 * The forwarded messages of one stream still waiting for their reply, by id.
 *
 * Ids are handed out in order and replies come back nearly in order, so the
 * waiters live in a ring indexed by id: adding and taking one is an array
 * store. A Map did the same at about 0.5 µs per message (measured: V8's
 * ordered hash table, filled at one end and emptied at the other, 523 ns
 * per add + take at 4,096 in flight, against 19 ns for the ring), 19% of the
 * sending node's time in the cross-node streaming bench.
 *
 * The ring spans the ids from the oldest one still waiting to the newest. A
 * waiter that stays while many newer ones come and go (a slow turn) would
 * stretch that span: past MAX_RING slots the oldest are moved to a Map
 * instead, so the ring never grows beyond it.
 */
export interface Waiter {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  sent_ms: number;
  /** Takes a failure instead of `reject` (PeerLink.forward's `recover`). */
  recover?: (error: unknown) => unknown;
}

/**
 * Settles a waiter with a failure: through its `recover` when it has one (whose result or throw settles it),
 * else rejected. `recover` runs in a microtask, as a `.catch` handler would: never inside the stream event
 * that failed the waiter (a retry may open the peer's next stream).
 */
export function failWaiter(waiter: Waiter, error: unknown): void {
  const recover = waiter.recover;
  if (recover === undefined) return waiter.reject(error);
  queueMicrotask(() => {
    let recovered: unknown;
    try {
      recovered = recover(error);
    } catch (thrown) {
      return waiter.reject(thrown);
    }
    waiter.resolve(recovered);
  });
}

const INITIAL_RING = 1024;
const MAX_RING = 1 << 16;

export class PendingReplies {
  private ring: (Waiter | undefined)[] = new Array(INITIAL_RING);
  private mask = INITIAL_RING - 1;
  /** Next id handed out. */
  private next = 1;
  /** Lowest id the ring may still hold; every id below it is taken or in `overflow`. */
  private oldest = 1;
  /** Waiters moved out of the ring (older than the ring's span allows). */
  private readonly overflow = new Map<number, Waiter>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(waiter: Waiter): number {
    const id = this.next++;
    if (id - this.oldest >= this.ring.length) this.makeRoom(id);
    this.ring[id & this.mask] = waiter;
    this.count++;
    return id;
  }

  /** The waiter of `id`, removed; undefined when none waits (already answered, timed out, or never sent). */
  take(id: number): Waiter | undefined {
    if (!Number.isInteger(id) || id >= this.next) return undefined;
    let waiter: Waiter | undefined;
    if (id < this.oldest) {
      waiter = this.overflow.get(id);
      if (waiter !== undefined) this.overflow.delete(id);
    } else {
      const slot = id & this.mask;
      waiter = this.ring[slot];
      this.ring[slot] = undefined;
      if (id === this.oldest) this.advance();
    }
    if (waiter !== undefined) this.count--;
    return waiter;
  }

  /** Removes and returns every waiter sent at or before `cutoff_ms`, oldest first. */
  takeSentBefore(cutoff_ms: number): Waiter[] {
    const expired: Waiter[] = [];
    for (const [id, waiter] of this.overflow) {
      if (waiter.sent_ms > cutoff_ms) continue;
      this.overflow.delete(id);
      expired.push(waiter);
    }
    for (let id = this.oldest; id < this.next; id++) {
      const slot = id & this.mask;
      const waiter = this.ring[slot];
      if (waiter === undefined) continue;
      // Sent in id order: the first young one ends the search.
      if (waiter.sent_ms > cutoff_ms) break;
      this.ring[slot] = undefined;
      expired.push(waiter);
    }
    this.advance();
    this.count -= expired.length;
    return expired;
  }

  /** Removes and returns every waiter. */
  takeAll(): Waiter[] {
    const all = [...this.overflow.values()];
    this.overflow.clear();
    for (let id = this.oldest; id < this.next; id++) {
      const slot = id & this.mask;
      const waiter = this.ring[slot];
      if (waiter === undefined) continue;
      this.ring[slot] = undefined;
      all.push(waiter);
    }
    this.oldest = this.next;
    this.count = 0;
    return all;
  }

  private advance(): void {
    while (this.oldest < this.next && this.ring[this.oldest & this.mask] === undefined) this.oldest++;
  }

  /** Room for `id` in the ring: grow it (up to MAX_RING), else move its oldest waiters to `overflow`. */
  private makeRoom(id: number): void {
    if (this.ring.length < MAX_RING) {
      const size = this.ring.length * 2;
      const ring: (Waiter | undefined)[] = new Array(size);
      for (let old = this.oldest; old < id; old++) ring[old & (size - 1)] = this.ring[old & this.mask];
      this.ring = ring;
      this.mask = size - 1;
      return;
    }
    while (id - this.oldest >= this.ring.length) {
      const slot = this.oldest & this.mask;
      const waiter = this.ring[slot];
      if (waiter !== undefined) {
        this.overflow.set(this.oldest, waiter);
        this.ring[slot] = undefined;
      }
      this.oldest++;
    }
    // No advance() here: `id` is handed out but not stored yet, and advancing would pass it.
  }
}
