import type { ErrorCode } from './errors.js';

/**
 * The actor contract. Each actor kind is a definition with a step function:
 * (state, message, context) -> TurnResult. The step function does no I/O and
 * reads time only from `context.now`; the runtime loads state, runs turns one
 * at a time, commits the writes, and only then releases the reply and effects
 * (the output gate).
 *
 * Two storage shapes:
 * - `snapshot`: the whole state is one record, written after any turn that
 *   returns a different state object. The step function must treat state as
 *   immutable (return a new object to change it).
 * - `records`: for large actors (a waiting room with 100k members). The state
 *   is rebuilt from keyed records at activation; each turn returns only the
 *   records it changed, so a turn costs O(change). The step function may
 *   mutate its in-memory state; if a turn throws anything but a ServiceError,
 *   or a commit fails, the runtime drops the activation and reloads it from
 *   storage, so a failed turn leaves no trace.
 *
 * Contract for both: throw a ServiceError to reject a message, and do so
 * before changing anything.
 */

/** The message the runtime delivers when a durable alarm falls due. */
export interface AlarmMessage {
  op: '$alarm';
  name: string;
  /** When the alarm was due, epoch-ms. */
  due_ms: number;
}

export interface TurnContext {
  /** Epoch-ms for this turn, from the runtime's injected clock. */
  readonly now: number;
  readonly kind: string;
  readonly key: string;
  /**
   * Set when the message arrived through `ask` (unique within this runtime
   * process); null for `tell`, outbox deliveries and alarms. A turn that
   * answers later returns `defer: true` and records this id in its persisted
   * state, so that a later turn can answer it through `replies`.
   */
  readonly request_id: string | null;
  /** A fresh opaque, URL-safe id (the one source of randomness for actors). */
  newId(prefix?: string): string;
}

/** Set (`due_ms` a number) or cancel (`due_ms` null) the alarm called `name`. */
export interface AlarmChange {
  name: string;
  due_ms: number | null;
}

/** A message to another actor, sent through the persisted outbox after commit. */
export interface ActorSend {
  kind: string;
  key: string;
  message: unknown;
}

/** A keyed record write of a `records` actor; `value` undefined deletes it. */
export interface RecordWrite {
  subkey: string;
  value: unknown;
}

/** A notification published on the node's event bus after commit. */
export interface ActorEvent {
  type: string;
  data: unknown;
}

/**
 * The answer to an ask that an earlier turn deferred: `reply` resolves it,
 * `error` rejects it with ServiceError(code, message, {details}).
 */
export interface DeferredReply {
  request_id: string;
  reply?: unknown;
  error?: { code: ErrorCode; message: string; details?: unknown };
}

export interface TurnResult<State, Reply> {
  /** The new state. For `snapshot` actors `null` deletes the stored record. */
  state: State;
  reply?: Reply;
  /** `records` actors only: the records this turn changed. */
  writes?: RecordWrite[];
  alarms?: AlarmChange[];
  sends?: ActorSend[];
  events?: ActorEvent[];
  /**
   * The message was asked and this turn answers it later: the asker keeps
   * waiting (up to limits.deferred_reply_ms_max) instead of getting `reply`.
   * Ignored for a message that was not asked.
   */
  defer?: boolean;
  /**
   * Answers to asks this actor deferred earlier (or in this batch), released
   * after this turn's commit like any reply. An unknown request_id (answered,
   * timed out, or from before a restart) is ignored.
   */
  replies?: DeferredReply[];
}

interface ActorDefinitionBase<State, Message, Reply> {
  kind: string;
  step(state: State, message: Message | AlarmMessage, context: TurnContext): TurnResult<State, Reply>;
}

export interface SnapshotActorDefinition<State, Message, Reply> extends ActorDefinitionBase<State, Message, Reply> {
  storage: 'snapshot';
  /** State of an actor that has never been written (or was deleted). */
  initial(key: string): State;
}

export interface RecordsActorDefinition<State, Message, Reply> extends ActorDefinitionBase<State, Message, Reply> {
  storage: 'records';
  /** Rebuilds the state from every stored record of the actor, in subkey order. */
  load(key: string, records: Iterable<[subkey: string, value: unknown]>): State;
}

export type ActorDefinition<State = any, Message = any, Reply = any> =
  | SnapshotActorDefinition<State, Message, Reply>
  | RecordsActorDefinition<State, Message, Reply>;

export function isAlarm(message: unknown): message is AlarmMessage {
  return typeof message === 'object' && message !== null && (message as { op?: unknown }).op === '$alarm';
}
