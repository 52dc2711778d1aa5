import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import { answerSum, startSum, type SumFanout } from './fanout.js';
import { JOB_QUEUE_KIND, JOB_REGISTRY_KIND, jobQueueKey, parseJobQueueKey, type QueueMessage, type RegistryListView, type RegistryMessage } from './messages.js';

/**
 * Every job queue of every tenant: pure logic of the `job-queue-registry`
 * actor (storage `records`, one actor, one record `e:<queue key>` per
 * queue), kept by the queues through the outbox on create and delete. It
 * coordinates the administrative fan-outs: admin cancel-bulk (every queue,
 * one user's jobs or everyone's) and cleanup by retention, and pages the
 * admin list of every queue (read-only).
 */
export const REGISTRY_PREFIX = 'e:';

export interface RegistryState {
  readonly key: string;
  queues: Set<string>;
  sums: Map<string, SumFanout>;
}

type Result = TurnResult<RegistryState, unknown>;

export function loadRegistry(key: string, records: Iterable<[string, unknown]>): RegistryState {
  const state: RegistryState = { key, queues: new Set(), sums: new Map() };
  for (const [subkey] of records) if (subkey.startsWith(REGISTRY_PREFIX)) state.queues.add(subkey.slice(REGISTRY_PREFIX.length));
  return state;
}

export function stepRegistry(state: RegistryState, message: RegistryMessage | AlarmMessage, context: TurnContext): Result {
  const self = { kind: JOB_REGISTRY_KIND, key: state.key };
  switch (message.op) {
    case '$alarm':
      return { state };
    case 'upsert': {
      const key = jobQueueKey(message.tenant, message.name);
      if (state.queues.has(key)) return { state };
      state.queues.add(key);
      return { state, writes: [{ subkey: REGISTRY_PREFIX + key, value: 1 }] };
    }
    case 'remove': {
      const key = jobQueueKey(message.tenant, message.name);
      if (!state.queues.delete(key)) return { state };
      return { state, writes: [{ subkey: REGISTRY_PREFIX + key, value: undefined }] };
    }
    case 'cancel_bulk': {
      const call: QueueMessage = { op: 'cancel', filter: { user_id: message.user_id } };
      const targets = [...state.queues].map((key) => ({ kind: JOB_QUEUE_KIND, key, call }));
      return { state, ...startSum(state.sums, self, targets, 'cancelled', 'cancelled_count', context) };
    }
    case 'cleanup': {
      const call: QueueMessage = { op: 'cleanup', retention_days: message.retention_days };
      const targets = [...state.queues].map((key) => ({ kind: JOB_QUEUE_KIND, key, call }));
      return { state, ...startSum(state.sums, self, targets, 'deleted', 'deleted_count', context) };
    }
    case 'list': {
      // Keys are JSON [tenant, name]: sorting the parsed pairs orders by tenant, then name.
      const all = [...state.queues].map(parseJobQueueKey).sort((a, b) => compare(a.tenant, b.tenant) || compare(a.name, b.name));
      return { state, reply: { queues: all.slice(message.offset, message.offset + message.limit), total: all.length } satisfies RegistryListView };
    }
    case 'flow-answer':
      return { state, replies: answerSum(state.sums, message) };
  }
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
