import type { ActorDefinition } from './actor.js';
import { assert } from './assert.js';
import type { Clock } from './clock.js';
import type { DeferredAsks } from './deferred-replies.js';
import { Mailbox } from './mailbox.js';
import type { RuntimeObserver } from './observer.js';
import { ProbationQueue } from './probation.js';
import { keys } from './storage-keys.js';
import type { Store } from './store.js';

/**
 * The actors in memory (activations): the kind -> key directory, and how an
 * activation's state is read from the store. Kept apart from the turn loop
 * because partition handoff, passivation and the loop all walk the same
 * directory and must agree on what "in memory" means.
 */

/** One message in a mailbox, with whoever waits for its outcome. */
export interface Envelope {
  message: unknown;
  resolve?: (reply: unknown) => void;
  reject?: (error: unknown) => void;
  /** Set on outbox deliveries: the receiver de-duplicates on it. */
  messageId?: string;
  /** Set on asks (deferred-replies.ts, nextRequestSeq): the turn sees requestIdOf(it) as context.request_id and may defer its answer. */
  requestSeq?: number;
}

export interface Activation {
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
  /** Asks this actor deferred and has not answered yet (created on the first). */
  deferred: DeferredAsks | undefined;
  /** Has had only the message that activated it (probation.ts); set and cleared by the table's ProbationQueue. */
  probation: boolean;
}

/** Nothing runs, nothing waits to run: the activation may leave memory. */
export function isQuiet(activation: Activation): boolean {
  return !activation.running && !activation.scheduled && activation.mailbox.length === 0;
}

/** Asks wait on this activation for a deferred reply. */
export function holdsDeferredAsks(activation: Activation): boolean {
  return activation.deferred !== undefined && activation.deferred.size > 0;
}

export class ActivationTable {
  /**
   * kind -> key -> activation. Two levels, so a message costs two map
   * lookups on strings V8 has already hashed, with no key concatenation;
   * the partition is computed once, at activation.
   */
  private readonly byKind = new Map<string, Map<string, Activation>>();
  /** Activations in memory, kept as a counter so the metrics and the limit read it without a walk. */
  private activeCount = 0;
  /** Activations that have had one message only, oldest first (probation.ts). */
  private readonly probation = new ProbationQueue<Activation>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly definitions: ReadonlyMap<string, ActorDefinition>,
    private readonly observer?: RuntimeObserver,
  ) {}

  get(kind: string, key: string): Activation | undefined {
    return this.byKind.get(kind)?.get(key);
  }

  /**
   * A new activation of kind + key in `partition`, its state loaded from the
   * store. Only for a key not in memory: the runtime has just looked it up
   * (synchronously, so nothing came in between), found nothing, and computed
   * the partition to check that this node serves it; neither is done twice.
   */
  activate(kind: string, key: string, partition: number): Activation {
    const definition = this.definitions.get(kind);
    assert(definition, `unknown actor kind ${kind}`);
    let byKey = this.byKind.get(kind);
    if (!byKey) {
      byKey = new Map();
      this.byKind.set(kind, byKey);
    }
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
      deferred: undefined,
      probation: false,
    };
    byKey.set(key, activation);
    this.probation.add(activation);
    this.activeCount++;
    this.observer?.activated(kind);
    return activation;
  }

  /** The actor's state as the store holds it (at activation, and to undo a failed batch). */
  loadState(definition: ActorDefinition, partition: number, key: string): unknown {
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

  count(): number {
    return this.activeCount;
  }

  /** Activations in memory that have had one message only. */
  countOnProbation(): number {
    return this.probation.size;
  }

  /** A message for an activation already in memory: it is no longer on probation. */
  touched(activation: Activation): void {
    this.probation.release(activation);
  }

  /**
   * Drops activations on probation, the longest-resident first, while more
   * than `target` remain: each one `mayLeave` accepts. One it refuses because
   * it is busy (`isBusy`) is moved to the back and the walk goes on (at most
   * `maxRequeued` times, and not round the whole queue); any other refusal
   * (not idle long enough) ends the walk, since the ones after it came into
   * memory later. Returns how many were dropped.
   */
  dropOnProbation(target: number, mayLeave: (activation: Activation) => boolean, isBusy: (activation: Activation) => boolean, maxRequeued = 64): number {
    let dropped = 0;
    let requeued = 0;
    while (this.probation.size > target) {
      const oldest = this.probation.oldest();
      if (oldest === undefined) break;
      if (mayLeave(oldest)) {
        this.drop(oldest);
        dropped++;
      } else if (isBusy(oldest) && requeued < Math.min(maxRequeued, this.probation.size)) {
        this.probation.requeueOldest();
        requeued++;
      } else {
        break;
      }
    }
    return dropped;
  }

  *all(): IterableIterator<Activation> {
    for (const byKey of this.byKind.values()) yield* byKey.values();
  }

  /** Rejects every deferred ask still waiting (the runtime stops). */
  interruptDeferredAsks(): void {
    for (const activation of this.all()) activation.deferred?.interruptAll();
  }

  hasQueuedMessages(): boolean {
    for (const byKey of this.byKind.values()) {
      for (const activation of byKey.values()) if (activation.mailbox.length > 0) return true;
    }
    return false;
  }

  /**
   * Drops from memory every activation `shouldDrop` selects (at most
   * `maxDropped`, oldest activations first within each kind); returns how
   * many. Asks a dropped activation deferred can no longer be answered: they
   * are rejected with flow_interrupted.
   */
  dropWhere(shouldDrop: (activation: Activation) => boolean, maxDropped = Infinity): number {
    let count = 0;
    // Each kind's map iterates in activation order, so a bounded drop takes the longest-resident first.
    for (const byKey of this.byKind.values()) {
      for (const [key, activation] of byKey) {
        if (count >= maxDropped) return count;
        if (!shouldDrop(activation)) continue;
        byKey.delete(key);
        this.left(activation);
        count++;
      }
    }
    return count;
  }

  /** Drops one activation from memory (it is in the table). */
  private drop(activation: Activation): void {
    this.byKind.get(activation.kind)?.delete(activation.key);
    this.left(activation);
  }

  /** Bookkeeping of an activation just deleted from its kind's map. */
  private left(activation: Activation): void {
    this.activeCount--;
    this.probation.release(activation);
    activation.deferred?.interruptAll();
    this.observer?.passivated(activation.kind);
  }
}
