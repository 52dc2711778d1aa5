import pino from 'pino';
import { loadConfig } from './config.js';
import { startNode } from './node.js';

/** `npm start`: one node from the environment; SIGTERM/SIGINT stop it gracefully. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel });
  const node = await startNode({ config, logger });
  logger.info({ url: node.url, dataDir: config.dataDir, partitions: config.partitions }, 'node started');

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
