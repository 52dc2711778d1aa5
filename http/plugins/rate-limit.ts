import client from 'prom-client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RuleSetView } from '../../actors/rate-limits/messages.js';
import { policyHeader, rateLimitHeader } from '../rate-limits/headers.js';
import { EdgeLimiter, newDecision, type Decision, type ReserveContext } from '../rate-limits/limiter.js';
import { callerOf, canonicalRoute, isPlatformAdmin, isProbeRoute, isRateLimitAdminRoute, LeaseRefs, resolveLimit, type AppliedLimit } from '../rate-limits/resolve.js';
import type { AppServices } from '../services.js';
import { sendError } from './error-handler.js';
import { routeConfigOf, type RouteConfig } from '../route-config.js';
import { replyHeadersOf } from '../reply-headers.js';

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

  const apply = (request: FastifyRequest, reply: FastifyReply, applied: AppliedLimit, policy: string, decision: Decision): boolean => {
    const value = rateLimitHeader(applied.policy, decision.remaining, decision.reset_seconds);
    const headers = replyHeadersOf(reply);
    if (headers !== null) {
      headers['ratelimit-policy'] = policy;
      headers.ratelimit = value;
    } else {
      reply.header('ratelimit-policy', policy);
      reply.header('ratelimit', value);
    }
    if (decision.allowed) return true;
    request.log.debug({ policy: applied.policy, scope: applied.scope }, 'rate limited');
    sendError(reply, 'rate_limited', `Rate limit exceeded (${applied.limit.max_requests} requests per ${applied.limit.window_seconds} s); retry after ${decision.retry_after_seconds} s.`, {
      retryAfterSeconds: decision.retry_after_seconds,
    });
    return false;
  };

  const leaseRefs = new LeaseRefs();
  // The hot path's decision, written by tryLocal and read by apply before the hook returns (the slow
  // path's decisions are objects of their own: they cross an await).
  const localDecision = newDecision();
  // The users with settings of their own in the current rule set, as a Set: looking a user id up in
  // the rule set's object would make V8 intern the id string on every request.
  let usersOf: RuleSetView | null = null;
  let usersWithSettings = new Set<string>();
  const hasOwnSettings = (rules: RuleSetView, user_id: string): boolean => {
    if (usersOf !== rules) {
      usersOf = rules;
      usersWithSettings = new Set(Object.keys(rules.users));
    }
    return usersWithSettings.size !== 0 && usersWithSettings.has(user_id);
  };

  // The limit of the route for callers without settings of their own, kept per rule set: most requests do no work but a comparison.
  const limitOf = (route: RouteLimit, rules: RuleSetView, user_id: string | null): AppliedLimit | 'bypass' => {
    if (user_id !== null && hasOwnSettings(rules, user_id)) return resolveLimit(rules, limiter.settings.defaultLimit, route.endpoint, user_id);
    if (route.rules !== rules) {
      route.rules = rules;
      route.applied = resolveLimit(rules, limiter.settings.defaultLimit, route.endpoint, null) as AppliedLimit;
      route.policyHeader = policyHeader(route.applied.policy, route.applied.limit);
    }
    return route.applied!;
  };

  // On the hot path (the caller's lease has a token) nothing is allocated but the RateLimit header.
  const decide = (route: RouteLimit, request: FastifyRequest, reply: FastifyReply, rules: RuleSetView, now: number, done: HookDone): void => {
    const principal = request.principal;
    const applied = limitOf(route, rules, principal?.user_id ?? null);
    if (applied === 'bypass') return done();
    // The address only for anonymous callers: request.ip is not free (a getter, proxy-addr with TRUST_PROXY).
    const address = principal ? '' : request.ip;
    const ref = leaseRefs.refOf(principal, address, applied);
    // The route's limit has its RateLimit-Policy ready; a caller's own settings make theirs here.
    const policy = applied === route.applied ? route.policyHeader : policyHeader(applied.policy, applied.limit);
    const local = limiter.tryLocal(ref, applied.limit, now, localDecision);
    if (local) {
      if (apply(request, reply, applied, policy, local)) done();
      return;
    }
    const context: ReserveContext = { caller: callerOf(principal, address), applied, endpoint: route.routeUrl!, method: request.method };
    limiter.acquire(ref, context).then(
      (decision) => {
        if (apply(request, reply, applied, policy, decision)) done();
      },
      (error: unknown) => done(error as Error),
    );
  };

  /** The hook of one route, with what the limiter keeps about that route. */
  const hookOfRoute = (): LimitHook => {
    const route: RouteLimit = { config: null, routeUrl: undefined, endpoint: '', counted: false, adminApi: false, rules: null, applied: null, policyHeader: '' };
    return (request, reply, done) => {
      // Read from the request, not the route's options: the config Fastify gives the request is the truth
      // (a prefix route's url), and one set of route options can pass through onRoute for two routes.
      const config = routeConfigOf(request);
      if (config !== route.config) describeRoute(route, config);
      // Probes are not counted, nor the rate-limit admin API for a platform admin.
      if (!route.counted || (route.adminApi && isPlatformAdmin(request.principal))) return done();
      const now = services.clock.now();
      const rules = limiter.currentRules(now);
      if (!(rules instanceof Promise)) return decide(route, request, reply, rules, now, done);
      rules.then(
        (current) => decide(route, request, reply, current, services.clock.now(), done),
        (error: unknown) => {
          // No rule set yet and its actor cannot answer: admit (fail open), as for an unavailable window.
          limiter.counts.failedOpen++;
          request.log.warn({ err: error }, 'rate limit rules unavailable: request admitted (fail open)');
          done();
        },
      );
    };
  };

  // The last onRequest hook of every route, after the route's own (its authentication): the caller is
  // known, the body not yet read. A hook of the phase the route already runs costs less than a phase of
  // its own (a preParsing hook made Fastify run one more hook phase per request). Routes declared after
  // this plugin only: app.ts registers it before any route. Unrouted requests (404) are not counted.
  const hooks = new WeakSet<LimitHook>();
  app.addHook('onRoute', (route) => {
    const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    // Append once, should the same options pass through again (a GET's HEAD twin is declared from a copy taken before).
    if (own.some((hook) => hooks.has(hook as LimitHook))) return;
    const hook = hookOfRoute();
    hooks.add(hook);
    route.onRequest = [...own, hook];
  });
}

type HookDone = (error?: Error) => void;
type LimitHook = (request: FastifyRequest, reply: FastifyReply, done: HookDone) => void;

/** What the limiter keeps about one route: filled from its first request, again should its config change. */
interface RouteLimit {
  /** The route config the rest was read from (null before the first request). */
  config: RouteConfig | undefined | null;
  /** The route template (`/api/v1/x/:id`), undefined for a request no route matched. */
  routeUrl: string | undefined;
  /** The template in the rules' form (`/api/v1/x/{}`). */
  endpoint: string;
  /** False for probes and scrapes (and unrouted requests). */
  counted: boolean;
  /** The rate-limit admin API: not counted for a platform admin. */
  adminApi: boolean;
  /** The rule set `applied` was resolved under. */
  rules: RuleSetView | null;
  /** The limit for callers without settings of their own, under `rules`. */
  applied: AppliedLimit | null;
  /** RateLimit-Policy of `applied`. */
  policyHeader: string;
}

function describeRoute(route: RouteLimit, config: RouteConfig | undefined): void {
  const routeUrl = config?.url;
  route.config = config;
  route.routeUrl = routeUrl;
  route.endpoint = routeUrl === undefined ? '' : canonicalRoute(routeUrl);
  route.counted = routeUrl !== undefined && !isProbeRoute(routeUrl);
  route.adminApi = routeUrl !== undefined && isRateLimitAdminRoute(routeUrl);
  route.rules = null;
  route.applied = null;
  route.policyHeader = '';
}
