import type { Etcd3, IKeyValue } from 'etcd3';
import { assert } from '../runtime/index.js';
import type { Coordination, CoordinationCompare, CoordinationKeyValue, CoordinationLease, CoordinationOp, CoordinationWatch, CoordinationWatchHandlers, LeaseEvents } from './ports.js';

/** The coordination port on a real etcd (the etcd3 client). */
export class EtcdCoordination implements Coordination {
  constructor(private readonly client: Etcd3) {}

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
