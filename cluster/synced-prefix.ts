import { EventEmitter } from 'node:events';
import type { RuntimeLogger } from '../runtime/index.js';
import { sleep, type ClusterClock, type Coordination, type CoordinationKeyValue, type CoordinationWatch } from './ports.js';

export interface SyncedPrefixHandlers {
  /** The whole prefix as read at `revision`: replace what was known (keys absent here are gone, unless newer than `revision`). */
  reset(kvs: CoordinationKeyValue[], revision: number): void;
  put(kv: CoordinationKeyValue): void;
  delete(kv: CoordinationKeyValue): void;
}

/** Retry of a failed re-read: doubling from the first to the last, so a returning etcd is seen within the last. */
const RESYNC_RETRY_FIRST_MS = 50;
const RESYNC_RETRY_MAX_MS = 500;

/**
 * A prefix of etcd kept in sync: read whole, then watched from the revision
 * after the read. When the watch breaks (etcd restarted, the connection
 * dropped) or on request (a new lease), the view is *stale* until a full
 * resync: read the prefix again, replace what was known, watch again from
 * the revision after that read. A watch resumed by the client alone may
 * stay down for its backoff, and nothing tells the caller which changes it
 * missed; a re-read does not depend on either.
 *
 * Emits 'stale' when the view stops following etcd and 'fresh' (revision)
 * once it follows it again.
 */
export class SyncedPrefix extends EventEmitter {
  private watcher?: CoordinationWatch;
  /** Bumped by every resync: events and results of an older one are ignored. */
  private generation = 0;
  private freshValue = false;
  private revisionValue = 0;
  private stopped = false;
  private syncing?: Promise<void>;

  constructor(
    private readonly client: Coordination,
    private readonly clock: ClusterClock,
    private readonly prefix: string,
    private readonly handlers: SyncedPrefixHandlers,
    private readonly logger: RuntimeLogger,
    private readonly name: string,
  ) {
    super();
  }

  /** True while the view follows etcd (read, and watched since, with no break). */
  get fresh(): boolean {
    return this.freshValue;
  }

  /** The revision of the last full read. */
  get revision(): number {
    return this.revisionValue;
  }

  /** The first read and watch; rejects if etcd cannot be read (the caller is starting). */
  async start(): Promise<void> {
    await this.syncOnce(++this.generation);
  }

  /** Marks the view stale and re-reads until it is fresh again (in the background). */
  resync(reason: string): void {
    if (this.stopped) return;
    const generation = ++this.generation;
    const wasFresh = this.freshValue;
    this.freshValue = false;
    const old = this.watcher;
    this.watcher = undefined;
    void old?.cancel().catch(() => undefined);
    if (wasFresh) {
      this.logger.warn({ view: this.name, reason }, 'etcd view stale; re-reading');
      this.emit('stale');
    }
    this.syncing = this.loop(generation);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.generation++;
    await this.watcher?.cancel().catch(() => undefined);
  }

  private async loop(generation: number): Promise<void> {
    for (let attempt = 0; !this.stopped && generation === this.generation; attempt++) {
      try {
        await this.syncOnce(generation);
        return;
      } catch (error) {
        if (attempt % 20 === 0) this.logger.warn({ err: error, view: this.name, attempt }, 'etcd re-read failed; retrying');
        await sleep(this.clock, Math.min(RESYNC_RETRY_MAX_MS, RESYNC_RETRY_FIRST_MS * 2 ** attempt));
      }
    }
  }

  private async syncOnce(generation: number): Promise<void> {
    const current = await this.client.range(this.prefix);
    if (generation !== this.generation) return;
    this.handlers.reset(current.kvs, current.revision);
    const watcher = await this.client.watch({ prefix: this.prefix }, current.revision + 1, {
      put: (kv) => {
        if (generation === this.generation) this.handlers.put(kv);
      },
      delete: (kv) => {
        if (generation === this.generation) this.handlers.delete(kv);
      },
      error: (error) => this.logger.warn({ err: error, view: this.name }, 'watch error'),
      interrupted: (error) => {
        if (generation !== this.generation) return;
        this.logger.warn({ err: error, view: this.name }, 'watch interrupted');
        this.resync('watch interrupted');
      },
    });
    if (generation !== this.generation) {
      void watcher.cancel().catch(() => undefined);
      return;
    }
    this.watcher = watcher;
    this.revisionValue = current.revision;
    this.freshValue = true;
    this.emit('fresh', current.revision);
  }

  /** For tests: resolves when the resync in progress (if any) ends. */
  settled(): Promise<void> {
    return this.syncing ?? Promise.resolve();
  }
}
