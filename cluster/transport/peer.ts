import * as grpc from '@grpc/grpc-js';
import type { RuntimeLogger } from '../../runtime/index.js';
import { PeerUnreachable, type PeerLink, type ReplicateStream } from '../ports.js';
import { clusterProto, peerChannelOptions, type ClusterClient, type FrameMessage } from './proto.js';
import { FrameBatcher } from './frame-batcher.js';
import { decodeFrame, type ForwardRequest, type ReplicateMessage, type ReplicateReply, type WireError } from './frames.js';
import { FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE, FlatRequestBatcher, visitReplies } from './forward-frames.js';
import { fromWireError } from './wire-error.js';
import { NODE_ID_METADATA } from './cluster-server.js';
import { failWaiter, PendingReplies } from './pending-replies.js';

interface ForwardStream {
  call: grpc.ClientDuplexStream<FrameMessage, FrameMessage>;
  /** Until the server has said it reads flat frames (forward-frames.ts): an object per message. */
  batcher: FrameBatcher<ForwardRequest>;
  /** Once it has. */
  flat: FlatRequestBatcher | undefined;
  /** By id, in send order, so the deadline sweep stops at the first young one. */
  pending: PendingReplies;
  established: boolean;
  /**
   * performance.now() at the last sweep: what a message is stamped with. Reading the clock once per message cost
   * the sending node 3% of its time in the cross-node streaming bench; the timeout needs no finer time.
   */
  clock_ms: number;
  sweep: NodeJS.Timeout;
}

/** How often a forward stream fails the messages its peer has not answered in FORWARD_REPLY_TIMEOUT_MS. */
const SWEEP_INTERVAL_MS = 1000;

/** A forwarded message unanswered for this long fails (outcome unknown): a leader that hangs does not hold requests forever. */
export const FORWARD_REPLY_TIMEOUT_MS = 15_000;

/**
 * The connection to one peer node: one Forward stream for actor messages
 * sent from this node's edge, one Replicate stream for the partitions this
 * node leads and the peer follows. Streams are opened on first use and
 * reopened after a failure.
 */
export class Peer implements PeerLink {
  readonly nodeId: string;
  readonly address: string;
  private readonly client: ClusterClient;
  private forwardStream?: ForwardStream;
  private replicateStream?: ReplicateStream & { closed: boolean; cancel(): void };

  constructor(
    nodeId: string,
    address: string,
    private readonly selfId: string,
    private readonly logger: RuntimeLogger,
    leaseTtlSeconds: number,
  ) {
    this.nodeId = nodeId;
    this.address = address;
    const { Client } = clusterProto();
    this.client = new Client(address, grpc.credentials.createInsecure(), peerChannelOptions(leaseTtlSeconds));
  }

  /** Sends an actor message to this peer and resolves with the reply of its turn. */
  forward(kind: string, key: string, message: unknown, messageId?: string, recover?: (error: unknown) => unknown): Promise<unknown> {
    const stream = this.forwardStream ?? this.openForward();
    return new Promise((resolve, reject) => {
      const id = stream.pending.add({ resolve, reject, sent_ms: stream.clock_ms, recover });
      if (stream.flat) {
        stream.flat.push(id, kind, key, message, messageId);
        return;
      }
      const request: ForwardRequest = { id, kind, key, message };
      if (messageId !== undefined) request.message_id = messageId;
      stream.batcher.push(request);
    });
  }

  /**
   * The replication stream to this peer; `onReply` gets its acknowledgements,
   * `onClose` fires once when it breaks (the caller re-syncs the peer's partitions).
   */
  replicate(onReply: (reply: ReplicateReply) => void, onClose: () => void): ReplicateStream {
    if (this.replicateStream && !this.replicateStream.closed) return this.replicateStream;
    const metadata = new grpc.Metadata();
    metadata.set(NODE_ID_METADATA, this.selfId);
    const call = this.client.Replicate(metadata);
    const batcher = new FrameBatcher<ReplicateMessage>((payload) => {
      if (!call.writableEnded && !call.destroyed) call.write({ payload });
    }, 256);
    const stream = {
      closed: false,
      send: (message: ReplicateMessage) => batcher.push(message),
      flush: () => batcher.flush(),
      cancel: () => call.cancel(),
    };
    let closedOnce = false;
    const close = () => {
      stream.closed = true;
      if (closedOnce) return;
      closedOnce = true;
      onClose();
    };
    call.on('data', (frame: FrameMessage) => {
      try {
        for (const reply of decodeFrame(frame.payload) as ReplicateReply[]) onReply(reply);
      } catch (error) {
        this.logger.warn({ err: error, peer: this.nodeId }, 'bad replicate reply frame');
      }
    });
    call.on('error', close);
    call.on('end', close);
    call.on('close', close);
    this.replicateStream = stream;
    return stream;
  }

  /**
   * Closes the channel and its streams: forwards pending on a stream the peer
   * never answered fail as unsent (the router retries them on the leader it
   * learns next), the others as outcome unknown; the replication stream
   * reports closed.
   */
  close(): void {
    this.forwardStream?.call.cancel();
    this.replicateStream?.cancel();
    this.client.close();
  }

  private openForward(): ForwardStream {
    const asked = new grpc.Metadata();
    asked.set(FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE);
    const call = this.client.Forward(asked);
    const write = (payload: Buffer) => {
      if (!call.writableEnded && !call.destroyed) call.write({ payload });
    };
    const stream: ForwardStream = {
      call,
      pending: new PendingReplies(),
      established: false,
      batcher: new FrameBatcher<ForwardRequest>(write),
      flat: undefined,
      clock_ms: performance.now(),
      // One timer per stream, not one per message: at 100k messages/s a timer each would cost more than the forwarding.
      sweep: setInterval(() => {
        stream.clock_ms = performance.now();
        // A message carries the clock of the sweep before it, up to one interval earlier than its sending: with
        // one interval more here, none fails before FORWARD_REPLY_TIMEOUT_MS, and none waits an interval longer.
        for (const waiter of stream.pending.takeSentBefore(stream.clock_ms - FORWARD_REPLY_TIMEOUT_MS - SWEEP_INTERVAL_MS)) failWaiter(waiter, new PeerUnreachable(false));
      }, SWEEP_INTERVAL_MS),
    };
    stream.sweep.unref();
    call.on('metadata', (metadata: grpc.Metadata) => {
      stream.established = true;
      if (!stream.flat && metadata.get(FLAT_FORMAT_METADATA).includes(FLAT_FORMAT_VALUE)) {
        // What was sent so far leaves first, as objects; the flat frames follow it on the stream.
        stream.batcher.flush();
        stream.flat = new FlatRequestBatcher(write);
      }
    });
    const settle = (id: number, ok: boolean, value: unknown) => {
      const waiter = stream.pending.take(id);
      if (!waiter) return;
      if (ok) waiter.resolve(value);
      else failWaiter(waiter, fromWireError(value as WireError));
    };
    call.on('data', (frame: FrameMessage) => {
      stream.established = true;
      try {
        visitReplies(decodeFrame(frame.payload), settle);
      } catch (error) {
        this.logger.warn({ err: error, peer: this.nodeId }, 'bad forward reply frame');
      }
    });
    const fail = () => {
      clearInterval(stream.sweep);
      if (this.forwardStream === stream) this.forwardStream = undefined;
      const error = new PeerUnreachable(!stream.established);
      for (const waiter of stream.pending.takeAll()) failWaiter(waiter, error);
    };
    call.on('error', fail);
    call.on('end', fail);
    call.on('close', fail);
    this.forwardStream = stream;
    return stream;
  }
}
