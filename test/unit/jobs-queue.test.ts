import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AssertionError, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { retryDelayMs } from '../../actors/jobs/backoff.js';
import { assertMove, canMove, JOB_TRANSITIONS } from '../../actors/jobs/job-transitions.js';
import {
  JOB_ATTEMPT_EVENT,
  JOB_STATUSES,
  jobIdFor,
  jobPolicy,
  jobQueueKey,
  queueIdOf,
  queueNameOfId,
  queueOfJobId,
  type JobAttempt,
  type JobRequest,
  type QueueMessage,
  type RetryPolicy,
} from '../../actors/jobs/messages.js';
import { emptyQueue, loadQueue, stepQueue, TICK_ALARM, type QueueState } from '../../actors/jobs/queue-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The job queue's pure logic: state machine, retry schedule, pause, DLQ and redrive, stats, restart (docs/api/jobs.md). */
const T0 = 1_700_000_000_000;
const KEY = jobQueueKey('tenant-1', 'q');
const SETTINGS = { attempt_timeout_ms: 1_000 };

/** A queue driven by pure steps; records are kept as the runtime would, so `reload()` is a restart. */
class Driver {
  state: QueueState = emptyQueue(KEY);
  records = new Map<string, unknown>();
  alarm: number | null = null;
  attempts: JobAttempt[] = [];
  now = T0;
  private n = 0;

  step(message: QueueMessage | { op: '$alarm'; name: string; due_ms: number }, context: Partial<TurnContext> = {}): TurnResult<QueueState, unknown> {
    const result = stepQueue(this.state, message as QueueMessage, { ...fixedContext(this.now, 'job-queue', KEY), ...context });
    this.state = result.state;
    for (const write of (result.writes ?? []) as RecordWrite[]) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, structuredClone(write.value));
    }
    for (const alarm of result.alarms ?? []) if (alarm.name === TICK_ALARM) this.alarm = alarm.due_ms;
    for (const event of result.events ?? []) if (event.type === JOB_ATTEMPT_EVENT) this.attempts.push(event.data as JobAttempt);
    return result;
  }

  /** Moves time and fires the tick alarm when due. */
  advance(ms: number): void {
    this.now += ms;
    if (this.alarm !== null && this.alarm <= this.now) this.step({ op: '$alarm', name: TICK_ALARM, due_ms: this.alarm });
  }

  schedule(overrides: Partial<JobRequest> = {}): string {
    const job_id = overrides.job_id ?? jobIdFor('q', `r${++this.n}`);
    const job: JobRequest = {
      job_id,
      user_id: 'u1',
      url: 'https://target.example/hook',
      headers: {},
      secret: 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0',
      events: ['job.due'],
      payload: { n: this.n },
      scheduled_at_ms: this.now,
      priority: null,
      retry_policy: null,
      ...overrides,
    };
    this.step({ op: 'schedule', tenant: 'tenant-1', job, job_settings: SETTINGS });
    return job_id;
  }

  result(attempt: JobAttempt, status_code: number | null, error_kind: 'timeout' | 'connection' | 'refused' | null = null): void {
    this.step({
      op: 'attempt_result',
      job_id: attempt.job_id,
      attempt: attempt.attempt,
      status_code,
      error: status_code === null ? `${error_kind}` : null,
      error_kind,
      duration_ms: 40,
      response_excerpt: null,
      job_settings: SETTINGS,
    });
  }

  job(id: string) {
    return this.step({ op: 'get_job', job_id: id }).reply as { status: string; attempts: number; error: string | null; scheduled_at_ms: number };
  }

  reload(): void {
    this.state = loadQueue(KEY, [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
  }
}

describe('ids', () => {
  it('a queue id and a job id name their queue; anything else is no id', () => {
    expect(queueNameOfId(queueIdOf('emails.v2'))).toBe('emails.v2');
    expect(queueNameOfId('jq_')).toBeNull();
    expect(queueNameOfId('emails')).toBeNull();
    expect(queueNameOfId(`jq_${Buffer.from('bad name').toString('base64url')}`)).toBeNull();
    expect(queueOfJobId(jobIdFor('reports:daily', 'abc_-1'))).toBe('reports:daily');
    expect(queueOfJobId('job_bogus')).toBeNull();
    expect(queueOfJobId('job_.x')).toBeNull();
  });
});

describe('job state machine', () => {
  it('allows exactly the documented transitions', () => {
    const allowed = JOB_STATUSES.flatMap((from) => JOB_STATUSES.filter((to) => canMove(from, to)).map((to) => `${from}->${to}`));
    expect(allowed.sort()).toEqual(
      ['scheduled->processing', 'scheduled->cancelled', 'processing->completed', 'processing->scheduled', 'processing->failed', 'failed->scheduled'].sort(),
    );
    expect(JOB_TRANSITIONS.completed).toEqual([]);
    expect(JOB_TRANSITIONS.cancelled).toEqual([]);
    expect(() => assertMove('completed', 'scheduled')).toThrow(AssertionError);
    expect(() => assertMove('processing', 'cancelled')).toThrow(AssertionError);
  });
});

describe('retry schedule', () => {
  const policy: RetryPolicy = { max_attempts: 10, backoff_seconds: 10 };
  it('doubles per failure with equal jitter in [0.5, 1), capped at an hour, the same for the same job and attempt', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.string({ minLength: 1, maxLength: 20 }), (attempt, id) => {
        const ms = retryDelayMs(policy, attempt, id);
        const full = Math.min(3_600, 10 * 2 ** (attempt - 1)) * 1000;
        expect(ms).toBeGreaterThanOrEqual(full / 2);
        expect(ms).toBeLessThan(full);
        expect(retryDelayMs(policy, attempt, id)).toBe(ms);
      }),
    );
    expect(retryDelayMs({ max_attempts: 3, backoff_seconds: 0 }, 2, 'x')).toBe(0);
    // Many jobs failing together spread out.
    const spread = new Set(Array.from({ length: 50 }, (_, i) => retryDelayMs(policy, 1, `job${i}`)));
    expect(spread.size).toBeGreaterThan(40);
  });
});

describe('job queue actor', () => {
  it('auto-creates the queue, fires a job at its time, and completes it on a 2xx', () => {
    const d = new Driver();
    const result = d.step({ op: 'schedule', tenant: 'tenant-1', job: { job_id: jobIdFor('q', 'a'), user_id: 'u1', url: 'https://t.example/', headers: { 'X-A': '1' }, secret: 'whsec_x', events: ['job.due'], payload: 7, scheduled_at_ms: T0 + 5_000, priority: null, retry_policy: null }, job_settings: SETTINGS });
    expect(result.reply).toEqual({ job_id: jobIdFor('q', 'a'), queue: 'q', scheduled_at_ms: T0 + 5_000, status: 'scheduled' });
    // The directory and the registry learn of the new queue through the outbox.
    expect(result.sends?.map((s) => s.kind)).toEqual(['job-queue-directory', 'job-queue-registry']);
    expect((d.step({ op: 'get' }).reply as { auto_created: boolean }).auto_created).toBe(true);
    expect(d.alarm).toBe(T0 + 5_000);
    d.advance(4_999);
    expect(d.attempts).toHaveLength(0);
    d.advance(1);
    expect(d.attempts).toHaveLength(1);
    const attempt = d.attempts[0];
    expect(JSON.parse(attempt.body)).toEqual({ job_id: jobIdFor('q', 'a'), queue: 'q', attempt: 1, payload: 7 });
    expect(attempt).toMatchObject({ queue_key: KEY, url: 'https://t.example/', headers: { 'X-A': '1' }, secret: 'whsec_x', timeout_ms: 1_000 });
    expect(d.job(attempt.job_id).status).toBe('processing');
    // The in-flight deadline is the alarm now: 2 x timeout + margin.
    expect(d.alarm).toBe(T0 + 5_000 + 3_000);
    d.result(attempt, 204);
    expect(d.job(attempt.job_id)).toMatchObject({ status: 'completed', attempts: 1, error: null });
    expect(d.alarm).toBeNull();
    // A repeated or late result is ignored.
    d.result(attempt, 500);
    expect(d.job(attempt.job_id).status).toBe('completed');
  });

  it('retries under the job\'s policy, then fails and dead-letters; redrive brings it back with skipped ids', () => {
    const d = new Driver();
    const id = d.schedule({ retry_policy: { max_attempts: 3, backoff_seconds: 10 } });
    d.advance(0);
    d.result(d.attempts[0], 500);
    const parked = d.job(id);
    expect(parked).toMatchObject({ status: 'scheduled', attempts: 1, error: 'HTTP 500' });
    expect(parked.scheduled_at_ms).toBe(d.now + retryDelayMs({ max_attempts: 3, backoff_seconds: 10 }, 1, id));
    d.advance(10_000);
    expect(d.attempts).toHaveLength(2);
    d.result(d.attempts[1], null, 'connection');
    d.advance(20_000);
    expect(d.attempts).toHaveLength(3);
    d.result(d.attempts[2], 404);
    expect(d.job(id)).toMatchObject({ status: 'failed', attempts: 3, error: 'HTTP 404' });
    const dlq = d.step({ op: 'dlq', limit: 50 }).reply as { entries: { job_id: string; error: string }[]; total: number };
    expect(dlq).toMatchObject({ total: 1, entries: [{ job_id: id, error: 'HTTP 404' }] });
    const stats = d.step({ op: 'stats' }).reply as { failed_last_hour: number; success_rate: number };
    expect(stats).toMatchObject({ failed_last_hour: 1, success_rate: 0 });

    const redrive = d.step({ op: 'redrive', job_ids: [id, 'job_x.y'], job_settings: SETTINGS });
    expect(redrive.reply).toEqual({ redriven: 1, skipped_job_ids: ['job_x.y'] });
    expect(d.attempts).toHaveLength(4);
    expect(d.attempts[3].attempt).toBe(1);
    d.result(d.attempts[3], 200);
    expect(d.job(id)).toMatchObject({ status: 'completed', attempts: 1 });
    expect((d.step({ op: 'dlq', limit: 50 }).reply as { total: number }).total).toBe(0);
  });

  it('fails at once when the delivery guard refuses the target; DLQ disabled keeps no entry', () => {
    const d = new Driver();
    d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: { dlq_config: { enabled: false, max_entries: 10 } }, job_settings: SETTINGS });
    const id = d.schedule();
    d.advance(0);
    d.result(d.attempts[0], null, 'refused');
    expect(d.job(id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect((d.step({ op: 'dlq', limit: 50 }).reply as { total: number }).total).toBe(0);
    expect((d.step({ op: 'redrive', job_ids: null, job_settings: SETTINGS }).reply as { redriven: number }).redriven).toBe(0);
  });

  it('counts an attempt without a result by its deadline as failed and retries it', () => {
    const d = new Driver();
    const id = d.schedule({ retry_policy: { max_attempts: 2, backoff_seconds: 0 } });
    d.advance(0);
    expect(d.attempts).toHaveLength(1);
    d.advance(3_000);
    // The deadline failure parks it with backoff 0: due at once, fired in the same turn.
    expect(d.attempts).toHaveLength(2);
    expect(d.attempts[1].attempt).toBe(2);
    d.result(d.attempts[0], 200); // late result of attempt 1: ignored
    expect(d.job(id).status).toBe('processing');
    d.advance(3_000);
    expect(d.job(id)).toMatchObject({ status: 'failed', error: expect.stringMatching(/deadline/) });
  });

  it('a paused queue starts nothing; resume delivers what fell due, by priority', () => {
    const d = new Driver();
    d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: { concurrency: 10 }, job_settings: SETTINGS });
    d.step({ op: 'set_active', active: false, job_settings: SETTINGS });
    d.schedule({ priority: 'low', payload: 'low' });
    d.schedule({ priority: null, payload: 'normal' });
    d.schedule({ priority: 'critical', payload: 'critical' });
    d.advance(60_000);
    expect(d.attempts).toHaveLength(0);
    d.step({ op: 'set_active', active: true, job_settings: SETTINGS });
    expect(d.attempts.map((a) => JSON.parse(a.body).payload)).toEqual(['critical', 'normal', 'low']);
  });

  it('keeps at most `concurrency` attempts in flight and starts the next as one finishes', () => {
    const d = new Driver();
    d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: { concurrency: 2 }, job_settings: SETTINGS });
    for (let i = 0; i < 5; i++) d.schedule();
    d.advance(0);
    expect(d.attempts).toHaveLength(2);
    d.result(d.attempts[0], 200);
    expect(d.attempts).toHaveLength(3);
    expect((d.step({ op: 'stats' }).reply as { processing: number; scheduled: number })).toMatchObject({ processing: 2, scheduled: 2 });
  });

  it('starts at most dispatch_per_turn_max attempts per turn and continues at once', () => {
    const d = new Driver();
    d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: { concurrency: 10_000 }, job_settings: SETTINGS });
    const per_turn = jobPolicy.dispatch_per_turn_max;
    const many: QueueMessage = { op: 'schedule_many', tenant: 'tenant-1', job_settings: SETTINGS, jobs: Array.from({ length: per_turn * 1.5 }, (_, i) => ({ job_id: jobIdFor('q', `m${i}`), user_id: 'u1', url: 'https://t.example/', headers: {}, secret: 'whsec_x', events: ['job.due'], payload: i, scheduled_at_ms: T0, priority: null, retry_policy: null })) };
    d.step(many);
    expect(d.attempts).toHaveLength(per_turn);
    expect(d.alarm).toBe(d.now);
    d.advance(0);
    expect(d.attempts).toHaveLength(per_turn * 1.5);
  });

  it('cancel and DELETE obey the state machine; cleanup removes finished jobs past retention', () => {
    const d = new Driver();
    const later = d.schedule({ scheduled_at_ms: T0 + 60_000 });
    const now = d.schedule();
    d.advance(0);
    expect(codeOf(() => d.step({ op: 'delete_job', job_id: now }))).toBe('job_not_cancellable');
    expect(d.step({ op: 'cancel', filter: { user_id: 'someone-else' } }).reply).toEqual({ cancelled: 0 });
    expect(d.step({ op: 'cancel', filter: { user_id: 'u1' } }).reply).toEqual({ cancelled: 1 });
    expect(d.job(later).status).toBe('cancelled');
    d.result(d.attempts[0], 200);
    d.advance(120_000);
    expect(d.attempts).toHaveLength(1);
    expect(d.step({ op: 'cleanup', retention_days: null }).reply).toEqual({ deleted: 0 });
    d.now += 7 * 86_400_000 + 1;
    expect(d.step({ op: 'cleanup', retention_days: null }).reply).toEqual({ deleted: 2 });
    expect(codeOf(() => d.job(later))).toBe('not_found');
    expect(d.step({ op: 'get' }).reply).toMatchObject({ completed_count: 0, cancelled_count: 0 });
  });

  it('refuses to delete a queue with open jobs unless forced', () => {
    const d = new Driver();
    d.schedule({ scheduled_at_ms: T0 + 60_000 });
    expect(codeOf(() => d.step({ op: 'delete', force: false }))).toBe('job_queue_not_empty');
    d.step({ op: 'delete', force: true });
    expect(d.records.size).toBe(0);
    expect(codeOf(() => d.step({ op: 'get' }))).toBe('not_found');
    expect(codeOf(() => d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: {}, job_settings: SETTINGS }))).toBeUndefined();
    expect(codeOf(() => d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: {}, job_settings: SETTINGS }))).toBe('job_queue_exists');
  });

  it('after a restart, a job that fell due while the node was down fires, and an in-flight one is retried at its deadline', () => {
    const d = new Driver();
    const due = d.schedule({ scheduled_at_ms: T0 + 10_000 });
    const flying = d.schedule({ retry_policy: { max_attempts: 3, backoff_seconds: 0 } });
    d.advance(0);
    expect(d.attempts.map((a) => a.job_id)).toEqual([flying]);
    // The node dies; it comes back a minute later. The stored tick alarm fires.
    d.reload();
    d.now += 60_000;
    d.step({ op: '$alarm', name: TICK_ALARM, due_ms: d.alarm! });
    expect(d.attempts.map((a) => [a.job_id, a.attempt])).toEqual([[flying, 1], [due, 1], [flying, 2]]);
    expect(d.job(due).status).toBe('processing');
    expect(d.job(flying)).toMatchObject({ status: 'processing', attempts: 2, error: expect.stringMatching(/deadline/) });
  });

  it('stats: success rate, average processing time and the oldest due job\'s wait over the last hour', () => {
    const d = new Driver();
    d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: { concurrency: 1, retry_policy: { max_attempts: 1, backoff_seconds: 0 } }, job_settings: SETTINGS });
    for (let i = 0; i < 4; i++) d.schedule();
    d.advance(0);
    d.now += 2_000;
    const mid = d.step({ op: 'stats' }).reply as { oldest_job_age_seconds: number; processing: number; scheduled: number };
    expect(mid).toMatchObject({ oldest_job_age_seconds: 2, processing: 1, scheduled: 3 });
    d.result(d.attempts[0], 200);
    d.result(d.attempts[1], 200);
    d.result(d.attempts[2], 200);
    d.result(d.attempts[3], 500);
    const stats = d.step({ op: 'stats' }).reply;
    expect(stats).toEqual({ queue: 'q', scheduled: 0, processing: 0, completed_last_hour: 3, failed_last_hour: 1, success_rate: 0.75, avg_processing_time_ms: 40, oldest_job_age_seconds: 0 });
    d.now += 61 * 60_000;
    expect(d.step({ op: 'stats' }).reply).toMatchObject({ completed_last_hour: 0, failed_last_hour: 0, success_rate: 0, avg_processing_time_ms: 0 });
  });

  it('property: counts match statuses, a paused queue starts nothing, in flight never exceeds concurrency, a reload changes nothing', () => {
    type Op =
      | { kind: 'schedule'; delay_s: number; priority: 'critical' | 'low' | null }
      | { kind: 'advance'; ms: number }
      | { kind: 'result'; pick: number; status: number | null }
      | { kind: 'pause' }
      | { kind: 'resume' }
      | { kind: 'cancel' }
      | { kind: 'redrive' }
      | { kind: 'reload' };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('schedule' as const), delay_s: fc.integer({ min: 0, max: 30 }), priority: fc.constantFrom('critical' as const, 'low' as const, null) }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 20_000 }) }),
      fc.record({ kind: fc.constant('result' as const), pick: fc.nat(), status: fc.constantFrom(200, 500, null) }),
      fc.constant({ kind: 'pause' as const }),
      fc.constant({ kind: 'resume' as const }),
      fc.constant({ kind: 'cancel' as const }),
      fc.constant({ kind: 'redrive' as const }),
      fc.constant({ kind: 'reload' as const }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const d = new Driver();
        d.step({ op: 'create', tenant: 'tenant-1', owner_id: 'u1', settings: { concurrency: 3, retry_policy: { max_attempts: 2, backoff_seconds: 1 } }, job_settings: SETTINGS });
        let paused = false;
        for (const o of ops) {
          const before = d.attempts.length;
          if (o.kind === 'schedule') d.schedule({ scheduled_at_ms: d.now + o.delay_s * 1000, priority: o.priority });
          else if (o.kind === 'advance') d.advance(o.ms);
          else if (o.kind === 'result' && d.attempts.length > 0) d.result(d.attempts[o.pick % d.attempts.length], o.status, o.status === null ? 'timeout' : null);
          else if (o.kind === 'pause') {
            d.step({ op: 'set_active', active: false, job_settings: SETTINGS });
            paused = true;
          } else if (o.kind === 'resume') {
            d.step({ op: 'set_active', active: true, job_settings: SETTINGS });
            paused = false;
          } else if (o.kind === 'cancel') d.step({ op: 'cancel', filter: { user_id: 'u1' } });
          else if (o.kind === 'redrive') d.step({ op: 'redrive', job_ids: null, job_settings: SETTINGS });
          else if (o.kind === 'reload') {
            const view = d.step({ op: 'get' }).reply;
            d.reload();
            // The alarm stays as stored; the reloaded actor re-derives its schedule.
            expect(d.step({ op: 'get' }).reply).toEqual(view);
          }
          if (paused) expect(d.attempts.length).toBe(before);
          const jobs = [...d.state.jobs.values()];
          for (const status of JOB_STATUSES) expect(d.state.counts[status]).toBe(jobs.filter((j) => j.status === status).length);
          expect(d.state.counts.processing).toBeLessThanOrEqual(3);
          for (const j of jobs) {
            expect(j.status === 'processing').toBe(j.in_flight !== null);
            expect(d.state.dlq.has(j.id)).toBe(j.dlq !== null);
            if (j.dlq) expect(j.status).toBe('failed');
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});
