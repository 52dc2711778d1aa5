import { EventEmitter } from 'node:events';
import type { ActorClient } from './actor-client.js';
import { isAlarm, type ActorDefinition, type ActorEvent, type AlarmChange, type ActorSend, type TurnContext } from './actor.js';
import { AlarmQueue } from './alarm-queue.js';
import { assert } from './assert.js';
import type { Clock, TimerHandle } from './clock.js';
import { isServiceError, ServiceError } from './errors.js';
import { randomId } from './ids.js';
import { limits as defaultLimits, type Limits } from './limits.js';
import { Mailbox } from './mailbox.js';
import { silentLogger, type RuntimeLogger, type RuntimeObserver } from './observer.js';
import { partitionOf } from './partitioning.js';
import { keys } from './storage-keys.js';
import type { Store, WriteOp } from './store.js';

interface Envelope {
  message: unknown;
  resolve?: (reply: unknown) => void;
  reject?: (error: unknown) => void;
  /** Set on outbox deliveries: the receiver de-duplicates on it. */
  messageId?: string;
}

interface Activation {
  readonly partition: number;
  readonly kind: string;
  readonly key: string;
  readonly definition: ActorDefinition;
  state: unknown;
  readonly mailbox: Mailbox<Envelope>;
  /** A batch is running or waiting for its commit. */
  running: boolean;
  /** A batch is queued to run. */
  scheduled: boolean;
  lastActiveMs: number;
}

interface Outcome {
  envelope: Envelope;
  ok: boolean;
  value: unknown;
}

/** An event published on `runtime.events` ('event') after its turn committed. */
export interface PublishedEvent extends ActorEvent {
  kind: string;
  key: string;
  at_ms: number;
}

/**
 * Delivers an outbox message to an actor whose partition this runtime does
 * not own (in a cluster: forwarded to the partition's leader). Resolves once
 * the receiver's turn committed; the receiver de-duplicates on messageId.
 */
export type RemoteDelivery = (kind: string, key: string, message: unknown, messageId: string) => Promise<void>;

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
  private readonly logger: RuntimeLogger;
  private readonly observer?: RuntimeObserver;
  private readonly definitions = new Map<string, ActorDefinition>();
  /**
   * Actors in memory: kind -> key -> activation. Two levels, so a message
   * costs two map lookups on strings V8 has already hashed, with no key
   * concatenation; the partition is computed once, at activation.
   */
  private readonly activations = new Map<string, Map<string, Activation>>();
  /** Durable alarms stored (all of them, not only the window in memory). */
  private alarmCount = 0;
  /** Alarms due before this time are in alarmQueue; later ones only in the store. */
  private alarmWindowEndMs = 0;
  private alarmWindowTimer?: TimerHandle;
  private readonly alarmQueue = new AlarmQueue();
  private alarmTimer?: TimerHandle;
  private alarmTimerFireMs = Infinity;
  private sweepTimer?: TimerHandle;
  private readonly retryTimers = new Set<TimerHandle>();
  private state: 'created' | 'running' | 'stopping' | 'stopped' = 'created';
  private runningBatches = 0;
  private idleWaiters: (() => void)[] = [];
  /** Commits made outside turns (outbox acknowledgements, sweeps); stop() waits for them. */
  private readonly housekeeping = new Set<Promise<void>>();
  /** owned[p] === 1 while this runtime serves partition p (all of them on one node). */
  private readonly owned: Uint8Array;
  private readonly initialPartitions: 'all' | 'none';
  private readonly remoteDelivery?: RemoteDelivery;
  private readonly partitionGate?: (p: number) => boolean;
  /** Called whenever a batch finishes: closePartition() waits on it for the partition to go quiet. */
  private batchWaiters: (() => void)[] = [];

  constructor(options: ActorRuntimeOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.partitionCount = options.partitionCount ?? defaultLimits.partitions_default;
    this.limits = { ...defaultLimits, ...options.limits };
    this.logger = options.logger ?? silentLogger;
    this.observer = options.observer;
    this.events.setMaxListeners(0);
    this.owned = new Uint8Array(this.partitionCount);
    this.initialPartitions = options.initialPartitions ?? 'all';
    this.remoteDelivery = options.remoteDelivery;
    this.partitionGate = options.partitionGate;
  }

  register(definition: ActorDefinition): this {
    assert(!this.definitions.has(definition.kind), `actor kind ${definition.kind} registered twice`);
    this.definitions.set(definition.kind, definition);
    return this;
  }

  /** Re-arms durable alarms and re-delivers the outbox, then accepts messages. */
  async start(): Promise<void> {
    assert(this.state === 'created', 'runtime started twice');
    if (this.initialPartitions === 'all') this.owned.fill(1);
    for (let p = 0; p < this.partitionCount; p++) if (this.owned[p]) this.alarmCount += this.countAlarms(p);
    this.loadAlarmWindow(0);
    this.state = 'running';
    for (let p = 0; p < this.partitionCount; p++) if (this.owned[p]) this.redeliverOutbox(p);
    this.armAlarmTimer();
    this.scheduleSweep();
  }

  /** True while this runtime serves partition p. */
  ownsPartition(p: number): boolean {
    return this.owned[p] === 1;
  }

  /**
   * Starts serving partition p from what the store holds for it (in a
   * cluster: after this node became its leader): re-arms its alarms and
   * re-delivers its outbox.
   */
  openPartition(p: number): void {
    assert(this.state === 'running', 'openPartition on a runtime that is not running');
    if (this.owned[p]) return;
    this.owned[p] = 1;
    this.alarmCount += this.countAlarms(p);
    const [start, end] = keys.alarmDueRange(p, 0, this.alarmWindowEndMs);
    for (const { key } of this.store.range(start, end)) {
      const [, , due_ms, kind, actorKey, name] = key as [string, number, number, string, string, string];
      this.alarmQueue.push({ fire_ms: due_ms, due_ms, partition: p, kind, key: actorKey, name });
    }
    this.redeliverOutbox(p);
    this.armAlarmTimer();
  }

  /**
   * Stops serving partition p: new messages for it are refused with
   * not_leader at once; messages already accepted run to the end of their
   * turns and commits; then its actors leave memory. Resolves when nothing of
   * p is running any more (handoff waits for this before releasing p).
   */
  async closePartition(p: number): Promise<void> {
    if (!this.owned[p]) return;
    this.owned[p] = 0;
    for (;;) {
      let busy = false;
      for (const byKey of this.activations.values()) {
        for (const activation of byKey.values()) {
          if (activation.partition === p && (activation.running || activation.scheduled || activation.mailbox.length > 0)) busy = true;
        }
      }
      if (!busy) break;
      await new Promise<void>((resolve) => this.batchWaiters.push(resolve));
    }
    // Still closed? (It may have been reopened while we waited.)
    if (this.owned[p]) return;
    for (const byKey of this.activations.values()) {
      for (const [key, activation] of byKey) {
        if (activation.partition !== p) continue;
        byKey.delete(key);
        this.observer?.passivated(activation.kind);
      }
    }
    this.alarmCount -= this.countAlarms(p);
  }

  private countAlarms(p: number): number {
    let count = 0;
    const [alarmStart, alarmEnd] = keys.alarmRange(p);
    for (const _ of this.store.range(alarmStart, alarmEnd)) count++;
    return count;
  }

  private redeliverOutbox(p: number): void {
    const [outboxStart, outboxEnd] = keys.outboxRange(p);
    for (const { key, value } of this.store.range(outboxStart, outboxEnd)) {
      this.deliverOutbox(p, key[2] as string, value as ActorSend);
    }
  }

  /** Sends a message and waits for the reply, released after its turn committed. */
  ask<Reply = unknown>(kind: string, key: string, message: unknown): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      this.enqueue(kind, key, { message, resolve: resolve as (reply: unknown) => void, reject });
    });
  }

  /**
   * Delivers an outbox message from another node: resolves once the turn
   * committed; a repeat of the same messageId is acknowledged without a turn.
   */
  deliver(kind: string, key: string, message: unknown, messageId: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.enqueue(kind, key, { message, messageId, resolve: () => resolve(), reject });
    });
  }

  /** Sends a message without waiting. Throws if the actor's mailbox is full. */
  tell(kind: string, key: string, message: unknown): void {
    this.enqueue(kind, key, { message });
  }

  /** Number of actors currently in memory. */
  activeActorCount(): number {
    let count = 0;
    for (const byKey of this.activations.values()) count += byKey.size;
    return count;
  }

  /** Durable alarms stored, whether or not their actor or their time window is in memory. */
  pendingAlarmCount(): number {
    return this.alarmCount;
  }

  /** Alarm entries held in memory: those due within the window (plus stale ones not yet popped). */
  alarmsInMemory(): number {
    return this.alarmQueue.size;
  }

  /** Passivates every idle actor now (tests and benchmarks). */
  passivateIdle(idle_ms = this.limits.passivate_idle_ms): number {
    const now = this.clock.now();
    let count = 0;
    for (const byKey of this.activations.values()) {
      for (const [key, activation] of byKey) {
        if (activation.running || activation.scheduled || activation.mailbox.length > 0) continue;
        if (now - activation.lastActiveMs < idle_ms) continue;
        byKey.delete(key);
        this.observer?.passivated(activation.kind);
        count++;
      }
    }
    return count;
  }

  /** Stops accepting messages, finishes every queued turn and commit, closes the store. */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.state = 'stopping';
    this.alarmTimer?.cancel();
    this.alarmWindowTimer?.cancel();
    this.sweepTimer?.cancel();
    for (const timer of this.retryTimers) timer.cancel();
    this.retryTimers.clear();
    await this.whenIdle();
    await Promise.all([...this.housekeeping]);
    this.state = 'stopped';
    await this.store.close();
  }

  private whenIdle(): Promise<void> {
    if (this.runningBatches === 0 && !this.hasQueuedMessages()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private hasQueuedMessages(): boolean {
    for (const byKey of this.activations.values()) {
      for (const activation of byKey.values()) if (activation.mailbox.length > 0) return true;
    }
    return false;
  }

  private enqueue(kind: string, key: string, envelope: Envelope): void {
    if (this.state !== 'running') {
      throw new ServiceError('shutting_down', 'The node is not accepting requests.', { retryAfterSeconds: 1 });
    }
    const existing = this.activations.get(kind)?.get(key);
    const partition = existing ? existing.partition : partitionOf(kind, key, this.partitionCount);
    if (this.owned[partition] !== 1) {
      // Refused before anything ran: the sender may safely retry at the partition's leader.
      throw new ServiceError('not_leader', 'This node does not serve that partition now.', { retryAfterSeconds: 1 });
    }
    const activation = existing ?? this.activate(kind, key);
    if (activation.mailbox.length >= this.limits.mailbox_messages_max) {
      this.observer?.overloaded(kind);
      throw new ServiceError('actor_overloaded', `Too many queued requests for this ${kind}.`, { retryAfterSeconds: 1 });
    }
    activation.mailbox.push(envelope);
    if (!activation.running && !activation.scheduled) {
      activation.scheduled = true;
      queueMicrotask(() => this.runBatch(activation));
    }
  }

  private activate(kind: string, key: string): Activation {
    let byKey = this.activations.get(kind);
    const existing = byKey?.get(key);
    if (existing) return existing;
    const definition = this.definitions.get(kind);
    assert(definition, `unknown actor kind ${kind}`);
    if (!byKey) {
      byKey = new Map();
      this.activations.set(kind, byKey);
    }
    const partition = partitionOf(kind, key, this.partitionCount);
    const activation: Activation = {
      partition,
      kind,
      key,
      definition,
      state: this.loadState(definition, partition, key),
      mailbox: new Mailbox(),
      running: false,
      scheduled: false,
      lastActiveMs: this.clock.now(),
    };
    byKey.set(key, activation);
    this.observer?.activated(kind);
    return activation;
  }

  private loadState(definition: ActorDefinition, partition: number, key: string): unknown {
    if (definition.storage === 'snapshot') {
      const stored = this.store.get(keys.snapshot(partition, definition.kind, key));
      return stored === undefined ? definition.initial(key) : stored;
    }
    const [start, end] = keys.recordRange(partition, definition.kind, key);
    const store = this.store;
    function* records(): Iterable<[string, unknown]> {
      for (const entry of store.range(start, end)) yield [entry.key[4] as string, entry.value];
    }
    return definition.load(key, records());
  }

  /** Runs up to turn_batch_messages_max turns, then commits them as one. */
  private runBatch(activation: Activation): void {
    activation.scheduled = false;
    activation.running = true;
    this.runningBatches++;
    const { definition, partition, kind, key } = activation;
    const started_ms = performance.now();
    const batch = activation.mailbox.take(this.limits.turn_batch_messages_max);
    if (this.partitionGate && !this.partitionGate(partition)) {
      const refusal = new ServiceError('not_leader', 'This node no longer serves that partition.', { retryAfterSeconds: 1 });
      this.finishBatch(activation, batch.map((envelope) => ({ envelope, ok: false, value: refusal })), [], [], [], false);
      return;
    }
    const ops: WriteOp[] = [];
    const outcomes: Outcome[] = [];
    const alarmChanges: AppliedAlarmChange[] = [];
    const sends: { id: string; send: ActorSend }[] = [];
    const events: ActorEvent[] = [];
    let pendingAlarms: Map<string, number | null> | undefined;
    let seenMessageIds: Set<string> | undefined;
    let snapshotChanged = false;
    /** What the snapshot record becomes: null deletes it. */
    let snapshotValue: unknown = null;
    let poisoned = false;
    const context: { now: number; kind: string; key: string; newId: (prefix?: string) => string } = {
      now: 0,
      kind,
      key,
      newId: randomId,
    };

    // One time for the whole batch: its turns run back to back within
    // microseconds, and reading the clock per message cost a fifth of a tell.
    context.now = this.clock.now();
    for (let i = 0; i < batch.length; i++) {
      const envelope = batch[i];
      const message = envelope.message;

      if (envelope.messageId !== undefined) {
        seenMessageIds ??= new Set();
        if (seenMessageIds.has(envelope.messageId) || this.store.get(keys.dedup(partition, kind, key, envelope.messageId)) !== undefined) {
          outcomes.push({ envelope, ok: true, value: undefined });
          continue;
        }
      }

      let clearsAlarm = false;
      if (isAlarm(message)) {
        const current = pendingAlarms?.has(message.name)
          ? pendingAlarms.get(message.name)
          : this.store.get(keys.alarm(partition, kind, key, message.name));
        if (current !== message.due_ms) {
          // Replaced or cancelled after it fired: a stale wake-up, not a turn.
          outcomes.push({ envelope, ok: true, value: undefined });
          continue;
        }
        clearsAlarm = true;
      }

      let result;
      try {
        result = definition.step(activation.state, message, context as TurnContext);
      } catch (error) {
        if (isServiceError(error)) {
          if (clearsAlarm) this.recordAlarmChange(ops, alarmChanges, (pendingAlarms ??= new Map()), activation, { name: (message as { name: string }).name, due_ms: null });
          outcomes.push({ envelope, ok: false, value: error });
          continue;
        }
        // A defect: answer this message with a 500, stop the batch here, and
        // reload the actor from storage after the commit of the turns before it.
        this.logger.error({ err: error, kind, key }, 'actor turn threw');
        outcomes.push({ envelope, ok: false, value: new ServiceError('internal_error') });
        activation.mailbox.unshiftAll(batch.slice(i + 1));
        poisoned = true;
        break;
      }

      if (clearsAlarm) {
        this.recordAlarmChange(ops, alarmChanges, (pendingAlarms ??= new Map()), activation, { name: (message as { name: string }).name, due_ms: null });
      }
      if (definition.storage === 'snapshot') {
        if (result.state !== activation.state) {
          snapshotChanged = true;
          snapshotValue = result.state ?? null;
          activation.state = result.state ?? definition.initial(key);
        }
      } else {
        activation.state = result.state;
        if (result.writes) {
          for (const write of result.writes) {
            const storeKey = keys.record(partition, kind, key, write.subkey);
            ops.push(write.value === undefined ? { type: 'del', key: storeKey } : { type: 'put', key: storeKey, value: write.value });
          }
        }
      }
      if (result.alarms) {
        pendingAlarms ??= new Map();
        for (const change of result.alarms) this.recordAlarmChange(ops, alarmChanges, pendingAlarms, activation, change);
      }
      if (result.sends) {
        for (const send of result.sends) {
          const id = randomId();
          ops.push({ type: 'put', key: keys.outbox(partition, id), value: send });
          sends.push({ id, send });
        }
      }
      if (result.events) for (const event of result.events) events.push(event);
      if (envelope.messageId !== undefined) {
        seenMessageIds!.add(envelope.messageId);
        ops.push({ type: 'put', key: keys.dedup(partition, kind, key, envelope.messageId), value: context.now });
        ops.push({ type: 'put', key: keys.dedupByTime(partition, context.now, envelope.messageId), value: [kind, key] });
      }
      // A successful tell has nobody to answer: no outcome to carry.
      if (envelope.resolve) outcomes.push({ envelope, ok: true, value: result.reply });
    }

    if (snapshotChanged) {
      const snapshotKey = keys.snapshot(partition, kind, key);
      ops.push(snapshotValue === null ? { type: 'del', key: snapshotKey } : { type: 'put', key: snapshotKey, value: snapshotValue });
    }
    const turn_ms = performance.now() - started_ms;
    this.observer?.batch(kind, batch.length, turn_ms);

    if (ops.length === 0) {
      this.finishBatch(activation, outcomes, alarmChanges, sends, events, poisoned);
      return;
    }
    const commitStarted_ms = performance.now();
    this.store.commit(ops).then(
      () => {
        this.observer?.commit(ops.length, performance.now() - commitStarted_ms);
        this.finishBatch(activation, outcomes, alarmChanges, sends, events, poisoned);
      },
      (error: unknown) => {
        // The batch did not happen (or, in a cluster, may not have): fail every
        // message in it and reload the actor from what is durable. A store
        // that says why (cluster: not_leader before anything was written,
        // partition_unavailable when the outcome is unknown) is passed on, so
        // the edge can retry the first safely.
        const failure = isServiceError(error) ? error : new ServiceError('internal_error', 'The change could not be stored.');
        if (!isServiceError(error)) this.logger.error({ err: error, kind, key, ops: ops.length }, 'commit failed');
        else this.logger.warn({ code: error.code, kind, key }, 'commit refused');
        for (const outcome of outcomes) {
          outcome.ok = false;
          outcome.value = failure;
        }
        this.finishBatch(activation, outcomes, [], [], [], true);
      },
    );
  }

  private recordAlarmChange(
    ops: WriteOp[],
    alarmChanges: AppliedAlarmChange[],
    pendingAlarms: Map<string, number | null>,
    activation: Activation,
    change: AlarmChange,
  ): void {
    const { partition, kind, key } = activation;
    const storeKey = keys.alarm(partition, kind, key, change.name);
    const previous = pendingAlarms.has(change.name) ? pendingAlarms.get(change.name) : (this.store.get(storeKey) as number | undefined);
    if (previous !== undefined && previous !== null) ops.push({ type: 'del', key: keys.alarmByTime(partition, previous, kind, key, change.name) });
    if (change.due_ms === null) ops.push({ type: 'del', key: storeKey });
    else {
      assert(Number.isFinite(change.due_ms), 'alarm due time must be a finite number');
      ops.push({ type: 'put', key: storeKey, value: change.due_ms });
      ops.push({ type: 'put', key: keys.alarmByTime(partition, change.due_ms, kind, key, change.name), value: 1 });
    }
    pendingAlarms.set(change.name, change.due_ms);
    alarmChanges.push({ ...change, existed: previous !== undefined && previous !== null });
  }

  private finishBatch(
    activation: Activation,
    outcomes: Outcome[],
    alarmChanges: AppliedAlarmChange[],
    sends: { id: string; send: ActorSend }[],
    events: ActorEvent[],
    reload: boolean,
  ): void {
    const { partition, kind, key } = activation;
    for (const change of alarmChanges) this.applyAlarmChange(partition, kind, key, change);
    if (alarmChanges.length > 0) this.armAlarmTimer();
    if (reload) activation.state = this.loadState(activation.definition, partition, key);
    activation.running = false;
    activation.lastActiveMs = this.clock.now();
    this.runningBatches--;

    for (const outcome of outcomes) {
      if (outcome.ok) outcome.envelope.resolve?.(outcome.value);
      else if (outcome.envelope.reject) outcome.envelope.reject(outcome.value);
      else if (!isServiceError(outcome.value) || outcome.value.code === 'internal_error') {
        this.logger.warn({ err: outcome.value, kind, key }, 'told message failed');
      }
    }
    for (const { id, send } of sends) this.deliverOutbox(partition, id, send);
    if (events.length > 0) {
      const at_ms = this.clock.now();
      for (const event of events) {
        try {
          this.events.emit('event', { ...event, kind, key, at_ms } satisfies PublishedEvent);
        } catch (error) {
          // A subscriber's bug must not stop this actor's mailbox.
          this.logger.error({ err: error, kind, key, type: event.type }, 'event subscriber threw');
        }
      }
    }

    if (activation.mailbox.length > 0) {
      if (!activation.scheduled) {
        activation.scheduled = true;
        queueMicrotask(() => this.runBatch(activation));
      }
    } else if (this.runningBatches === 0 && this.idleWaiters.length > 0 && !this.hasQueuedMessages()) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const waiter of waiters) waiter();
    }
    if (this.batchWaiters.length > 0) {
      const waiters = this.batchWaiters;
      this.batchWaiters = [];
      for (const waiter of waiters) waiter();
    }
  }

  // ---- durable alarms ----

  private applyAlarmChange(partition: number, kind: string, key: string, change: AppliedAlarmChange): void {
    this.alarmCount += (change.due_ms === null ? 0 : 1) - (change.existed ? 1 : 0);
    // Inside the window: schedule now. Later: the window will load it from the store.
    if (change.due_ms !== null && change.due_ms < this.alarmWindowEndMs) {
      this.alarmQueue.push({ fire_ms: change.due_ms, due_ms: change.due_ms, partition, kind, key, name: change.name });
    }
  }

  /**
   * Moves the alarm window to now + alarm_window_ms, scheduling the stored
   * alarms it now covers, and re-arms itself. An alarm may end up in the queue
   * twice (committed just before a scan); the stale check at fire time and in
   * the turn drops the second.
   */
  private loadAlarmWindow(from_ms: number): void {
    const until_ms = this.clock.now() + this.limits.alarm_window_ms;
    for (let p = 0; p < this.partitionCount; p++) {
      if (!this.owned[p]) continue;
      const [start, end] = keys.alarmDueRange(p, from_ms, until_ms);
      for (const { key } of this.store.range(start, end)) {
        const [, , due_ms, kind, actorKey, name] = key as [string, number, number, string, string, string];
        this.alarmQueue.push({ fire_ms: due_ms, due_ms, partition: p, kind, key: actorKey, name });
      }
    }
    this.alarmWindowEndMs = until_ms;
    this.alarmWindowTimer = this.clock.setTimer(this.limits.alarm_window_ms / 4, () => {
      if (this.state !== 'running') return;
      this.loadAlarmWindow(this.alarmWindowEndMs);
      this.armAlarmTimer();
    });
  }

  private armAlarmTimer(): void {
    if (this.state !== 'running') return;
    const next = this.alarmQueue.peek();
    if (!next) {
      this.alarmTimer?.cancel();
      this.alarmTimer = undefined;
      this.alarmTimerFireMs = Infinity;
      return;
    }
    if (this.alarmTimer && this.alarmTimerFireMs <= next.fire_ms) return;
    this.alarmTimer?.cancel();
    this.alarmTimerFireMs = next.fire_ms;
    this.alarmTimer = this.clock.setTimer(next.fire_ms - this.clock.now(), () => {
      this.alarmTimer = undefined;
      this.alarmTimerFireMs = Infinity;
      this.fireDueAlarms();
    });
  }

  private fireDueAlarms(): void {
    if (this.state !== 'running') return;
    const now = this.clock.now();
    for (let next = this.alarmQueue.peek(); next && next.fire_ms <= now; next = this.alarmQueue.peek()) {
      this.alarmQueue.pop();
      // A partition handed to another node: its new leader fires it.
      if (!this.owned[next.partition]) continue;
      if (this.store.get(keys.alarm(next.partition, next.kind, next.key, next.name)) !== next.due_ms) continue;
      try {
        this.tell(next.kind, next.key, { op: '$alarm', name: next.name, due_ms: next.due_ms });
      } catch {
        // Mailbox full: try again shortly; the alarm stays durable meanwhile.
        this.alarmQueue.push({ ...next, fire_ms: now + this.limits.outbox_retry_delay_ms });
      }
    }
    this.armAlarmTimer();
  }

  // ---- outbox ----

  private deliverOutbox(sourcePartition: number, id: string, send: ActorSend): void {
    const retry = () => {
      const timer = this.clock.setTimer(this.limits.outbox_retry_delay_ms, () => {
        this.retryTimers.delete(timer);
        if (this.state === 'running') this.deliverOutbox(sourcePartition, id, send);
      });
      this.retryTimers.add(timer);
    };
    const acknowledge = () => {
      this.housekeepingCommit([{ type: 'del', key: keys.outbox(sourcePartition, id) }], 'outbox acknowledgement failed; the message will be re-delivered and de-duplicated');
    };
    if (this.remoteDelivery && !this.owned[partitionOf(send.kind, send.key, this.partitionCount)]) {
      this.remoteDelivery(send.kind, send.key, send.message, id).then(acknowledge, (error: unknown) => {
        if (isServiceError(error) && error.statusCode < 500) {
          this.logger.warn({ err: error, kind: send.kind, key: send.key }, 'outbox message refused by receiver');
          acknowledge();
        } else if (this.state === 'running') retry();
      });
      return;
    }
    try {
      this.enqueue(send.kind, send.key, {
        message: send.message,
        messageId: id,
        resolve: acknowledge,
        reject: (error) => {
          if (isServiceError(error) && error.statusCode < 500) {
            // The receiver refused it for good: retrying would change nothing.
            this.logger.warn({ err: error, kind: send.kind, key: send.key }, 'outbox message refused by receiver');
            acknowledge();
          } else retry();
        },
      });
    } catch (error) {
      if (this.state === 'running') retry();
    }
  }

  // ---- passivation and housekeeping ----

  private scheduleSweep(): void {
    if (this.state !== 'running') return;
    this.sweepTimer = this.clock.setTimer(this.limits.passivate_sweep_interval_ms, () => {
      this.passivateIdle();
      this.sweepDedupRecords();
      this.scheduleSweep();
    });
  }

  /**
   * Drops receiver de-duplication records past their retention. The time
   * index ['y', p, received_ms, id] makes this a scan of expired entries only,
   * at most `dedup_sweep_records_max` per sweep, so its cost does not grow with
   * the number of live records.
   */
  private sweepDedupRecords(): void {
    const cutoff_ms = this.clock.now() - this.limits.dedup_retention_ms;
    const expired: WriteOp[] = [];
    let budget = this.limits.dedup_sweep_records_max;
    for (let p = 0; p < this.partitionCount && budget > 0; p++) {
      if (!this.owned[p]) continue;
      const [start, end] = keys.dedupExpiredRange(p, cutoff_ms);
      for (const { key, value } of this.store.range(start, end)) {
        const [kind, actorKey] = value as [string, string];
        expired.push({ type: 'del', key }, { type: 'del', key: keys.dedup(p, kind, actorKey, key[3] as string) });
        if (--budget <= 0) break;
      }
    }
    if (expired.length > 0) this.housekeepingCommit(expired, 'dedup sweep failed');
  }

  private housekeepingCommit(ops: WriteOp[], failure: string): void {
    const commit = Promise.resolve()
      .then(() => this.store.commit(ops))
      .catch((error: unknown) => this.logger.error({ err: error }, failure));
    this.housekeeping.add(commit);
    void commit.finally(() => this.housekeeping.delete(commit));
  }
}

/** An alarm change as committed, with whether it replaced or removed a stored alarm. */
interface AppliedAlarmChange extends AlarmChange {
  existed: boolean;
}
