import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadDirectory, stepDirectory, type DirectoryState } from './directory-state.js';
import { MQ_DIRECTORY_KIND, MQ_QUEUE_KIND, MQ_TOPIC_KIND, type DirectoryMessage, type QueueMessage, type TopicMessage } from './messages.js';
import { loadQueue, stepQueue, type QueueState } from './queue-state.js';
import { loadTopic, stepTopic, type TopicState } from './topic-state.js';

/** One queue (key [tenant, name]): its messages as keyed records, so a turn costs O(change), not O(queue). */
export const mqQueueActor: RecordsActorDefinition<QueueState, QueueMessage, unknown> = {
  kind: MQ_QUEUE_KIND,
  storage: 'records',
  load: loadQueue,
  step: stepQueue,
};

/** One topic (key [tenant, name]): its subscriptions; a publish fans out through the outbox. */
export const mqTopicActor: RecordsActorDefinition<TopicState, TopicMessage, unknown> = {
  kind: MQ_TOPIC_KIND,
  storage: 'records',
  load: loadTopic,
  step: stepTopic,
};

/** One directory per tenant (key [tenant]): the list index of its queues and topics. */
export const mqDirectoryActor: RecordsActorDefinition<DirectoryState, DirectoryMessage, unknown> = {
  kind: MQ_DIRECTORY_KIND,
  storage: 'records',
  load: loadDirectory,
  step: stepDirectory,
};

export const mqActors = [mqQueueActor, mqTopicActor, mqDirectoryActor];
