import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** protos/cluster.proto, found from this file whether it runs from the sources or from dist/. */
function protoPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'protos', 'cluster.proto');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error('protos/cluster.proto not found');
}

export interface FrameMessage {
  payload: Buffer;
}

type ClusterClientConstructor = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ClientOptions) => ClusterClient;

export interface ClusterClient extends grpc.Client {
  Forward(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<FrameMessage, FrameMessage>;
  Replicate(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<FrameMessage, FrameMessage>;
}

let loaded: { service: grpc.ServiceDefinition; Client: ClusterClientConstructor } | undefined;

export function clusterProto(): { service: grpc.ServiceDefinition; Client: ClusterClientConstructor } {
  if (!loaded) {
    const definition = protoLoader.loadSync(protoPath(), { keepCase: true, longs: Number, defaults: true });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      platform: { cluster: { v1: { Cluster: ClusterClientConstructor & { service: grpc.ServiceDefinition } } } };
    };
    const Cluster = pkg.platform.cluster.v1.Cluster;
    loaded = { service: Cluster.service, Client: Cluster };
  }
  return loaded;
}

/**
 * HTTP/2 flow-control window of a cluster connection and of each of its
 * streams, both directions. The default (64 KiB) is smaller than one frame of
 * forwarded messages (up to 1,024 of them) or of replication entries: the
 * sender then stops mid-frame until the receiver's event loop has read the
 * first part and sent WINDOW_UPDATE, so under load the two nodes took turns
 * instead of working at once. A peer is trusted with this much unread data.
 */
export const FLOW_CONTROL_WINDOW_BYTES = 16 * 1024 * 1024;

/** Big enough for snapshot chunks and full frames; frames are cut well below it. */
export const channelOptions: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  'grpc.max_send_message_length': 64 * 1024 * 1024,
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  // The client's receiving side (the server's is set per session: cluster-server.ts).
  'grpc-node.flow_control_window': FLOW_CONTROL_WINDOW_BYTES,
};

/**
 * The channel to a peer: channelOptions plus a reconnect backoff derived
 * from the lease TTL. grpc-js's default (1 s, x1.6 per attempt, up to
 * 120 s, +-20 % jitter) leaves a peer that was down for a few seconds
 * unreachable for seconds more after it is back. A peer whose member record
 * changes (a restart: new lease) gets a new channel anyway
 * (Transport.forget); the backoff still matters for a peer that comes back
 * without a new record (a pause or a cut link shorter than its lease, so it
 * kept its partitions and requests wait for it). Capped at TTL/4 (500 ms at
 * the default TTL of 2 s; between 100 ms and 1 s), the next attempt comes at
 * most TTL/4 x 1.2 = 0.3 TTL (600 ms) after the peer is back: well inside
 * the "reachable within TTL + 1 s" budget, for about 2 + TTL/(TTL/4) = 6 to
 * 10 connection attempts per TTL while a peer is down (each a refused SYN on
 * loopback or one round trip on a LAN). Each Peer has its own subchannel
 * (`use_local_subchannel_pool`): grpc-js otherwise shares one per address
 * across channels, backoff included, and a new channel would inherit it.
 */
export function peerChannelOptions(leaseTtlSeconds: number): grpc.ChannelOptions {
  return {
    ...channelOptions,
    'grpc.initial_reconnect_backoff_ms': PEER_RECONNECT_INITIAL_MS,
    'grpc.max_reconnect_backoff_ms': peerReconnectMaxMs(leaseTtlSeconds),
    'grpc.use_local_subchannel_pool': 1,
  };
}

export const PEER_RECONNECT_INITIAL_MS = 100;

export function peerReconnectMaxMs(leaseTtlSeconds: number): number {
  return Math.min(1000, Math.max(PEER_RECONNECT_INITIAL_MS, Math.floor((leaseTtlSeconds * 1000) / 4)));
}
