import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall } from '../flow-call.js';
import { matchesFilterPolicy, parseFilterPolicy, type ParsedPolicy } from './filter-policy.js';
import {
  MQ_DIRECTORY_KIND,
  MQ_QUEUE_KIND,
  MQ_TOPIC_KIND,
  mqDirectoryKey,
  mqLimits,
  mqQueueKey,
  type FilterPolicy,
  type NotificationEnvelope,
  type PublishView,
  type QueueMessage,
  type SubscriptionView,
  type TopicConfig,
  type TopicDetailView,
  type TopicMessage,
  type TopicSettings,
} from './messages.js';

/**
 * One topic (a `records` actor keyed [tenant, name]): its subscriptions and
 * the fan-out of a publish, pure.
 *
 * Records:
 *   c             config (absent: no topic)
 *   v             the last revision sent to the directory (kept across delete)
 *   n             messages published
 *   s:<queue>     a subscription
 *   p:<queue>     a subscription being created: the queue's answer is awaited
 *   d:<dedup id>  a publish de-duplication id, for retention_minutes
 *
 * A publish is one turn: it sends one outbox message per subscribed queue
 * whose filter policy matches, all in the turn's commit. The outbox delivers
 * each after the commit, retries it until the queue has committed it, and
 * the queue's runtime de-duplicates it by its outbox id; so a crash between
 * two queues neither loses a copy nor delivers one twice.
 *
 * Subscribing is a flow: the topic asks the queue (flow-call `attach`; the
 * queue must exist and be a standard queue, and records the subscription for
 * its own detail view) and commits the subscription when the queue answers.
 */
interface Subscription {
  view: SubscriptionView;
  policy: ParsedPolicy | null;
}

interface PendingSubscription {
  flow_id: string;
  request_id: string | null;
  topic_id: string;
  view: SubscriptionView;
  /** The queue's id if it reported its deletion while its answer was on the way (its answer must not subscribe it). */
  gone_queue_id?: string;
}

export interface TopicState {
  config: TopicConfig | null;
  rev: number;
  message_count: number;
  subscriptions: Map<string, Subscription>;
  pending: Map<string, PendingSubscription>;
  dedup: Map<string, { message_id: string; delivered_to: number; expires_at: number }>;
  sweepDue: number | null | undefined;
}

const SWEEP_ALARM = 'sweep';

export function emptyTopic(): TopicState {
  return { config: null, rev: 0, message_count: 0, subscriptions: new Map(), pending: new Map(), dedup: new Map(), sweepDue: undefined };
}

function subscriptionOf(view: SubscriptionView): Subscription {
  return { view, policy: view.filter_policy ? parseFilterPolicy(view.filter_policy) : null };
}

export function loadTopic(_key: string, records: Iterable<[string, unknown]>): TopicState {
  const state = emptyTopic();
  const dedup: [string, { message_id: string; delivered_to: number; expires_at: number }][] = [];
  for (const [subkey, value] of records) {
    if (subkey === 'c') state.config = value as TopicConfig;
    else if (subkey === 'v') state.rev = value as number;
    else if (subkey === 'n') state.message_count = value as number;
    else if (subkey.startsWith('s:')) state.subscriptions.set(subkey.slice(2), subscriptionOf(value as SubscriptionView));
    else if (subkey.startsWith('p:')) state.pending.set(subkey.slice(2), value as PendingSubscription);
    else if (subkey.startsWith('d:')) dedup.push([subkey.slice(2), value as { message_id: string; delivered_to: number; expires_at: number }]);
  }
  dedup.sort((a, b) => a[1].expires_at - b[1].expires_at);
  for (const [id, entry] of dedup) state.dedup.set(id, entry);
  return state;
}

function tenantOf(key: string): string {
  return (JSON.parse(key) as [string, string])[0];
}

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function sameSettings(a: TopicSettings, b: TopicSettings): boolean {
  return a.max_message_size_bytes === b.max_message_size_bytes && a.retention_minutes === b.retention_minutes && JSON.stringify(a.tags) === JSON.stringify(b.tags);
}

const samePolicy = (a: FilterPolicy | null, b: FilterPolicy | null) => JSON.stringify(a) === JSON.stringify(b);

function armSweep(state: TopicState): AlarmChange[] {
  const first = state.dedup.values().next().value as { expires_at: number } | undefined;
  if (!first || first.expires_at === state.sweepDue) return [];
  state.sweepDue = first.expires_at;
  return [{ name: SWEEP_ALARM, due_ms: first.expires_at }];
}

export function stepTopic(state: TopicState, message: TopicMessage | AlarmMessage, context: TurnContext): TurnResult<TopicState, unknown> {
  const now = context.now;
  const name = (JSON.parse(context.key) as [string, string])[1];
  const tenant = tenantOf(context.key);
  const existing = () => {
    if (!state.config) throw new ServiceError('mq_topic_not_found', `No topic named ${JSON.stringify(name)}.`);
    return state.config;
  };
  const toQueue = (queue_name: string, body: QueueMessage): ActorSend => ({ kind: MQ_QUEUE_KIND, key: mqQueueKey(tenant, queue_name), message: body });
  const detail = (): TopicDetailView => ({ config: state.config!, message_count: state.message_count, subscription_count: state.subscriptions.size });

  switch (message.op) {
    case 'create': {
      if (state.config) {
        if (sameSettings(state.config, message.settings)) return { state, reply: { config: state.config, created: false } };
        throw new ServiceError('mq_topic_exists', `A topic named ${JSON.stringify(name)} already exists with other settings.`);
      }
      const config: TopicConfig = { ...message.settings, topic_id: context.newId('t_'), name, created_at: now, updated_at: now };
      state.config = config;
      state.message_count = 0;
      state.rev += 1;
      return {
        state,
        reply: { config, created: true },
        writes: [
          { subkey: 'c', value: config },
          { subkey: 'v', value: state.rev },
          { subkey: 'n', value: 0 },
        ],
        sends: [{ kind: MQ_DIRECTORY_KIND, key: mqDirectoryKey(tenant), message: { op: 'upsert', type: 'topic', entry: { name, id: config.topic_id, created_at: now }, rev: state.rev } }],
      };
    }

    case 'get':
      existing();
      return { state, reply: detail() };

    case 'list-subscriptions':
      existing();
      return { state, reply: [...state.subscriptions.values()].map((s) => s.view).sort((a, b) => a.created_at - b.created_at || (a.queue_name < b.queue_name ? -1 : 1)) };

    case 'delete': {
      const config = existing();
      const writes: RecordWrite[] = [];
      const sends: ActorSend[] = [];
      for (const [queue_name] of state.subscriptions) {
        writes.push({ subkey: 's:' + queue_name, value: undefined });
        sends.push(toQueue(queue_name, { op: 'detach', topic_name: name, topic_id: config.topic_id }));
      }
      for (const id of state.dedup.keys()) writes.push({ subkey: 'd:' + id, value: undefined });
      const rev = state.rev + 1;
      writes.push({ subkey: 'c', value: undefined }, { subkey: 'n', value: undefined }, { subkey: 'v', value: rev });
      sends.push({ kind: MQ_DIRECTORY_KIND, key: mqDirectoryKey(tenant), message: { op: 'remove', type: 'topic', name, rev } });
      // Subscriptions still being created stay: their answer detaches the queue (below).
      const fresh = emptyTopic();
      fresh.rev = rev;
      fresh.pending = state.pending;
      return { state: fresh, reply: { deleted: true }, writes, sends };
    }

    case 'publish': {
      const config = existing();
      if (Buffer.byteLength(message.body, 'utf8') > config.max_message_size_bytes) {
        throw badRequest('body.body', `is larger than the topic's max_message_size_bytes (${config.max_message_size_bytes})`);
      }
      if (message.deduplication_id !== undefined) {
        const seen = state.dedup.get(message.deduplication_id);
        if (seen && seen.expires_at > now) return { state, reply: { message_id: seen.message_id, delivered_to: seen.delivered_to, duplicate: true } satisfies PublishView };
      }
      const message_id = context.newId('msg_');
      const sends: ActorSend[] = [];
      let envelope: string | null = null;
      for (const { view, policy } of state.subscriptions.values()) {
        if (!matchesFilterPolicy(policy, message.attributes)) continue;
        if (!view.raw_message_delivery && envelope === null) {
          const notification: NotificationEnvelope = {
            type: 'Notification',
            message_id,
            topic_name: name,
            body: message.body,
            attributes: message.attributes,
            timestamp: new Date(now).toISOString(),
          };
          envelope = JSON.stringify(notification);
        }
        const copy = view.raw_message_delivery
          ? { message_id, body: message.body, attributes: message.attributes, sent_at: now, group_id: null, receive_count: 0 }
          : { message_id, body: envelope!, attributes: {}, sent_at: now, group_id: null, receive_count: 0 };
        sends.push(toQueue(view.queue_name, { op: 'deliver', queue_id: view.queue_id, copy }));
      }
      state.message_count += 1;
      const writes: RecordWrite[] = [{ subkey: 'n', value: state.message_count }];
      if (message.deduplication_id !== undefined) {
        const entry = { message_id, delivered_to: sends.length, expires_at: now + config.retention_minutes * 60_000 };
        state.dedup.delete(message.deduplication_id);
        state.dedup.set(message.deduplication_id, entry);
        writes.push({ subkey: 'd:' + message.deduplication_id, value: entry });
        if (state.dedup.size > mqLimits.topic_deduplication_ids_max) {
          const [oldest] = state.dedup.keys();
          state.dedup.delete(oldest);
          writes.push({ subkey: 'd:' + oldest, value: undefined });
        }
      }
      return { state, reply: { message_id, delivered_to: sends.length, duplicate: false } satisfies PublishView, writes, sends, alarms: armSweep(state) };
    }

    case 'subscribe': {
      const config = existing();
      const current = state.subscriptions.get(message.queue_name);
      if (current) {
        if (samePolicy(current.view.filter_policy, message.filter_policy) && current.view.raw_message_delivery === message.raw_message_delivery) {
          return { state, reply: { subscription: current.view, created: false } };
        }
        throw new ServiceError('mq_subscription_exists', `The queue ${JSON.stringify(message.queue_name)} is already subscribed with other settings; delete that subscription first.`);
      }
      if (state.pending.has(message.queue_name)) throw new ServiceError('conflict', `A subscription of ${JSON.stringify(message.queue_name)} is being created.`);
      if (state.subscriptions.size + state.pending.size >= mqLimits.subscriptions_per_topic_max) {
        throw new ServiceError('mq_limit_reached', `A topic has at most ${mqLimits.subscriptions_per_topic_max} subscriptions.`);
      }
      if (message.filter_policy) parseFilterPolicy(message.filter_policy);
      const subscription_id = context.newId('sub_');
      const pending: PendingSubscription = {
        flow_id: subscription_id,
        request_id: context.request_id,
        topic_id: config.topic_id,
        view: {
          subscription_id,
          topic_name: name,
          queue_name: message.queue_name,
          queue_id: '',
          filter_policy: message.filter_policy,
          raw_message_delivery: message.raw_message_delivery,
          created_at: now,
        },
      };
      state.pending.set(message.queue_name, pending);
      const attach: QueueMessage = { op: 'attach', topic_name: name, topic_id: config.topic_id, filter_policy: message.filter_policy, subscribed_at: now };
      return {
        state,
        writes: [{ subkey: 'p:' + message.queue_name, value: pending }],
        sends: [flowCall(MQ_QUEUE_KIND, mqQueueKey(tenant, message.queue_name), attach, { kind: MQ_TOPIC_KIND, key: context.key, flow_id: subscription_id, step: 'attach' })],
        defer: context.request_id !== null,
      };
    }

    case 'flow-answer': {
      const answer = message;
      const pending = [...state.pending.values()].find((p) => p.flow_id === answer.flow_id && answer.step === 'attach');
      if (!pending) return { state };
      const queue_name = pending.view.queue_name;
      state.pending.delete(queue_name);
      const writes: RecordWrite[] = [{ subkey: 'p:' + queue_name, value: undefined }];
      const replyTo = (reply: Omit<DeferredReply, 'request_id'>): DeferredReply[] => (pending.request_id === null ? [] : [{ request_id: pending.request_id, ...reply }]);
      if (!answer.ok) return { state, writes, replies: replyTo({ error: answer.error }) };
      const queue_id = (answer.reply as { queue_id: string }).queue_id;
      if (pending.gone_queue_id === queue_id) {
        return { state, writes, replies: replyTo({ error: { code: 'mq_queue_not_found', message: `The queue ${JSON.stringify(queue_name)} was deleted.` } }) };
      }
      if (!state.config || state.config.topic_id !== pending.topic_id) {
        // The topic was deleted meanwhile: undo the queue's side.
        return {
          state,
          writes,
          sends: [toQueue(queue_name, { op: 'detach', topic_name: name, topic_id: pending.topic_id })],
          replies: replyTo({ error: { code: 'mq_topic_not_found', message: `The topic ${JSON.stringify(name)} was deleted.` } }),
        };
      }
      const view: SubscriptionView = { ...pending.view, queue_id };
      state.subscriptions.set(queue_name, subscriptionOf(view));
      state.config = { ...state.config, updated_at: now };
      writes.push({ subkey: 's:' + queue_name, value: view }, { subkey: 'c', value: state.config });
      return { state, writes, replies: replyTo({ reply: { subscription: view, created: true } }) };
    }

    case 'unsubscribe': {
      const config = existing();
      const current = state.subscriptions.get(message.queue_name);
      if (!current) throw new ServiceError('mq_subscription_not_found', `The queue ${JSON.stringify(message.queue_name)} is not subscribed to this topic.`);
      state.subscriptions.delete(message.queue_name);
      state.config = { ...config, updated_at: now };
      return {
        state,
        reply: { deleted: true },
        writes: [
          { subkey: 's:' + message.queue_name, value: undefined },
          { subkey: 'c', value: state.config },
        ],
        sends: [toQueue(message.queue_name, { op: 'detach', topic_name: name, topic_id: config.topic_id })],
      };
    }

    case 'queue-gone': {
      const pending = state.pending.get(message.queue_name);
      if (pending) {
        // The queue was deleted after it accepted a subscription still on its way back here.
        pending.gone_queue_id = message.queue_id;
        return { state, writes: [{ subkey: 'p:' + message.queue_name, value: { ...pending } }] };
      }
      const current = state.subscriptions.get(message.queue_name);
      if (!state.config || !current || current.view.queue_id !== message.queue_id) return { state };
      state.subscriptions.delete(message.queue_name);
      state.config = { ...state.config, updated_at: now };
      return {
        state,
        writes: [
          { subkey: 's:' + message.queue_name, value: undefined },
          { subkey: 'c', value: state.config },
        ],
      };
    }

    case '$alarm': {
      state.sweepDue = null;
      const writes: RecordWrite[] = [];
      let budget: number = mqLimits.sweep_batch_max;
      for (const [id, entry] of state.dedup) {
        if (budget-- <= 0 || entry.expires_at > now) break;
        state.dedup.delete(id);
        writes.push({ subkey: 'd:' + id, value: undefined });
      }
      return { state, writes, alarms: armSweep(state) };
    }
  }
}
