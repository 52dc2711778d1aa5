import { isAlarm, type ActorEvent, type ActorSend, type DeferredReply, type TurnContext, type TurnResult } from './actor.js';
import type { Activation, Envelope } from './activation.js';
import type { AlarmWindow, AppliedAlarmChange } from './alarm-window.js';
import { isServiceError, ServiceError } from './errors.js';
import { requestIdOf } from './deferred-replies.js';
import { randomId } from './ids.js';
import type { RuntimeLogger } from './observer.js';
import { keys } from './storage-keys.js';
import type { Store, WriteOp } from './store.js';

/**
 * One batch of turns of one actor, up to its commit: runs the turns one after
 * another and gathers, in order, the writes they make (one LMDB commit for
 * them all: group commit) and the outputs they produce (replies, deferred
 * replies, alarm changes, outbox sends, events), which the turn loop releases
 * only after that commit (the output gate). Does no I/O but reads; owns the
 * per-turn rules: de-duplication of outbox deliveries, stale alarm wake-ups,
 * rejection versus defect, which asks are deferred.
 */

/** How one message ended: resolved with `value`, or rejected with it. */
export interface Outcome {
  envelope: Envelope;
  ok: boolean;
  value: unknown;
  /** The turn deferred its answer: after the commit the asker waits for a deferred reply. */
  deferred?: boolean;
}

/** What a batch releases after its commit. */
export interface BatchOutput {
  readonly outcomes: readonly Outcome[];
  readonly alarmChanges: readonly AppliedAlarmChange[];
  readonly sends: readonly { id: string; send: ActorSend }[];
  readonly events: readonly ActorEvent[];
  readonly replies: readonly DeferredReply[];
}

/** Shared by every batch that has none of a kind of output: most batches write or send nothing but replies. */
const NONE: readonly never[] = Object.freeze([]);

/** The TurnContext of a batch's turns: request_id is made from the turn's ask number when a turn reads it. */
class BatchContext implements TurnContext {
  /** The ask number of the turn running now (undefined: a tell, an outbox delivery, an alarm). */
  requestSeq: number | undefined = undefined;
  readonly newId = randomId;

  constructor(
    readonly now: number,
    readonly kind: string,
    readonly key: string,
  ) {}

  get request_id(): string | null {
    return this.requestSeq === undefined ? null : requestIdOf(this.requestSeq);
  }
}

export class Batch implements BatchOutput {
  readonly outcomes: Outcome[] = [];
  // Created on first use: a read-only batch allocates none of them (a cross-node read costs a batch per actor).
  private writes?: WriteOp[];
  private changes?: AppliedAlarmChange[];
  private outgoing?: { id: string; send: ActorSend }[];
  private published?: ActorEvent[];
  private answers?: DeferredReply[];
  /** A turn threw a defect: the actor is reloaded from storage after the commit. */
  poisoned = false;
  /** Alarm changes staged by earlier turns of this batch (name -> due_ms), ahead of the store. */
  private pendingAlarms?: Map<string, number | null>;
  /** Outbox message ids received by earlier turns of this batch, ahead of the store. */
  private seenMessageIds?: Set<string>;
  private snapshotChanged = false;
  /** What the snapshot record becomes: null deletes it. */
  private snapshotValue: unknown = null;
  /** One context for the batch; the request changes per turn. */
  private readonly context: BatchContext;

  constructor(
    private readonly activation: Activation,
    private readonly store: Store,
    private readonly alarms: AlarmWindow,
    private readonly logger: RuntimeLogger,
    /**
     * One time for the whole batch: its turns run back to back within
     * microseconds, and reading the clock per message cost a fifth of a tell.
     */
    now_ms: number,
  ) {
    this.context = new BatchContext(now_ms, activation.kind, activation.key);
  }

  /** The batch's writes, in order (one LMDB commit). */
  get ops(): readonly WriteOp[] {
    return this.writes ?? NONE;
  }
  get alarmChanges(): readonly AppliedAlarmChange[] {
    return this.changes ?? NONE;
  }
  get sends(): readonly { id: string; send: ActorSend }[] {
    return this.outgoing ?? NONE;
  }
  get events(): readonly ActorEvent[] {
    return this.published ?? NONE;
  }
  get replies(): readonly DeferredReply[] {
    return this.answers ?? NONE;
  }

  private write(op: WriteOp): void {
    (this.writes ??= []).push(op);
  }

  /** Runs the envelopes in order. A defect stops the batch there and puts the rest back in the mailbox. */
  runTurns(envelopes: Envelope[]): void {
    for (let i = 0; i < envelopes.length; i++) {
      if (!this.runTurn(envelopes[i])) {
        this.activation.mailbox.unshiftAll(envelopes.slice(i + 1));
        break;
      }
    }
    this.stageSnapshot();
  }

  /** One message; false if it was a defect and the batch must stop. */
  private runTurn(envelope: Envelope): boolean {
    const message = envelope.message;
    if (envelope.messageId !== undefined && this.isDuplicate(envelope.messageId)) {
      this.outcomes.push({ envelope, ok: true, value: undefined });
      return true;
    }
    let clearsAlarm = false;
    if (isAlarm(message)) {
      const { partition, kind, key } = this.activation;
      if (this.alarms.currentDue(this.pendingAlarms, partition, kind, key, message.name) !== message.due_ms) {
        // Replaced or cancelled after it fired: a stale wake-up, not a turn.
        this.outcomes.push({ envelope, ok: true, value: undefined });
        return true;
      }
      clearsAlarm = true;
    }

    let result: TurnResult<unknown, unknown>;
    this.context.requestSeq = envelope.requestSeq;
    try {
      result = this.activation.definition.step(this.activation.state, message, this.context);
    } catch (error) {
      if (isServiceError(error)) {
        if (clearsAlarm) this.clearFiredAlarm(message);
        this.outcomes.push({ envelope, ok: false, value: error });
        return true;
      }
      // A defect: answer this message with a 500, stop the batch here, and
      // reload the actor from storage after the commit of the turns before it.
      this.logger.error({ err: error, kind: this.activation.kind, key: this.activation.key }, 'actor turn threw');
      this.outcomes.push({ envelope, ok: false, value: new ServiceError('internal_error') });
      this.poisoned = true;
      return false;
    }

    if (clearsAlarm) this.clearFiredAlarm(message);
    this.applyState(result);
    this.stageEffects(result);
    if (envelope.messageId !== undefined) this.recordReceived(envelope.messageId);
    // A successful tell has nobody to answer: no outcome to carry.
    if (envelope.resolve) {
      const deferred = result.defer === true && envelope.requestSeq !== undefined;
      this.outcomes.push({ envelope, ok: true, value: result.reply, deferred });
    }
    return true;
  }

  /** An outbox message this actor has already committed (in this batch or before). */
  private isDuplicate(messageId: string): boolean {
    this.seenMessageIds ??= new Set();
    const { partition, kind, key } = this.activation;
    return this.seenMessageIds.has(messageId) || this.store.get(keys.dedup(partition, kind, key, messageId)) !== undefined;
  }

  /** A fired alarm's record is deleted in the commit of the turn that handles it (at-least-once). */
  private clearFiredAlarm(message: unknown): void {
    this.stageAlarmChange({ name: (message as { name: string }).name, due_ms: null });
  }

  private stageAlarmChange(change: { name: string; due_ms: number | null }): void {
    const { partition, kind, key } = this.activation;
    this.alarms.stageChange((this.writes ??= []), (this.changes ??= []), (this.pendingAlarms ??= new Map()), partition, kind, key, change);
  }

  /** Takes the turn's new state; `records` actors write the records it names, `snapshot` actors once at the end. */
  private applyState(result: TurnResult<unknown, unknown>): void {
    const activation = this.activation;
    const { definition, partition, kind, key } = activation;
    if (definition.storage === 'snapshot') {
      if (result.state !== activation.state) {
        this.snapshotChanged = true;
        this.snapshotValue = result.state ?? null;
        activation.state = result.state ?? definition.initial(key);
      }
      return;
    }
    activation.state = result.state;
    if (result.writes) {
      for (const write of result.writes) {
        const storeKey = keys.record(partition, kind, key, write.subkey);
        this.write(write.value === undefined ? { type: 'del', key: storeKey } : { type: 'put', key: storeKey, value: write.value });
      }
    }
  }

  /** Alarm changes and outbox sends are written in the batch's commit; events wait for it in memory. */
  private stageEffects(result: TurnResult<unknown, unknown>): void {
    if (result.alarms) for (const change of result.alarms) this.stageAlarmChange(change);
    if (result.sends) {
      for (const send of result.sends) {
        const id = randomId();
        this.write({ type: 'put', key: keys.outbox(this.activation.partition, id), value: send });
        (this.outgoing ??= []).push({ id, send });
      }
    }
    if (result.events) for (const event of result.events) (this.published ??= []).push(event);
    if (result.replies) for (const reply of result.replies) (this.answers ??= []).push(reply);
  }

  /** The receiver stores an outbox message's id in the commit of its turn, by actor and by time (for the sweep). */
  private recordReceived(messageId: string): void {
    const { partition, kind, key } = this.activation;
    const now = this.context.now;
    this.seenMessageIds!.add(messageId);
    this.write({ type: 'put', key: keys.dedup(partition, kind, key, messageId), value: now });
    this.write({ type: 'put', key: keys.dedupByTime(partition, now, messageId), value: [kind, key] });
  }

  /** A snapshot actor's state is written once per batch, after its last turn. */
  private stageSnapshot(): void {
    if (!this.snapshotChanged) return;
    const { partition, kind, key } = this.activation;
    const snapshotKey = keys.snapshot(partition, kind, key);
    this.write(this.snapshotValue === null ? { type: 'del', key: snapshotKey } : { type: 'put', key: snapshotKey, value: this.snapshotValue });
  }
}
