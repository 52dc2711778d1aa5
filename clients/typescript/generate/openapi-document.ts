import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../../http/config.js';
import { startNode } from '../../../http/node.js';

/**
 * The OpenAPI document every node serves at `/openapi.json`, built in this
 * process: a node with the default configuration (the environment is not
 * read, so the document does not depend on who runs the generator) starts in
 * a temporary directory on a loopback port, `app.swagger()` is read, and the
 * node stops and its directory is removed. Nothing outside this process runs.
 */
export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'platform-openapi-'));
  try {
    const config = { ...loadConfig({}), host: '127.0.0.1', port: 0, dataDir, logLevel: 'silent' as const };
    const node = await startNode({ config, logger: pino({ level: 'silent' }) });
    try {
      // A deep copy: the generator must not see (or change) the live object swagger keeps.
      return JSON.parse(JSON.stringify(node.app.swagger())) as Record<string, unknown>;
    } finally {
      await node.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
