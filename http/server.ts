import pino from 'pino';
import { loadConfig } from './config.js';
import { startNode } from './node.js';

/** `npm start`: one node from the environment; SIGTERM/SIGINT stop it gracefully. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel });
  const node = await startNode({ config, logger });
  // GC_THREADS takes effect through the start command's V8 flags (http/node-flags.ts); this says which ones this process got.
  const gc = process.execArgv.includes('--single-threaded-gc') ? 'single' : 'parallel';
  const semiSpace = process.execArgv.find((arg) => arg.startsWith('--max-semi-space-size='))?.split('=')[1] ?? 'default';
  logger.info({ url: node.url, dataDir: config.dataDir, partitions: node.services.config.partitions, gc_threads: gc, gc_semi_space_mb: semiSpace }, 'node started');
  // Route schemas not yet used are compiled in the background, now that the node serves (http/lazy-schemas.ts).
  node.app.lazySchemas.warmUp(
    (error) => logger.error({ err: error }, 'a route schema does not compile; its route answers 500'),
    (compiled, elapsed_ms) => logger.info({ compiled, elapsed_ms: Math.round(elapsed_ms) }, 'route schemas compiled'),
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: finishing in-flight requests and turns');
    node.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'unclean stop');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
