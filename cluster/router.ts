import { partitionOf, ServiceError, type ActorClient, type ActorRuntime, type AskOptions, type RuntimeLogger } from '../runtime/index.js';
import type { Leadership } from './leadership.js';
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
  constructor(private readonly options: RouterOptions) {}

  ask<Reply = unknown>(kind: string, key: string, message: unknown, options?: AskOptions): Promise<Reply> {
    const p = partitionOf(kind, key, this.options.runtime.partitionCount);
    const readOnly = options?.readOnly === true;
    const deadlineMs = options?.deadlineMs ?? this.options.deadlineMs;
    if (this.options.serving(p)) {
      return this.options.runtime.ask<Reply>(kind, key, message).catch((error: unknown) => {
        if (!retryable(error, readOnly)) throw error;
        return this.route(p, kind, key, message, undefined, readOnly, deadlineMs) as Promise<Reply>;
      });
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
    const { leadership, runtime, transport, selfId, clock } = this.options;
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
          const peer = transport.peer(leader.node_id, leader.grpc_address);
          this.options.onForward?.();
          const reply = peer.forward(kind, key, message, messageId);
          return await (readOnly ? this.unlessLeaderChanges(p, leader.epoch, reply) : reply);
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

  /**
   * The reply, or LeaderChanged as soon as p gets another leader while it is
   * pending (a leader paused without a crash holds its connection open: a
   * read sent to it would otherwise wait for its reply timeout).
   */
  private unlessLeaderChanges(p: number, epoch: number, reply: Promise<unknown>): Promise<unknown> {
    const { leadership } = this.options;
    return new Promise((resolve, reject) => {
      const onChange = (changed: number) => {
        if (changed !== p || leadership.leaderOf(p)?.epoch === epoch) return;
        leadership.off('changed', onChange);
        reject(new LeaderChanged());
      };
      leadership.on('changed', onChange);
      reply.then(
        (value) => {
          leadership.off('changed', onChange);
          resolve(value);
        },
        (error: unknown) => {
          leadership.off('changed', onChange);
          reject(error);
        },
      );
    });
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
