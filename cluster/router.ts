import { partitionOf, ServiceError, type ActorClient, type ActorRuntime, type RuntimeLogger } from '../runtime/index.js';
import type { Leadership } from './leadership.js';
import type { PeerDirectory } from './peer-directory.js';
import { PeerUnreachable } from './transport/peer.js';

export interface RouterOptions {
  selfId: string;
  runtime: ActorRuntime;
  leadership: Leadership;
  peers: PeerDirectory;
  /** True when this node serves p right now (holds it, lease alive, runtime open). */
  serving(p: number): boolean;
  /** How long a message may wait for its partition's leader (failover, handoff) before 503. */
  deadlineMs: number;
  logger: RuntimeLogger;
  onForward?: () => void;
}

function retryable(error: unknown): boolean {
  if (error instanceof PeerUnreachable) return error.unsent;
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

  ask<Reply = unknown>(kind: string, key: string, message: unknown): Promise<Reply> {
    const p = partitionOf(kind, key, this.options.runtime.partitionCount);
    if (this.options.serving(p)) {
      return this.options.runtime.ask<Reply>(kind, key, message).catch((error: unknown) => {
        if (!retryable(error)) throw error;
        return this.route(p, kind, key, message, undefined) as Promise<Reply>;
      });
    }
    return this.route(p, kind, key, message, undefined) as Promise<Reply>;
  }

  tell(kind: string, key: string, message: unknown): void {
    this.ask(kind, key, message).catch((error: unknown) => this.options.logger.warn({ err: error, kind }, 'told message failed'));
  }

  /** Outbox delivery to a partition this node does not serve (RemoteDelivery of the runtime). */
  deliver(kind: string, key: string, message: unknown, messageId: string): Promise<void> {
    const p = partitionOf(kind, key, this.options.runtime.partitionCount);
    return this.route(p, kind, key, message, messageId).then(() => undefined);
  }

  private async route(p: number, kind: string, key: string, message: unknown, messageId: string | undefined): Promise<unknown> {
    const { leadership, runtime, peers, selfId } = this.options;
    const deadline = performance.now() + this.options.deadlineMs;
    let delay = 10;
    for (;;) {
      const leader = leadership.leaderOf(p);
      try {
        if (leader && leader.node_id === selfId) {
          if (this.options.serving(p)) {
            return messageId === undefined ? await runtime.ask(kind, key, message) : await runtime.deliver(kind, key, message, messageId);
          }
        } else if (leader) {
          const peer = peers.get(leader.node_id, leader.grpc_address);
          this.options.onForward?.();
          return await peer.forward(kind, key, message, messageId);
        }
      } catch (error) {
        if (!retryable(error)) throw error;
      }
      const now = performance.now();
      if (now >= deadline) {
        throw new ServiceError('partition_unavailable', 'No node could serve this request in time; retry shortly.', { retryAfterSeconds: 1 });
      }
      await this.waitForChange(p, Math.min(delay, deadline - now));
      delay = Math.min(delay * 2, 250);
    }
  }

  /** Resolves when p's leader changes or after `ms`, whichever comes first. */
  private waitForChange(p: number, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const { leadership } = this.options;
      const onChange = (changed: number) => {
        if (changed !== p) return;
        done();
      };
      const timer = setTimeout(() => done(), ms);
      const done = () => {
        clearTimeout(timer);
        leadership.off('changed', onChange);
        // Let a just-elected leader finish opening the partition.
        setTimeout(resolve, 5);
      };
      leadership.on('changed', onChange);
    });
  }
}
