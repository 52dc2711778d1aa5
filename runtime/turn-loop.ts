import type { EventEmitter } from 'node:events';
import type { ActorEvent } from './actor.js';
import type { Activation, ActivationTable, Envelope } from './activation.js';
import type { AlarmWindow } from './alarm-window.js';
import { Batch, type BatchOutput, type Outcome } from './batch.js';
import type { Clock } from './clock.js';
import { DeferredAsks, requestIdOf } from './deferred-replies.js';
import { isServiceError, ServiceError } from './errors.js';
import type { Limits } from './limits.js';
import type { RuntimeLogger, RuntimeObserver } from './observer.js';
import type { Outbox } from './outbox.js';
import type { Store } from './store.js';

/**
 * The turn loop: schedules an actor when its mailbox gets work, runs a batch
 * of its turns (batch.ts), commits the batch, and only after the commit
 * releases what the batch produced: replies (or, for a deferring turn, the
 * wait for a deferred reply), deferred replies, alarm changes, outbox
 * deliveries, events (the output gate). A failed commit fails the whole batch
 * and reloads the actor from storage. Also counts running batches, so that
 * stop() and partition handoff can wait for quiet.
 */

/** An event published on `runtime.events` ('event') after its turn committed. */
export interface PublishedEvent extends ActorEvent {
  kind: string;
  key: string;
  at_ms: number;
}

export interface TurnLoopOptions {
  store: Store;
  clock: Clock;
  limits: Limits;
  logger: RuntimeLogger;
  observer?: RuntimeObserver;
  activations: ActivationTable;
  alarms: AlarmWindow;
  outbox: Outbox;
  events: EventEmitter;
  /** Cluster: may turns of partition p run now? (see ActorRuntimeOptions.partitionGate) */
  partitionGate?: (p: number) => boolean;
}

const noOutputs = { alarmChanges: [], sends: [], events: [], replies: [] } as const;

export class TurnLoop {
  private runningBatches = 0;
  private idleWaiters: (() => void)[] = [];
  /** Called whenever a batch finishes: closePartition() waits on it for the partition to go quiet. */
  private batchWaiters: (() => void)[] = [];

  constructor(private readonly options: TurnLoopOptions) {}

  /** Queues a batch for the activation unless one is running or already queued. */
  schedule(activation: Activation): void {
    if (activation.running || activation.scheduled) return;
    activation.scheduled = true;
    queueMicrotask(() => this.runBatch(activation));
  }

  /** Resolves once no batch runs and no message waits in any mailbox. */
  whenIdle(): Promise<void> {
    if (this.runningBatches === 0 && !this.options.activations.hasQueuedMessages()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Resolves when the next batch (of any actor) finishes. */
  nextBatchFinished(): Promise<void> {
    return new Promise<void>((resolve) => this.batchWaiters.push(resolve));
  }

  /** Runs up to turn_batch_messages_max turns, then commits them as one. */
  private runBatch(activation: Activation): void {
    const { store, clock, limits, logger, observer, alarms, partitionGate } = this.options;
    activation.scheduled = false;
    activation.running = true;
    this.runningBatches++;
    const started_ms = performance.now();
    const envelopes = activation.mailbox.take(limits.turn_batch_messages_max);
    if (partitionGate && !partitionGate(activation.partition)) {
      this.refuseBatch(activation, envelopes);
      return;
    }
    const batch = new Batch(activation, store, alarms, logger, clock.now());
    batch.runTurns(envelopes);
    observer?.batch(activation.kind, envelopes.length, performance.now() - started_ms);
    this.commitBatch(activation, batch);
  }

  /** The partition left this node: nothing of the batch runs, and not_leader is safe to retry. */
  private refuseBatch(activation: Activation, envelopes: Envelope[]): void {
    const refusal = new ServiceError('not_leader', 'This node no longer serves that partition.', { retryAfterSeconds: 1 });
    const outcomes = envelopes.map((envelope): Outcome => ({ envelope, ok: false, value: refusal }));
    this.releaseBatch(activation, { outcomes, ...noOutputs }, false);
  }

  private commitBatch(activation: Activation, batch: Batch): void {
    const { store, logger, observer } = this.options;
    const ops = batch.ops;
    if (ops.length === 0) {
      this.releaseBatch(activation, batch, batch.poisoned);
      return;
    }
    const commitStarted_ms = performance.now();
    store.commit(ops).then(
      () => {
        observer?.commit(ops.length, performance.now() - commitStarted_ms);
        this.releaseBatch(activation, batch, batch.poisoned);
      },
      (error: unknown) => {
        // The batch did not happen (or, in a cluster, may not have): fail every
        // message in it and reload the actor from what is durable. A store
        // that says why (cluster: not_leader before anything was written,
        // partition_unavailable when the outcome is unknown) is passed on, so
        // the edge can retry the first safely.
        const { kind, key } = activation;
        const failure = isServiceError(error) ? error : new ServiceError('internal_error', 'The change could not be stored.');
        if (!isServiceError(error)) logger.error({ err: error, kind, key, ops: ops.length }, 'commit failed');
        else logger.warn({ code: error.code, kind, key }, 'commit refused');
        for (const outcome of batch.outcomes) {
          outcome.ok = false;
          outcome.value = failure;
        }
        this.releaseBatch(activation, { outcomes: batch.outcomes, ...noOutputs }, true);
      },
    );
  }

  /** After the commit (the output gate): applies and releases the batch's outputs, then moves on. */
  private releaseBatch(activation: Activation, output: BatchOutput, reload: boolean): void {
    const { clock, activations, alarms, outbox } = this.options;
    const { partition, kind, key } = activation;
    alarms.applyChanges(partition, kind, key, output.alarmChanges);
    if (reload) activation.state = activations.loadState(activation.definition, partition, key);
    activation.running = false;
    activation.lastActiveMs = clock.now();
    this.runningBatches--;

    this.answer(activation, output.outcomes);
    if (output.replies.length > 0) for (const reply of output.replies) activation.deferred?.answer(reply);
    // Reloaded from storage: what the asks waited on is gone from memory.
    if (reload) activation.deferred?.interruptAll();
    for (const { id, send } of output.sends) outbox.deliver(partition, id, send);
    this.publish(activation, output.events);
    this.continueOrSignalIdle(activation);
  }

  private answer(activation: Activation, outcomes: readonly Outcome[]): void {
    for (const outcome of outcomes) {
      if (outcome.ok && outcome.deferred) this.holdDeferred(activation, outcome.envelope);
      else if (outcome.ok) outcome.envelope.resolve?.(outcome.value);
      else if (outcome.envelope.reject) outcome.envelope.reject(outcome.value);
      else if (!isServiceError(outcome.value) || outcome.value.code === 'internal_error') {
        this.options.logger.warn({ err: outcome.value, kind: activation.kind, key: activation.key }, 'told message failed');
      }
    }
  }

  /** The turn deferred its answer: the asker waits on the activation, within its bounds. */
  private holdDeferred(activation: Activation, envelope: Envelope): void {
    const { clock, limits } = this.options;
    const deferred = (activation.deferred ??= new DeferredAsks());
    if (deferred.size >= limits.deferred_replies_per_actor_max) {
      envelope.reject!(new ServiceError('actor_overloaded', `Too many pending requests for this ${activation.kind}.`, { retryAfterSeconds: 1 }));
      return;
    }
    deferred.hold(requestIdOf(envelope.requestSeq!), envelope.resolve!, envelope.reject!, clock, limits.deferred_reply_ms_max);
  }

  private publish(activation: Activation, events: readonly ActorEvent[]): void {
    if (events.length === 0) return;
    const { kind, key } = activation;
    const at_ms = this.options.clock.now();
    for (const event of events) {
      try {
        this.options.events.emit('event', { ...event, kind, key, at_ms } satisfies PublishedEvent);
      } catch (error) {
        // A subscriber's bug must not stop this actor's mailbox.
        this.options.logger.error({ err: error, kind, key, type: event.type }, 'event subscriber threw');
      }
    }
  }

  /** Runs the actor's next batch if messages wait; otherwise wakes stop() once everything is quiet. */
  private continueOrSignalIdle(activation: Activation): void {
    if (activation.mailbox.length > 0) this.schedule(activation);
    else if (this.runningBatches === 0 && this.idleWaiters.length > 0 && !this.options.activations.hasQueuedMessages()) {
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
}
