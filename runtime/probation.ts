/**
 * The activations that have had only the message that brought them into
 * memory, oldest first: the probationary segment of a segmented LRU (Akka
 * Cluster Sharding's `least-recently-used.segmented`, Caffeine's window).
 *
 * Why: a stream of one-off keys (a lock per request, a subject seen once)
 * otherwise fills the table up to activations_max with actors nobody asks
 * again, each living long enough to reach V8's old generation and to be
 * marked there until the limit trims it. On the write path's fresh-key load,
 * in paired rounds, a node holding at most 2,000 of them ran 12-21% faster
 * than one holding 100,000, and with this queue 2-27% faster
 * (docs/performance.md). An actor asked a second time while in
 * memory leaves probation and is bounded only by activations_max and the idle
 * sweep, so a hot or warm set is not reloaded more often for it.
 *
 * The queue holds activations in the order they came in. An entry is stale
 * once its activation left probation (promoted or dropped from memory); stale
 * entries are skipped at the head and compacted away when they dominate, so
 * the queue stays within about twice the number on probation. A slot the head
 * has passed is cleared at once, and the array is cut once the passed prefix
 * is most of it: the queue must not keep alive what it has let go (it once
 * did, and held every activation a fresh-key load had ever trimmed,
 * 716,578 of them after 30 s; docs/performance.md).
 */

/** What the queue needs of an activation: the flag it owns. */
export interface OnProbation {
  probation: boolean;
}

export class ProbationQueue<A extends OnProbation> {
  /** Slots before `head` are cleared (undefined) as the head passes them. */
  private entries: (A | undefined)[] = [];
  private head = 0;
  private onProbation = 0;

  /** Activations in memory still on probation. */
  get size(): number {
    return this.onProbation;
  }

  /** A new activation: on probation until its second message. */
  add(activation: A): void {
    activation.probation = true;
    this.onProbation++;
    this.entries.push(activation);
    this.compactIfStale();
  }

  /** Leaves probation: a second message (promoted) or out of memory (dropped). */
  release(activation: A): void {
    if (!activation.probation) return;
    activation.probation = false;
    this.onProbation--;
    this.compactIfStale();
  }

  /** The longest-resident activation still on probation, or undefined. */
  oldest(): A | undefined {
    while (this.head < this.entries.length) {
      const activation = this.entries[this.head]!;
      if (activation.probation) return activation;
      this.advance();
    }
    this.reset();
    return undefined;
  }

  /** Moves the oldest entry to the back (it may not leave memory now: busy, or holding deferred asks). */
  requeueOldest(): void {
    const activation = this.oldest();
    if (activation === undefined) return;
    this.advance();
    this.entries.push(activation);
  }

  /** Lets go of the head entry; cuts the array once the passed prefix is most of it. */
  private advance(): void {
    this.entries[this.head] = undefined;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  private compactIfStale(): void {
    const held = this.entries.length - this.head;
    if (held <= 2 * this.onProbation + 1024) return;
    this.entries = this.entries.slice(this.head).filter((activation) => activation!.probation);
    this.head = 0;
  }

  private reset(): void {
    this.entries = [];
    this.head = 0;
  }
}
