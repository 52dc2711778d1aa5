import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, serialisedBytes } from '../../runtime/index.js';
import {
  MQ_DIRECTORY_KIND,
  MQ_QUEUE_KIND,
  MQ_TOPIC_KIND,
  SORT_FIELDS,
  mqDirectoryKey,
  mqLimits,
  mqQueueKey,
  mqTopicKey,
  parseFilterPolicy,
  type Attributes,
  type ChangeVisibilityView,
  type DirectoryListView,
  type DirectoryMessage,
  type FilterPolicy,
  type PublishView,
  type QueueConfig,
  type QueueDetailView,
  type QueueMessage,
  type ReceivedMessage,
  type SendView,
  type SortField,
  type SubscriptionView,
  type TopicConfig,
  type TopicDetailView,
  type TopicMessage,
} from '../../actors/mq/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/**
 * The message queue (spec doc 1 §4.6; conventions "Message queue data
 * plane"; docs/api/mq.md): queues with an SQS-like data plane, topics with
 * SNS-like subscriptions and filter policies.
 */
const tags = ['mq'];
const base = '/api/v1/mq';

const QUEUE_NAME = Type.String({
  minLength: 1,
  maxLength: mqLimits.queue_name_length_max,
  pattern: '^[A-Za-z0-9_-]+(\\.fifo)?$',
  description: 'Letters, digits, - and _, optionally ending in .fifo (as SQS).',
});
const TOPIC_NAME = Type.String({ minLength: 1, maxLength: mqLimits.topic_name_length_max, pattern: '^[A-Za-z0-9_-]+$', description: 'Letters, digits, - and _ (as SNS).' });
const RECEIPT_HANDLE = Type.String({ minLength: 3, maxLength: 128, pattern: '^[0-9a-z]+\\.[A-Za-z0-9_-]+$' });
const QueueParams = Type.Object({ queue_name: QUEUE_NAME });
const RedriveBody = Type.Object({
  destination: QUEUE_NAME,
  max_messages: Type.Optional(Type.Integer({ minimum: 1, maximum: mqLimits.redrive_messages_max })),
});
const MessageParams = Type.Object({ queue_name: QUEUE_NAME, receipt_handle: RECEIPT_HANDLE });
const TopicParams = Type.Object({ topic_name: TOPIC_NAME });
const SubscriptionParams = Type.Object({ topic_name: TOPIC_NAME, queue_name: QUEUE_NAME });

const Timestamp = Type.String({ format: 'date-time' });
const AttributeValue = Type.Union([Type.String({ maxLength: mqLimits.attribute_value_length_max }), Type.Number(), Type.Boolean()]);
const AttributesSchema = Type.Record(Type.String(), AttributeValue, {
  maxProperties: mqLimits.attributes_max,
  description: `At most ${mqLimits.attributes_max} attributes; names of letters, digits, _, - and . (at most ${mqLimits.attribute_name_length_max}); values strings, numbers or booleans. Filter policies match on them.`,
});
const BODY = Type.String({ minLength: 1, maxLength: mqLimits.body_bytes_max, description: `A string of at most ${mqLimits.body_bytes_max} UTF-8 bytes (JSON: serialise it).` });

const ListQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0, description: 'Default 20, at most 100.' })),
  sort_by: Type.Optional(Type.Union(SORT_FIELDS.map((field) => Type.Literal(field)), { description: 'name (default), -name, created_at, -created_at.' })),
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Substring of the name, case-insensitive.' })),
});

const CreateQueueBody = Type.Object({
  name: QUEUE_NAME,
  visibility_timeout_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: mqLimits.visibility_timeout_seconds_max, description: 'Default 30.' })),
  delay_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: mqLimits.delay_seconds_max, description: 'Default 0.' })),
  message_retention_minutes: Type.Optional(Type.Integer({ minimum: mqLimits.retention_minutes_min, maximum: mqLimits.retention_minutes_max, description: 'Default 5760 (4 days).' })),
  fifo: Type.Optional(Type.Boolean({ description: 'Must agree with the name: true for a name ending in .fifo, false for any other (as SQS); absent: from the name.' })),
  max_receive_count: Type.Optional(Type.Integer({ minimum: 1, maximum: mqLimits.max_receive_count_max, description: 'With dead_letter_queue: receives before a message moves there.' })),
  dead_letter_queue: Type.Optional(Type.Union([QUEUE_NAME, Type.Null()])),
});
const MqQueue = Type.Object(
  {
    queue_id: Type.String(),
    name: Type.String(),
    created_at: Timestamp,
    visibility_timeout_seconds: Type.Integer(),
    delay_seconds: Type.Integer(),
    message_retention_minutes: Type.Integer(),
    fifo: Type.Boolean(),
    max_receive_count: Type.Integer({ description: '0: no dead-letter queue.' }),
    dead_letter_queue: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'MqQueue' },
);
const QueueStatisticsSchema = Type.Object({
  approximate_message_count: Type.Integer(),
  approximate_not_visible_count: Type.Integer(),
  approximate_delayed_count: Type.Integer(),
  oldest_message_age_seconds: Type.Integer(),
});
const MqQueueDetail = Type.Object(
  {
    ...MqQueue.properties,
    updated_at: Timestamp,
    statistics: QueueStatisticsSchema,
    subscriptions: Type.Array(Type.Object({ topic_name: Type.String(), filter_policy: Type.Unknown(), subscribed_at: Timestamp })),
  },
  { title: 'MqQueueDetail' },
);
const MqQueueSummary = Type.Object(
  {
    queue_id: Type.String(),
    name: Type.String(),
    created_at: Timestamp,
    approximate_message_count: Type.Integer(),
    approximate_not_visible_count: Type.Integer(),
    approximate_delayed_count: Type.Integer(),
    fifo: Type.Boolean(),
    dead_letter_queue: Type.Union([Type.String(), Type.Null()]),
    subscriptions: Type.Array(Type.String()),
  },
  { title: 'MqQueueSummary' },
);

const SendBody = Type.Object({
  body: BODY,
  attributes: Type.Optional(AttributesSchema),
  delay_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: mqLimits.delay_seconds_max, description: 'Standard queues only; default the queue\'s.' })),
  group_id: Type.Optional(Type.String({ minLength: 1, maxLength: mqLimits.group_id_length_max, description: 'FIFO queues: required; order is kept per group.' })),
  deduplication_id: Type.Optional(
    Type.String({ minLength: 1, maxLength: mqLimits.deduplication_id_length_max, description: 'FIFO queues: a second send with the same id within 5 minutes queues nothing and returns the first message_id.' }),
  ),
});
const ReceiveBody = Type.Object({
  max_messages: Type.Optional(Type.Integer({ minimum: 1, maximum: mqLimits.max_messages_max, description: 'Default 1.' })),
  wait_time_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: mqLimits.wait_time_seconds_max, description: 'Long polling: wait up to this long for a message. Default 0.' })),
  visibility_timeout_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: mqLimits.visibility_timeout_seconds_max, description: "Default the queue's." })),
});
const ReceivedSchema = Type.Object(
  {
    message_id: Type.String(),
    receipt_handle: Type.String(),
    body: Type.String(),
    attributes: Type.Record(Type.String(), Type.Unknown()),
    receive_count: Type.Integer(),
    sent_at: Timestamp,
    group_id: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'MqReceivedMessage' },
);
const VisibilityBody = Type.Object({ visibility_timeout_seconds: Type.Integer({ minimum: 0, maximum: mqLimits.visibility_timeout_seconds_max }) });
const VisibilityReply = Type.Object({ message_id: Type.String(), receipt_handle: Type.String(), visibility_timeout_seconds: Type.Integer(), visible_at: Timestamp });

const CreateTopicBody = Type.Object({
  name: TOPIC_NAME,
  max_message_size_bytes: Type.Optional(Type.Integer({ minimum: 1, maximum: mqLimits.body_bytes_max, description: `Default ${mqLimits.body_bytes_max}.` })),
  retention_minutes: Type.Optional(
    Type.Integer({ minimum: 1, maximum: mqLimits.topic_retention_minutes_max, description: `How long publish deduplication_ids are remembered. Default ${mqLimits.topic_retention_minutes_default}.` }),
  ),
  tags: Type.Optional(Type.Record(Type.String(), Type.String({ maxLength: 256 }), { maxProperties: mqLimits.topic_tags_max })),
});
const MqTopic = Type.Object(
  {
    topic_id: Type.String(),
    name: Type.String(),
    created_at: Timestamp,
    max_message_size_bytes: Type.Integer(),
    retention_minutes: Type.Integer(),
    tags: Type.Record(Type.String(), Type.String()),
  },
  { title: 'MqTopic' },
);
const MqTopicDetail = Type.Object({ ...MqTopic.properties, message_count: Type.Integer(), subscription_count: Type.Integer(), updated_at: Timestamp }, { title: 'MqTopicDetail' });
const MqTopicSummary = Type.Object(
  { topic_id: Type.String(), name: Type.String(), created_at: Timestamp, message_count: Type.Integer(), subscription_count: Type.Integer() },
  { title: 'MqTopicSummary' },
);
const SubscribeBody = Type.Object({
  queue_name: QUEUE_NAME,
  filter_policy: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Array(Type.Unknown())), Type.Null()], { description: 'SNS filter policy on message attributes; see docs/api/mq.md.' })),
  raw_message_delivery: Type.Optional(Type.Boolean({ description: 'true: the queue gets the body as published; false (default): an envelope (docs/api/mq.md).' })),
});
const MqSubscription = Type.Object(
  {
    subscription_id: Type.String(),
    topic_name: Type.String(),
    queue_name: Type.String(),
    filter_policy: Type.Unknown(),
    raw_message_delivery: Type.Boolean(),
    created_at: Timestamp,
  },
  { title: 'MqSubscription' },
);
const PublishBody = Type.Object({
  body: BODY,
  attributes: Type.Optional(AttributesSchema),
  deduplication_id: Type.Optional(
    Type.String({ minLength: 1, maxLength: mqLimits.deduplication_id_length_max, description: "A publish with the same id within the topic's retention_minutes fans out nothing and returns the first message_id." }),
  ),
});

const ATTRIBUTE_NAME = /^[A-Za-z0-9_.-]+$/;

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function checkBody(body: string): void {
  if (Buffer.byteLength(body, 'utf8') > mqLimits.body_bytes_max) throw badRequest('body.body', `is larger than ${mqLimits.body_bytes_max} bytes`);
}

function checkAttributes(attributes: Attributes | undefined): Attributes {
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (name.length > mqLimits.attribute_name_length_max || !ATTRIBUTE_NAME.test(name)) {
      throw badRequest('body.attributes', `name ${JSON.stringify(name.slice(0, 64))} must be 1-${mqLimits.attribute_name_length_max} letters, digits, _, - or .`);
    }
    if (typeof value === 'number' && !Number.isFinite(value)) throw badRequest('body.attributes', `${name} must be a finite number`);
  }
  return attributes ?? {};
}

function checkFilterPolicy(policy: FilterPolicy | null | undefined): FilterPolicy | null {
  if (policy === undefined || policy === null) return null;
  if (serialisedBytes(policy) > mqLimits.filter_policy_bytes_max) throw badRequest('body.filter_policy', `is larger than ${mqLimits.filter_policy_bytes_max} bytes`);
  parseFilterPolicy(policy);
  return policy;
}

function queueShape(config: QueueConfig) {
  return {
    queue_id: config.queue_id,
    name: config.name,
    created_at: isoTime(config.created_at)!,
    visibility_timeout_seconds: config.visibility_timeout_seconds,
    delay_seconds: config.delay_seconds,
    message_retention_minutes: config.message_retention_minutes,
    fifo: config.fifo,
    max_receive_count: config.max_receive_count,
    dead_letter_queue: config.dead_letter_queue,
  };
}

function topicShape(config: TopicConfig) {
  return {
    topic_id: config.topic_id,
    name: config.name,
    created_at: isoTime(config.created_at)!,
    max_message_size_bytes: config.max_message_size_bytes,
    retention_minutes: config.retention_minutes,
    tags: config.tags,
  };
}

function subscriptionShape(view: SubscriptionView) {
  return {
    subscription_id: view.subscription_id,
    topic_name: view.topic_name,
    queue_name: view.queue_name,
    filter_policy: view.filter_policy,
    raw_message_delivery: view.raw_message_delivery,
    created_at: isoTime(view.created_at)!,
  };
}

function receivedShape(message: ReceivedMessage) {
  return { ...message, sent_at: isoTime(message.sent_at)! };
}

/** A receive may come without a body: every parameter has a default (as SQS's ReceiveMessage). */
async function emptyBodyIsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

/** Deleted since the directory answered: leave it out of the list. */
function goneAsNull(code: string) {
  return (error: unknown) => {
    if (error instanceof ServiceError && error.code === code) return null;
    throw error;
  };
}

export function mqRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const queue = <Reply>(tenant: string, name: string, message: QueueMessage) => services.actors.ask<Reply>(MQ_QUEUE_KIND, mqQueueKey(tenant, name), message);
  const topic = <Reply>(tenant: string, name: string, message: TopicMessage) => services.actors.ask<Reply>(MQ_TOPIC_KIND, mqTopicKey(tenant, name), message);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, TSchema>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  /**
   * One page of the tenant's queues or topics: the directory's page of names (one read), then
   * each one's detail (read-only, in parallel); one deleted in between is left out.
   */
  async function listDirectory<Detail>(tenant: string, type: 'queue' | 'topic', query: Static<typeof ListQuery>) {
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(100, query.page_size || 20);
    const sort_by: SortField = query.sort_by ?? 'name';
    const index = await services.actors.ask<DirectoryListView>(
      MQ_DIRECTORY_KIND,
      mqDirectoryKey(tenant),
      { op: 'list', type, q: query.q, sort_by, page, page_size } satisfies DirectoryMessage,
      { readOnly: true },
    );
    const [kind, key, gone] = type === 'queue' ? [MQ_QUEUE_KIND, mqQueueKey, 'mq_queue_not_found' as const] : [MQ_TOPIC_KIND, mqTopicKey, 'mq_topic_not_found' as const];
    const details = await Promise.all(
      index.entries.map((entry) =>
        services.actors
          .ask<Detail>(kind, key(tenant, entry.name), { op: 'get' } satisfies QueueMessage & TopicMessage, { readOnly: true })
          .catch(goneAsNull(gone)),
      ),
    );
    return {
      pagination: { page, page_size, total: index.total, has_more: page * page_size < index.total },
      details: details.filter((detail): detail is Awaited<Detail> => detail !== null),
    };
  }

  // ---- queues ----

  app.get<{ Querystring: Static<typeof ListQuery> }>(`${base}/queues`, {
    onRequest: authenticate,
    schema: schema('List the tenant\'s queues: q on the name, sort_by name|-name|created_at|-created_at.', { querystring: ListQuery }, {
      200: Type.Object({ pagination: Pagination, queues: Type.Array(MqQueueSummary) }),
    }),
  }, async (request) => {
    const { pagination, details } = await listDirectory<QueueDetailView>(requirePrincipal(request).tenant, 'queue', request.query);
    return {
      pagination,
      queues: details.map((detail) => ({
        queue_id: detail.config.queue_id,
        name: detail.config.name,
        created_at: isoTime(detail.config.created_at)!,
        approximate_message_count: detail.statistics.approximate_message_count,
        approximate_not_visible_count: detail.statistics.approximate_not_visible_count,
        approximate_delayed_count: detail.statistics.approximate_delayed_count,
        fifo: detail.config.fifo,
        dead_letter_queue: detail.config.dead_letter_queue,
        subscriptions: detail.subscriptions.map((subscription) => subscription.topic_name).sort(),
      })),
    };
  });

  app.post<{ Body: Static<typeof CreateQueueBody> }>(`${base}/queues`, {
    onRequest: authenticate,
    schema: schema(
      'Create a queue: 201; the same name with the same settings again: 200 with the queue; with other settings: 409 mq_queue_exists.',
      { body: CreateQueueBody },
      { 200: MqQueue, 201: MqQueue },
      [409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const dead_letter_queue = body.dead_letter_queue ?? null;
    if (dead_letter_queue !== null && body.max_receive_count === undefined) throw badRequest('body.max_receive_count', 'is required with dead_letter_queue');
    if (dead_letter_queue === null && body.max_receive_count !== undefined) throw badRequest('body.dead_letter_queue', 'is required with max_receive_count');
    // As SQS: a FIFO queue's name ends in .fifo, a standard queue's does not.
    const fifo = body.name.endsWith('.fifo');
    if (body.fifo === true && !fifo) throw badRequest('body.fifo', `is true but the name ${JSON.stringify(body.name)} does not end in .fifo: a FIFO queue's name must end in .fifo`);
    if (body.fifo === false && fifo) throw badRequest('body.fifo', `is false but the name ${JSON.stringify(body.name)} ends in .fifo: only a FIFO queue's name may end in .fifo`);
    const created = await queue<{ config: QueueConfig; created: boolean }>(principal.tenant, body.name, {
      op: 'create',
      name: body.name,
      settings: {
        visibility_timeout_seconds: body.visibility_timeout_seconds ?? mqLimits.visibility_timeout_seconds_default,
        delay_seconds: body.delay_seconds ?? 0,
        message_retention_minutes: body.message_retention_minutes ?? mqLimits.retention_minutes_default,
        fifo,
        max_receive_count: body.max_receive_count ?? 0,
        dead_letter_queue,
      },
    });
    return reply.code(created.created ? 201 : 200).send(queueShape(created.config));
  });

  app.get<{ Params: Static<typeof QueueParams> }>(`${base}/queues/:queue_name`, {
    onRequest: authenticate,
    schema: schema('A queue with its statistics and subscriptions.', { params: QueueParams }, { 200: MqQueueDetail }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const detail = await services.actors.ask<QueueDetailView>(MQ_QUEUE_KIND, mqQueueKey(principal.tenant, request.params.queue_name), { op: 'get' } satisfies QueueMessage, {
      readOnly: true,
    });
    return {
      ...queueShape(detail.config),
      updated_at: isoTime(detail.config.updated_at)!,
      statistics: detail.statistics,
      subscriptions: detail.subscriptions.map((s) => ({ topic_name: s.topic_name, filter_policy: s.filter_policy, subscribed_at: isoTime(s.subscribed_at)! })),
    };
  });

  app.delete<{ Params: Static<typeof QueueParams> }>(`${base}/queues/:queue_name`, {
    onRequest: authenticate,
    schema: schema('Delete a queue with its messages; its topic subscriptions go too.', { params: QueueParams }, { 200: MessageBody }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await queue(principal.tenant, request.params.queue_name, { op: 'delete' });
    return { message: `Queue ${request.params.queue_name} deleted.` };
  });

  app.post<{ Params: Static<typeof QueueParams> }>(`${base}/queues/:queue_name/purge`, {
    onRequest: authenticate,
    schema: schema('Delete every message of the queue (in flight too).', { params: QueueParams }, { 200: Type.Object({ messages_purged: Type.Integer() }) }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return queue<{ messages_purged: number }>(principal.tenant, request.params.queue_name, { op: 'purge' });
  });

  app.post<{ Params: Static<typeof QueueParams>; Body: Static<typeof RedriveBody> }>(`${base}/queues/:queue_name/redrive`, {
    onRequest: authenticate,
    schema: schema(
      `Move messages not in flight, oldest first (at most max_messages, default and at most ${mqLimits.redrive_messages_max}), to the destination queue: a dead-letter queue's redrive. A destination that does not exist: 404 mq_queue_not_found, nothing moves. Each arrives exactly once with receive_count 0; a destination deleted meanwhile, or of the other type (FIFO, standard), sends it back. remaining: messages left in this queue.`,
      { params: QueueParams, body: RedriveBody },
      { 200: Type.Object({ moved: Type.Integer(), remaining: Type.Integer() }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const max_messages = request.body.max_messages ?? mqLimits.redrive_messages_max;
    return queue<{ moved: number; remaining: number }>(principal.tenant, request.params.queue_name, { op: 'redrive', destination: request.body.destination, max_messages });
  });

  // ---- the data plane ----

  app.post<{ Params: Static<typeof QueueParams>; Body: Static<typeof SendBody> }>(`${base}/queues/:queue_name/messages`, {
    onRequest: authenticate,
    schema: schema('Send a message. 201 once it is durably stored.', { params: QueueParams, body: SendBody }, { 201: Type.Object({ message_id: Type.String() }) }, [404, 409]),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const { body, delay_seconds, group_id, deduplication_id } = request.body;
    checkBody(body);
    const attributes = checkAttributes(request.body.attributes);
    const sent = await queue<SendView>(principal.tenant, request.params.queue_name, { op: 'send', body, attributes, delay_seconds, group_id, deduplication_id });
    return reply.code(201).send({ message_id: sent.message_id });
  });

  /**
   * One long-poll receive on one queue, answered by `deadline`. The queue actor holds one receive for at most
   * receive_wait_ms_max (the runtime bounds a deferred ask). A longer wait first waits, read-only, for a message
   * to be there, then receives with what is left of it. If another consumer took that message first, the same
   * receive is asked again with the time still left (the same operation on the same actor, not a chain), so an
   * empty answer always means the time is up.
   */
  const receiveBy = async (key: string, deadline: number, options: { max_messages: number; visibility_timeout_seconds: number | undefined }): Promise<ReceivedMessage[]> => {
    const clock = services.clock;
    for (let remaining = deadline - clock.now(); remaining > mqLimits.receive_wait_ms_max; remaining = deadline - clock.now()) {
      const wait_ms = Math.min(mqLimits.receive_wait_ms_max, remaining - mqLimits.receive_wait_ms_max);
      const { available } = await services.actors.ask<{ available: boolean }>(MQ_QUEUE_KIND, key, { op: 'await-message', wait_ms } satisfies QueueMessage, { readOnly: true });
      if (available) break;
    }
    const wait_ms = Math.max(0, Math.min(mqLimits.receive_wait_ms_max, deadline - clock.now()));
    const messages = await services.actors.ask<ReceivedMessage[]>(MQ_QUEUE_KIND, key, { op: 'receive', wait_ms, ...options } satisfies QueueMessage);
    if (messages.length > 0 || clock.now() >= deadline) return messages;
    return receiveBy(key, deadline, options);
  };

  app.post<{ Params: Static<typeof QueueParams>; Body: Static<typeof ReceiveBody> }>(`${base}/queues/:queue_name/receive`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema(
      'Receive up to max_messages; with wait_time_seconds, wait (long polling) until a message arrives or the time is up (then an empty list).',
      { params: QueueParams, body: ReceiveBody },
      { 200: Type.Object({ messages: Type.Array(ReceivedSchema) }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const key = mqQueueKey(principal.tenant, request.params.queue_name);
    const { max_messages = 1, wait_time_seconds = 0, visibility_timeout_seconds } = request.body;
    const deadline = services.clock.now() + wait_time_seconds * 1000;
    const messages = await receiveBy(key, deadline, { max_messages, visibility_timeout_seconds });
    return { messages: messages.map(receivedShape) };
  });

  app.delete<{ Params: Static<typeof MessageParams> }>(`${base}/queues/:queue_name/messages/:receipt_handle`, {
    onRequest: authenticate,
    schema: schema(
      "Delete a received message by its latest receipt handle. 404 mq_receipt_handle_invalid: the handle deletes nothing (already deleted, expired, or received again since).",
      { params: MessageParams },
      { 204: Type.Null() },
      [404],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await queue(principal.tenant, request.params.queue_name, { op: 'delete-message', receipt_handle: request.params.receipt_handle });
    return reply.code(204).send();
  });

  app.patch<{ Params: Static<typeof MessageParams>; Body: Static<typeof VisibilityBody> }>(`${base}/queues/:queue_name/messages/:receipt_handle`, {
    onRequest: authenticate,
    schema: schema(
      'Change an in-flight message\'s visibility timeout, from now (0: visible again at once).',
      { params: MessageParams, body: VisibilityBody },
      { 200: VisibilityReply },
      [404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await queue<ChangeVisibilityView>(principal.tenant, request.params.queue_name, {
      op: 'change-visibility',
      receipt_handle: request.params.receipt_handle,
      visibility_timeout_seconds: request.body.visibility_timeout_seconds,
    });
    return { ...view, visible_at: isoTime(view.visible_at)! };
  });

  // ---- topics ----

  app.get<{ Querystring: Static<typeof ListQuery> }>(`${base}/topics`, {
    onRequest: authenticate,
    schema: schema('List the tenant\'s topics: q on the name, sort_by name|-name|created_at|-created_at.', { querystring: ListQuery }, {
      200: Type.Object({ pagination: Pagination, topics: Type.Array(MqTopicSummary) }),
    }),
  }, async (request) => {
    const { pagination, details } = await listDirectory<TopicDetailView>(requirePrincipal(request).tenant, 'topic', request.query);
    return {
      pagination,
      topics: details.map((detail) => ({
        topic_id: detail.config.topic_id,
        name: detail.config.name,
        created_at: isoTime(detail.config.created_at)!,
        message_count: detail.message_count,
        subscription_count: detail.subscription_count,
      })),
    };
  });

  app.post<{ Body: Static<typeof CreateTopicBody> }>(`${base}/topics`, {
    onRequest: authenticate,
    schema: schema(
      'Create a topic: 201; the same name with the same settings again: 200 with the topic; with other settings: 409 mq_topic_exists.',
      { body: CreateTopicBody },
      { 200: MqTopic, 201: MqTopic },
      [409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const created = await topic<{ config: TopicConfig; created: boolean }>(principal.tenant, body.name, {
      op: 'create',
      name: body.name,
      settings: {
        max_message_size_bytes: body.max_message_size_bytes ?? mqLimits.body_bytes_max,
        retention_minutes: body.retention_minutes ?? mqLimits.topic_retention_minutes_default,
        tags: body.tags ?? {},
      },
    });
    return reply.code(created.created ? 201 : 200).send(topicShape(created.config));
  });

  app.get<{ Params: Static<typeof TopicParams> }>(`${base}/topics/:topic_name`, {
    onRequest: authenticate,
    schema: schema('A topic with its counts.', { params: TopicParams }, { 200: MqTopicDetail }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const detail = await services.actors.ask<TopicDetailView>(MQ_TOPIC_KIND, mqTopicKey(principal.tenant, request.params.topic_name), { op: 'get' } satisfies TopicMessage, {
      readOnly: true,
    });
    return { ...topicShape(detail.config), message_count: detail.message_count, subscription_count: detail.subscription_count, updated_at: isoTime(detail.config.updated_at)! };
  });

  app.delete<{ Params: Static<typeof TopicParams> }>(`${base}/topics/:topic_name`, {
    onRequest: authenticate,
    schema: schema('Delete a topic and its subscriptions (the queues stay).', { params: TopicParams }, { 200: MessageBody }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await topic(principal.tenant, request.params.topic_name, { op: 'delete' });
    return { message: `Topic ${request.params.topic_name} deleted.` };
  });

  app.get<{ Params: Static<typeof TopicParams> }>(`${base}/topics/:topic_name/subscriptions`, {
    onRequest: authenticate,
    schema: schema('The topic\'s subscriptions, oldest first.', { params: TopicParams }, { 200: Type.Object({ subscriptions: Type.Array(MqSubscription) }) }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const views = await services.actors.ask<SubscriptionView[]>(MQ_TOPIC_KIND, mqTopicKey(principal.tenant, request.params.topic_name), { op: 'list-subscriptions' } satisfies TopicMessage, {
      readOnly: true,
    });
    return { subscriptions: views.map(subscriptionShape) };
  });

  app.post<{ Params: Static<typeof TopicParams>; Body: Static<typeof SubscribeBody> }>(`${base}/topics/:topic_name/subscriptions`, {
    onRequest: authenticate,
    schema: schema(
      'Subscribe a standard queue of the tenant: 201; the same subscription again: 200; other settings: 409 mq_subscription_exists.',
      { params: TopicParams, body: SubscribeBody },
      { 200: MqSubscription, 201: MqSubscription },
      [404, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const filter_policy = checkFilterPolicy(request.body.filter_policy);
    const result = await topic<{ subscription: SubscriptionView; created: boolean }>(principal.tenant, request.params.topic_name, {
      op: 'subscribe',
      queue_name: request.body.queue_name,
      filter_policy,
      raw_message_delivery: request.body.raw_message_delivery ?? false,
    });
    return reply.code(result.created ? 201 : 200).send(subscriptionShape(result.subscription));
  });

  app.delete<{ Params: Static<typeof SubscriptionParams> }>(`${base}/topics/:topic_name/subscriptions/:queue_name`, {
    onRequest: authenticate,
    schema: schema('Unsubscribe a queue from the topic.', { params: SubscriptionParams }, { 200: MessageBody }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await topic(principal.tenant, request.params.topic_name, { op: 'unsubscribe', queue_name: request.params.queue_name });
    return { message: `Queue ${request.params.queue_name} unsubscribed from topic ${request.params.topic_name}.` };
  });

  app.post<{ Params: Static<typeof TopicParams>; Body: Static<typeof PublishBody> }>(`${base}/topics/:topic_name/messages`, {
    onRequest: authenticate,
    schema: schema(
      'Publish: a copy to every subscribed queue whose filter policy matches the attributes; delivered_to counts them. 201 once the fan-out is durably queued.',
      { params: TopicParams, body: PublishBody },
      { 201: Type.Object({ message_id: Type.String(), delivered_to: Type.Integer() }) },
      [404],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    checkBody(request.body.body);
    const attributes = checkAttributes(request.body.attributes);
    const published = await topic<PublishView>(principal.tenant, request.params.topic_name, {
      op: 'publish',
      body: request.body.body,
      attributes,
      deduplication_id: request.body.deduplication_id,
    });
    return reply.code(201).send({ message_id: published.message_id, delivered_to: published.delivered_to });
  });
}
