import { createServer } from 'node:net';

/**
 * A TCP port on the loopback interface that was free a moment ago (listen on
 * port 0, read it, close). For the local cluster, tests and benchmarks, which
 * start processes that must be told their ports in advance.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
