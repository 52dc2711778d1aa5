import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadDirectory, stepDirectory, type DirectoryState } from './directory-state.js';
import {
  JOB_DIRECTORY_KIND,
  JOB_PROBE_KIND,
  JOB_QUEUE_KIND,
  JOB_REGISTRY_KIND,
  type DirectoryMessage,
  type ProbeMessage,
  type QueueMessage,
  type RegistryMessage,
} from './messages.js';
import { stepProbe, type ProbeState } from './probe-state.js';
import { loadQueue, stepQueue, type QueueState } from './queue-state.js';
import { loadRegistry, stepRegistry, type RegistryState } from './registry-state.js';

/** One job queue (key = jobQueueKey(tenant, name)): config, jobs, due schedule, DLQ, stats as records. */
export const jobQueueActor: RecordsActorDefinition<QueueState, QueueMessage, unknown> = {
  kind: JOB_QUEUE_KIND,
  storage: 'records',
  load: loadQueue,
  step: stepQueue,
};

/** A tenant's queues (key = jobDirectoryKey(tenant)): list, batch and cancel-bulk coordinator. */
export const jobDirectoryActor: RecordsActorDefinition<DirectoryState, DirectoryMessage, unknown> = {
  kind: JOB_DIRECTORY_KIND,
  storage: 'records',
  load: loadDirectory,
  step: stepDirectory,
};

/** Every queue of every tenant (one actor): the administrative fan-outs. */
export const jobRegistryActor: RecordsActorDefinition<RegistryState, RegistryMessage, unknown> = {
  kind: JOB_REGISTRY_KIND,
  storage: 'records',
  load: loadRegistry,
  step: stepRegistry,
};

/** The scheduler probe of a node (key = node id): a durable alarm every few seconds, seen by the health check. */
export const jobProbeActor: SnapshotActorDefinition<ProbeState, ProbeMessage, unknown> = {
  kind: JOB_PROBE_KIND,
  storage: 'snapshot',
  initial: () => ({ ticks: 0 }),
  step: stepProbe,
};

export const jobActors = [jobQueueActor, jobDirectoryActor, jobRegistryActor, jobProbeActor];
