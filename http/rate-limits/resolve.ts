import { canonicalEndpoint, NO_SUPPORT_TIER, type Limit, type RateLimitCaller, type RuleSetView } from '../../actors/rate-limits/messages.js';
import type { Principal } from '../auth/principal.js';
import { leaseRef, type LeaseRef } from './limiter.js';
import { ownEntry } from '../../runtime/index.js';

/**
 * Which limit applies to a request, pure: the most specific rule wins,
 * user custom (for this endpoint) > user tier (a support tier) > endpoint
 * tier > module tier > default tier. Each answer names its scope, the window
 * a caller's requests are counted in: requests under different scopes are
 * counted apart (a caller's default-tier count does not include the requests
 * an endpoint tier governs).
 */
export interface AppliedLimit {
  /** The window's name within the caller: `default`, `module:<m>`, `endpoint:<template>`, `tier:<name>`, `custom:<template>`. */
  scope: string;
  /** The policy name shown in RateLimit-Policy / RateLimit: default, module, endpoint, tier, custom. */
  policy: 'default' | 'module' | 'endpoint' | 'tier' | 'custom';
  limit: Limit;
}

/**
 * The module of a path: the first segment after the version (`presence` in
 * /api/v1/presence/...; `scim` in /scim/v2/Users), else the first segment
 * (`admin` in /admin/rate-limits, `oauth` in /oauth/token).
 */
export function moduleOf(canonical: string): string {
  const segments = canonical.split('/').filter((segment) => segment !== '');
  if (segments.length === 0) return '';
  if (segments.length >= 3 && segments[0] === 'api' && /^v\d+$/.test(segments[1]!)) return segments[2]!;
  return segments[0]!;
}


export function resolveLimit(rules: RuleSetView, fallbackDefault: Limit, canonical: string, user_id: string | null): AppliedLimit | 'bypass' {
  const user = user_id === null ? undefined : ownEntry(rules.users, user_id);
  if (user?.bypass) return 'bypass';
  const custom = user ? ownEntry(user.custom_limits, canonical) : undefined;
  if (custom) return { scope: `custom:${canonical}`, policy: 'custom', limit: custom };
  if (user && user.tier !== NO_SUPPORT_TIER) {
    const tier = ownEntry(rules.support_tiers, user.tier);
    if (tier) return { scope: `tier:${user.tier}`, policy: 'tier', limit: tier };
  }
  const endpoint = ownEntry(rules.endpoints, canonical);
  if (endpoint) return { scope: `endpoint:${canonical}`, policy: 'endpoint', limit: endpoint };
  const module = moduleOf(canonical);
  const moduleTier = module === '' ? undefined : ownEntry(rules.modules, module);
  if (moduleTier) return { scope: `module:${module}`, policy: 'module', limit: moduleTier };
  return { scope: 'default', policy: 'default', limit: rules.default_tier ?? fallbackDefault };
}

/** Who is counted, by id: `user:<id>` for an access token, `tenant:<id>` for an API key, else `address:<ip>`. */
export function callerIdOf(principal: Principal | null, address: string): string {
  if (!principal) return `address:${address}`;
  return principal.credential === 'api_key' ? `tenant:${principal.tenant}` : `user:${principal.user_id}`;
}

/** Who is counted: the user of an access token, the tenant of an API key, else the client address. */
export function callerOf(principal: Principal | null, address: string): RateLimitCaller {
  const id = callerIdOf(principal, address);
  if (!principal) return { id, tenant: null, user_id: null };
  return { id, tenant: principal.tenant, user_id: principal.user_id };
}

/** The node's key for a caller's lease under a limit. */
export function localKeyOf(principal: Principal | null, address: string, applied: AppliedLimit): string {
  return `${callerIdOf(principal, address)}\u0000${applied.scope}`;
}

/** Past this many refs the cache starts again (a ref is made again on its caller's next request: only a cost). */
const LEASE_REFS_MAX = 100_000;

/**
 * The limiter's handle on a caller's lease (LeaseRef: its key, localKeyOf,
 * and the lease once found), remembered: the hot path reaches the lease by
 * the ids the request already has (the user id of the session cache, the
 * tenant, the address) in its scope's map for that kind of caller, instead
 * of concatenating a key, hashing it and looking it up in the node's lease
 * table on every request.
 * Keyed by scope, then kind of caller, then id, so a user and a tenant of
 * the same id never share a ref.
 */
export class LeaseRefs {
  private readonly byScope = new Map<string, CallerRefs>();
  private size = 0;

  refOf(principal: Principal | null, address: string, applied: AppliedLimit): LeaseRef {
    let kinds = this.byScope.get(applied.scope);
    if (kinds === undefined) this.byScope.set(applied.scope, (kinds = { users: new Map(), tenants: new Map(), addresses: new Map() }));
    let byId: Map<string, LeaseRef>;
    let id: string;
    if (!principal) {
      byId = kinds.addresses;
      id = address;
    } else if (principal.credential === 'api_key') {
      byId = kinds.tenants;
      id = principal.tenant;
    } else {
      byId = kinds.users;
      id = principal.user_id;
    }
    let ref = byId.get(id);
    if (ref === undefined) {
      if (this.size >= LEASE_REFS_MAX) return this.restart(principal, address, applied);
      ref = leaseRef(localKeyOf(principal, address, applied));
      byId.set(id, ref);
      this.size++;
    }
    return ref;
  }

  /** Full: forget every ref and remember this one. */
  private restart(principal: Principal | null, address: string, applied: AppliedLimit): LeaseRef {
    this.clear();
    return this.refOf(principal, address, applied);
  }

  clear(): void {
    this.byScope.clear();
    this.size = 0;
  }
}

interface CallerRefs {
  users: Map<string, LeaseRef>;
  tenants: Map<string, LeaseRef>;
  addresses: Map<string, LeaseRef>;
}

/** The canonical template of a Fastify route (`/api/v1/x/:id` -> `/api/v1/x/{}`), memoised per route. */
const canonicalCache = new Map<string, string>();
export function canonicalRoute(routeUrl: string): string {
  let canonical = canonicalCache.get(routeUrl);
  if (canonical === undefined) {
    canonical = canonicalEndpoint(routeUrl) ?? routeUrl;
    if (canonicalCache.size < 10_000) canonicalCache.set(routeUrl, canonical);
  }
  return canonical;
}

/**
 * Routes the limiter leaves alone: probes and scrapes (health, readiness,
 * metrics, the OpenAPI document, the cluster's status), and the rate-limit
 * admin API for a platform admin, who must always be able to lift a limit.
 */
export function isExempt(routeUrl: string, principal: Principal | null): boolean {
  return isProbeRoute(routeUrl) || (isRateLimitAdminRoute(routeUrl) && isPlatformAdmin(principal));
}

/** Probes and scrapes: never counted, whoever calls. */
export function isProbeRoute(routeUrl: string): boolean {
  return routeUrl === '/health' || routeUrl.startsWith('/health/') || routeUrl === '/metrics' || routeUrl === '/openapi.json' || routeUrl.startsWith('/cluster/');
}

/** The rate-limit admin API: not counted for a platform admin. */
export function isRateLimitAdminRoute(routeUrl: string): boolean {
  return routeUrl.startsWith('/admin/rate-limits');
}

/** A platform admin acting as themself (not an impersonation session). */
export function isPlatformAdmin(principal: Principal | null): boolean {
  return principal?.role === 'admin' && principal.impersonated_by === null;
}
