import { MinHeap, type ActorSend, type AlarmChange, type DeferredReply, type RecordWrite, type TurnContext } from '../../runtime/index.js';
import type { Waiter } from './long-poll.js';
import {
  MQ_QUEUE_KIND,
  mqLimits,
  mqQueueKey,
  type Attributes,
  type MessageCopy,
  type QueueConfig,
  type QueueMessage,
  type QueueStatistics,
  type QueueSubscriptionView,
  type ReceivedMessage,
} from './messages.js';

/**
 * The messages of one queue (the state of the `mq-queue` records actor, see
 * queue-state.ts for its step): how they are stored, ordered and received, pure.
 *
 * Records:
 *   c             the queue's config (absent: no queue)
 *   v             the last revision sent to the directory (kept across delete)
 *   m:<seq>       one message as sent (seq zero-padded: records load in arrival order)
 *   r:<seq>       its delivery state once received (visible_at, receive_count, receipt):
 *                 a receive rewrites this small record, never the body
 *   d:<dedup id>  a FIFO de-duplication id and the message it named, until the window ends
 *   s:<topic>     a topic subscription of this queue (the topic holds the authoritative copy)
 *   x:<flow id>   a redrive waiting for its destination's answer (queue-state.ts)
 *
 * In memory beside them: the receivable messages in order (standard), the
 * messages of each group (FIFO), a heap of the times messages become
 * receivable (delay and visibility timeouts), and the receives waiting for a
 * message (long polling). Waiters are never written: a reloaded activation
 * has none, and the runtime answers their asks flow_interrupted.
 *
 * A receive gives each message a new receipt handle `<seq>.<nonce>`; only the
 * latest handle deletes it or changes its visibility, so a consumer holding a
 * stale handle (its visibility ran out and the message went to another) can
 * never delete the newer delivery.
 */
export interface StoredMessage {
  seq: number;
  message_id: string;
  body: string;
  bytes: number;
  attributes: Attributes;
  /** When the message was first sent (shown); kept through dead-letter moves. */
  sent_at: number;
  /** When it entered this queue: retention counts from here. */
  enqueued_at: number;
  visible_at: number;
  receive_count: number;
  /** The latest receive's handle; null until first received here. */
  receipt: string | null;
  group_id: string | null;
  /** The dead-letter queue refused it: it is received here like any message. */
  dead_letter_refused: boolean;
}

export interface VisibilityEntry {
  at: number;
  seq: number;
}

/** A redrive that asked its destination whether it exists and waits for the answer (record x:<flow_id>). */
export interface PendingRedrive {
  flow_id: string;
  /** The ask to answer when the flow ends (null: a tell, or an ask from before a restart). */
  request_id: string | null;
  /** The queue that started it: a queue deleted (and maybe re-created) meanwhile moves nothing. */
  queue_id: string;
  destination: string;
  max_messages: number;
}

export interface QueueState {
  config: QueueConfig | null;
  rev: number;
  messages: Map<number, StoredMessage>;
  nextSeq: number;
  bytes: number;
  /** Standard queues: receivable messages, oldest first (as of the last promote). */
  ready: Map<number, StoredMessage>;
  /**
   * Messages that become receivable later, by (visible_at, seq). A message whose visibility
   * changes gets a new entry; an entry that no longer matches its message is stale and skipped
   * when it surfaces (lazy deletion).
   */
  timed: MinHeap<VisibilityEntry>;
  /** FIFO queues: the messages of each group in order. */
  groups: Map<string, Map<number, StoredMessage>>;
  /** FIFO de-duplication ids, oldest first. */
  dedup: Map<string, { message_id: string; expires_at: number }>;
  subscriptions: Map<string, QueueSubscriptionView>;
  /** Redrives waiting for their destination's answer, by flow id. */
  redrives: Map<string, PendingRedrive>;
  waiters: Waiter[];
  /** The due time of the alarms as last set by this activation (undefined: not known since load). */
  sweepDue: number | null | undefined;
  wakeDue: number | null | undefined;
}

export const SWEEP_ALARM = 'sweep';

export function emptyQueue(): QueueState {
  return {
    config: null,
    rev: 0,
    messages: new Map(),
    nextSeq: 1,
    bytes: 0,
    ready: new Map(),
    timed: new MinHeap<VisibilityEntry>((a, b) => a.at < b.at),
    groups: new Map(),
    dedup: new Map(),
    subscriptions: new Map(),
    redrives: new Map(),
    waiters: [],
    sweepDue: undefined,
    wakeDue: undefined,
  };
}

const paddedSeq = (seq: number) => String(seq).padStart(15, '0');
const messageKey = (seq: number) => 'm:' + paddedSeq(seq);
const deliveryKey = (seq: number) => 'r:' + paddedSeq(seq);

/** What a receive or a visibility change alters: kept in its own record. */
interface DeliveryState {
  visible_at: number;
  receive_count: number;
  receipt: string | null;
}

export function loadQueue(_key: string, records: Iterable<[string, unknown]>): QueueState {
  const state = emptyQueue();
  const dedup: [string, { message_id: string; expires_at: number }][] = [];
  const messages: StoredMessage[] = [];
  const deliveries = new Map<string, DeliveryState>();
  for (const [subkey, value] of records) {
    if (subkey === 'c') state.config = value as QueueConfig;
    else if (subkey === 'v') state.rev = value as number;
    else if (subkey.startsWith('m:')) messages.push(value as StoredMessage);
    else if (subkey.startsWith('r:')) deliveries.set(subkey.slice(2), value as DeliveryState);
    else if (subkey.startsWith('d:')) dedup.push([subkey.slice(2), value as { message_id: string; expires_at: number }]);
    else if (subkey.startsWith('s:')) state.subscriptions.set(subkey.slice(2), value as QueueSubscriptionView);
    // A restart forgets the ask (the runtime answered it flow_interrupted); the flow goes on to its end.
    else if (subkey.startsWith('x:')) state.redrives.set(subkey.slice(2), { ...(value as PendingRedrive), request_id: null });
  }
  // Insertion order is expiry order (the window is fixed): the sweep walks from the front.
  dedup.sort((a, b) => a[1].expires_at - b[1].expires_at);
  for (const [id, entry] of dedup) state.dedup.set(id, entry);
  // Records come in seq order; the first turn after a load places each message by its visibility.
  for (const message of messages) {
    const delivery = deliveries.get(paddedSeq(message.seq));
    insertMessage(state, delivery ? { ...message, ...delivery } : message, Number.NEGATIVE_INFINITY);
  }
  state.nextSeq = messages.length > 0 ? messages[messages.length - 1].seq + 1 : 1;
  return state;
}

export function tenantOf(key: string): string {
  return (JSON.parse(key) as [string, string])[0];
}

/**
 * Adds a message to the in-memory structures. `now` decides whether it is
 * receivable at once (standard: into `ready`) or later (into the heap);
 * -Infinity puts every message into the heap (load: the first turn promotes).
 */
export function insertMessage(state: QueueState, message: StoredMessage, now: number): void {
  state.messages.set(message.seq, message);
  state.bytes += message.bytes;
  if (state.config?.fifo) {
    const groupId = message.group_id ?? '';
    let group = state.groups.get(groupId);
    if (!group) state.groups.set(groupId, (group = new Map()));
    group.set(message.seq, message);
  }
  if (!state.config?.fifo && message.visible_at <= now) state.ready.set(message.seq, message);
  else state.timed.push({ at: message.visible_at, seq: message.seq });
}

export function removeMessage(state: QueueState, message: StoredMessage, writes: RecordWrite[]): void {
  state.messages.delete(message.seq);
  state.ready.delete(message.seq);
  state.bytes -= message.bytes;
  if (message.group_id !== null || state.config?.fifo) {
    const groupId = message.group_id ?? '';
    const group = state.groups.get(groupId);
    if (group) {
      group.delete(message.seq);
      if (group.size === 0) state.groups.delete(groupId);
    }
  }
  writes.push({ subkey: messageKey(message.seq), value: undefined });
  if (message.receipt !== null) writes.push({ subkey: deliveryKey(message.seq), value: undefined });
}

export const writeMessage = (message: StoredMessage): RecordWrite => ({ subkey: messageKey(message.seq), value: { ...message } });
export const writeDelivery = (message: StoredMessage): RecordWrite => ({
  subkey: deliveryKey(message.seq),
  value: { visible_at: message.visible_at, receive_count: message.receive_count, receipt: message.receipt } satisfies DeliveryState,
});

/** Moves messages whose time has come from the heap to `ready` (standard) and drops stale heap entries. */
export function promote(state: QueueState, now: number): void {
  const fifo = state.config?.fifo ?? false;
  for (let entry = state.timed.peek(); entry && entry.at <= now; entry = state.timed.peek()) {
    state.timed.pop();
    const message = state.messages.get(entry.seq);
    if (!fifo && message && message.visible_at === entry.at && !state.ready.has(message.seq)) state.ready.set(message.seq, message);
  }
}

/** When the next message becomes receivable (null: none is waiting for its time). */
export function nextVisibleAt(state: QueueState): number | null {
  for (let entry = state.timed.peek(); entry; entry = state.timed.peek()) {
    const message = state.messages.get(entry.seq);
    if (message && message.visible_at === entry.at) return entry.at;
    state.timed.pop();
  }
  return null;
}

export const retentionMs = (config: QueueConfig) => config.message_retention_minutes * 60_000;

export function isExpired(config: QueueConfig, message: StoredMessage, now: number): boolean {
  return message.enqueued_at + retentionMs(config) <= now;
}

/** Whether a receive now would find a message (it may still be moved to the DLQ or expired). */
export function hasReceivable(state: QueueState, now: number): boolean {
  if (!state.config) return false;
  if (!state.config.fifo) {
    promote(state, now);
    return state.ready.size > 0;
  }
  for (const group of state.groups.values()) {
    const head = group.values().next().value as StoredMessage | undefined;
    if (head && head.visible_at <= now) return true;
  }
  return false;
}

export interface TurnOutput {
  writes: RecordWrite[];
  sends: ActorSend[];
  replies: DeferredReply[];
}

/**
 * Receives up to `max` messages: each gets receive_count + 1, a new receipt
 * handle and is invisible for the visibility timeout. A message already
 * received max_receive_count times goes to the dead-letter queue instead
 * (through the outbox); an expired one is dropped.
 */
export function take(state: QueueState, now: number, max: number, visibility_ms: number | null, context: TurnContext, out: TurnOutput): ReceivedMessage[] {
  const config = state.config!;
  const received: ReceivedMessage[] = [];
  const invisibleFor = visibility_ms ?? config.visibility_timeout_seconds * 1000;
  const deliver = (message: StoredMessage): 'taken' | 'skipped' => {
    if (isExpired(config, message, now)) {
      removeMessage(state, message, out.writes);
      return 'skipped';
    }
    if (config.dead_letter_queue !== null && config.max_receive_count > 0 && message.receive_count >= config.max_receive_count && !message.dead_letter_refused) {
      removeMessage(state, message, out.writes);
      out.sends.push({
        kind: MQ_QUEUE_KIND,
        key: mqQueueKey(tenantOf(context.key), config.dead_letter_queue),
        message: { op: 'dead-letter', source_queue: config.name, copy: copyOf(message) } satisfies QueueMessage,
      });
      return 'skipped';
    }
    state.ready.delete(message.seq);
    message.receive_count += 1;
    message.receipt = `${message.seq.toString(36)}.${context.newId()}`;
    message.visible_at = now + invisibleFor;
    state.timed.push({ at: message.visible_at, seq: message.seq });
    out.writes.push(writeDelivery(message));
    received.push({
      message_id: message.message_id,
      receipt_handle: message.receipt,
      body: message.body,
      attributes: message.attributes,
      receive_count: message.receive_count,
      sent_at: message.sent_at,
      group_id: message.group_id,
    });
    return 'taken';
  };

  if (!config.fifo) {
    promote(state, now);
    for (const message of state.ready.values()) {
      if (received.length >= max) break;
      if (deliver(message) === 'skipped') state.ready.delete(message.seq);
    }
    return received;
  }
  // FIFO: a group is receivable when its first message is; then its messages
  // in order until one is not (in flight) or the batch is full.
  for (const group of [...state.groups.values()]) {
    if (received.length >= max) break;
    for (const message of [...group.values()]) {
      if (received.length >= max || message.visible_at > now) break;
      deliver(message);
    }
  }
  return received;
}

export function copyOf(message: StoredMessage): MessageCopy {
  return {
    message_id: message.message_id,
    body: message.body,
    attributes: message.attributes,
    sent_at: message.sent_at,
    group_id: message.group_id,
    receive_count: message.receive_count,
  };
}

export function bodyBytes(body: string): number {
  return Buffer.byteLength(body, 'utf8');
}

/** Queues a message (a send, a topic's copy or a dead-letter move). */
export function enqueue(
  state: QueueState,
  now: number,
  fields: { message_id: string; body: string; attributes: Attributes; sent_at: number; group_id: string | null; receive_count: number; delay_seconds: number; dead_letter_refused: boolean },
  out: TurnOutput,
): StoredMessage {
  const message: StoredMessage = {
    seq: state.nextSeq++,
    message_id: fields.message_id,
    body: fields.body,
    bytes: bodyBytes(fields.body),
    attributes: fields.attributes,
    sent_at: fields.sent_at,
    enqueued_at: now,
    visible_at: now + fields.delay_seconds * 1000,
    receive_count: fields.receive_count,
    receipt: null,
    group_id: fields.group_id,
    dead_letter_refused: fields.dead_letter_refused,
  };
  insertMessage(state, message, now);
  out.writes.push(writeMessage(message));
  return message;
}

/** The sweep alarm: the first message's retention end or the first de-duplication id's window end. */
export function armSweep(state: QueueState): AlarmChange[] {
  const config = state.config;
  if (!config) return [];
  let due: number | null = null;
  const first = state.messages.values().next().value as StoredMessage | undefined;
  if (first) due = first.enqueued_at + retentionMs(config);
  const firstDedup = state.dedup.values().next().value as { expires_at: number } | undefined;
  if (firstDedup && (due === null || firstDedup.expires_at < due)) due = firstDedup.expires_at;
  // Nothing to expire: a stale alarm left set only costs an empty turn.
  if (due === null || due === state.sweepDue) return [];
  state.sweepDue = due;
  return [{ name: SWEEP_ALARM, due_ms: due }];
}

export function sweep(state: QueueState, now: number, out: TurnOutput): void {
  const config = state.config;
  if (!config) return;
  let budget: number = mqLimits.sweep_batch_max;
  for (const message of state.messages.values()) {
    if (budget-- <= 0 || !isExpired(config, message, now)) break;
    removeMessage(state, message, out.writes);
  }
  for (const [id, entry] of state.dedup) {
    if (budget-- <= 0 || entry.expires_at > now) break;
    state.dedup.delete(id);
    out.writes.push({ subkey: 'd:' + id, value: undefined });
  }
}

export function statistics(state: QueueState, now: number): QueueStatistics {
  let visible = 0;
  let inFlight = 0;
  let delayed = 0;
  for (const message of state.messages.values()) {
    if (message.visible_at <= now) visible++;
    else if (message.receipt !== null) inFlight++;
    else delayed++;
  }
  const first = state.messages.values().next().value as StoredMessage | undefined;
  return {
    approximate_message_count: visible,
    approximate_not_visible_count: inFlight,
    approximate_delayed_count: delayed,
    oldest_message_age_seconds: first ? Math.max(0, Math.floor((now - first.sent_at) / 1000)) : 0,
  };
}

/** The receipt handle's message, if the handle is its latest one. */
export function messageOfHandle(state: QueueState, handle: string): StoredMessage | undefined {
  const dot = handle.indexOf('.');
  if (dot <= 0) return undefined;
  const seq = Number.parseInt(handle.slice(0, dot), 36);
  const message = state.messages.get(seq);
  return message && message.receipt === handle ? message : undefined;
}
