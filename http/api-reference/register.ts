import type { FastifyInstance } from 'fastify';
import { registerOpenApiEnrichment } from './enrich.js';
import { registerDocsUi } from './ui.js';

/**
 * The API reference: what /openapi.json says beyond the route schemas (enrich.ts), and the
 * interactive page at /docs (ui.ts, DOCS_UI). Registered after @fastify/swagger and before any route.
 */
export async function registerApiReference(app: FastifyInstance, docsUi: boolean): Promise<void> {
  registerOpenApiEnrichment(app);
  await registerDocsUi(app, docsUi);
}
