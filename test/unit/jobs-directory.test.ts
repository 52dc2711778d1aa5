import { describe, expect, it } from 'vitest';
import type { FlowAnswer, FlowCall } from '../../actors/flow-call.js';
import { loadDirectory, stepDirectory } from '../../actors/jobs/directory-state.js';
import { jobDirectoryKey, jobIdFor, jobQueueKey, type DirectoryEntry, type JobRequest, type QueueMessage } from '../../actors/jobs/messages.js';
import { loadRegistry, stepRegistry } from '../../actors/jobs/registry-state.js';
import { fixedContext } from '../helpers/step.js';

/** The tenant directory (list, schedule-batch and cancel-bulk coordinator) and the registry (admin fan-outs). */
const KEY = jobDirectoryKey('t1');
const asked = (now = 0) => ({ ...fixedContext(now, 'job-queue-directory', KEY), request_id: 'req-1' });

function entry(name: string, overrides: Partial<DirectoryEntry> = {}): DirectoryEntry {
  return { name, active: true, auto_created: false, tags: {}, created_at_ms: 0, updated_at_ms: 0, seq: 1, ...overrides };
}
function request(id: string): JobRequest {
  return { job_id: id, user_id: 'u1', url: 'https://t.example/', headers: {}, secret: 'whsec_x', events: ['job.due'], payload: null, scheduled_at_ms: 0, priority: null, retry_policy: null };
}
function answer(call: FlowCall<QueueMessage>, reply: unknown): FlowAnswer {
  return { op: 'flow-answer', flow_id: call.reply_to.flow_id, step: call.reply_to.step, ok: true, reply };
}

describe('job queue directory', () => {
  it('keeps the newest entry per queue and lists with search, filters, sort and pages', () => {
    let state = loadDirectory(KEY, []);
    const upsert = (e: DirectoryEntry) => (state = stepDirectory(state, { op: 'upsert', entry: e }, fixedContext(0)).state);
    upsert(entry('emails', { created_at_ms: 3, tags: { team: 'a' } }));
    upsert(entry('reports', { created_at_ms: 1, auto_created: true, seq: 2 }));
    upsert(entry('reports', { created_at_ms: 1, active: false, seq: 1 })); // older: ignored
    upsert(entry('billing', { created_at_ms: 2, active: false }));
    const list = (query: object) => stepDirectory(state, { op: 'list', query: { sort: '-created_at', page: 1, page_size: 20, ...query } }, fixedContext(0)).reply;
    expect(list({})).toEqual({ total: 3, names: ['emails', 'billing', 'reports'] });
    expect(list({ sort: 'name', page_size: 2, page: 2 })).toEqual({ total: 3, names: ['reports'] });
    expect(list({ active: true })).toEqual({ total: 2, names: ['emails', 'reports'] });
    expect(list({ auto_created: true })).toEqual({ total: 1, names: ['reports'] });
    expect(list({ tag: 'team' })).toEqual({ total: 1, names: ['emails'] });
    expect(list({ search: 'ILL' })).toEqual({ total: 1, names: ['billing'] });
    state = stepDirectory(state, { op: 'remove', name: 'billing', seq: 2 }, fixedContext(0)).state;
    expect(stepDirectory(state, { op: 'names' }, fixedContext(0)).reply).toEqual({ names: ['emails', 'reports'] });
  });

  it('schedule-batch: one schedule_many per queue, per-item results in batch order', () => {
    const state = loadDirectory(KEY, []);
    const jobs = [
      { queue: 'a', job: request(jobIdFor('a', '1')) },
      { queue: 'b', job: request(jobIdFor('b', '2')) },
      { queue: 'a', job: request(jobIdFor('a', '3')) },
    ];
    const started = stepDirectory(state, { op: 'schedule_batch', jobs, job_settings: { attempt_timeout_ms: 1000 } }, asked());
    expect(started.defer).toBe(true);
    const calls = started.sends!.map((s) => ({ key: s.key, call: s.message as FlowCall<QueueMessage> }));
    expect(calls.map((c) => c.key)).toEqual([jobQueueKey('t1', 'a'), jobQueueKey('t1', 'b')]);
    const [a, b] = calls;
    const ack = (id: string, queue: string) => ({ ok: true, ack: { job_id: id, queue, scheduled_at_ms: 0, status: 'scheduled' } });
    const first = stepDirectory(state, answer(b.call, { outcomes: [{ ok: false, code: 'job_queue_full', error: 'full' }] }), fixedContext(0));
    expect(first.replies ?? []).toEqual([]);
    const done = stepDirectory(state, answer(a.call, { outcomes: [ack(jobIdFor('a', '1'), 'a'), ack(jobIdFor('a', '3'), 'a')] }), fixedContext(0));
    expect(done.replies).toEqual([
      {
        request_id: 'req-1',
        reply: {
          results: [
            { index: 0, ...ack(jobIdFor('a', '1'), 'a') },
            { index: 1, ok: false, code: 'job_queue_full', error: 'full' },
            { index: 2, ...ack(jobIdFor('a', '3'), 'a') },
          ],
        },
      },
    ]);
    // A repeated answer is ignored.
    expect(stepDirectory(state, answer(a.call, { outcomes: [] }), fixedContext(0)).replies ?? []).toEqual([]);
  });

  it('cancel-bulk asks every queue (or those named) and adds up the counts', () => {
    let state = loadDirectory(KEY, []);
    for (const name of ['a', 'b', 'c']) state = stepDirectory(state, { op: 'upsert', entry: entry(name) }, fixedContext(0)).state;
    const started = stepDirectory(state, { op: 'cancel_bulk', filter: { user_id: 'u1' } }, asked());
    const calls = started.sends!.map((s) => s.message as FlowCall<QueueMessage>);
    expect(calls).toHaveLength(3);
    expect(calls[0].call).toEqual({ op: 'cancel', filter: { user_id: 'u1' } });
    stepDirectory(state, answer(calls[0], { cancelled: 2 }), fixedContext(0));
    stepDirectory(state, answer(calls[1], { cancelled: 0 }), fixedContext(0));
    expect(stepDirectory(state, answer(calls[2], { cancelled: 5 }), fixedContext(0)).replies).toEqual([{ request_id: 'req-1', reply: { cancelled_count: 7 } }]);
    const byIds = stepDirectory(state, { op: 'cancel_bulk', filter: { user_id: 'u1', job_ids: [jobIdFor('b', 'x'), jobIdFor('b', 'y'), 'junk'] } }, asked());
    expect(byIds.sends!.map((s) => s.key)).toEqual([jobQueueKey('t1', 'b')]);
    const none = stepDirectory(loadDirectory(KEY, []), { op: 'cancel_bulk', filter: { user_id: 'u1' } }, asked());
    expect(none.reply).toEqual({ cancelled_count: 0 });
  });
});

describe('job queue registry', () => {
  it('fans admin cancel-bulk and cleanup out to every queue of every tenant', () => {
    let state = loadRegistry('all', []);
    state = stepRegistry(state, { op: 'upsert', tenant: 't1', name: 'a' }, fixedContext(0)).state;
    state = stepRegistry(state, { op: 'upsert', tenant: 't2', name: 'a' }, fixedContext(0)).state;
    const cancel = stepRegistry(state, { op: 'cancel_bulk', user_id: null }, { ...fixedContext(0), request_id: 'r' });
    const calls = cancel.sends!.map((s) => s.message as FlowCall<QueueMessage>);
    expect(cancel.sends!.map((s) => s.key).sort()).toEqual([jobQueueKey('t1', 'a'), jobQueueKey('t2', 'a')].sort());
    expect(calls[0].call).toEqual({ op: 'cancel', filter: { user_id: null } });
    stepRegistry(state, answer(calls[0], { cancelled: 1 }), fixedContext(0));
    expect(stepRegistry(state, answer(calls[1], { cancelled: 2 }), fixedContext(0)).replies).toEqual([{ request_id: 'r', reply: { cancelled_count: 3 } }]);
    state = stepRegistry(state, { op: 'remove', tenant: 't2', name: 'a' }, fixedContext(0)).state;
    const cleanup = stepRegistry(state, { op: 'cleanup', retention_days: 1 }, { ...fixedContext(0), request_id: 'r2' });
    const [call] = cleanup.sends!.map((s) => s.message as FlowCall<QueueMessage>);
    expect(call.call).toEqual({ op: 'cleanup', retention_days: 1 });
    expect(stepRegistry(state, answer(call, { deleted: 4 }), fixedContext(0)).replies).toEqual([{ request_id: 'r2', reply: { deleted_count: 4 } }]);
  });

  it('pages every queue, ordered by tenant then name, for the admin list', () => {
    let state = loadRegistry('all', []);
    for (const [tenant, name] of [['t2', 'b'], ['t1', 'z'], ['t2', 'a'], ['t1', 'a']]) state = stepRegistry(state, { op: 'upsert', tenant, name }, fixedContext(0)).state;
    expect(stepRegistry(state, { op: 'list', offset: 0, limit: 3 }, fixedContext(0)).reply).toEqual({
      queues: [{ tenant: 't1', name: 'a' }, { tenant: 't1', name: 'z' }, { tenant: 't2', name: 'a' }],
      total: 4,
    });
    expect(stepRegistry(state, { op: 'list', offset: 3, limit: 3 }, fixedContext(0)).reply).toEqual({ queues: [{ tenant: 't2', name: 'b' }], total: 4 });
  });
});
