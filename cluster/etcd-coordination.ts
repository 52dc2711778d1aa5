import { circuitBreaker, ConsecutiveBreaker, ConstantBackoff, ExponentialBackoff, handleWhen, retry } from 'cockatiel';
import { Etcd3, isRecoverableError, type IKeyValue, type IOptions } from 'etcd3';
import { assert } from '../runtime/index.js';
import type { Coordination, CoordinationCompare, CoordinationKeyValue, CoordinationLease, CoordinationOp, CoordinationWatch, CoordinationWatchHandlers, LeaseEvents } from './ports.js';

/**
 * How fast the etcd3 client notices that etcd is back. etcd3@1.1's defaults
 * are built for a client that can wait: a circuit breaker per host that,
 * after 3 consecutive failures, refuses every call for 5 s (and for 5 s more
 * each time the one trial call fails), a watch reconnect backoff growing to
 * 30 s, and grpc-js's channel reconnect backoff (1 s, x1.6, up to 120 s).
 * After an etcd outage that left a node blind for up to 30 s. Here every one
 * of them is capped well under a second, so that a returning etcd is seen
 * within RECONNECT_MAX_MS (plus one request):
 * - breaker: open after 5 consecutive failures, trial call after 250 ms;
 * - global retry: 3 attempts, 50 ms apart (a call fails in ~100 ms, not 15 s);
 * - watch stream reconnect: 50 ms doubling to 500 ms (the watches that
 *   matter re-read and re-watch on their own: SyncedPrefix);
 * - gRPC channel reconnect: 100 ms, capped at 500 ms.
 * One node costs etcd at most a few requests per second while it is down.
 */
export const ETCD_RECONNECT_MAX_MS = 500;

export function etcdClientOptions(hosts: string[]): IOptions {
  return {
    hosts,
    grpcOptions: {
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': ETCD_RECONNECT_MAX_MS,
    },
    faultHandling: {
      host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 250, breaker: new ConsecutiveBreaker(5) }),
      global: retry(handleWhen(isRecoverableError), { maxAttempts: 3, backoff: new ConstantBackoff(50) }),
      watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: ETCD_RECONNECT_MAX_MS }) as unknown as NonNullable<IOptions['faultHandling']>['watchBackoff'],
    },
  };
}

/** The coordination port on a real etcd (the etcd3 client). */
export class EtcdCoordination implements Coordination {
  constructor(private readonly client: Etcd3) {}

  /** A client for `hosts` with the reconnect tuning above. */
  static connect(hosts: string[]): EtcdCoordination {
    return new EtcdCoordination(new Etcd3(etcdClientOptions(hosts)));
  }

  async range(prefix: string): Promise<{ kvs: CoordinationKeyValue[]; revision: number }> {
    const result = await this.client.getAll().prefix(prefix).exec();
    return { kvs: result.kvs.map(toKeyValue), revision: Number(result.header.revision) };
  }

  async get(key: string): Promise<string | undefined> {
    return (await this.client.get(key).string()) ?? undefined;
  }

  async put(key: string, value: string, lease?: string): Promise<void> {
    const put = this.client.put(key).value(value);
    if (lease !== undefined) put.lease(lease);
    await put.exec();
  }

  async delete(key: string): Promise<void> {
    await this.client.delete().key(key).exec();
  }

  async txn(compares: CoordinationCompare[], ops: CoordinationOp[]): Promise<{ succeeded: boolean; revision: number }> {
    assert(compares.length > 0, 'a coordination txn needs at least one compare');
    const column = (c: CoordinationCompare) => (c.target === 'create' ? 'Create' : 'Mod');
    const txn = this.client.if(compares[0].key, column(compares[0]), '==', compares[0].equals);
    for (const c of compares.slice(1)) txn.and(c.key, column(c), '==', c.equals);
    const result = await txn
      .then(
        ...ops.map((op) => {
          if (op.type === 'delete') return this.client.delete().key(op.key);
          const put = this.client.put(op.key).value(op.value);
          return op.lease !== undefined ? put.lease(op.lease) : put;
        }),
      )
      .commit();
    return { succeeded: result.succeeded, revision: Number(result.header.revision) };
  }

  async watch(target: { prefix: string } | { key: string }, fromRevision: number | undefined, handlers: CoordinationWatchHandlers): Promise<CoordinationWatch> {
    const builder = 'prefix' in target ? this.client.watch().prefix(target.prefix) : this.client.watch().key(target.key);
    if (fromRevision !== undefined) builder.startRevision(String(fromRevision));
    const watcher = await builder.create();
    watcher.on('put', (kv) => handlers.put(toKeyValue(kv)));
    watcher.on('delete', (kv) => handlers.delete(toKeyValue(kv)));
    watcher.on('error', (error) => handlers.error(error));
    const interrupted = handlers.interrupted;
    if (interrupted) {
      // The caller re-reads and watches again from what it read: stop etcd3
      // from resuming this one (and from queueing it behind its backoff).
      let done = false;
      watcher.on('disconnected', (error: unknown) => {
        if (done) return;
        done = true;
        void watcher.cancel().catch(() => undefined);
        interrupted(error);
      });
    }
    return { cancel: () => watcher.cancel() };
  }

  lease(ttlSeconds: number, events: LeaseEvents): CoordinationLease {
    const lease = this.client.lease(ttlSeconds, { autoKeepAlive: true });
    lease.on('keepaliveFired', () => events.fired());
    lease.on('keepaliveSucceeded', () => events.succeeded());
    lease.on('keepaliveFailed', () => events.failed());
    lease.on('keepaliveEstablished', () => events.established());
    lease.on('lost', (error: unknown) => events.lost(error));
    return {
      grant: () => lease.grant(),
      revoke: () => lease.revoke(),
      release: () => lease.release(),
    };
  }

  close(): void {
    this.client.close();
  }
}

function toKeyValue(kv: IKeyValue): CoordinationKeyValue {
  return { key: kv.key.toString(), value: kv.value.toString(), create_revision: Number(kv.create_revision), mod_revision: Number(kv.mod_revision) };
}
