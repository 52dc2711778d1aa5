import type { FastifyContextConfig, FastifyRequest } from 'fastify';
import { fastifySymbol } from './fastify-symbol.js';

/**
 * A request's route config (with the route's `url` template and `method`),
 * as `request.routeOptions.config` gives it, without what that getter costs:
 * Fastify 5 builds a new twelve-field object and asks the router about
 * version constraints on every `request.routeOptions` access, and the edge's
 * per-request hooks (rate limit, metrics) each need the route. The config is
 * read from the request's route context (Fastify's `fastify.context` symbol,
 * found once); should a Fastify version not have it, this falls back to the
 * getter. http/route-config.test.ts checks both give the same.
 */
export type RouteConfig = FastifyContextConfig & { url?: string; method?: string | string[] };

let contextSymbol: symbol | null | undefined;

function findContextSymbol(request: FastifyRequest): symbol | null {
  return fastifySymbol(request, 'fastify.context', (context) => typeof context === 'object' && context !== null && (context as { config?: unknown }).config === request.routeOptions.config);
}

export function routeConfigOf(request: FastifyRequest): RouteConfig | undefined {
  if (contextSymbol === undefined) contextSymbol = findContextSymbol(request);
  if (contextSymbol === null) return request.routeOptions.config as RouteConfig | undefined;
  return (request as unknown as Record<symbol, { config?: RouteConfig }>)[contextSymbol]?.config;
}

/** The route template of the request (`/api/v1/locks/:id`), undefined when no route matched. */
export function routeUrlOf(request: FastifyRequest): string | undefined {
  return routeConfigOf(request)?.url;
}
