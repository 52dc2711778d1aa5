/** The public surface of the runtime. Sibling layers import from here only. */
export type { ActorClient, AskOptions } from './actor-client.js';
export { ActorRuntime, type ActorRuntimeOptions, type PublishedEvent, type RemoteDelivery } from './actor-runtime.js';
export { keys as storageKeys } from './storage-keys.js';
export {
  isAlarm,
  type ActorDefinition,
  type ActorEvent,
  type ActorSend,
  type AlarmChange,
  type AlarmMessage,
  type DeferredReply,
  type RecordWrite,
  type RecordsActorDefinition,
  type SnapshotActorDefinition,
  type TurnContext,
  type TurnResult,
} from './actor.js';
export { assert, AssertionError } from './assert.js';
export { ManualClock, SystemClock, type Clock, type TimerHandle } from './clock.js';
export { errorCodes, isServiceError, ServiceError, type ErrorCode } from './errors.js';
export { randomId } from './ids.js';
export { limits, type Limits } from './limits.js';
export { serialisedBytes } from './serialised-bytes.js';
export { ownEntry } from './own-entry.js';
export { MinHeap } from './min-heap.js';
export { silentLogger, type RuntimeLogger, type RuntimeObserver } from './observer.js';
export { embeddedPartitionCount, EMBEDDED_PARTITIONS_DEFAULT, PartitionCountMismatch, PARTITIONS_MAX, refuseOtherLayout } from './partition-count.js';
export { partitionOf } from './partitioning.js';
export {
  PARTITION_READ_LIMIT_MAX,
  PARTITION_READS_KIND,
  partitionReadsKey,
  type GroupsRead,
  type PartitionRead,
  type SnapshotsRead,
} from './partition-reads.js';
export { LmdbStore, type LmdbStoreOptions } from './store-lmdb.js';
export type { Store, StoreKey, WriteOp } from './store.js';
