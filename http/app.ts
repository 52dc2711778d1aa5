import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { randomId } from '../runtime/index.js';
import { registerErrorHandling } from './plugins/error-handler.js';
import { registerIdempotency } from './plugins/idempotency.js';
import { registerValidation } from './plugins/validation.js';
import { routeAreas } from './routes/index.js';
import { ErrorBody } from './schemas.js';
import type { AppServices } from './services.js';
import './auth/principal.js';

/**
 * Builds the Fastify edge without listening (tests drive it over a socket
 * through node.ts; only server.ts decides to listen on a configured port).
 */
export async function buildApp(services: AppServices, logger: FastifyBaseLogger): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: services.config.bodyLimitBytes,
    genReqId: () => randomId('req_'),
    requestIdHeader: 'x-request-id',
    // One log line per request at debug level (below); the default two lines
    // at info would cost more than a lock turn.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    return503OnClosing: true,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    routerOptions: { maxParamLength: 1024 },
  });
  app.decorateRequest('principal', null);
  registerValidation(app);
  // JSON only: any other body type is a 415, not a string handed to a route.
  app.removeContentTypeParser(['text/plain']);
  registerErrorHandling(app);

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

  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 500) request.log.error({ status: reply.statusCode, url: request.url, method: request.method }, 'request failed');
    else request.log.debug({ status: reply.statusCode, url: request.url, method: request.method, ms: reply.elapsedTime }, 'request');
  });
  services.metrics.register(app);
  registerIdempotency(app, services);
  for (const area of routeAreas) area(app, services);
  return app;
}
