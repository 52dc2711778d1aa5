import client from 'prom-client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RuleSetView } from '../../actors/rate-limits/messages.js';
import { policyHeader, rateLimitHeader } from '../rate-limits/headers.js';
import { EdgeLimiter, type Decision, type ReserveContext } from '../rate-limits/limiter.js';
import { callerOf, canonicalRoute, isExempt, localKeyOf, resolveLimit, type AppliedLimit } from '../rate-limits/resolve.js';
import type { AppServices } from '../services.js';
import { sendError } from './error-handler.js';
import { routeUrlOf } from '../route-config.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The node's rate limiter (null when RATE_LIMITS_ENABLED=0): the admin routes tell it about rule changes. */
    rateLimiter: EdgeLimiter | null;
  }
}

/** How often leases of finished windows are dropped and their actors told to forget. */
const SWEEP_INTERVAL_MS = 15_000;

/**
 * Rate limiting at the edge, on every routed request (docs/api/rate-limits.md).
 *
 * The last `onRequest` hook of every route: it runs after the route's own
 * (its authentication), so the caller is known (the bearer's user, an API
 * key's tenant, else the client address), and before the body is read, so
 * a refused request costs no parsing. The most specific rule picks the
 * limit (http/rate-limits/resolve.ts); the node's lease for the caller's window decides, and only
 * when the lease is spent does the window actor hear of it
 * (http/rate-limits/limiter.ts). A refusal is 429 `rate_limited` with
 * Retry-After; every limited response carries RateLimit-Policy and RateLimit.
 */
export function registerRateLimit(app: FastifyInstance, services: AppServices): void {
  const { config } = services;
  if (!config.rateLimitsEnabled) {
    app.decorate('rateLimiter', null);
    return;
  }
  const limiter = new EdgeLimiter(
    services.actors,
    services.clock,
    {
      defaultLimit: { max_requests: config.rateLimitDefaultMaxRequests, window_seconds: config.rateLimitDefaultWindowSeconds },
      rulesCacheMs: config.rateLimitRulesCacheMs,
    },
    (error) => app.log.warn({ err: error }, 'rate limit window unavailable: request admitted (fail open)'),
  );
  app.decorate('rateLimiter', limiter);
  // Counted by the limiter with a plain increment (the hot path), read at scrape time.
  new client.Counter({
    name: 'rate_limit_decisions_total',
    help: 'Requests the edge rate limiter admitted, refused (429), or admitted because a window actor could not answer (failed_open).',
    labelNames: ['decision'] as const,
    registers: [services.metrics.registry],
    collect() {
      this.reset();
      this.labels('allowed').inc(limiter.counts.allowed);
      this.labels('limited').inc(limiter.counts.limited);
      this.labels('failed_open').inc(limiter.counts.failedOpen);
    },
  });
  new client.Gauge({
    name: 'rate_limit_reserves_sent',
    help: 'Leases this node has reserved from window actors since start (one actor message each).',
    registers: [services.metrics.registry],
    collect() {
      this.set(limiter.counts.reserves);
    },
  });

  const sweep = setInterval(() => limiter.sweep(), SWEEP_INTERVAL_MS);
  sweep.unref();
  app.addHook('onClose', (_instance, done) => {
    clearInterval(sweep);
    done();
  });

  const apply = (request: FastifyRequest, reply: FastifyReply, applied: AppliedLimit, decision: Decision): boolean => {
    reply.header('ratelimit-policy', policyHeaderOf(applied));
    reply.header('ratelimit', rateLimitHeader(applied.policy, decision.remaining, decision.reset_seconds));
    if (decision.allowed) return true;
    request.log.debug({ policy: applied.policy, scope: applied.scope }, 'rate limited');
    sendError(reply, 'rate_limited', `Rate limit exceeded (${applied.limit.max_requests} requests per ${applied.limit.window_seconds} s); retry after ${decision.retry_after_seconds} s.`, {
      retryAfterSeconds: decision.retry_after_seconds,
    });
    return false;
  };

  // The limit of a route for callers without settings of their own, per rule set (most requests: no work but a lookup).
  let resolvedFor: RuleSetView | null = null;
  const resolved = new Map<string, AppliedLimit>();
  const limitOf = (rules: RuleSetView, endpoint: string, user_id: string | null): AppliedLimit | 'bypass' => {
    if (user_id !== null && Object.hasOwn(rules.users, user_id)) return resolveLimit(rules, limiter.settings.defaultLimit, endpoint, user_id);
    if (resolvedFor !== rules) {
      resolvedFor = rules;
      resolved.clear();
    }
    let applied = resolved.get(endpoint);
    if (applied === undefined) {
      applied = resolveLimit(rules, limiter.settings.defaultLimit, endpoint, null) as AppliedLimit;
      resolved.set(endpoint, applied);
    }
    return applied;
  };

  // On the hot path (the caller's lease has a token) nothing is allocated but the lease key and the RateLimit header.
  const decide = (request: FastifyRequest, reply: FastifyReply, routeUrl: string, rules: RuleSetView, done: HookDone): void => {
    const endpoint = canonicalRoute(routeUrl);
    const principal = request.principal;
    const applied = limitOf(rules, endpoint, principal?.user_id ?? null);
    if (applied === 'bypass') return done();
    // The address only for anonymous callers: request.ip is not free (a getter, proxy-addr with TRUST_PROXY).
    const address = principal ? '' : request.ip;
    const key = localKeyOf(principal, address, applied);
    const local = limiter.tryLocal(key, applied.limit);
    if (local) {
      if (apply(request, reply, applied, local)) done();
      return;
    }
    const context: ReserveContext = { caller: callerOf(principal, address), applied, endpoint: routeUrl, method: request.method };
    limiter.acquire(key, context).then(
      (decision) => {
        if (apply(request, reply, applied, decision)) done();
      },
      (error: unknown) => done(error as Error),
    );
  };

  const limitRequest = (request: FastifyRequest, reply: FastifyReply, done: HookDone): void => {
    const routeUrl = routeUrlOf(request);
    // Probes are not counted.
    if (routeUrl === undefined || isExempt(routeUrl, request.principal)) return done();
    const rules = limiter.currentRules();
    if (!(rules instanceof Promise)) return decide(request, reply, routeUrl, rules, done);
    rules.then(
      (current) => decide(request, reply, routeUrl, current, done),
      (error: unknown) => {
        // No rule set yet and its actor cannot answer: admit (fail open), as for an unavailable window.
        limiter.counts.failedOpen++;
        request.log.warn({ err: error }, 'rate limit rules unavailable: request admitted (fail open)');
        done();
      },
    );
  };

  // The last onRequest hook of every route, after the route's own (its authentication): the caller is
  // known, the body not yet read. A hook of the phase the route already runs costs less than a phase of
  // its own (a preParsing hook made Fastify run one more hook phase per request). Routes declared after
  // this plugin only: app.ts registers it before any route. Unrouted requests (404) are not counted.
  app.addHook('onRoute', (route) => {
    const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    // Append once, should the same options pass through again (a GET's HEAD twin is declared from a copy taken before).
    if (own.includes(limitRequest)) return;
    route.onRequest = [...own, limitRequest];
  });
}

type HookDone = (error?: Error) => void;

/** RateLimit-Policy of an applied limit: built once per applied limit (they are memoised per rule set and route). */
const policyHeaders = new WeakMap<AppliedLimit, string>();
function policyHeaderOf(applied: AppliedLimit): string {
  let header = policyHeaders.get(applied);
  if (header === undefined) policyHeaders.set(applied, (header = policyHeader(applied.policy, applied.limit)));
  return header;
}
