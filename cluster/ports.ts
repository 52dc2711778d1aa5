import { ServiceError, SystemClock, type Clock, type Store, type TimerHandle } from '../runtime/index.js';
import type { ReplicateMessage, ReplicateReply } from './transport/frames.js';

/**
 * What cluster/ needs from the world, as interfaces (as runtime/ takes its
 * Clock and Store): time and timers, the coordination service (etcd), the
 * peer transport (gRPC) and the node's local store. Production passes the
 * real ones (SystemClusterClock, EtcdCoordination in etcd-coordination.ts,
 * GrpcTransport in transport/grpc-transport.ts, LmdbStore); the seeded
 * simulation (test/cluster/simulation/) passes a scheduler-driven clock, a
 * fake etcd and a lossy network, and runs the same cluster code.
 *
 * Nothing in cluster/ outside the real implementations calls setTimeout,
 * setInterval, Date.now() or performance.now().
 */

// ---- time ----

export type { Clock, TimerHandle };

export interface ClusterClock extends Clock {
  /** Milliseconds on a clock that never goes backwards (lease deadlines, election waits, retry deadlines). */
  monotonicNow(): number;
}

/**
 * The system's clock. Timers are plain (monotonic) setTimeout, unref'd: a
 * step of the wall clock does not delay them (runtime's SystemClock re-checks
 * the wall clock, which suits alarms due at a wall time, not cluster timers),
 * and they never keep a process alive on their own.
 */
export class SystemClusterClock extends SystemClock implements ClusterClock {
  monotonicNow(): number {
    return performance.now();
  }

  override setTimer(delay_ms: number, callback: () => void): TimerHandle {
    const handle = setTimeout(callback, Math.min(Math.max(0, delay_ms), 2_147_000_000));
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  }
}

/** Calls `callback` every `interval_ms` until cancelled (a timer re-armed after each call). */
export function every(clock: Clock, interval_ms: number, callback: () => void): TimerHandle {
  let cancelled = false;
  let current: TimerHandle;
  const arm = () => {
    current = clock.setTimer(interval_ms, () => {
      if (cancelled) return;
      arm();
      callback();
    });
  };
  arm();
  return {
    cancel() {
      cancelled = true;
      current.cancel();
    },
  };
}

/** Resolves after `delay_ms` on `clock`. */
export function sleep(clock: Clock, delay_ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimer(delay_ms, resolve));
}

// ---- coordination (etcd) ----

export interface CoordinationKeyValue {
  key: string;
  value: string;
  create_revision: number;
  mod_revision: number;
}

export interface CoordinationCompare {
  key: string;
  target: 'create' | 'mod';
  equals: number;
}

export type CoordinationOp = { type: 'put'; key: string; value: string; lease?: string } | { type: 'delete'; key: string };

export interface CoordinationWatchHandlers {
  put(kv: CoordinationKeyValue): void;
  delete(kv: CoordinationKeyValue): void;
  error(error: unknown): void;
  /**
   * The watch broke (its stream to etcd failed) and has been cancelled: no
   * more events come. Given, the caller re-reads and watches again (see
   * SyncedPrefix); absent, the client resumes the watch on its own.
   */
  interrupted?(error: unknown): void;
}

export interface CoordinationWatch {
  cancel(): Promise<void>;
}

/** What a lease reports while it is kept alive (etcd3's Lease events). */
export interface LeaseEvents {
  /** A keep-alive request was sent. */
  fired(): void;
  /** The oldest keep-alive not yet answered was answered: the lease was renewed. */
  succeeded(): void;
  /** The keep-alive stream failed (requests sent on it will not be answered). */
  failed(): void;
  /** A keep-alive stream was (re)opened. */
  established(): void;
  /** The lease is gone (expired or revoked). */
  lost(error: unknown): void;
}

export interface CoordinationLease {
  /** Creates the lease and starts keeping it alive; resolves with its id. */
  grant(): Promise<string>;
  revoke(): Promise<void>;
  /** Stops keeping it alive (and any retry of grant). */
  release(): void;
}

/** The etcd operations membership, leadership and the node use: a linearizable KV with revisions, leases and watches. */
export interface Coordination {
  /** Every key under `prefix`, and the store revision they were read at. */
  range(prefix: string): Promise<{ kvs: CoordinationKeyValue[]; revision: number }>;
  get(key: string): Promise<string | undefined>;
  put(key: string, value: string, lease?: string): Promise<void>;
  delete(key: string): Promise<void>;
  /** Applies `ops` atomically if every compare holds; `revision` is the store revision after it. */
  txn(compares: CoordinationCompare[], ops: CoordinationOp[]): Promise<{ succeeded: boolean; revision: number }>;
  /** Watches a prefix (or one key), from `fromRevision` if given, else from now. */
  watch(target: { prefix: string } | { key: string }, fromRevision: number | undefined, handlers: CoordinationWatchHandlers): Promise<CoordinationWatch>;
  lease(ttlSeconds: number, events: LeaseEvents): CoordinationLease;
  close(): void;
}

// ---- transport (peers) ----

/**
 * A peer could not be reached. `unsent`: the message surely never reached
 * it (the stream never came up), so it is safe to retry elsewhere.
 */
export class PeerUnreachable extends ServiceError {
  readonly unsent: boolean;
  constructor(unsent: boolean) {
    super('partition_unavailable', unsent ? 'The partition leader could not be reached.' : 'The connection to the partition leader broke; the outcome is unknown.', {
      retryAfterSeconds: 1,
    });
    this.unsent = unsent;
  }
}

export interface ReplicateStream {
  send(message: ReplicateMessage): void;
  /** Sends what is buffered now (before a wait on acknowledgements). */
  flush(): void;
  readonly closed: boolean;
}

/** The connection to one peer node. */
export interface PeerLink {
  /**
   * Sends an actor message to the peer; resolves with the reply of its turn (rejects with PeerUnreachable if the link fails).
   * With `recover`, a failure is handed to it instead and the promise settles as it does (its value, the promise it
   * returns, or what it throws): the router's retry without a second promise per message.
   */
  forward(kind: string, key: string, message: unknown, messageId?: string, recover?: (error: unknown) => unknown): Promise<unknown>;
  /** The replication stream to the peer (opened on first use, reopened after it closed); `onClose` fires once when it breaks. */
  replicate(onReply: (reply: ReplicateReply) => void, onClose: () => void): ReplicateStream;
}

/** What a node serves to its peers. */
export interface TransportHandlers {
  /**
   * Runs a forwarded actor message on this node (which must lead its
   * partition) and hands its reply to `resolve`, or its failure to `reject`:
   * one of them, once (callbacks, not a promise: no promise per forwarded
   * message on the receiving node).
   */
  forward(kind: string, key: string, message: unknown, messageId: string | undefined, resolve: (reply: unknown) => void, reject: (error: unknown) => void): void;
  /** Applies one frame of replication messages from leader `from`, in order, and returns the replies. */
  replicate(from: string, messages: ReplicateMessage[]): Promise<ReplicateReply[]>;
}

export interface Transport {
  /** Serves `handlers` to peers; resolves with the port bound. */
  listen(host: string, port: number, handlers: TransportHandlers): Promise<number>;
  /** The link to peer `nodeId` at `address` (one per peer, replaced if its address changes). */
  peer(nodeId: string, address: string): PeerLink;
  /**
   * Drops the link to `nodeId` (its channel and streams): the peer restarted
   * or left. Forwards it never received fail as unsent (retried elsewhere);
   * the next peer() opens a new channel, with no reconnect backoff left over.
   */
  forget(nodeId: string): void;
  /** Stops serving and closes every link. */
  close(): Promise<void>;
}

// ---- everything a node takes ----

export interface ClusterPorts {
  clock: ClusterClock;
  coordination: Coordination;
  transport: Transport;
  /** The node's own durable store (LMDB in production). */
  store: Store;
}
