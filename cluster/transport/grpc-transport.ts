import type { RuntimeLogger } from '../../runtime/index.js';
import { PeerDirectory } from '../peer-directory.js';
import type { PeerLink, Transport, TransportHandlers } from '../ports.js';
import { ClusterServer } from './cluster-server.js';

/** The transport port on gRPC: the node's ClusterServer and one Peer (channel and streams) per remote node. */
export class GrpcTransport implements Transport {
  private readonly peers: PeerDirectory;
  private server?: ClusterServer;

  constructor(
    selfId: string,
    private readonly logger: RuntimeLogger,
    /** Sets the peers' reconnect backoff (transport/proto.ts peerChannelOptions). */
    leaseTtlSeconds: number,
  ) {
    this.peers = new PeerDirectory(selfId, logger, leaseTtlSeconds);
  }

  listen(host: string, port: number, handlers: TransportHandlers): Promise<number> {
    this.server = new ClusterServer(handlers, this.logger);
    return this.server.listen(host, port);
  }

  peer(nodeId: string, address: string): PeerLink {
    return this.peers.get(nodeId, address);
  }

  forget(nodeId: string): void {
    this.peers.forget(nodeId);
  }

  async close(): Promise<void> {
    await this.server?.close();
    this.peers.closeAll();
  }
}
