import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { open } from 'lmdb';

/**
 * The floor for a durable write over HTTP in Node on this machine (write-path
 * bench): the bare Fastify echo route, plus one `await db.put()` and
 * `await db.flushed` on an lmdb-js database opened with its defaults
 * (overlappingSync on: each reply waits for the fsync of its commit).
 * POST /put/:key stores the parsed body under the key and echoes it;
 * GET / returns a constant. Listens on env PORT; its data directory is a
 * temporary one (or env DATA_DIR), removed on SIGTERM when temporary.
 */
const ownDir = !process.env.DATA_DIR;
const dataDir = process.env.DATA_DIR ?? mkdtempSync(join(tmpdir(), 'bench-durable-put-'));
const db = open<unknown, string>({ path: dataDir });

const app = Fastify({ logger: false });
app.post<{ Params: { key: string } }>('/put/:key', async (request) => {
  await db.put(request.params.key, request.body);
  await db.flushed;
  return request.body;
});
app.get('/', async () => ({ hello: 'world' }));

const port = Number(process.env.PORT ?? 0);
await app.listen({ host: '127.0.0.1', port });

const stop = () => {
  app
    .close()
    .then(() => db.close())
    .then(
      () => {
        if (ownDir) rmSync(dataDir, { recursive: true, force: true });
        process.exit(0);
      },
      () => process.exit(1),
    );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
