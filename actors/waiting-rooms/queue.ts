import { Fenwick } from './fenwick.js';

/**
 * The waiting line of one room as an order-statistic structure.
 *
 * Members are served by priority class (the boost of their group, highest
 * first) and, within a class, first come first served. Each class is an
 * append-only array of slots in join order with a Fenwick tree of occupied
 * slots, so join (append), leave (clear a slot), position (prefix sum) and
 * admission (head of the first non-empty class) are O(log n) and selecting
 * the k-th member is O(log n). Groups sharing a class (same boost) each keep
 * a Fenwick tree over the class's slots too, so a group's first member, its
 * k-th member and the sum of its members' ranks are also O(log n) / O(1).
 *
 * Holes left by leaving members are compacted away (O(n)) once they are the
 * majority of a class's slots, which amortises to O(1) per removal.
 */
export interface QueueEntry {
  readonly member_id: string;
  /** Join sequence: the order within a class. */
  seq: number;
  group: string;
  /** Placement, owned by the queue. */
  slot: number;
  cls: PriorityClass<QueueEntry> | null;
}

interface GroupTrack {
  tree: Fenwick;
  count: number;
  /** Sum over the group's members of their rank within the class (1-based). */
  rankSum: number;
}

const COMPACT_MIN_SLOTS = 1024;

export class PriorityClass<E extends QueueEntry> {
  slots: (E | null)[] = [];
  all = new Fenwick();
  count = 0;
  private head = 0;
  readonly groups = new Map<string, GroupTrack>();

  constructor(readonly boost: number) {}

  append(entry: E): void {
    let track = this.groups.get(entry.group);
    if (!track) {
      track = { tree: Fenwick.zeros(this.slots.length), count: 0, rankSum: 0 };
      this.groups.set(entry.group, track);
    }
    entry.slot = this.slots.length;
    entry.cls = this as unknown as PriorityClass<QueueEntry>;
    this.slots.push(entry);
    this.all.push(1);
    for (const [name, other] of this.groups) other.tree.push(name === entry.group ? 1 : 0);
    this.count++;
    track.count++;
    track.rankSum += this.count;
  }

  remove(entry: E): void {
    const slot = entry.slot;
    const own = this.groups.get(entry.group)!;
    const rank = this.all.prefix(slot);
    // Every member behind the leaving one moves up one rank.
    for (const [name, track] of this.groups) {
      if (track.count === 0) continue;
      const behind = rank === 1 ? track.count - (name === entry.group ? 1 : 0) : track.count - track.tree.prefix(slot);
      track.rankSum -= behind;
    }
    own.rankSum -= rank;
    this.all.add(slot, -1);
    own.tree.add(slot, -1);
    own.count--;
    this.count--;
    this.slots[slot] = null;
    entry.cls = null;
    entry.slot = -1;
    if (this.slots.length >= COMPACT_MIN_SLOTS && this.count * 2 < this.slots.length) this.compact();
    else if (this.count === 0) this.reset();
  }

  /** 1-based rank of a member of this class. */
  rankOf(entry: E): number {
    return this.all.prefix(entry.slot);
  }

  first(): E | null {
    while (this.head < this.slots.length && this.slots[this.head] === null) this.head++;
    return this.slots[this.head] ?? null;
  }

  /** The k-th member (1-based) of the class. */
  at(k: number): E | null {
    const slot = this.all.findKth(k);
    return slot < 0 ? null : this.slots[slot];
  }

  /** The k-th member (1-based) of `group` within the class. */
  groupAt(group: string, k: number): E | null {
    const track = this.groups.get(group);
    if (!track || k > track.count) return null;
    const slot = track.tree.findKth(k);
    return slot < 0 ? null : this.slots[slot];
  }

  groupCount(group: string): number {
    return this.groups.get(group)?.count ?? 0;
  }

  groupRankSum(group: string): number {
    return this.groups.get(group)?.rankSum ?? 0;
  }

  private reset(): void {
    this.slots = [];
    this.all = new Fenwick();
    this.head = 0;
    this.groups.clear();
  }

  private compact(): void {
    const live: E[] = [];
    for (const entry of this.slots) if (entry !== null) live.push(entry);
    for (let i = 0; i < live.length; i++) live[i].slot = i;
    this.slots = live;
    this.head = 0;
    this.all = Fenwick.from(new Int32Array(live.length).fill(1));
    for (const [name, track] of [...this.groups]) {
      if (track.count === 0) {
        this.groups.delete(name);
        continue;
      }
      const marks = new Int32Array(live.length);
      for (let i = 0; i < live.length; i++) if (live[i].group === name) marks[i] = 1;
      track.tree = Fenwick.from(marks);
    }
  }
}

export class WaitingQueue<E extends QueueEntry> {
  /** Classes by boost, highest first. */
  private classes: PriorityClass<E>[] = [];
  size = 0;

  add(entry: E, boost: number): void {
    this.classFor(boost).append(entry);
    this.size++;
  }

  remove(entry: E): void {
    const cls = entry.cls as PriorityClass<E> | null;
    if (!cls) return;
    cls.remove(entry);
    this.size--;
  }

  has(entry: E): boolean {
    return entry.cls !== null;
  }

  /** 1-based position in the whole line. */
  position(entry: E): number {
    const cls = entry.cls as PriorityClass<E>;
    return this.countAhead(cls) + cls.rankOf(entry);
  }

  /** The member served next, or null. */
  first(): E | null {
    for (const cls of this.classes) if (cls.count > 0) return cls.first();
    return null;
  }

  /** The member at 1-based position k, or null. */
  at(k: number): E | null {
    if (k < 1 || k > this.size) return null;
    for (const cls of this.classes) {
      if (k <= cls.count) return cls.at(k);
      k -= cls.count;
    }
    return null;
  }

  /** Waiting members of `group` (whose class has `boost`). */
  groupCount(group: string, boost: number): number {
    return this.find(boost)?.groupCount(group) ?? 0;
  }

  /** Sum of the positions of every waiting member of `group`. */
  groupPositionSum(group: string, boost: number): number {
    const cls = this.find(boost);
    if (!cls) return 0;
    return this.countAhead(cls) * cls.groupCount(group) + cls.groupRankSum(group);
  }

  /** The k-th (1-based) waiting member of `group`, in line order. */
  groupAt(group: string, boost: number, k: number): E | null {
    return this.find(boost)?.groupAt(group, k) ?? null;
  }

  clear(): void {
    this.classes = [];
    this.size = 0;
  }

  private countAhead(cls: PriorityClass<E>): number {
    let ahead = 0;
    for (const other of this.classes) {
      if (other === cls) break;
      ahead += other.count;
    }
    return ahead;
  }

  private find(boost: number): PriorityClass<E> | undefined {
    return this.classes.find((cls) => cls.boost === boost);
  }

  private classFor(boost: number): PriorityClass<E> {
    let index = 0;
    while (index < this.classes.length && this.classes[index].boost > boost) index++;
    const existing = this.classes[index];
    if (existing && existing.boost === boost) return existing;
    const created = new PriorityClass<E>(boost);
    this.classes.splice(index, 0, created);
    return created;
  }
}
