import { REGISTRATIONS_PER_ADDRESS_MAX } from '../actors/accounts/messages.js';
import { base64KeyFrom } from './node-key-file.js';
import { limits } from '../runtime/limits.js';
import { PARTITIONS_MAX } from '../runtime/partition-count.js';
import { LMDB_MAP_SIZE_GB_DEFAULT } from '../runtime/store-lmdb.js';
import { gcPretenuringFrom, gcThreadsFrom, semiSpaceMbFrom, type GcPretenuring, type GcThreads } from './node-flags.js';
import type { ClusterConfig } from '../cluster/config.js';
import { parseOAuthProviders, type OAuthProviders } from './auth/oauth-providers.js';

export type { ClusterConfig };

/** A cluster's partition count when PARTITIONS is unset at its creation. */
export const CLUSTER_PARTITIONS_DEFAULT = 64;

/** A running node's configuration: its partition count is known (the cluster's, or its data directory's). */
export type ResolvedNodeConfig = NodeConfig & { partitions: number };

/**
 * Node configuration from the environment, read once at start. Every
 * variable is documented in README.md (Configuration).
 */
export interface NodeConfig {
  host: string;
  port: number;
  dataDir: string;
  /**
   * PARTITIONS as set; unset: 64 in a cluster, and on an embedded node the
   * count its data directory was created with, 1 for a new one
   * (runtime/partition-count.ts). The running node's count is its services'
   * `config.partitions` (ResolvedNodeConfig).
   */
  partitions: number | undefined;
  /** Actors one node holds in memory before passivating quiet ones early (runtime limits.activations_max). */
  actorsInMemoryMax: number;
  /** GC_THREADS, checked here so a bad value stops the start; it acts through the start command's V8 flags (node-flags.ts). */
  gcThreads: GcThreads;
  /** GC_SEMI_SPACE_MB, checked here like GC_THREADS; it acts through the start command's V8 flags (node-flags.ts). */
  gcSemiSpaceMb: number;
  /** GC_PRETENURING, checked here like GC_THREADS; it acts through the start command's V8 flags (node-flags.ts). */
  gcPretenuring: GcPretenuring;
  logLevel: string;
  adminEmail?: string;
  adminPassword?: string;
  /** log2 of the scrypt cost parameter N for password hashing. */
  passwordKdfCostLog2: number;
  /** Registrations one client address may attempt per 15-minute window; 0 turns the throttle off (docs/api/accounts.md, Login throttling). */
  registrationsPerAddressMax: number;
  /**
   * SCIM provisioning creates platform users only in e-mail domains the
   * organization has verified (SCIM_VERIFIED_DOMAINS_ONLY, default on; 0 turns
   * it off for closed deployments and test setups; docs/api/scim.md).
   */
  scimVerifiedDomainsOnly: boolean;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  bodyLimitBytes: number;
  /** `sync` (fsync before reply, default) or `commit` (visible, survives a process crash). */
  durability: 'sync' | 'commit';
  /** LMDB_MAP_SIZE_GB: the most the data file may grow to (runtime/store-lmdb.ts). */
  lmdbMapSizeGb: number;
  issuer: string;
  /** Liveness: an entity is alive while now < last heartbeat + this. */
  livenessGraceSeconds: number;
  /** OAuth issuer and endpoint base (no trailing slash); '' means the request's own scheme and host. */
  publicBaseUrl: string;
  /**
   * Origins a password reset request's `redirect_url` may point to besides the
   * public base URL's (PASSWORD_RESET_REDIRECT_ORIGINS, comma-separated; docs/api/accounts.md).
   */
  passwordResetRedirectOrigins: string[];
  /** External OAuth providers for linked accounts (OAUTH_PROVIDERS, JSON; see docs/api/linked-accounts.md). */
  oauthProviders: OAuthProviders;
  /** A request's headers and body must arrive within this (HTTP_REQUEST_TIMEOUT_MS; docs/api/common.md, Connections). */
  httpRequestTimeoutMs: number;
  /** A request's headers must arrive within this, also on an idle new connection (HTTP_HEADERS_TIMEOUT_MS). */
  httpHeadersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (HTTP_KEEP_ALIVE_TIMEOUT_MS). */
  httpKeepAliveTimeoutMs: number;
  /** Open connections past this are closed at once (HTTP_CONNECTIONS_MAX). */
  httpConnectionsMax: number;
  /**
   * Which proxies' X-Forwarded-For to believe for the client address (TRUST_PROXY):
   * false (default: the socket's peer is the client), a hop count, or addresses/CIDRs.
   */
  trustProxy: false | number | string[];
  /** Webhooks: one delivery attempt's time-out, redirects included (WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** Webhooks: consecutive exhausted events that disable a webhook (WEBHOOK_DISABLE_AFTER_FAILURES). */
  webhookDisableAfterFailures: number;
  /** Webhooks: the first retry's base wait; it doubles per attempt (WEBHOOK_RETRY_BASE_MS). */
  webhookRetryBaseMs: number;
  /** Webhooks: let deliveries reach loopback, private and link-local targets (WEBHOOK_ALLOW_PRIVATE_TARGETS=1; tests only). */
  webhookAllowPrivateTargets: boolean;
  /** The operator console's static assets at /console/ (CONSOLE_UI=0 turns them off; docs/console.md). */
  consoleUi: boolean;
  /** Recent metrics (GET /admin/metrics/recent): the node samples its own registry this often (METRICS_SAMPLE_INTERVAL_MS)... */
  metricsSampleIntervalMs: number;
  /** ...and keeps this much history (METRICS_HISTORY_SECONDS). */
  metricsHistorySeconds: number;
  /** The interactive API reference at /docs (DOCS_UI=0 turns it off; /openapi.json stays). */
  docsUi: boolean;
  /**
   * Vault: the key that seals attestation content keys (VAULT_SEAL_KEY, base64 of 32 bytes).
   * Empty: the embedded node keeps one in DATA_DIR/vault-seal.key; a cluster node needs it set.
   */
  vaultSealKey: string;
  /**
   * Forms: the key of encrypted submission fields (FORMS_FIELD_KEY, base64 of 32 bytes). Unset, an
   * embedded node keeps one in DATA_DIR/forms-field.key; cluster nodes need it, the same on each.
   */
  formsFieldKey: string;
  /** x402: enforce price rules on priced routes (X402_ENABLED=1; default off: docs/api/x402.md). */
  x402Enabled: boolean;
  /** x402: the facilitator that verifies and settles X-PAYMENT proofs (X402_FACILITATOR_URL; '' = none). */
  x402FacilitatorUrl: string;
  /** x402: one request to the facilitator may take this long (X402_FACILITATOR_TIMEOUT_MS). */
  x402FacilitatorTimeoutMs: number;
  /** x402: the address payments go to (X402_PAY_TO, an EVM address; '' = not configured). */
  x402PayTo: string;
  /** x402: networks accepted, x402 v1 names (X402_NETWORKS, comma-separated; default base-sepolia). */
  x402Networks: string[];
  /** x402: lifetime of a POST /x402/session token (X402_SESSION_TTL_SECONDS). */
  x402SessionTtlSeconds: number;
  /** x402: how long the edge keeps the price rules before asking again (X402_PRICE_CACHE_MS). */
  x402PriceCacheMs: number;
  /** Throttle plans: how long a node may use its cached copy of a plan changed through another node (THROTTLE_PLAN_CACHE_MS; 0: read it on every request). */
  throttlePlanCacheMs: number;
  /** Rate limits: enforce the tiers at the edge (RATE_LIMITS_ENABLED, default 1; docs/api/rate-limits.md). */
  rateLimitsEnabled: boolean;
  /** Rate limits: the default tier until an admin sets one (RATE_LIMITS_DEFAULT_MAX_REQUESTS per RATE_LIMITS_DEFAULT_WINDOW_SECONDS). */
  rateLimitDefaultMaxRequests: number;
  rateLimitDefaultWindowSeconds: number;
  /** Rate limits: how long a node uses its copy of the rule set before checking it again (RATE_LIMITS_RULES_CACHE_MS). */
  rateLimitRulesCacheMs: number;
  /** Jobs: one delivery attempt's time-out, redirects included (JOB_TIMEOUT_MS). */
  jobTimeoutMs: number;
  /** Jobs: attempts the node's job worker runs at once (JOB_DELIVERY_CONCURRENCY); each queue also has its own concurrency. */
  jobDeliveryConcurrency: number;
  /** ECS coordinator: a WebSocket subscriber with more unsent bytes than this is closed with 4001 (ECS_WS_BUFFER_MAX_BYTES). */
  ecsWsBufferMaxBytes: number;
  /** Cluster mode when set (ETCD_ENDPOINTS); undefined runs the embedded single node. */
  cluster?: ClusterConfig;
}

/** X402_FACILITATOR_URL: an absolute http(s) URL without trailing slash, or ''. */
function facilitatorUrlFrom(raw: string | undefined): string {
  if (raw === undefined || raw.trim() === '') return '';
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error(`X402_FACILITATOR_URL must be an absolute http(s) URL, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('X402_FACILITATOR_URL must be an http or https URL');
  return raw.trim().replace(/\/+$/, '');
}

function x402From(env: NodeJS.ProcessEnv) {
  const payTo = (env.X402_PAY_TO ?? '').trim();
  if (payTo !== '' && !/^0x[0-9a-fA-F]{40}$/.test(payTo)) throw new Error('X402_PAY_TO must be an EVM address (0x and 40 hex digits)');
  const networks = (env.X402_NETWORKS ?? 'base-sepolia').split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  for (const network of networks) if (!/^[a-z0-9-]{1,64}$/.test(network)) throw new Error(`X402_NETWORKS entry ${JSON.stringify(network)} is not a network name such as base-sepolia`);
  return {
    x402Enabled: intFrom(env, 'X402_ENABLED', 0, 0, 1) === 1,
    x402FacilitatorUrl: facilitatorUrlFrom(env.X402_FACILITATOR_URL),
    x402FacilitatorTimeoutMs: intFrom(env, 'X402_FACILITATOR_TIMEOUT_MS', 10_000, 100, 120_000),
    x402PayTo: payTo,
    x402Networks: networks.length > 0 ? networks : ['base-sepolia'],
    x402SessionTtlSeconds: intFrom(env, 'X402_SESSION_TTL_SECONDS', 900, 30, 86_400),
    x402PriceCacheMs: intFrom(env, 'X402_PRICE_CACHE_MS', 5_000, 0, 3_600_000),
  };
}

function clusterFrom(env: NodeJS.ProcessEnv, port: number): ClusterConfig | undefined {
  const raw = env.ETCD_ENDPOINTS;
  if (raw === undefined || raw.trim() === '') return undefined;
  const etcdEndpoints = raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map((e) => (/^https?:\/\//.test(e) ? e : `http://${e}`));
  const nodeId = env.NODE_ID || `node-${port}`;
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(nodeId)) throw new Error('NODE_ID must be 1-64 characters of letters, digits, _ . -');
  const prefix = env.CLUSTER_PREFIX || '/platform/';
  const replicationFactor = intFrom(env, 'REPLICATION_FACTOR', 2, 1, 5);
  // Above the replication factor no write could ever be accepted.
  const minInSyncReplicas = intFrom(env, 'MIN_IN_SYNC_REPLICAS', 1, 1, replicationFactor);
  return {
    etcdEndpoints,
    nodeId,
    grpcPort: intFrom(env, 'GRPC_PORT', 9090, 0, 65535),
    advertiseHost: env.ADVERTISE_HOST || '127.0.0.1',
    replicationFactor,
    minInSyncReplicas,
    leaseTtlSeconds: intFrom(env, 'LEASE_TTL_SECONDS', 2, 2, 60),
    prefix: prefix.endsWith('/') ? prefix : `${prefix}/`,
    replicationTimeoutMs: intFrom(env, 'REPLICATION_TIMEOUT_MS', 1000, 50, 60_000),
    commitDelayMs: intFrom(env, 'REPLICATION_COMMIT_DELAY_MS', 4, 0, 100),
    forwardDeadlineMs: intFrom(env, 'FORWARD_DEADLINE_MS', 10_000, 100, 120_000),
  };
}

/** intFrom with no default: undefined when the variable is unset or empty. */
function optionalIntFrom(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  return env[name] === undefined || env[name] === '' ? undefined : intFrom(env, name, 0, min, max);
}

function intFrom(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

function publicBaseUrlFrom(raw: string | undefined): string {
  if (raw === undefined || raw === '') return '';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`PUBLIC_BASE_URL must be an absolute http(s) URL, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('PUBLIC_BASE_URL must be an http or https URL');
  return raw.replace(/\/+$/, '');
}

/** A comma-separated list of http(s) origins (`https://app.example.com`), each normalised to its origin. */
function originsFrom(name: string, raw: string | undefined): string[] {
  const entries = (raw ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  return entries.map((entry) => {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new Error(`${name} entry ${JSON.stringify(entry)} is not an absolute http(s) origin`);
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
      throw new Error(`${name} entry ${JSON.stringify(entry)} must be an http(s) origin such as https://app.example.com`);
    }
    return url.origin;
  });
}

/**
 * TRUST_PROXY: unset, empty or 0 trusts no proxy; a number n trusts the
 * last n hops of X-Forwarded-For; otherwise a comma-separated list of proxy
 * addresses or CIDR ranges (e.g. `127.0.0.1,10.0.0.0/8`). `true` (trust any
 * sender) is refused: any client could then choose its own address.
 */
export function trustProxyFrom(raw: string | undefined): false | number | string[] {
  const value = (raw ?? '').trim();
  if (value === '' || value === '0' || value.toLowerCase() === 'false') return false;
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    if (hops > 16) throw new Error('TRUST_PROXY as a hop count must be 1 to 16');
    return hops;
  }
  if (value.toLowerCase() === 'true') throw new Error('TRUST_PROXY=true would let any client choose its address; name the proxies (addresses or CIDRs) or a hop count');
  const entries = value.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  for (const entry of entries) {
    if (!/^[0-9A-Fa-f:.]+(\/\d{1,3})?$/.test(entry)) throw new Error(`TRUST_PROXY entry ${entry} is not an IP address or CIDR range`);
  }
  return entries;
}

function httpLimitsFrom(env: NodeJS.ProcessEnv) {
  const httpRequestTimeoutMs = intFrom(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 1_000, 3_600_000);
  // Node requires the headers' deadline to be within the request's.
  const httpHeadersTimeoutMs = Math.min(intFrom(env, 'HTTP_HEADERS_TIMEOUT_MS', 10_000, 500, 600_000), httpRequestTimeoutMs);
  return {
    httpRequestTimeoutMs,
    httpHeadersTimeoutMs,
    httpKeepAliveTimeoutMs: intFrom(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1_000, 3_600_000),
    httpConnectionsMax: intFrom(env, 'HTTP_CONNECTIONS_MAX', 16_384, 16, 1_000_000),
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): NodeConfig {
  const durability = env.DURABILITY ?? 'sync';
  if (durability !== 'sync' && durability !== 'commit') throw new Error('DURABILITY must be sync or commit');
  const host = env.HOST || '127.0.0.1';
  const port = intFrom(env, 'PORT', 8080, 0, 65535);
  return {
    host,
    port,
    dataDir: env.DATA_DIR || './data',
    partitions: optionalIntFrom(env, 'PARTITIONS', 1, PARTITIONS_MAX),
    actorsInMemoryMax: intFrom(env, 'ACTORS_IN_MEMORY_MAX', limits.activations_max, 1_000, 100_000_000),
    gcThreads: gcThreadsFrom(env.GC_THREADS),
    gcSemiSpaceMb: semiSpaceMbFrom(env.GC_SEMI_SPACE_MB),
    gcPretenuring: gcPretenuringFrom(env.GC_PRETENURING),
    logLevel: env.LOG_LEVEL || 'info',
    adminEmail: env.ADMIN_EMAIL || undefined,
    adminPassword: env.ADMIN_PASSWORD || undefined,
    passwordKdfCostLog2: intFrom(env, 'PASSWORD_KDF_COST', 15, 10, 20),
    registrationsPerAddressMax: intFrom(env, 'REGISTRATIONS_PER_ADDRESS_MAX', REGISTRATIONS_PER_ADDRESS_MAX, 0, 1_000_000),
    scimVerifiedDomainsOnly: intFrom(env, 'SCIM_VERIFIED_DOMAINS_ONLY', 1, 0, 1) === 1,
    accessTokenTtlSeconds: intFrom(env, 'ACCESS_TOKEN_TTL_SECONDS', 900, 30, 86_400),
    refreshTokenTtlSeconds: intFrom(env, 'REFRESH_TOKEN_TTL_SECONDS', 30 * 86_400, 60, 365 * 86_400),
    bodyLimitBytes: intFrom(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    durability,
    lmdbMapSizeGb: intFrom(env, 'LMDB_MAP_SIZE_GB', LMDB_MAP_SIZE_GB_DEFAULT, 1, 4096),
    issuer: env.TOKEN_ISSUER || 'platform-service',
    livenessGraceSeconds: intFrom(env, 'LIVENESS_GRACE_SECONDS', 30, 1, 86_400),
    publicBaseUrl: publicBaseUrlFrom(env.PUBLIC_BASE_URL),
    passwordResetRedirectOrigins: originsFrom('PASSWORD_RESET_REDIRECT_ORIGINS', env.PASSWORD_RESET_REDIRECT_ORIGINS),
    oauthProviders: parseOAuthProviders(env.OAUTH_PROVIDERS),
    ...httpLimitsFrom(env),
    trustProxy: trustProxyFrom(env.TRUST_PROXY),
    webhookTimeoutMs: intFrom(env, 'WEBHOOK_TIMEOUT_MS', 30_000, 100, 300_000),
    webhookDisableAfterFailures: intFrom(env, 'WEBHOOK_DISABLE_AFTER_FAILURES', 10, 1, 10_000),
    webhookRetryBaseMs: intFrom(env, 'WEBHOOK_RETRY_BASE_MS', 5_000, 10, 3_600_000),
    jobTimeoutMs: intFrom(env, 'JOB_TIMEOUT_MS', 30_000, 100, 300_000),
    jobDeliveryConcurrency: intFrom(env, 'JOB_DELIVERY_CONCURRENCY', 256, 1, 4_096),
    webhookAllowPrivateTargets: intFrom(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', 0, 0, 1) === 1,
    consoleUi: intFrom(env, 'CONSOLE_UI', 1, 0, 1) === 1,
    vaultSealKey: base64KeyFrom('VAULT_SEAL_KEY', env.VAULT_SEAL_KEY),
    formsFieldKey: base64KeyFrom('FORMS_FIELD_KEY', env.FORMS_FIELD_KEY),
    metricsSampleIntervalMs: intFrom(env, 'METRICS_SAMPLE_INTERVAL_MS', 5_000, 250, 60_000),
    metricsHistorySeconds: intFrom(env, 'METRICS_HISTORY_SECONDS', 900, 60, 86_400),
    docsUi: intFrom(env, 'DOCS_UI', 1, 0, 1) === 1,
    ...x402From(env),
    throttlePlanCacheMs: intFrom(env, 'THROTTLE_PLAN_CACHE_MS', 1_000, 0, 60_000),
    rateLimitsEnabled: intFrom(env, 'RATE_LIMITS_ENABLED', 1, 0, 1) === 1,
    rateLimitDefaultMaxRequests: intFrom(env, 'RATE_LIMITS_DEFAULT_MAX_REQUESTS', 6_000, 1, 1_000_000_000),
    rateLimitDefaultWindowSeconds: intFrom(env, 'RATE_LIMITS_DEFAULT_WINDOW_SECONDS', 60, 1, 86_400),
    rateLimitRulesCacheMs: intFrom(env, 'RATE_LIMITS_RULES_CACHE_MS', 2_000, 0, 60_000),
    ecsWsBufferMaxBytes: intFrom(env, 'ECS_WS_BUFFER_MAX_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    cluster: clusterFrom(env, port),
  };
}


