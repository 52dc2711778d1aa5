import type { ActorClient, Clock } from '../runtime/index.js';
import type { ClusterStatusView } from '../cluster/cluster-node.js';
import type { DrainOutcome } from '../cluster/drain-request.js';
import type { NodeStatus } from '../cluster/etcd-keys.js';
import type { SessionCache } from './auth/session-cache.js';
import type { TokenService } from './auth/tokens.js';
import type { MailTransport } from './auth/mail.js';
import type { ResolvedNodeConfig } from './config.js';
import type { DomainResolver } from './domain-resolver.js';
import type { Metrics } from './plugins/metrics.js';

/** What route plugins are given: the edge talks to actors, never to storage. */
export interface AppServices {
  actors: ActorClient;
  tokens: TokenService;
  clock: Clock;
  config: ResolvedNodeConfig;
  metrics: Metrics;
  /** Outgoing mail (default: LogMailTransport). Mutable so a deployment or a test can plug in another. */
  mail: MailTransport;
  /** DNS TXT lookups for organization domain verification (default: SystemDomainResolver). Mutable, like `mail`. */
  domainResolver: DomainResolver;
  /** True while this node owns and serves its partitions. */
  isReady(): boolean;
  /** PUBLIC_BASE_URL, or this node's own URL once it listens (http/public-base.ts). */
  publicBaseUrl(): string;
  /** Present in cluster mode: what GET /cluster/status shows, and an operator's drain (POST /admin/cluster/nodes/{node_id}/drain). */
  cluster?: { status(): ClusterStatusView; memberHttpUrl(node_id: string): string | undefined; publishedStatuses(): Promise<NodeStatus[]>; requestDrain(nodeId: string): Promise<DrainOutcome> };
  /** Recent positive session checks of this node (dropped everywhere on revocation: see http/auth/session-cache.ts). */
  sessionCache: SessionCache;
}
