import type { FastifyInstance } from 'fastify';
import { sendError } from './error-handler.js';

/**
 * Graceful stop (SIGTERM): once app.close() starts, requests already running
 * finish normally but their responses carry `Connection: close`, so the
 * client's keep-alive socket ends with them and server.close() can complete
 * (otherwise an idle keep-alive connection of a busy client keeps the process
 * alive forever). A request arriving during the drain gets 503
 * `shutting_down` in the conventions' error shape, with Retry-After.
 *
 * Replaces Fastify's return503OnClosing, whose body has no `code`.
 */
export function registerGracefulClose(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (_request, reply) => {
    if (!closing) return;
    reply.header('connection', 'close');
    return sendError(reply, 'shutting_down', 'The node is shutting down; retry on another node or later.', { retryAfterSeconds: 1 });
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (closing) reply.header('connection', 'close');
    return payload;
  });
}
