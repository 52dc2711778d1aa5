import type { Http2Session } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import type { RuntimeLogger } from '../../runtime/index.js';
import type { TransportHandlers } from '../ports.js';
import { channelOptions, clusterProto, FLOW_CONTROL_WINDOW_BYTES, type FrameMessage } from './proto.js';
import { FrameBatcher } from './frame-batcher.js';
import { decodeFrame, type ForwardReply, type ReplicateMessage, type ReplicateReply, type WireError } from './frames.js';
import { FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE, FlatReplyBatcher, visitRequests } from './forward-frames.js';
import { StringTableReader } from './string-table.js';
import { toWireError } from './wire-error.js';

export type ClusterHandlers = TransportHandlers;

type ReplyWriter = (id: number, ok: boolean, value: unknown) => void;

function flatReplies(write: (payload: Buffer) => void): ReplyWriter {
  const batcher = new FlatReplyBatcher(write);
  return (id, ok, value) => batcher.push(id, ok, value);
}

/** A client of the previous version: a reply object each (frames.ts). */
function objectReplies(write: (payload: Buffer) => void): ReplyWriter {
  const batcher = new FrameBatcher<ForwardReply>(write);
  return (id, ok, value) => batcher.push(ok ? { id, ok, value } : { id, ok, error: value as WireError });
}

export const NODE_ID_METADATA = 'x-node-id';

/** The gRPC side of a node: serves Forward and Replicate streams from its peers. */
export class ClusterServer {
  private readonly server = new grpc.Server(channelOptions);
  private readonly calls = new Set<grpc.ServerDuplexStream<FrameMessage, FrameMessage>>();

  constructor(
    private readonly handlers: ClusterHandlers,
    private readonly logger: RuntimeLogger,
  ) {
    const { service } = clusterProto();
    this.server.addService(service, {
      Forward: (call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>) => this.serveForward(call),
      Replicate: (call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>) => this.serveReplicate(call),
    });
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (error, bound) => {
        if (error) {
          reject(error);
          return;
        }
        this.tuneServerSockets();
        resolve(bound);
      });
    });
  }

  /**
   * Two settings of the server's sockets and sessions that grpc-js has no
   * option for, set on its http2 servers (a private field; if it disappears
   * in a future version this logs a warning and does nothing):
   * - TCP_NODELAY: grpc-js sets it on client sockets but not on the server's.
   *   With many small frames in flight (acknowledgements, forwarded replies),
   *   Nagle's algorithm may then hold a reply until the peer's delayed ACK (up
   *   to 40 ms on Linux).
   * - The flow-control window of each session and its streams
   *   (FLOW_CONTROL_WINDOW_BYTES, proto.ts), as the clients set theirs.
   */
  private tuneServerSockets(): void {
    const servers = (this.server as unknown as { http2Servers?: Map<import('node:net').Server, unknown> }).http2Servers;
    if (!(servers instanceof Map)) {
      this.logger.warn({}, 'grpc-js internals changed: cannot disable Nagle nor widen flow-control windows on cluster server sockets');
      return;
    }
    for (const server of servers.keys()) {
      server.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
      server.on('session', (session: Http2Session) => {
        try {
          session.settings({ initialWindowSize: FLOW_CONTROL_WINDOW_BYTES });
          session.setLocalWindowSize(FLOW_CONTROL_WINDOW_BYTES);
        } catch (error) {
          // A session that closes as it opens: nothing to tune.
          this.logger.debug({ err: error }, 'could not widen a cluster session window');
        }
      });
    }
  }

  async close(): Promise<void> {
    for (const call of this.calls) call.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 2000);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private track(call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>, metadata = new grpc.Metadata()): void {
    this.calls.add(call);
    const forget = () => this.calls.delete(call);
    call.on('close', forget);
    call.on('error', forget);
    call.on('cancelled', forget);
    // Headers first: the client takes them as proof the stream reached a live server.
    call.sendMetadata(metadata);
  }

  private serveForward(call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>): void {
    // This server reads both formats (forward-frames.ts) and says so; it replies flat to a client that asked.
    const offered = new grpc.Metadata();
    offered.set(FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE);
    this.track(call, offered);
    const write = (payload: Buffer) => {
      if (!call.writableEnded && !call.destroyed) call.write({ payload });
    };
    const reply = call.metadata.get(FLAT_FORMAT_METADATA).includes(FLAT_FORMAT_VALUE) ? flatReplies(write) : objectReplies(write);
    const strings = new StringTableReader();
    const run = (id: number, kind: string, key: string, message: unknown, messageId: string | undefined) => {
      try {
        this.handlers.forward(
          kind,
          key,
          message,
          messageId,
          (value) => reply(id, true, value),
          (error: unknown) => reply(id, false, toWireError(error)),
        );
      } catch (error) {
        reply(id, false, toWireError(error));
      }
    };
    let broken = false;
    call.on('data', (frame: FrameMessage) => {
      if (broken) return;
      try {
        visitRequests(decodeFrame(frame.payload), strings, run);
      } catch (error) {
        broken = true;
        this.endBrokenStream(call, error);
      }
    });
    call.on('end', () => call.end());
    call.on('error', () => undefined);
  }

  /**
   * A frame that does not parse: its messages are lost and the stream's string table may be out of step, so the
   * stream ends; the client fails what it has pending there (outcome unknown) and opens a new one.
   */
  private endBrokenStream(call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>, error: unknown): void {
    this.logger.warn({ err: error }, 'bad forward frame: ending the stream');
    // grpc-js ends a server stream with a status through its 'error' event.
    call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: `bad forward frame: ${error instanceof Error ? error.message : String(error)}` });
  }

  private serveReplicate(call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>): void {
    this.track(call);
    const from = String(call.metadata.get(NODE_ID_METADATA)[0] ?? '');
    // The replies of every frame applied by one commit leave in one frame: the replicator resolves a round's frames
    // together, so their replies meet here before the batcher's next tick. One reply frame per frame received cost
    // a 3-node RF 2 cluster 7 frames per commit instead of 2 (docs/performance.md).
    const replies = new FrameBatcher<ReplicateReply>((payload) => {
      if (!call.writableEnded && !call.destroyed) call.write({ payload });
    });
    // Frames go to the replicator as they arrive: it applies them in arrival
    // order, several per commit, and resolves their replies in that order.
    call.on('data', (frame: FrameMessage) => {
      let messages: ReplicateMessage[];
      try {
        messages = decodeFrame(frame.payload) as ReplicateMessage[];
      } catch (error) {
        this.logger.warn({ err: error }, 'bad replicate frame');
        return;
      }
      this.handlers.replicate(from, messages).then(
        (frameReplies) => {
          for (const reply of frameReplies) replies.push(reply);
        },
        (error: unknown) => {
          // The follower could not store the frame: end the stream, the leader re-syncs it.
          this.logger.error({ err: error, from }, 'replication apply failed');
          call.destroy(error as Error);
        },
      );
    });
    call.on('end', () => call.end());
    call.on('error', () => undefined);
  }
}
