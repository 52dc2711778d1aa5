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

/** Big enough for snapshot chunks and full frames; frames are cut well below it. */
export const channelOptions: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  'grpc.max_send_message_length': 64 * 1024 * 1024,
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
};
