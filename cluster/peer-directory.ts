import type { RuntimeLogger } from '../runtime/index.js';
import { Peer } from './transport/peer.js';

/** One Peer (gRPC channel and streams) per remote node, replaced if its address changes. */
export class PeerDirectory {
  private readonly peers = new Map<string, Peer>();

  constructor(
    private readonly selfId: string,
    private readonly logger: RuntimeLogger,
    private readonly leaseTtlSeconds: number,
  ) {}

  get(nodeId: string, address: string): Peer {
    const existing = this.peers.get(nodeId);
    if (existing && existing.address === address) return existing;
    existing?.close();
    const peer = new Peer(nodeId, address, this.selfId, this.logger, this.leaseTtlSeconds);
    this.peers.set(nodeId, peer);
    return peer;
  }

  find(nodeId: string): Peer | undefined {
    return this.peers.get(nodeId);
  }

  /** Closes and drops the peer's channel (it restarted or left); the next get() opens a new one. */
  forget(nodeId: string): void {
    const peer = this.peers.get(nodeId);
    if (!peer) return;
    this.peers.delete(nodeId);
    peer.close();
  }

  closeAll(): void {
    for (const peer of this.peers.values()) peer.close();
    this.peers.clear();
  }
}
