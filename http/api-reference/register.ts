import type { FastifyInstance } from 'fastify';
import { registerOpenApiEnrichment, type EdgeRefusals } from './enrich.js';
import { registerDocsUi } from './ui.js';

/**
 * The API reference: what /openapi.json says beyond the route schemas (enrich.ts), and the
 * interactive page at /docs (ui.ts, DOCS_UI). Registered after @fastify/swagger and before any route.
 */
export async function registerApiReference(app: FastifyInstance, docsUi: boolean, edge: EdgeRefusals): Promise<void> {
  registerOpenApiEnrichment(app, edge);
  await registerDocsUi(app, docsUi);
}
