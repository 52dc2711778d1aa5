/**
 * Which partitions this runtime serves now. One node serves all of them from
 * start; in a cluster the leadership layer opens and closes them one by one.
 * A bit per partition, checked on every message, so a message for a partition
 * not served is refused before anything runs (the sender may retry at the
 * partition's leader).
 */
export class PartitionTable {
  /** owned[p] === 1 while this runtime serves partition p. */
  private readonly owned: Uint8Array;

  constructor(readonly count: number) {
    this.owned = new Uint8Array(count);
  }

  owns(p: number): boolean {
    return this.owned[p] === 1;
  }

  ownAll(): void {
    this.owned.fill(1);
  }

  /** Marks p served; false if it already was. */
  open(p: number): boolean {
    if (this.owned[p]) return false;
    this.owned[p] = 1;
    return true;
  }

  /** Marks p not served; false if it already was not. */
  close(p: number): boolean {
    if (!this.owned[p]) return false;
    this.owned[p] = 0;
    return true;
  }
}
