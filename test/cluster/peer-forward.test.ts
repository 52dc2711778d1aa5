import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { ServiceError } from '../../runtime/index.js';
import { PeerUnreachable, type TransportHandlers } from '../../cluster/ports.js';
import { ClusterServer } from '../../cluster/transport/cluster-server.js';
import { Peer } from '../../cluster/transport/peer.js';

/**
 * A forward over a real gRPC stream on loopback (ClusterServer and Peer in one
 * process): how its reply or failure reaches the caller, with and without the
 * `recover` the router passes for its retries.
 */
const logger = pino({ level: 'silent' });
const handlers: TransportHandlers = {
  forward: (_kind, key, _message, _messageId, resolve, reject) => {
    if (key === 'refused') reject(new ServiceError('not_leader'));
    else resolve({ echoed: key });
  },
  replicate: async () => [],
};

describe('Peer.forward over gRPC', () => {
  let server: ClusterServer;
  let port: number;
  const peers: Peer[] = [];
  const peer = () => {
    const made = new Peer('n2', `127.0.0.1:${port}`, 'n1', logger, 2);
    peers.push(made);
    return made;
  };

  beforeAll(async () => {
    server = new ClusterServer(handlers, logger);
    port = await server.listen('127.0.0.1', 0);
  });

  afterAll(async () => {
    for (const made of peers) made.close();
    await server.close();
  });

  it('resolves with the reply, and rejects with the wire error when there is no recover', async () => {
    const link = peer();
    await expect(link.forward('k', 'a', { op: 'x' })).resolves.toEqual({ echoed: 'a' });
    const refused = await link.forward('k', 'refused', null).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).code).toBe('not_leader');
  });

  it('hands a failure to recover and settles as recover does', async () => {
    const link = peer();
    const seen: unknown[] = [];
    const recovered = link.forward('k', 'refused', null, undefined, (error) => {
      seen.push(error);
      return Promise.resolve('retried');
    });
    await expect(recovered).resolves.toBe('retried');
    expect((seen[0] as ServiceError).code).toBe('not_leader');

    const thrown = new Error('not retryable');
    await expect(
      link.forward('k', 'refused', null, undefined, () => {
        throw thrown;
      }),
    ).rejects.toBe(thrown);

    // A success never calls recover.
    let called = false;
    await expect(
      link.forward('k', 'b', null, undefined, () => {
        called = true;
      }),
    ).resolves.toEqual({ echoed: 'b' });
    expect(called).toBe(false);
  });

  it('hands a broken stream to recover as PeerUnreachable', async () => {
    const slowHandlers: TransportHandlers = { forward: () => undefined, replicate: async () => [] };
    const slow = new ClusterServer(slowHandlers, logger);
    const slowPort = await slow.listen('127.0.0.1', 0);
    const stuck = new Peer('n3', `127.0.0.1:${slowPort}`, 'n1', logger, 2);
    peers.push(stuck);
    const failures: unknown[] = [];
    const pending = stuck.forward('k', 'never', null, undefined, (error) => {
      failures.push(error);
      return 'recovered';
    });
    // Let the frame reach the server before the link goes.
    await new Promise((resolve) => setTimeout(resolve, 50));
    stuck.close();
    await expect(pending).resolves.toBe('recovered');
    expect(failures[0]).toBeInstanceOf(PeerUnreachable);
    await slow.close();
  });
});
