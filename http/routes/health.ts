import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppServices } from '../services.js';

/** Probes, the OpenAPI document and Prometheus metrics. No credential needed. */
export function healthRoutes(app: FastifyInstance, services: AppServices): void {
  app.get('/health', {
    schema: {
      tags: ['health'],
      summary: 'Liveness: 200 as soon as the node serves requests.',
      response: { 200: Type.Object({ status: Type.Literal('ok') }) },
    },
  }, async () => ({ status: 'ok' as const }));

  app.get('/health/ready', {
    schema: {
      tags: ['health'],
      summary: 'Readiness: 200 only while the node owns and serves its partitions.',
      response: {
        200: Type.Object({ status: Type.Literal('ready') }),
        503: Type.Object({ status: Type.Literal('not_ready') }),
      },
    },
  }, async (_request, reply) => {
    if (services.isReady()) return { status: 'ready' as const };
    return reply.code(503).send({ status: 'not_ready' as const });
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(services.metrics.registry.contentType);
    return services.metrics.registry.metrics();
  });
}
