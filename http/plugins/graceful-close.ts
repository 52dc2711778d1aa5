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
  // Plain callbacks, not async: they run on every request and almost always do nothing.
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) {
      done();
      return;
    }
    reply.header('connection', 'close');
    // Answering from a callback hook: the chain stops, done is not called.
    sendError(reply, 'shutting_down', 'The node is shutting down; retry on another node or later.', { retryAfterSeconds: 1 });
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
}
