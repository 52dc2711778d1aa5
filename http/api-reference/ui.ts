import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * The interactive API reference at /docs: Swagger UI, its assets served from the package on this
 * node (no CDN), rendering the document of /openapi.json (the UI fetches it as /docs/json, the same
 * `app.swagger()` object). "Authorize" takes a bearer token (the `bearerAuth` scheme) and "Try it
 * out" sends real requests to this node. The plugin's routes are hidden, so they are not in
 * /openapi.json. DOCS_UI=0: nothing is registered and /docs answers 404.
 */
export async function registerDocsUi(app: FastifyInstance, enabled: boolean): Promise<void> {
  if (!enabled) return;
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: {
      // Operations collapsed: 300 of them expanded would make the page unusable.
      docExpansion: 'none',
      // The filter box searches tags: "locks", "mq", ...
      filter: true,
      // The token typed into "Authorize" lives in the page only: not kept in the browser's storage
      // after the tab closes (Swagger UI's persistAuthorization stays off).
      persistAuthorization: false,
      displayRequestDuration: true,
    },
  });
}
