import swagger from '@fastify/swagger';
import { registerConsole } from './console.js';
import { registerApiReference } from './api-reference/register.js';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { lazyChildLoggerFactory } from './request-logger.js';
import { serializerFactory } from './serializer.js';
import { LazySchemas } from './lazy-schemas.js';
import { requestIdGenerator, requestIdOf } from './request-ids.js';
import { clientErrorHandler } from './plugins/client-errors.js';
import { registerErrorHandling, sendError } from './plugins/error-handler.js';
import { registerGracefulClose } from './plugins/graceful-close.js';
import { registerIdempotency } from './plugins/idempotency.js';
import { registerRateLimit } from './plugins/rate-limit.js';
import { registerJsonBody } from './plugins/json-body.js';
import { registerValidation } from './plugins/validation.js';
import { registerX402 } from './plugins/x402.js';
import type { AreaRoutes } from './area-routes.js';
import { clusterRoutes } from './routes/cluster.js';
import { healthRoutes } from './routes/health.js';
import { ErrorBody } from './schemas.js';
import type { AppServices } from './services.js';
import './auth/principal.js';
import './public-base.js';
import { routeConfigOf } from './route-config.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The route schemas still to compile (http/lazy-schemas.ts): server.ts warms them up once the node is ready. */
    lazySchemas: LazySchemas;
  }
  interface FastifyContextConfig {
    /** The route's query string carries a secret (a token in a link): request logs show only the path. */
    secretQuery?: boolean;
  }
}

/** The URL as the request log shows it: without the query string on routes marked `secretQuery`. */
function loggedUrl(request: FastifyRequest): string {
  if (routeConfigOf(request)?.secretQuery !== true) return request.url;
  const query = request.url.indexOf('?');
  return query < 0 ? request.url : `${request.url.slice(0, query)}?[redacted]`;
}

/** A hop count becomes proxy-addr's trust function: the nearest `hops` senders are proxies. */
function trustProxyOption(setting: false | number | string[]): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return setting;
}

/**
 * Builds the Fastify edge without listening (tests drive it over a socket
 * through node.ts; only server.ts decides to listen on a configured port).
 */
export async function buildApp(services: AppServices, logger: FastifyBaseLogger, areaRoutes: AreaRoutes[]): Promise<FastifyInstance> {
  const lazySchemas = new LazySchemas();
  const app = Fastify({
    loggerInstance: logger,
    // request.log makes its pino child only when a line is written (http/request-logger.ts).
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: services.config.bodyLimitBytes,
    // Slow or idle clients cannot hold sockets for ever (docs/api/common.md, Connections).
    requestTimeout: services.config.httpRequestTimeoutMs,
    keepAliveTimeout: services.config.httpKeepAliveTimeoutMs,
    clientErrorHandler,
    // The client address (request.ip) behind a TLS proxy or load balancer: only the named proxies are believed.
    trustProxy: trustProxyOption(services.config.trustProxy),
    // Node checks those deadlines on this period (default 30 s, far longer than the deadlines themselves).
    http: { connectionsCheckingInterval: Math.min(1000, Math.ceil(services.config.httpHeadersTimeoutMs / 2)) },
    // The client's X-Request-Id when it is a plausible one, else a made one (http/request-ids.ts).
    genReqId: requestIdOf(requestIdGenerator()),
    requestIdHeader: false,
    // One log line per request at debug level (below); the default two lines
    // at info would cost more than a lock turn.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    // Drain answers come from plugins/graceful-close.ts (the error shape, Connection: close).
    return503OnClosing: false,
    // Response schemas go to the serialiser with nullable fields as `nullable`, not `anyOf` (http/serializer.ts),
    // and are compiled on first use, as validators are (http/lazy-schemas.ts).
    schemaController: { compilersFactory: { buildSerializer: serializerFactory(lazySchemas) } },
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    routerOptions: { maxParamLength: 1024 },
    // Malformed URLs and over-long path parameters are rejected by the router before any
    // hook runs; answer them in the conventions' shape too (400 BAD_REQUEST, not FST_ codes).
    frameworkErrors: (error, _request, reply) => {
      sendError(reply, error.code === 'FST_ERR_ASYNC_CONSTRAINT' ? 'internal_error' : 'BAD_REQUEST', error.message);
    },
  });
  app.server.headersTimeout = services.config.httpHeadersTimeoutMs;
  app.server.maxConnections = services.config.httpConnectionsMax;
  app.decorateRequest('principal', null);
  app.decorate('publicBaseUrl', () => services.publicBaseUrl());
  app.decorate('lazySchemas', lazySchemas);
  registerValidation(app, lazySchemas);
  // JSON only: any other body type is a 415, not a string handed to a route.
  app.removeContentTypeParser(['text/plain']);
  registerJsonBody(app);
  registerErrorHandling(app);
  registerGracefulClose(app);
  // Rate limits on every routed request, after the route's authentication (docs/api/rate-limits.md): an
  // onRoute hook, so before any route is declared.
  registerRateLimit(app, services);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Platform service',
        version: '1.0.0',
        description: 'HTTP API. Errors use the ErrorBody shape; codes are listed in docs/errors.md.',
      },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
    },
  });
  app.addSchema(ErrorBody);
  // Descriptions, examples and bearerAuth in /openapi.json, and the interactive reference at /docs (DOCS_UI).
  await registerApiReference(app, services.config.docsUi, { rateLimits: services.config.rateLimitsEnabled, x402: services.config.x402Enabled });

  const debugEnabled = (logger as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled?.('debug') ?? true;
  app.addHook('onResponse', (request, reply, done) => {
    // A 503 is the service saying "not now" (readiness, overload, failover), not a fault: a warning.
    if (reply.statusCode === 503) request.log.warn({ status: reply.statusCode, url: loggedUrl(request), method: request.method }, 'request refused: unavailable');
    else if (reply.statusCode >= 500) request.log.error({ status: reply.statusCode, url: loggedUrl(request), method: request.method }, 'request failed');
    else if (debugEnabled) request.log.debug({ status: reply.statusCode, url: loggedUrl(request), method: request.method, ms: reply.elapsedTime }, 'request');
    done();
  });
  services.metrics.register(app);
  registerIdempotency(app, services);
  // x402: notes the routes for the catalog; with X402_ENABLED, prices and charges priced routes (docs/api/x402.md).
  registerX402(app, services);
  // The node's own routes, then every area's (the list is areas.ts).
  healthRoutes(app, services);
  await registerConsole(app, services.config.consoleUi);
  clusterRoutes(app, services);
  for (const routes of areaRoutes) routes(app, services);
  return app;
}
