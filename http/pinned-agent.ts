import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';

/** Where a pinned connection goes: the checked address, and the name TLS verifies. */
export interface PinnedTarget {
  address: string;
  port: number;
  tls: boolean;
  servername: string;
}

/** The request options a pinned agent reads (passed through http.request's options). */
export interface PinnedRequestOptions extends http.RequestOptions {
  pinned_address: string;
  servername: string;
}

/**
 * Kept-alive connections for outbound deliveries (webhooks, jobs) that never resolve a name
 * twice. Each pool is keyed by host, port and the checked address, and a new connection is made
 * by `connect` to that address (the delivery guard checked it first, http/webhook-guard.ts). A
 * pooled socket was connected to an address checked when it was made, so reusing it cannot reach
 * an unchecked one, and a receiver answering thousands of deliveries pays for one TCP (and TLS)
 * handshake per connection instead of one per delivery.
 *
 * Idle sockets close after the receiver's Keep-Alive hint or `idle_ms`, whichever is sooner
 * (Node's agent honours the hint); at most `free_max` idle sockets are kept per target.
 */
export function pinnedAgent(secure: boolean, connect: (target: PinnedTarget) => Duplex, idle_ms = 4_000, free_max = 16): http.Agent {
  const Base = secure ? https.Agent : http.Agent;
  class PinnedAgent extends Base {
    override getName(options?: http.ClientRequestArgs): string {
      return `${super.getName(options)}|${(options as PinnedRequestOptions | undefined)?.pinned_address ?? ''}`;
    }
    override createConnection(options: http.ClientRequestArgs): Duplex {
      const pinned = options as PinnedRequestOptions;
      return connect({ address: pinned.pinned_address, port: Number(pinned.port), tls: secure, servername: pinned.servername });
    }
  }
  return new PinnedAgent({ keepAlive: true, maxFreeSockets: free_max, scheduling: 'lifo', timeout: idle_ms });
}
