import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import {
  MQ_DIRECTORY_KIND,
  MQ_QUEUE_KIND,
  MQ_TOPIC_KIND,
  mqDirectoryKey,
  mqLimits,
  mqQueueKey,
  mqTopicKey,
  type Attributes,
  type ChangeVisibilityView,
  type MessageCopy,
  type QueueConfig,
  type QueueDetailView,
  type QueueMessage,
  type QueueSettings,
  type QueueStatistics,
  type QueueSubscriptionView,
  type ReceivedMessage,
  type SendView,
} from './messages.js';
import { VisibilityHeap } from './visibility-heap.js';

/**
 * One message queue (a `records` actor keyed [tenant, name]): pure domain logic.
 *
 * Records:
 *   c             the queue's config (absent: no queue)
 *   v             the last revision sent to the directory (kept across delete)
 *   m:<seq>       one message as sent (seq zero-padded: records load in arrival order)
 *   r:<seq>       its delivery state once received (visible_at, receive_count, receipt):
 *                 a receive rewrites this small record, never the body
 *   d:<dedup id>  a FIFO de-duplication id and the message it named, until the window ends
 *   s:<topic>     a topic subscription of this queue (the topic holds the authoritative copy)
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

type Waiter =
  | { type: 'receive'; request_id: string; max_messages: number; visibility_ms: number | null; deadline: number }
  | { type: 'await'; request_id: string; deadline: number };

export interface QueueState {
  config: QueueConfig | null;
  rev: number;
  messages: Map<number, StoredMessage>;
  nextSeq: number;
  bytes: number;
  /** Standard queues: receivable messages, oldest first (as of the last promote). */
  ready: Map<number, StoredMessage>;
  /** Messages that become receivable later. */
  timed: VisibilityHeap;
  /** FIFO queues: the messages of each group in order. */
  groups: Map<string, Map<number, StoredMessage>>;
  /** FIFO de-duplication ids, oldest first. */
  dedup: Map<string, { message_id: string; expires_at: number }>;
  subscriptions: Map<string, QueueSubscriptionView>;
  waiters: Waiter[];
  /** The due time of the alarms as last set by this activation (undefined: not known since load). */
  sweepDue: number | null | undefined;
  wakeDue: number | null | undefined;
}

const SWEEP_ALARM = 'sweep';
const WAKE_ALARM = 'wake';

export function emptyQueue(): QueueState {
  return {
    config: null,
    rev: 0,
    messages: new Map(),
    nextSeq: 1,
    bytes: 0,
    ready: new Map(),
    timed: new VisibilityHeap(),
    groups: new Map(),
    dedup: new Map(),
    subscriptions: new Map(),
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

function tenantOf(key: string): string {
  return (JSON.parse(key) as [string, string])[0];
}

function notFound(name?: string): ServiceError {
  return new ServiceError('mq_queue_not_found', name ? `No queue named ${JSON.stringify(name)}.` : undefined);
}

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

/**
 * Adds a message to the in-memory structures. `now` decides whether it is
 * receivable at once (standard: into `ready`) or later (into the heap);
 * -Infinity puts every message into the heap (load: the first turn promotes).
 */
function insertMessage(state: QueueState, message: StoredMessage, now: number): void {
  state.messages.set(message.seq, message);
  state.bytes += message.bytes;
  if (state.config?.fifo) {
    const groupId = message.group_id ?? '';
    let group = state.groups.get(groupId);
    if (!group) state.groups.set(groupId, (group = new Map()));
    group.set(message.seq, message);
  }
  if (!state.config?.fifo && message.visible_at <= now) state.ready.set(message.seq, message);
  else state.timed.push(message.visible_at, message.seq);
}

function removeMessage(state: QueueState, message: StoredMessage, writes: RecordWrite[]): void {
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

const writeMessage = (message: StoredMessage): RecordWrite => ({ subkey: messageKey(message.seq), value: { ...message } });
const writeDelivery = (message: StoredMessage): RecordWrite => ({
  subkey: deliveryKey(message.seq),
  value: { visible_at: message.visible_at, receive_count: message.receive_count, receipt: message.receipt } satisfies DeliveryState,
});

/** Moves messages whose time has come from the heap to `ready` (standard) and drops stale heap entries. */
function promote(state: QueueState, now: number): void {
  const fifo = state.config?.fifo ?? false;
  for (let entry = state.timed.peek(); entry && entry.at <= now; entry = state.timed.peek()) {
    state.timed.pop();
    const message = state.messages.get(entry.seq);
    if (!fifo && message && message.visible_at === entry.at && !state.ready.has(message.seq)) state.ready.set(message.seq, message);
  }
}

/** When the next message becomes receivable (null: none is waiting for its time). */
function nextVisibleAt(state: QueueState): number | null {
  for (let entry = state.timed.peek(); entry; entry = state.timed.peek()) {
    const message = state.messages.get(entry.seq);
    if (message && message.visible_at === entry.at) return entry.at;
    state.timed.pop();
  }
  return null;
}

const retentionMs = (config: QueueConfig) => config.message_retention_minutes * 60_000;

function isExpired(config: QueueConfig, message: StoredMessage, now: number): boolean {
  return message.enqueued_at + retentionMs(config) <= now;
}

/** Whether a receive now would find a message (it may still be moved to the DLQ or expired). */
function hasReceivable(state: QueueState, now: number): boolean {
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

interface TurnOutput {
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
function take(state: QueueState, now: number, max: number, visibility_ms: number | null, context: TurnContext, out: TurnOutput): ReceivedMessage[] {
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
    state.timed.push(message.visible_at, message.seq);
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

function copyOf(message: StoredMessage): MessageCopy {
  return {
    message_id: message.message_id,
    body: message.body,
    attributes: message.attributes,
    sent_at: message.sent_at,
    group_id: message.group_id,
    receive_count: message.receive_count,
  };
}

function bodyBytes(body: string): number {
  return Buffer.byteLength(body, 'utf8');
}

/** Queues a message (a send, a topic's copy or a dead-letter move). */
function enqueue(
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

/** Answers waiting receives that can be served now, and those whose wait is over. */
function serveWaiters(state: QueueState, now: number, context: TurnContext, out: TurnOutput): void {
  if (state.waiters.length === 0 || !state.config) return;
  const still: Waiter[] = [];
  // Once a receive finds less than it asked for, the queue has nothing more to hand out in this turn:
  // the waiters after it only need their deadline checked.
  let exhausted = false;
  for (const waiter of state.waiters) {
    if (waiter.type === 'await') {
      const available = !exhausted && hasReceivable(state, now);
      if (available || waiter.deadline <= now) out.replies.push({ request_id: waiter.request_id, reply: { available } });
      else still.push(waiter);
      continue;
    }
    const messages = exhausted ? [] : take(state, now, waiter.max_messages, waiter.visibility_ms, context, out);
    if (messages.length < waiter.max_messages) exhausted = true;
    if (messages.length > 0 || waiter.deadline <= now) out.replies.push({ request_id: waiter.request_id, reply: messages });
    else still.push(waiter);
  }
  state.waiters = still;
}

/** The wake alarm: the next waiter's deadline or the next message becoming receivable, while receives wait. */
function armWake(state: QueueState): AlarmChange[] {
  if (state.waiters.length === 0) return [];
  let due = Math.min(...state.waiters.map((waiter) => waiter.deadline));
  const visible = nextVisibleAt(state);
  if (visible !== null && visible < due) due = visible;
  if (due === state.wakeDue) return [];
  state.wakeDue = due;
  return [{ name: WAKE_ALARM, due_ms: due }];
}

/** The sweep alarm: the first message's retention end or the first de-duplication id's window end. */
function armSweep(state: QueueState): AlarmChange[] {
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

function sweep(state: QueueState, now: number, out: TurnOutput): void {
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

function detail(state: QueueState, now: number): QueueDetailView {
  return { config: state.config!, statistics: statistics(state, now), subscriptions: [...state.subscriptions.values()] };
}

function sameSettings(a: QueueSettings, b: QueueSettings): boolean {
  return (
    a.visibility_timeout_seconds === b.visibility_timeout_seconds &&
    a.delay_seconds === b.delay_seconds &&
    a.message_retention_minutes === b.message_retention_minutes &&
    a.fifo === b.fifo &&
    a.max_receive_count === b.max_receive_count &&
    a.dead_letter_queue === b.dead_letter_queue
  );
}

/** The receipt handle's message, if the handle is its latest one. */
function messageOfHandle(state: QueueState, handle: string): StoredMessage | undefined {
  const dot = handle.indexOf('.');
  if (dot <= 0) return undefined;
  const seq = Number.parseInt(handle.slice(0, dot), 36);
  const message = state.messages.get(seq);
  return message && message.receipt === handle ? message : undefined;
}

const invalidHandle = () => new ServiceError('mq_receipt_handle_invalid');

export function stepQueue(state: QueueState, message: QueueMessage | AlarmMessage, context: TurnContext): TurnResult<QueueState, unknown> {
  const now = context.now;
  const out: TurnOutput = { writes: [], sends: [], replies: [] };
  const name = (JSON.parse(context.key) as [string, string])[1];
  const finish = (reply: unknown, extra: { defer?: boolean } = {}): TurnResult<QueueState, unknown> => {
    serveWaiters(state, now, context, out);
    const alarms = [...armSweep(state), ...armWake(state)];
    return { state, reply, writes: out.writes, sends: out.sends, replies: out.replies, alarms, ...extra };
  };
  const existing = () => {
    if (!state.config) throw notFound(name);
    return state.config;
  };

  switch (message.op) {
    case 'create': {
      const settings = message.settings;
      if (state.config) {
        if (sameSettings(state.config, settings)) return { state, reply: { config: state.config, created: false } };
        throw new ServiceError('mq_queue_exists', `A queue named ${JSON.stringify(name)} already exists with other settings.`);
      }
      if (settings.dead_letter_queue === name) throw badRequest('body.dead_letter_queue', 'cannot be the queue itself');
      const config: QueueConfig = { ...settings, queue_id: context.newId('q_'), name, created_at: now, updated_at: now };
      state.config = config;
      state.rev += 1;
      out.writes.push({ subkey: 'c', value: config }, { subkey: 'v', value: state.rev });
      out.sends.push({
        kind: MQ_DIRECTORY_KIND,
        key: mqDirectoryKey(tenantOf(context.key)),
        message: { op: 'upsert', type: 'queue', entry: { name, id: config.queue_id, created_at: now }, rev: state.rev },
      });
      return finish({ config, created: true });
    }

    case 'get':
      existing();
      return { state, reply: detail(state, now) };

    case 'delete': {
      const config = existing();
      for (const stored of [...state.messages.values()]) removeMessage(state, stored, out.writes);
      for (const id of state.dedup.keys()) out.writes.push({ subkey: 'd:' + id, value: undefined });
      for (const topic of state.subscriptions.keys()) out.writes.push({ subkey: 's:' + topic, value: undefined });
      const tenant = tenantOf(context.key);
      for (const subscription of state.subscriptions.values()) {
        out.sends.push({ kind: MQ_TOPIC_KIND, key: mqTopicKey(tenant, subscription.topic_name), message: { op: 'queue-gone', queue_name: name, queue_id: config.queue_id } });
      }
      for (const waiter of state.waiters) out.replies.push({ request_id: waiter.request_id, error: { code: 'mq_queue_not_found', message: `The queue ${JSON.stringify(name)} was deleted.` } });
      const rev = state.rev + 1;
      out.writes.push({ subkey: 'c', value: undefined }, { subkey: 'v', value: rev });
      out.sends.push({ kind: MQ_DIRECTORY_KIND, key: mqDirectoryKey(tenant), message: { op: 'remove', type: 'queue', name, rev } });
      const fresh = emptyQueue();
      fresh.rev = rev;
      return { state: fresh, reply: { deleted: true }, writes: out.writes, sends: out.sends, replies: out.replies };
    }

    case 'purge': {
      existing();
      const purged = state.messages.size;
      for (const stored of [...state.messages.values()]) removeMessage(state, stored, out.writes);
      state.timed.clear();
      return finish({ messages_purged: purged });
    }

    case 'send': {
      const config = existing();
      if (config.fifo) {
        if (message.group_id === undefined) throw badRequest('body.group_id', 'is required on a FIFO queue');
        if (message.delay_seconds !== undefined) throw badRequest('body.delay_seconds', 'is not supported per message on a FIFO queue (set the queue\'s delay_seconds)');
      } else {
        if (message.group_id !== undefined) throw badRequest('body.group_id', 'applies to FIFO queues only');
        if (message.deduplication_id !== undefined) throw badRequest('body.deduplication_id', 'applies to FIFO queues only');
      }
      if (message.deduplication_id !== undefined) {
        const seen = state.dedup.get(message.deduplication_id);
        if (seen && seen.expires_at > now) return { state, reply: { message_id: seen.message_id, duplicate: true } satisfies SendView };
      }
      const bytes = bodyBytes(message.body);
      if (state.messages.size >= mqLimits.queue_messages_max || state.bytes + bytes > mqLimits.queue_bytes_max) {
        throw new ServiceError('mq_queue_full', `The queue holds ${state.messages.size} messages (${state.bytes} bytes); receive and delete some first.`);
      }
      const stored = enqueue(
        state,
        now,
        {
          message_id: context.newId('msg_'),
          body: message.body,
          attributes: message.attributes,
          sent_at: now,
          group_id: message.group_id ?? null,
          receive_count: 0,
          delay_seconds: message.delay_seconds ?? config.delay_seconds,
          dead_letter_refused: false,
        },
        out,
      );
      if (message.deduplication_id !== undefined) {
        const entry = { message_id: stored.message_id, expires_at: now + mqLimits.fifo_deduplication_window_ms };
        state.dedup.delete(message.deduplication_id);
        state.dedup.set(message.deduplication_id, entry);
        out.writes.push({ subkey: 'd:' + message.deduplication_id, value: entry });
        if (state.dedup.size > mqLimits.fifo_deduplication_ids_max) {
          const [oldest] = state.dedup.keys();
          state.dedup.delete(oldest);
          out.writes.push({ subkey: 'd:' + oldest, value: undefined });
        }
      }
      return finish({ message_id: stored.message_id, duplicate: false } satisfies SendView);
    }

    case 'receive': {
      existing();
      // Waiters come first: they asked earlier.
      serveWaiters(state, now, context, out);
      const visibility_ms = message.visibility_timeout_seconds === undefined ? null : message.visibility_timeout_seconds * 1000;
      const received = take(state, now, message.max_messages, visibility_ms, context, out);
      if (received.length > 0 || message.wait_ms <= 0 || context.request_id === null) return finish(received);
      if (state.waiters.length >= mqLimits.waiters_max) {
        throw new ServiceError('actor_overloaded', `Too many receives are waiting on this queue (${mqLimits.waiters_max}).`, { retryAfterSeconds: 1 });
      }
      const wait_ms = Math.min(message.wait_ms, mqLimits.receive_wait_ms_max);
      state.waiters.push({ type: 'receive', request_id: context.request_id, max_messages: message.max_messages, visibility_ms, deadline: now + wait_ms });
      return finish(undefined, { defer: true });
    }

    case 'await-message': {
      existing();
      const available = hasReceivable(state, now);
      if (available || message.wait_ms <= 0 || context.request_id === null) return { state, reply: { available } };
      if (state.waiters.length >= mqLimits.waiters_max) {
        throw new ServiceError('actor_overloaded', `Too many receives are waiting on this queue (${mqLimits.waiters_max}).`, { retryAfterSeconds: 1 });
      }
      state.waiters.push({ type: 'await', request_id: context.request_id, deadline: now + Math.min(message.wait_ms, mqLimits.receive_wait_ms_max) });
      return finish(undefined, { defer: true });
    }

    case 'delete-message': {
      existing();
      const stored = messageOfHandle(state, message.receipt_handle);
      if (!stored) throw invalidHandle();
      removeMessage(state, stored, out.writes);
      return finish({ deleted: true });
    }

    case 'change-visibility': {
      existing();
      const stored = messageOfHandle(state, message.receipt_handle);
      if (!stored) throw invalidHandle();
      if (stored.visible_at <= now) throw new ServiceError('mq_message_not_in_flight');
      stored.visible_at = now + message.visibility_timeout_seconds * 1000;
      state.timed.push(stored.visible_at, stored.seq);
      out.writes.push(writeDelivery(stored));
      return finish({
        message_id: stored.message_id,
        receipt_handle: message.receipt_handle,
        visibility_timeout_seconds: message.visibility_timeout_seconds,
        visible_at: stored.visible_at,
      } satisfies ChangeVisibilityView);
    }

    case 'attach': {
      const config = existing();
      if (config.fifo) throw badRequest('body.queue_name', 'is a FIFO queue: topics deliver to standard queues only (as SNS standard topics)');
      const subscription: QueueSubscriptionView = {
        topic_name: message.topic_name,
        topic_id: message.topic_id,
        filter_policy: message.filter_policy,
        subscribed_at: message.subscribed_at,
      };
      state.subscriptions.set(message.topic_name, subscription);
      state.config = { ...config, updated_at: now };
      out.writes.push({ subkey: 's:' + message.topic_name, value: subscription }, { subkey: 'c', value: state.config });
      return finish({ queue_id: config.queue_id });
    }

    case 'detach': {
      const config = state.config;
      const subscription = state.subscriptions.get(message.topic_name);
      if (!config || !subscription || subscription.topic_id !== message.topic_id) return { state };
      state.subscriptions.delete(message.topic_name);
      state.config = { ...config, updated_at: now };
      out.writes.push({ subkey: 's:' + message.topic_name, value: undefined }, { subkey: 'c', value: state.config });
      return finish(undefined);
    }

    case 'deliver': {
      // A copy for a queue deleted (and maybe re-created) since the subscription is dropped.
      const config = state.config;
      if (!config || config.queue_id !== message.queue_id) return { state };
      enqueue(state, now, { ...message.copy, receive_count: 0, delay_seconds: config.delay_seconds, dead_letter_refused: false }, out);
      return finish(undefined);
    }

    case 'dead-letter': {
      const config = state.config;
      const refuse = (reason: string) => ({
        state,
        sends: [{ kind: MQ_QUEUE_KIND, key: mqQueueKey(tenantOf(context.key), message.source_queue), message: { op: 'dead-letter-refused', copy: message.copy, reason } satisfies QueueMessage }],
      });
      if (!config) return refuse('the dead-letter queue does not exist');
      if (config.fifo !== (message.copy.group_id !== null)) return refuse('the dead-letter queue is not of the same type (FIFO or standard) as its source');
      enqueue(state, now, { ...message.copy, receive_count: 0, delay_seconds: 0, dead_letter_refused: false }, out);
      return finish(undefined);
    }

    case 'dead-letter-refused': {
      // The message goes back to its queue and is received there like any other.
      const config = state.config;
      if (!config) return { state };
      enqueue(state, now, { ...message.copy, delay_seconds: 0, dead_letter_refused: true }, out);
      return finish(undefined);
    }

    case 'flow-call':
      return answerFlowCall(stepQueue, state, message, context);

    case '$alarm': {
      if (message.name === SWEEP_ALARM) {
        state.sweepDue = null;
        sweep(state, now, out);
      } else if (message.name === WAKE_ALARM) {
        state.wakeDue = null;
      }
      return finish(undefined);
    }
  }
}
