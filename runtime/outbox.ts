import type { ActorSend } from './actor.js';
import type { Envelope } from './activation.js';
import type { Clock, TimerHandle } from './clock.js';
import { isServiceError } from './errors.js';
import type { HousekeepingCommits } from './housekeeping.js';
import type { Limits } from './limits.js';
import type { RuntimeLogger } from './observer.js';
import type { PartitionTable } from './partition-table.js';
import { partitionOf } from './partitioning.js';
import { keys } from './storage-keys.js';
import type { Store } from './store.js';

/**
 * Delivery of the outbox: `sends` are written to the sender's partition
 * outbox in the turn's commit (batch.ts), delivered after it (here), and
 * deleted once the receiver has committed the message. Until then a delivery
 * that fails for a reason that may pass (full mailbox, 5xx, lost connection)
 * is retried after `outbox_retry_delay_ms`, and a restart re-delivers every
 * entry left; the receiver de-duplicates on the entry's id. At-least-once
 * delivery, exactly-once effect.
 */

/**
 * Delivers an outbox message to an actor whose partition this runtime does
 * not own (in a cluster: forwarded to the partition's leader). Resolves once
 * the receiver's turn committed; the receiver de-duplicates on messageId.
 */
export type RemoteDelivery = (kind: string, key: string, message: unknown, messageId: string) => Promise<void>;

export interface OutboxOptions {
  store: Store;
  clock: Clock;
  limits: Limits;
  logger: RuntimeLogger;
  partitions: PartitionTable;
  housekeeping: HousekeepingCommits;
  isRunning: () => boolean;
  /** Queues a message to a local actor; throws when it cannot be accepted now. */
  enqueue: (kind: string, key: string, envelope: Envelope) => void;
  remoteDelivery?: RemoteDelivery;
}

export class Outbox {
  private readonly retryTimers = new Set<TimerHandle>();

  constructor(private readonly options: OutboxOptions) {}

  /** Delivers every entry left in partition p's outbox (at start, or when p is taken over). */
  redeliver(p: number): void {
    const [outboxStart, outboxEnd] = keys.outboxRange(p);
    for (const { key, value } of this.options.store.range(outboxStart, outboxEnd)) {
      this.deliver(p, key[2] as string, value as ActorSend);
    }
  }

  /** Delivers one committed entry; acknowledges (deletes) it once the receiver committed it. */
  deliver(sourcePartition: number, id: string, send: ActorSend): void {
    const { clock, limits, logger, partitions, housekeeping, isRunning, remoteDelivery } = this.options;
    const retry = () => {
      const timer = clock.setTimer(limits.outbox_retry_delay_ms, () => {
        this.retryTimers.delete(timer);
        if (isRunning()) this.deliver(sourcePartition, id, send);
      });
      this.retryTimers.add(timer);
    };
    const acknowledge = () => {
      housekeeping.commit([{ type: 'del', key: keys.outbox(sourcePartition, id) }], 'outbox acknowledgement failed; the message will be re-delivered and de-duplicated');
    };
    if (remoteDelivery && !partitions.owns(partitionOf(send.kind, send.key, partitions.count))) {
      remoteDelivery(send.kind, send.key, send.message, id).then(acknowledge, (error: unknown) => {
        if (isServiceError(error) && error.statusCode < 500) {
          logger.warn({ err: error, kind: send.kind, key: send.key }, 'outbox message refused by receiver');
          acknowledge();
        } else if (isRunning()) retry();
      });
      return;
    }
    try {
      this.options.enqueue(send.kind, send.key, {
        message: send.message,
        messageId: id,
        resolve: acknowledge,
        reject: (error) => {
          if (isServiceError(error) && error.statusCode < 500) {
            // The receiver refused it for good: retrying would change nothing.
            logger.warn({ err: error, kind: send.kind, key: send.key }, 'outbox message refused by receiver');
            acknowledge();
          } else retry();
        },
      });
    } catch (error) {
      if (isRunning()) retry();
    }
  }

  /** Cancels pending retries (the entries stay in the store for the next start). */
  stop(): void {
    for (const timer of this.retryTimers) timer.cancel();
    this.retryTimers.clear();
  }
}
