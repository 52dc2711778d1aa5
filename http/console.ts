import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { sendError } from './plugins/error-handler.js';

/**
 * Where `npm run build` puts the console (console/vite.config.ts): dist/console. This file runs
 * from dist/http when built and from http/ under the test runner; both find the same folder.
 */
function consoleAssetsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // Not ../console from http/: that is the console's source, whose index.html names .tsx files.
  return basename(dirname(here)) === 'dist' ? join(here, '..', 'console') : join(here, '..', 'dist', 'console');
}

/**
 * The operator console (docs/console.md): static assets only, served by every node. It talks
 * to the node through the public API with an administrator's token, so it has no routes of its
 * own and can never do what the API forbids. Not in /openapi.json.
 */
export async function registerConsole(app: FastifyInstance, enabled: boolean): Promise<void> {
  if (!enabled) return;
  const root = consoleAssetsDir();
  if (!existsSync(join(root, 'index.html'))) {
    app.get('/console/*', { schema: { hide: true } }, (_request, reply) =>
      sendError(reply, 'not_found', 'The console is not built on this node: run `npm run build`.'),
    );
  } else {
    // Loaded only when served: a node with CONSOLE_UI=0 does not pay for it at start-up.
    const { default: fastifyStatic } = await import('@fastify/static');
    await app.register(fastifyStatic, { root, prefix: '/console/', index: 'index.html', wildcard: false, decorateReply: false });
  }
  app.get('/console', { schema: { hide: true } }, (_request, reply) => reply.redirect('/console/', 302));
}
