import type { AlarmMessage, DeferredReply, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { flowCall, type FlowAnswer } from '../flow-call.js';
import { answerSum, startSum, type SumFanout } from './fanout.js';
import {
  JOB_DIRECTORY_KIND,
  JOB_QUEUE_KIND,
  jobPolicy as policy,
  jobQueueKey,
  queueOfJobId,
  type BatchResultView,
  type DirectoryEntry,
  type DirectoryMessage,
  type JobRequest,
  type QueueListQuery,
  type QueueListView,
  type QueueMessage,
  type ScheduleOutcome,
} from './messages.js';

/**
 * A tenant's job queues: pure logic of the `job-queue-directory` actor
 * (storage `records`, key = jobDirectoryKey(tenant), one record `q:<name>`
 * per queue). The queues keep it up to date through the outbox (each
 * entry carries the queue's change counter; an older one is ignored).
 *
 * It is also the coordinator of what spans the tenant's queues:
 * schedule-batch (one `schedule_many` flow-call per queue named in the
 * batch, per-item results gathered into one reply) and cancel-bulk (one
 * `cancel` per queue, the counts added up).
 */
export const ENTRY_PREFIX = 'q:';

interface BatchFlow {
  request_id: string | null;
  /** Step -> the batch indexes sent in that step, in order. */
  groups: Map<string, number[]>;
  results: ({ index: number } & ScheduleOutcome)[];
}

export interface DirectoryState {
  readonly key: string;
  entries: Map<string, DirectoryEntry>;
  // In memory only.
  sums: Map<string, SumFanout>;
  batches: Map<string, BatchFlow>;
}

type Result = TurnResult<DirectoryState, unknown>;

export function loadDirectory(key: string, records: Iterable<[string, unknown]>): DirectoryState {
  const state: DirectoryState = { key, entries: new Map(), sums: new Map(), batches: new Map() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith(ENTRY_PREFIX)) {
      const entry = value as DirectoryEntry;
      state.entries.set(entry.name, entry);
    }
  }
  return state;
}

const tenantOf = (key: string) => (JSON.parse(key) as [string])[0];

export function stepDirectory(state: DirectoryState, message: DirectoryMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case '$alarm':
      return { state };
    case 'flow-call':
      // The directory takes no flow-calls today; answer nothing (a stray call is dropped).
      return { state };
    case 'upsert': {
      const current = state.entries.get(message.entry.name);
      if (current && current.seq >= message.entry.seq) return { state };
      state.entries.set(message.entry.name, { ...message.entry });
      return { state, writes: [{ subkey: ENTRY_PREFIX + message.entry.name, value: { ...message.entry } }] };
    }
    case 'remove': {
      const current = state.entries.get(message.name);
      if (!current || current.seq > message.seq) return { state };
      state.entries.delete(message.name);
      const writes: RecordWrite[] = [{ subkey: ENTRY_PREFIX + message.name, value: undefined }];
      return { state, writes };
    }
    case 'list':
      return { state, reply: list(state, message.query) };
    case 'names':
      return { state, reply: { names: [...state.entries.keys()].sort().slice(0, policy.queues_per_tenant_max) } };
    case 'schedule_batch':
      return scheduleBatch(state, message, context);
    case 'cancel_bulk': {
      // A job id names its queue: with job_ids, only their queues are asked.
      const named = message.filter.job_ids?.map(queueOfJobId).filter((name): name is string => name !== null);
      const names = message.filter.queue !== undefined ? [message.filter.queue] : named !== undefined ? [...new Set(named)] : [...state.entries.keys()];
      const tenant = tenantOf(state.key);
      const call: QueueMessage = { op: 'cancel', filter: message.filter };
      const targets = names.map((name) => ({ kind: JOB_QUEUE_KIND, key: jobQueueKey(tenant, name), call }));
      const started = startSum(state.sums, { kind: JOB_DIRECTORY_KIND, key: state.key }, targets, 'cancelled', 'cancelled_count', context);
      return { state, ...started };
    }
    case 'flow-answer':
      return answered(state, message);
  }
}

function list(state: DirectoryState, query: QueueListQuery): QueueListView {
  const search = query.search?.toLowerCase();
  const found = [...state.entries.values()].filter((entry) => {
    if (search !== undefined && search !== '' && !entry.name.toLowerCase().includes(search)) return false;
    if (query.active !== undefined && entry.active !== query.active) return false;
    if (query.auto_created !== undefined && entry.auto_created !== query.auto_created) return false;
    if (query.tag !== undefined && !Object.prototype.hasOwnProperty.call(entry.tags, query.tag)) return false;
    return true;
  });
  const descending = query.sort.startsWith('-');
  const field = (descending ? query.sort.slice(1) : query.sort) as 'created_at' | 'name' | 'updated_at';
  const value = (entry: DirectoryEntry) => (field === 'name' ? entry.name : field === 'created_at' ? entry.created_at_ms : entry.updated_at_ms);
  found.sort((a, b) => {
    const x = value(a);
    const y = value(b);
    const order = x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    return descending ? -order : order;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: found.length, names: found.slice(start, start + query.page_size).map((entry) => entry.name) };
}

function scheduleBatch(state: DirectoryState, message: Extract<DirectoryMessage, { op: 'schedule_batch' }>, context: TurnContext): Result {
  const tenant = tenantOf(state.key);
  const byQueue = new Map<string, { indexes: number[]; jobs: JobRequest[] }>();
  message.jobs.forEach((item, index) => {
    const group = byQueue.get(item.queue) ?? { indexes: [], jobs: [] };
    group.indexes.push(index);
    group.jobs.push(item.job);
    byQueue.set(item.queue, group);
  });
  const flow_id = context.newId('jqb_');
  const flow: BatchFlow = { request_id: context.request_id, groups: new Map(), results: [] };
  const sends = [...byQueue.entries()].map(([queue, group], i) => {
    const step = `g${i}`;
    flow.groups.set(step, group.indexes);
    const call: QueueMessage = { op: 'schedule_many', tenant, jobs: group.jobs, job_settings: message.job_settings };
    return flowCall(JOB_QUEUE_KIND, jobQueueKey(tenant, queue), call, { kind: JOB_DIRECTORY_KIND, key: state.key, flow_id, step });
  });
  if (sends.length === 0) return { state, reply: { results: [] } satisfies BatchResultView };
  state.batches.set(flow_id, flow);
  return { state, sends, defer: context.request_id !== null };
}

function answered(state: DirectoryState, answer: FlowAnswer): Result {
  const batch = state.batches.get(answer.flow_id);
  if (!batch) return { state, replies: answerSum(state.sums, answer) };
  const indexes = batch.groups.get(answer.step);
  if (!indexes) return { state };
  batch.groups.delete(answer.step);
  if (answer.ok) {
    const outcomes = (answer.reply as { outcomes: ScheduleOutcome[] }).outcomes;
    indexes.forEach((index, i) => batch.results.push({ index, ...outcomes[i] }));
  } else {
    for (const index of indexes) batch.results.push({ index, ok: false, code: answer.error.code, error: answer.error.message });
  }
  if (batch.groups.size > 0) return { state };
  state.batches.delete(answer.flow_id);
  batch.results.sort((a, b) => a.index - b.index);
  const replies: DeferredReply[] = batch.request_id === null ? [] : [{ request_id: batch.request_id, reply: { results: batch.results } satisfies BatchResultView }];
  return { state, replies };
}
