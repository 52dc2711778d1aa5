import type { RuntimeLogger } from './observer.js';
import type { Store, WriteOp } from './store.js';

/**
 * Commits made outside turns (outbox acknowledgements, the dedup sweep).
 * Their failure is only logged: each is safe to lose (an unacknowledged
 * outbox entry is re-delivered and de-duplicated; a sweep runs again). They
 * are tracked so that stop() can wait for them before closing the store.
 */
export class HousekeepingCommits {
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly store: Store,
    private readonly logger: RuntimeLogger,
  ) {}

  commit(ops: WriteOp[], failure: string): void {
    const commit = Promise.resolve()
      .then(() => this.store.commit(ops))
      .catch((error: unknown) => this.logger.error({ err: error }, failure));
    this.inFlight.add(commit);
    void commit.finally(() => this.inFlight.delete(commit));
  }

  async settled(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }
}
