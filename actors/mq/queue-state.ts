import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall, flowCall, type FlowError } from '../flow-call.js';
import { armWake, serveWaiters, WAKE_ALARM } from './long-poll.js';
import {
  MQ_DIRECTORY_KIND,
  MQ_QUEUE_KIND,
  MQ_TOPIC_KIND,
  mqDirectoryKey,
  mqLimits,
  mqQueueKey,
  mqTopicKey,
  type ChangeVisibilityView,
  type QueueConfig,
  type QueueDetailView,
  type QueueMessage,
  type QueueSettings,
  type QueueSubscriptionView,
  type RedriveDestinationView,
  type RedriveView,
  type SendView,
} from './messages.js';
import {
  armSweep,
  bodyBytes,
  copyOf,
  emptyQueue,
  enqueue,
  hasReceivable,
  messageOfHandle,
  removeMessage,
  statistics,
  sweep,
  SWEEP_ALARM,
  take,
  tenantOf,
  writeDelivery,
  type PendingRedrive,
  type QueueState,
  type TurnOutput,
} from './queue-messages.js';

export { emptyQueue, loadQueue, statistics, type PendingRedrive, type QueueState, type StoredMessage } from './queue-messages.js';

/**
 * The step of one message queue (the `mq-queue` records actor, key [tenant,
 * name]): its lifecycle, the data plane, subscriptions, fan-out copies and
 * dead-letter moves. The messages' storage and order are in
 * queue-messages.ts, waiting receives in long-poll.ts.
 *
 * A redrive is a flow of the source queue: it records the redrive (x:<flow
 * id>) and asks the destination, through the outbox, whether it exists
 * (flow-call `redrive-destination`); the destination's answer moves the
 * messages in one turn and answers the route's deferred ask, or answers
 * mq_queue_not_found and moves nothing. A destination deleted after it
 * answered still sends each message back (the dead-letter move's rule).
 */

const REDRIVE_STEP = 'redrive-destination';

function notFound(name?: string): ServiceError {
  return new ServiceError('mq_queue_not_found', name ? `No queue named ${JSON.stringify(name)}.` : undefined);
}

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
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

const invalidHandle = () => new ServiceError('mq_receipt_handle_invalid');

/**
 * Moves up to `max_messages` messages not in flight, oldest first, to `destination`: each as a
 * dead-letter move, through the outbox (exactly one copy arrives, its receive_count from 0; a
 * destination that is missing by then, or of the other type, sends it back here).
 */
function redrive(state: QueueState, config: QueueConfig, destination: string, max_messages: number, now: number, tenant: string, out: TurnOutput): RedriveView {
  // A message in flight (received, its visibility timeout running) stays: its consumer may still delete it.
  const movable = [...state.messages.values()].filter((stored) => stored.receipt === null || stored.visible_at <= now).sort((a, b) => a.seq - b.seq);
  const moving = movable.slice(0, max_messages);
  for (const stored of moving) {
    removeMessage(state, stored, out.writes);
    out.sends.push({ kind: MQ_QUEUE_KIND, key: mqQueueKey(tenant, destination), message: { op: 'dead-letter', source_queue: config.name, copy: copyOf(stored) } satisfies QueueMessage });
  }
  return { moved: moving.length, remaining: state.messages.size };
}

/** The error a redrive answers when its destination refused the check (it does not exist). */
function destinationRefused(destination: string, error: FlowError): FlowError {
  if (error.code !== 'mq_queue_not_found') return error;
  const message = 'does not exist';
  return { code: 'mq_queue_not_found', message: `The destination queue ${JSON.stringify(destination)} does not exist; nothing was moved.`, details: [{ field: 'body.destination', message }] };
}

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
      // A redrive still waiting for its destination moves nothing: its answer will find no record.
      for (const pending of state.redrives.values()) {
        out.writes.push({ subkey: 'x:' + pending.flow_id, value: undefined });
        if (pending.request_id !== null) out.replies.push({ request_id: pending.request_id, error: { code: 'mq_queue_not_found', message: `The queue ${JSON.stringify(name)} was deleted.` } });
      }
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

    case 'redrive': {
      const config = existing();
      if (message.destination === name) throw badRequest('body.destination', 'cannot be the queue itself');
      // First the destination's check (a flow step through the outbox); the move is the answer's turn.
      const pending: PendingRedrive = {
        flow_id: context.newId('rd_'),
        request_id: context.request_id,
        queue_id: config.queue_id,
        destination: message.destination,
        max_messages: message.max_messages,
      };
      state.redrives.set(pending.flow_id, pending);
      out.writes.push({ subkey: 'x:' + pending.flow_id, value: pending });
      out.sends.push(
        flowCall(MQ_QUEUE_KIND, mqQueueKey(tenantOf(context.key), message.destination), { op: 'redrive-destination' } satisfies QueueMessage, {
          kind: MQ_QUEUE_KIND,
          key: context.key,
          flow_id: pending.flow_id,
          step: REDRIVE_STEP,
        }),
      );
      return { state, writes: out.writes, sends: out.sends, defer: context.request_id !== null };
    }

    case 'redrive-destination': {
      const config = existing();
      return { state, reply: { queue_id: config.queue_id, fifo: config.fifo } satisfies RedriveDestinationView };
    }

    case 'flow-answer': {
      const pending = message.step === REDRIVE_STEP ? state.redrives.get(message.flow_id) : undefined;
      // Late, repeated, or for a redrive its queue's deletion already answered.
      if (!pending) return { state };
      state.redrives.delete(pending.flow_id);
      out.writes.push({ subkey: 'x:' + pending.flow_id, value: undefined });
      const answer = (reply: { reply: RedriveView } | { error: FlowError }) => {
        if (pending.request_id !== null) out.replies.push({ request_id: pending.request_id, ...reply });
      };
      const config = state.config;
      if (!config || config.queue_id !== pending.queue_id) {
        answer({ error: { code: 'mq_queue_not_found', message: `The queue ${JSON.stringify(name)} was deleted.` } });
        return { state, writes: out.writes, replies: out.replies };
      }
      if (!message.ok) {
        answer({ error: destinationRefused(pending.destination, message.error) });
        return finish(undefined);
      }
      answer({ reply: redrive(state, config, pending.destination, pending.max_messages, now, tenantOf(context.key), out) });
      return finish(undefined);
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
      state.timed.push({ at: stored.visible_at, seq: stored.seq });
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
