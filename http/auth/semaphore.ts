/**
 * A counting semaphore with a bounded wait queue (TigerBeetle's "put a limit
 * on everything"): at most `running_max` tasks run at once, at most
 * `waiting_max` wait for a turn, in arrival order; past that, `run` refuses at
 * once with the error `refuse()` makes instead of queueing without limit.
 *
 * Used to cap the password KDF (passwords.ts): scrypt runs on libuv's thread
 * pool, which LMDB's writes share, so unbounded hashing would starve them.
 */
export class Semaphore {
  private running = 0;
  private readonly waiters: (() => void)[] = [];

  constructor(
    readonly running_max: number,
    readonly waiting_max: number,
    private readonly refuse: () => Error,
  ) {
    if (!Number.isInteger(running_max) || running_max < 1) throw new RangeError('running_max must be a positive integer');
    if (!Number.isInteger(waiting_max) || waiting_max < 0) throw new RangeError('waiting_max must be a non-negative integer');
  }

  /** Runs `task` when a slot is free; rejects with refuse() (task not started) when every slot and every waiting place is taken. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await task();
    } finally {
      this.release();
    }
  }

  get running_count(): number {
    return this.running;
  }

  get waiting_count(): number {
    return this.waiters.length;
  }

  private acquire(): Promise<void> {
    if (this.running < this.running_max) {
      this.running++;
      return Promise.resolve();
    }
    if (this.waiters.length >= this.waiting_max) return Promise.reject(this.refuse());
    // The slot is handed over by release(): `running` stays counted for the waiter.
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.running--;
  }
}
