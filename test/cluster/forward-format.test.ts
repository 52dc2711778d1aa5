import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { TransportHandlers } from '../../cluster/ports.js';
import { ClusterServer } from '../../cluster/transport/cluster-server.js';
import { FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE, FLAT_TAG, FlatReplyBatcher, visitRequests } from '../../cluster/transport/forward-frames.js';
import { decodeFrame, encodeFrame, type ForwardReply, type ForwardRequest } from '../../cluster/transport/frames.js';
import { Peer } from '../../cluster/transport/peer.js';
import { channelOptions, clusterProto, type ClusterClient, type FrameMessage } from '../../cluster/transport/proto.js';
import { StringTableReader } from '../../cluster/transport/string-table.js';

/**
 * The forward stream's format is negotiated (cluster/transport/forward-frames.ts):
 * a Peer and a ClusterServer of this version move to flat frames; either
 * talks to an end of the previous version (objects, no metadata) in
 * objects. Over real gRPC streams on loopback; the "previous version" ends
 * are written here from the proto, as that version spoke it.
 */
const logger = pino({ level: 'silent' });
const echo: TransportHandlers = {
  forward: (kind, key, message, messageId, resolve) => resolve({ kind, key, message, messageId: messageId ?? null }),
  replicate: async () => [],
};

/** A server that records the tag of every request frame; answers in objects (previous version) or flat, as told. */
function recordingServer(flat: boolean): { server: grpc.Server; tags: unknown[] } {
  const tags: unknown[] = [];
  const server = new grpc.Server(channelOptions);
  server.addService(clusterProto().service, {
    Forward: (call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>) => {
      const metadata = new grpc.Metadata();
      if (flat) metadata.set(FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE);
      call.sendMetadata(metadata);
      const strings = new StringTableReader();
      const replies = new FlatReplyBatcher((payload) => call.write({ payload }));
      call.on('data', (frame: FrameMessage) => {
        const items = decodeFrame(frame.payload);
        tags.push(items[0] === FLAT_TAG ? 'flat' : 'objects');
        if (!flat) {
          const answers: ForwardReply[] = (items as ForwardRequest[]).map((r) => ({ id: r.id, ok: true, value: { kind: r.kind, key: r.key, message: r.message, messageId: r.message_id ?? null } }));
          call.write({ payload: encodeFrame(answers) });
          return;
        }
        visitRequests(items, strings, (id, kind, key, message, messageId) => replies.push(id, true, { kind, key, message, messageId: messageId ?? null }));
      });
      call.on('end', () => call.end());
      call.on('error', () => undefined);
    },
    Replicate: (call: grpc.ServerDuplexStream<FrameMessage, FrameMessage>) => call.end(),
  });
  return { server, tags };
}

function bind(server: grpc.Server): Promise<number> {
  return new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))));
}

describe('forward stream format', () => {
  const cleanups: (() => unknown)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  /** 2,000 forwards over 300 keys (so the string table both defines and refers), in a few bursts. */
  async function forwardMany(link: Peer): Promise<void> {
    for (let burst = 0; burst < 4; burst++) {
      const sent = Array.from({ length: 500 }, (_, i) => ({ key: `k${(burst * 500 + i) % 300}`, messageId: i % 5 === 0 ? `m${burst}-${i}` : undefined }));
      const answers = await Promise.all(sent.map((s) => link.forward('lock', s.key, { op: 'status', i: s.key }, s.messageId)));
      expect(answers).toEqual(sent.map((s) => ({ kind: 'lock', key: s.key, message: { op: 'status', i: s.key }, messageId: s.messageId ?? null })));
    }
  }

  /** The tags of the request frames a Peer sent to a recording server that offers the flat format or not. */
  async function framesSentTo(flat: boolean): Promise<unknown[]> {
    const { server, tags } = recordingServer(flat);
    const port = await bind(server);
    cleanups.push(() => server.forceShutdown());
    const link = new Peer('n2', `127.0.0.1:${port}`, 'n1', logger, 2);
    cleanups.push(() => link.close());
    await forwardMany(link);
    return tags;
  }

  it('moves to flat frames between two ends of this version', async () => {
    const tags = await framesSentTo(true);
    // The first frame may leave before the server's metadata is read; every later one is flat.
    expect(tags.slice(1).every((tag) => tag === 'flat')).toBe(true);
    expect(tags.filter((tag) => tag === 'flat').length).toBeGreaterThan(2);
  });

  it('keeps to objects with a server of the previous version', async () => {
    const tags = await framesSentTo(false);
    expect(tags.length).toBeGreaterThan(0);
    expect(tags.every((tag) => tag === 'objects')).toBe(true);
  });

  /** A raw gRPC client of a ClusterServer of this version (the client side written here, not Peer). */
  async function clientOfServer(): Promise<ClusterClient> {
    const server = new ClusterServer(echo, logger);
    const port = await server.listen('127.0.0.1', 0);
    cleanups.push(() => server.close());
    const { Client } = clusterProto();
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), channelOptions);
    cleanups.push(() => client.close());
    return client;
  }

  it('answers a client of the previous version in objects', async () => {
    const call = (await clientOfServer()).Forward();
    const replies: unknown[] = [];
    const done = new Promise<void>((resolve) => {
      call.on('data', (frame: FrameMessage) => {
        const items = decodeFrame(frame.payload);
        replies.push(...items);
        if (replies.length === 2) resolve();
      });
    });
    call.write({ payload: encodeFrame([{ id: 1, kind: 'lock', key: 'a', message: { op: 'status' } }, { id: 2, kind: 'lock', key: 'b', message: null, message_id: 'm2' }]) });
    await done;
    expect(replies).toEqual([
      { id: 1, ok: true, value: { kind: 'lock', key: 'a', message: { op: 'status' }, messageId: null } },
      { id: 2, ok: true, value: { kind: 'lock', key: 'b', message: null, messageId: 'm2' } },
    ]);
    call.end();
  });

  it('ends a stream whose flat frame does not parse, with a status that says why', async () => {
    const asked = new grpc.Metadata();
    asked.set(FLAT_FORMAT_METADATA, FLAT_FORMAT_VALUE);
    const call = (await clientOfServer()).Forward(asked);
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => undefined);
    call.on('data', () => undefined);
    // Slot 7 was never defined on this stream.
    call.write({ payload: encodeFrame([FLAT_TAG, 1, 'lock', 7, null, null]) });
    const ended = await status;
    expect(ended.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(ended.details).toMatch(/no slot 7/);
  });
});
