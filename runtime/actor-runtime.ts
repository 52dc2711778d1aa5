import { EventEmitter } from 'node:events';
import type { ActorClient } from './actor-client.js';
import type { ActorDefinition } from './actor.js';
import { ActivationTable, isQuiet, type Envelope } from './activation.js';
import { AlarmWindow } from './alarm-window.js';
import { assert } from './assert.js';
import type { Clock, TimerHandle } from './clock.js';
import { expiredDedupRecords } from './dedup-sweep.js';
import { nextRequestSeq } from './deferred-replies.js';
import { ServiceError } from './errors.js';
import { HousekeepingCommits } from './housekeeping.js';
import { limits as defaultLimits, type Limits } from './limits.js';
import { silentLogger, type RuntimeLogger, type RuntimeObserver } from './observer.js';
import { Outbox, type RemoteDelivery } from './outbox.js';
import { PartitionTable } from './partition-table.js';
import { partitionOf } from './partitioning.js';
import { PARTITION_READS_KIND, partitionOfReadsKey, readPartition, type PartitionRead } from './partition-reads.js';
import { ActivationLimit, passivateIdle } from './passivation.js';
import type { Store } from './store.js';
import { TurnLoop } from './turn-loop.js';

/**
 * The runtime's public face: wires the parts together and keeps the
 * lifecycle (start, partition open/close, stop). Each concern lives in its
 * own file: the actors in memory (activation.ts), the partitions served
 * (partition-table.ts), running and committing turns (turn-loop.ts,
 * batch.ts), deferred replies (deferred-replies.ts), durable alarms
 * (alarm-window.ts), outbox delivery (outbox.ts), passivation
 * (passivation.ts), the dedup sweep (dedup-sweep.ts).
 */

export type { PublishedEvent } from './turn-loop.js';
export type { RemoteDelivery } from './outbox.js';

export interface ActorRuntimeOptions {
  store: Store;
  clock: Clock;
  partitionCount?: number;
  limits?: Partial<Limits>;
  logger?: RuntimeLogger;
  observer?: RuntimeObserver;
  /**
   * `all` (default, one node): every partition is served from start().
   * `none` (cluster): none is, until the leadership layer calls openPartition(p).
   */
  initialPartitions?: 'all' | 'none';
  remoteDelivery?: RemoteDelivery;
  /**
   * Cluster: may turns of partition p run now? Checked before each batch: a
   * node that lost p's leadership must not run messages still queued there
   * (after a failed commit the actor is reloaded from a local store that may
   * hold an unreplicated write). Refused messages fail with not_leader,
   * which is safe to retry: they did not run.
   */
  partitionGate?: (p: number) => boolean;
}

/**
 * Runs virtual actors: addressed by kind + key, activated on first message
 * with their state read from the store, one turn at a time, passivated when
 * idle. Each batch of turns commits once; replies, alarms, outbox deliveries
 * and events leave only after that commit (the output gate).
 */
export class ActorRuntime implements ActorClient {
  readonly partitionCount: number;
  readonly limits: Limits;
  /** Emits 'event' with a PublishedEvent after the turn that produced it committed. */
  readonly events = new EventEmitter();
  private readonly store: Store;
  private readonly clock: Clock;
  private readonly observer?: RuntimeObserver;
  private readonly definitions = new Map<string, ActorDefinition>();
  private readonly partitions: PartitionTable;
  private readonly activations: ActivationTable;
  private readonly housekeeping: HousekeepingCommits;
  private readonly alarms: AlarmWindow;
  private readonly outbox: Outbox;
  private readonly turns: TurnLoop;
  private readonly initialPartitions: 'all' | 'none';
  private sweepTimer?: TimerHandle;
  private readonly activationLimit: ActivationLimit;
  private trimScheduled = false;
  private state: 'created' | 'running' | 'stopping' | 'stopped' = 'created';

  constructor(options: ActorRuntimeOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.partitionCount = options.partitionCount ?? defaultLimits.partitions_default;
    this.limits = { ...defaultLimits, ...options.limits };
    this.events.setMaxListeners(0);
    this.initialPartitions = options.initialPartitions ?? 'all';
    const { store, clock, limits } = this;
    const logger = options.logger ?? silentLogger;
    this.observer = options.observer;
    const observer = this.observer;
    const isRunning = () => this.state === 'running';
    this.partitions = new PartitionTable(this.partitionCount);
    this.activations = new ActivationTable(store, clock, this.definitions, observer);
    this.activationLimit = new ActivationLimit(this.activations, limits);
    this.housekeeping = new HousekeepingCommits(store, logger);
    this.alarms = new AlarmWindow({
      store,
      clock,
      limits,
      partitions: this.partitions,
      isRunning,
      deliver: (kind, key, message) => this.tell(kind, key, message),
    });
    this.outbox = new Outbox({
      store,
      clock,
      limits,
      logger,
      partitions: this.partitions,
      housekeeping: this.housekeeping,
      isRunning,
      enqueue: (kind, key, envelope) => this.enqueue(kind, key, envelope),
      remoteDelivery: options.remoteDelivery,
    });
    this.turns = new TurnLoop({
      store,
      clock,
      limits,
      logger,
      observer,
      activations: this.activations,
      alarms: this.alarms,
      outbox: this.outbox,
      events: this.events,
      partitionGate: options.partitionGate,
    });
  }

  register(definition: ActorDefinition): this {
    assert(!this.definitions.has(definition.kind), `actor kind ${definition.kind} registered twice`);
    this.definitions.set(definition.kind, definition);
    return this;
  }

  /** Re-arms durable alarms and re-delivers the outbox, then accepts messages. */
  async start(): Promise<void> {
    assert(this.state === 'created', 'runtime started twice');
    if (this.initialPartitions === 'all') this.partitions.ownAll();
    this.alarms.start();
    this.state = 'running';
    for (let p = 0; p < this.partitionCount; p++) if (this.partitions.owns(p)) this.outbox.redeliver(p);
    this.alarms.arm();
    this.scheduleSweep();
  }

  /** True while this runtime serves partition p. */
  ownsPartition(p: number): boolean {
    return this.partitions.owns(p);
  }

  /**
   * Starts serving partition p from what the store holds for it (in a
   * cluster: after this node became its leader): re-arms its alarms and
   * re-delivers its outbox.
   */
  openPartition(p: number): void {
    assert(this.state === 'running', 'openPartition on a runtime that is not running');
    if (!this.partitions.open(p)) return;
    this.alarms.openPartition(p);
    this.outbox.redeliver(p);
    this.alarms.arm();
  }

  /**
   * Stops serving partition p: new messages for it are refused with
   * not_leader at once; messages already accepted run to the end of their
   * turns and commits; then its actors leave memory. Resolves when nothing of
   * p is running any more (handoff waits for this before releasing p).
   */
  async closePartition(p: number): Promise<void> {
    if (!this.partitions.close(p)) return;
    while (this.hasBusyActivation(p)) await this.turns.nextBatchFinished();
    // Still closed? (It may have been reopened while we waited.)
    if (this.partitions.owns(p)) return;
    this.activations.dropWhere((activation) => activation.partition === p);
    this.alarms.closePartition(p);
  }

  private hasBusyActivation(p: number): boolean {
    for (const activation of this.activations.all()) if (activation.partition === p && !isQuiet(activation)) return true;
    return false;
  }

  /** Sends a message and waits for the reply, released after its turn committed. */
  ask<Reply = unknown>(kind: string, key: string, message: unknown): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => this.askWith(kind, key, message, resolve as (reply: unknown) => void, reject));
  }

  /**
   * `ask` with its outcome handed to `resolve` or `reject` (exactly one of
   * them, once) instead of a promise: the cluster's forward path answers a
   * peer's message with no promise of its own (a promise, its executor and
   * its reaction per message were a measurable part of a forwarded message's
   * cost on the receiving node).
   */
  askWith(kind: string, key: string, message: unknown, resolve: (reply: unknown) => void, reject: (error: unknown) => void): void {
    if (kind === PARTITION_READS_KIND) {
      this.readPartition(key, message as PartitionRead).then(resolve, reject);
      return;
    }
    try {
      this.enqueue(kind, key, { message, resolve, reject, requestSeq: nextRequestSeq() });
    } catch (error) {
      reject(error);
    }
  }

  /**
   * Delivers an outbox message from another node: resolves once the turn
   * committed; a repeat of the same messageId is acknowledged without a turn.
   */
  deliver(kind: string, key: string, message: unknown, messageId: string): Promise<void> {
    return new Promise<void>((resolve, reject) => this.deliverWith(kind, key, message, messageId, () => resolve(), reject));
  }

  /** `deliver` with its outcome handed to `resolve` (with nothing: the turn's reply is not for the sender) or `reject`, as askWith. */
  deliverWith(kind: string, key: string, message: unknown, messageId: string, resolve: (reply: undefined) => void, reject: (error: unknown) => void): void {
    try {
      this.enqueue(kind, key, { message, messageId, resolve: () => resolve(undefined), reject });
    } catch (error) {
      reject(error);
    }
  }

  /** Sends a message without waiting. Throws if the actor's mailbox is full. */
  tell(kind: string, key: string, message: unknown): void {
    this.enqueue(kind, key, { message });
  }

  /** A partition read (partition-reads.ts): answered from the store, if this runtime serves the partition. */
  private readPartition(key: string, read: PartitionRead): Promise<unknown> {
    try {
      if (this.state !== 'running') throw new ServiceError('shutting_down', 'The node is not accepting requests.', { retryAfterSeconds: 1 });
      const p = partitionOfReadsKey(key, this.partitionCount);
      if (p === undefined) throw new ServiceError('BAD_REQUEST', `No partition ${key}.`);
      if (!this.partitions.owns(p)) throw new ServiceError('not_leader', 'This node does not serve that partition now.', { retryAfterSeconds: 1 });
      return Promise.resolve(readPartition(this.store, p, read));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Number of actors currently in memory. */
  activeActorCount(): number {
    return this.activations.count();
  }

  /** Messages waiting in the mailboxes of the actors in memory, not yet taken into a turn (the mailbox depth metric). */
  queuedMessageCount(): number {
    let queued = 0;
    for (const activation of this.activations.all()) queued += activation.mailbox.length;
    return queued;
  }

  /** Durable alarms stored, whether or not their actor or their time window is in memory. */
  pendingAlarmCount(): number {
    return this.alarms.pendingCount;
  }

  /** Alarm entries held in memory: those due within the window (plus stale ones not yet popped). */
  alarmsInMemory(): number {
    return this.alarms.inMemoryCount;
  }

  /** Passivates every idle actor now (tests and benchmarks). */
  passivateIdle(idle_ms = this.limits.passivate_idle_ms): number {
    return passivateIdle(this.activations, this.clock.now(), idle_ms);
  }

  /** Stops accepting messages, finishes every queued turn and commit, closes the store. */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.state = 'stopping';
    this.alarms.stop();
    this.sweepTimer?.cancel();
    this.outbox.stop();
    await this.turns.whenIdle();
    // No turn runs any more, so no deferred ask can be answered.
    this.activations.interruptDeferredAsks();
    await this.housekeeping.settled();
    this.state = 'stopped';
    await this.store.close();
  }

  private enqueue(kind: string, key: string, envelope: Envelope): void {
    if (this.state !== 'running') {
      throw new ServiceError('shutting_down', 'The node is not accepting requests.', { retryAfterSeconds: 1 });
    }
    const existing = this.activations.get(kind, key);
    const partition = existing ? existing.partition : partitionOf(kind, key, this.partitionCount);
    if (!this.partitions.owns(partition)) {
      // Refused before anything ran: the sender may safely retry at the partition's leader.
      throw new ServiceError('not_leader', 'This node does not serve that partition now.', { retryAfterSeconds: 1 });
    }
    let activation = existing;
    if (!activation) {
      activation = this.activations.activate(kind, key, partition);
      if (this.activationLimit.exceeded()) this.scheduleTrim();
    } else if (activation.probation) {
      this.activations.touched(activation);
    }
    if (activation.mailbox.length >= this.limits.mailbox_messages_max) {
      this.observer?.overloaded(kind);
      throw new ServiceError('actor_overloaded', `Too many queued requests for this ${kind}.`, { retryAfterSeconds: 1 });
    }
    activation.mailbox.push(envelope);
    this.turns.schedule(activation);
  }

  /**
   * Over the activation limit (passivation.ts, ActivationLimit): passivates
   * quiet actors early, after the current event-loop turn, not inside the
   * enqueue of the activation that crossed the limit.
   */
  private scheduleTrim(): void {
    if (this.trimScheduled) return;
    this.trimScheduled = true;
    setImmediate(() => {
      this.trimScheduled = false;
      if (this.state === 'running') this.activationLimit.trim(this.clock.now());
    });
  }

  /** Every passivate_sweep_interval_ms: idle actors leave memory, expired dedup records leave the store. */
  private scheduleSweep(): void {
    if (this.state !== 'running') return;
    this.sweepTimer = this.clock.setTimer(this.limits.passivate_sweep_interval_ms, () => {
      this.passivateIdle();
      this.activationLimit.swept();
      const expired = expiredDedupRecords(this.store, this.partitions, this.clock.now(), this.limits);
      if (expired.length > 0) this.housekeeping.commit(expired, 'dedup sweep failed');
      this.scheduleSweep();
    });
  }
}
