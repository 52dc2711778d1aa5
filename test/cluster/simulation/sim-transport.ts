import { PeerUnreachable, type PeerLink, type ReplicateStream, type Transport, type TransportHandlers } from '../../../cluster/ports.js';
import type { ReplicateMessage, ReplicateReply } from '../../../cluster/transport/frames.js';
import { FORWARD_REPLY_TIMEOUT_MS } from '../../../cluster/transport/peer.js';
import { fromWireError, toWireError } from '../../../cluster/transport/wire-error.js';
import type { Network } from './network.js';
import type { SimProcess } from './process.js';

/**
 * The Transport port over the simulated network, with gRPC's stream
 * semantics: per peer one forward stream and one replication stream, each
 * in order; what a stream carries is lost when it breaks (a link cut, found
 * out when it heals; the peer's process gone, found out at once), and its
 * owner learns it then (pending forwards fail with PeerUnreachable, the
 * replication stream reports closed). Replication messages sent in one event
 * travel as one frame, as FrameBatcher sends what was pushed in one turn of
 * the event loop.
 */
export interface TransportWorld {
  net: Network;
  /** The process and the handlers it serves, if it is up and listening. */
  endpoint(nodeId: string): { process: SimProcess; handlers?: TransportHandlers } | undefined;
  /** Fault: followers acknowledge appends at once, without storing them. */
  followersAckUnapplied: boolean;
  /** A leader shipped a frame with an entry (faults may strike right then). */
  onAppendShipped(nodeId: string): void;
}

interface Forwarding {
  pending: Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void; timer: { cancel(): void } }>;
  established: boolean;
  broken: boolean;
}

interface Replicating extends ReplicateStream {
  closed: boolean;
  close(): void;
}

class SimPeerLink implements PeerLink {
  private forwarding?: Forwarding;
  private replicating?: Replicating;
  private nextId = 1;

  constructor(
    private readonly transport: SimTransport,
    readonly nodeId: string,
  ) {}

  forward(kind: string, key: string, message: unknown, messageId?: string, recover?: (error: unknown) => unknown): Promise<unknown> {
    const sent = this.send(kind, key, message, messageId);
    return recover === undefined ? sent : sent.catch(recover);
  }

  private send(kind: string, key: string, message: unknown, messageId?: string): Promise<unknown> {
    const { process, world } = this.transport;
    const stream = this.forwarding ?? this.openForward();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = process.clock.setTimer(FORWARD_REPLY_TIMEOUT_MS, () => {
        if (stream.pending.delete(id)) reject(new PeerUnreachable(false));
      });
      stream.pending.set(id, { resolve, reject, timer });
      const from = this.transport.selfId;
      const target = world.endpoint(this.nodeId);
      if (!target) return;
      const targetInc = target.process.incarnation;
      const srcInc = process.incarnation;
      world.net.send(from, this.nodeId, () =>
        target.process.post(targetInc, () => {
          if (stream.broken) return;
          stream.established = true;
          const answer = (reply: { ok: true; value: unknown } | { ok: false; error: unknown }) => {
            const wire = reply.ok ? reply : { ok: false as const, error: toWireError(reply.error) };
            world.net.send(this.nodeId, from, () =>
              process.post(srcInc, () => {
                const waiter = stream.pending.get(id);
                if (!waiter || stream.broken) return;
                stream.pending.delete(id);
                waiter.timer.cancel();
                if (wire.ok) waiter.resolve(wire.value);
                else waiter.reject(fromWireError(wire.error));
              }),
            );
          };
          const handlers = world.endpoint(this.nodeId)?.handlers;
          if (!handlers) return;
          try {
            handlers.forward(
              kind,
              key,
              message,
              messageId,
              (value) => answer({ ok: true, value }),
              (error: unknown) => answer({ ok: false, error }),
            );
          } catch (error) {
            answer({ ok: false, error });
          }
        }),
      );
    });
  }

  private openForward(): Forwarding {
    const stream: Forwarding = { pending: new Map(), established: false, broken: false };
    this.forwarding = stream;
    // Nobody listens there: the call fails shortly (connection refused), before anything was sent.
    if (!this.transport.world.endpoint(this.nodeId)?.handlers) this.later(() => this.breakForward(stream));
    return stream;
  }

  private breakForward(stream: Forwarding): void {
    if (stream.broken) return;
    stream.broken = true;
    if (this.forwarding === stream) this.forwarding = undefined;
    const error = new PeerUnreachable(!stream.established);
    for (const waiter of stream.pending.values()) {
      waiter.timer.cancel();
      waiter.reject(error);
    }
    stream.pending.clear();
  }

  replicate(onReply: (reply: ReplicateReply) => void, onClose: () => void): ReplicateStream {
    if (this.replicating && !this.replicating.closed) return this.replicating;
    const { process, world } = this.transport;
    const from = this.transport.selfId;
    const to = this.nodeId;
    let buffer: ReplicateMessage[] = [];
    let flushQueued = false;
    const stream: Replicating = {
      closed: false,
      close: () => {
        if (stream.closed) return;
        stream.closed = true;
        onClose();
      },
      send: (message) => {
        if (stream.closed) return;
        buffer.push(message);
        if (flushQueued) return;
        flushQueued = true;
        this.later(() => stream.flush());
      },
      flush: () => {
        flushQueued = false;
        if (stream.closed || buffer.length === 0) return;
        const frame = buffer;
        buffer = [];
        const target = world.endpoint(to);
        if (!target) return;
        const targetInc = target.process.incarnation;
        const srcInc = process.incarnation;
        const reply = (replies: ReplicateReply[]) =>
          world.net.send(to, from, () =>
            process.post(srcInc, () => {
              if (stream.closed) return;
              for (const r of replies) onReply(r);
            }),
          );
        if (world.followersAckUnapplied) {
          const acks = frame.flatMap((m): ReplicateReply[] => (m.t === 'append' ? [{ t: 'ack', partition: m.entry.partition, seq: m.entry.seq, epoch: m.entry.epoch }] : []));
          if (acks.length > 0) reply(acks);
        }
        if (frame.some((m) => m.t === 'append')) world.onAppendShipped(from);
        world.net.send(from, to, () =>
          target.process.post(targetInc, () => {
            if (stream.closed) return;
            const handlers = world.endpoint(to)?.handlers;
            if (!handlers) return;
            handlers.replicate(from, frame).then(
              (replies) => {
                if (replies.length > 0) reply(replies);
              },
              // The follower could not store the frame: it ends the stream; the leader re-syncs it.
              () => world.net.send(to, from, () => process.post(srcInc, () => stream.close())),
            );
          }),
        );
      },
    };
    this.replicating = stream;
    if (!world.endpoint(to)?.handlers) this.later(() => stream.close());
    return stream;
  }

  /** The link to this peer broke (cut healed, or its process went away). */
  broken(): void {
    if (this.forwarding) this.breakForward(this.forwarding);
    this.replicating?.close();
  }

  /** Runs fn in this process a moment later (a new event at the same instant, or a few ms on). */
  private later(fn: () => void, delay_ms = 0): void {
    this.transport.process.clock.setTimer(delay_ms, fn);
  }
}

export class SimTransport implements Transport {
  private readonly links = new Map<string, SimPeerLink>();
  handlers?: TransportHandlers;

  constructor(
    readonly selfId: string,
    readonly process: SimProcess,
    readonly world: TransportWorld,
  ) {}

  async listen(_host: string, _port: number, handlers: TransportHandlers): Promise<number> {
    this.handlers = handlers;
    return 0;
  }

  peer(nodeId: string, _address: string): PeerLink {
    let link = this.links.get(nodeId);
    if (!link) this.links.set(nodeId, (link = new SimPeerLink(this, nodeId)));
    return link;
  }

  forget(nodeId: string): void {
    const link = this.links.get(nodeId);
    if (!link) return;
    this.links.delete(nodeId);
    link.broken();
  }

  /** The streams to `peer` broke. */
  broken(peer: string): void {
    this.links.get(peer)?.broken();
  }

  async close(): Promise<void> {
    this.handlers = undefined;
    for (const link of this.links.values()) link.broken();
    this.links.clear();
  }
}
