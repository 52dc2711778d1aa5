import { partitionOf, ServiceError, type ActorClient, type ActorRuntime, type AskOptions, type RuntimeLogger } from '../runtime/index.js';
import type { LeaderView, Leadership } from './leadership.js';
import { PeerUnreachable, type ClusterClock, type Transport } from './ports.js';

export interface RouterOptions {
  selfId: string;
  runtime: Pick<ActorRuntime, 'partitionCount' | 'ask' | 'deliver'>;
  leadership: Leadership;
  transport: Transport;
  clock: ClusterClock;
  /** True when this node serves p right now (holds it, lease alive, runtime open). */
  serving(p: number): boolean;
  /** How long a message may wait for its partition's leader (failover, handoff) before 503. */
  deadlineMs: number;
  logger: RuntimeLogger;
  onForward?: () => void;
}

/** The leader changed while a read-only message was pending there: ask the new one. */
class LeaderChanged extends Error {}

interface PendingRead {
  /** The leader epoch the read was sent to. */
  epoch: number;
  reject: (error: unknown) => void;
}

function retryable(error: unknown, readOnly: boolean): boolean {
  if (error instanceof LeaderChanged) return true;
  if (error instanceof PeerUnreachable) return readOnly || error.unsent;
  return error instanceof ServiceError && error.code === 'not_leader';
}

/**
 * The edge's ActorClient in cluster mode: a message for a partition this node
 * serves goes straight to the local runtime; any other is forwarded to the
 * partition's leader. "Not leader" and "leader unknown" (failover, handoff)
 * are retried with backoff until the deadline: both happen before anything
 * ran, so a retry cannot apply a message twice. A connection that broke
 * after the message left is not retried: its outcome is unknown.
 */
export class ClusterRouter implements ActorClient {
  /**
   * Read-only forwards in flight, by partition, with the leader epoch each was
   * sent to: one 'changed' listener for all of them (one per message was an
   * O(n) removal each, at thousands in flight).
   */
  private readonly pendingReads = new Map<number, Set<PendingRead>>();

  constructor(private readonly options: RouterOptions) {
    options.leadership.on('changed', (p: number) => this.leaderChanged(p));
  }

  ask<Reply = unknown>(kind: string, key: string, message: unknown, options?: AskOptions): Promise<Reply> {
    const p = partitionOf(kind, key, this.options.runtime.partitionCount);
    const readOnly = options?.readOnly === true;
    const deadlineMs = options?.deadlineMs ?? this.options.deadlineMs;
    const retry = (error: unknown) => {
      if (!retryable(error, readOnly)) throw error;
      return this.route(p, kind, key, message, undefined, readOnly, deadlineMs) as Promise<Reply>;
    };
    if (this.options.serving(p)) return this.options.runtime.ask<Reply>(kind, key, message).catch(retry);
    // The common case without the retry loop: the leader is known and is another node.
    const leader = this.options.leadership.leaderOf(p);
    if (leader && leader.node_id !== this.options.selfId) {
      // A write's retry rides on the forward itself (one promise per message instead of two); a read's must
      // also catch LeaderChanged, which comes from the promise around the forward.
      if (!readOnly) return this.send(p, leader, kind, key, message, undefined, false, retry) as Promise<Reply>;
      return (this.send(p, leader, kind, key, message, undefined, true) as Promise<Reply>).catch(retry);
    }
    return this.route(p, kind, key, message, undefined, readOnly, deadlineMs) as Promise<Reply>;
  }

  tell(kind: string, key: string, message: unknown): void {
    this.ask(kind, key, message).catch((error: unknown) => this.options.logger.warn({ err: error, kind }, 'told message failed'));
  }

  /** Outbox delivery to a partition this node does not serve (RemoteDelivery of the runtime). */
  deliver(kind: string, key: string, message: unknown, messageId: string): Promise<void> {
    const p = partitionOf(kind, key, this.options.runtime.partitionCount);
    return this.route(p, kind, key, message, messageId, false, this.options.deadlineMs).then(() => undefined);
  }

  private async route(p: number, kind: string, key: string, message: unknown, messageId: string | undefined, readOnly: boolean, deadlineMs: number): Promise<unknown> {
    const { leadership, runtime, selfId, clock } = this.options;
    const deadline = clock.monotonicNow() + deadlineMs;
    let delay = 10;
    for (;;) {
      const leader = leadership.leaderOf(p);
      try {
        if (leader && leader.node_id === selfId) {
          if (this.options.serving(p)) {
            return messageId === undefined ? await runtime.ask(kind, key, message) : await runtime.deliver(kind, key, message, messageId);
          }
        } else if (leader) {
          return await this.send(p, leader, kind, key, message, messageId, readOnly);
        }
      } catch (error) {
        if (!retryable(error, readOnly)) throw error;
      }
      const now = clock.monotonicNow();
      if (now >= deadline) {
        throw new ServiceError('partition_unavailable', 'No node could serve this request in time; retry shortly.', { retryAfterSeconds: 1 });
      }
      await this.waitForChange(p, Math.min(delay, deadline - now));
      delay = Math.min(delay * 2, 250);
    }
  }

  /** Forwards to p's leader (another node); a read fails with LeaderChanged as soon as p gets another leader. */
  private send(p: number, leader: LeaderView, kind: string, key: string, message: unknown, messageId: string | undefined, readOnly: boolean, recover?: (error: unknown) => unknown): Promise<unknown> {
    const peer = this.options.transport.peer(leader.node_id, leader.grpc_address);
    this.options.onForward?.();
    const reply = peer.forward(kind, key, message, messageId, recover);
    return readOnly ? this.unlessLeaderChanges(p, leader.epoch, reply) : reply;
  }

  /**
   * The reply, or LeaderChanged as soon as p gets another leader while it is
   * pending (a leader paused without a crash holds its connection open: a
   * read sent to it would otherwise wait for its reply timeout).
   */
  private unlessLeaderChanges(p: number, epoch: number, reply: Promise<unknown>): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let reads = this.pendingReads.get(p);
      if (!reads) this.pendingReads.set(p, (reads = new Set()));
      const read: PendingRead = { epoch, reject };
      reads.add(read);
      const settle = () => {
        reads.delete(read);
        if (reads.size === 0 && this.pendingReads.get(p) === reads) this.pendingReads.delete(p);
      };
      reply.then(
        (value) => {
          settle();
          resolve(value);
        },
        (error: unknown) => {
          settle();
          reject(error);
        },
      );
    });
  }

  private leaderChanged(p: number): void {
    const reads = this.pendingReads.get(p);
    if (!reads) return;
    const epoch = this.options.leadership.leaderOf(p)?.epoch;
    for (const read of reads) {
      if (read.epoch === epoch) continue;
      reads.delete(read);
      read.reject(new LeaderChanged());
    }
    if (reads.size === 0) this.pendingReads.delete(p);
  }

  /** Resolves when p's leader changes or after `ms`, whichever comes first. */
  private waitForChange(p: number, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const { leadership, clock } = this.options;
      const onChange = (changed: number) => {
        if (changed !== p) return;
        done();
      };
      const timer = clock.setTimer(ms, () => done());
      const done = () => {
        timer.cancel();
        leadership.off('changed', onChange);
        // Let a just-elected leader finish opening the partition.
        clock.setTimer(5, resolve);
      };
      leadership.on('changed', onChange);
    });
  }
}
