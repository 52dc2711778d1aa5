import { describe, expect, it } from 'vitest';
import { ServiceError, type TurnContext } from '../../runtime/index.js';
import {
  IN_PROGRESS_LEASE_MS,
  RETENTION_MS,
  stepIdempotency,
  type IdempotencyMessage,
  type IdempotencyRecord,
  type StoredResponse,
} from '../../actors/idempotency/state.js';
import { codeOf } from '../helpers/step.js';

/** Pure step tests of one Idempotency-Key. */
const T0 = Date.UTC(2026, 0, 1);
const response: StoredResponse = { status_code: 200, content_type: 'application/json; charset=utf-8', body: '{"ok":true}' };

function send(state: IdempotencyRecord | null, message: IdempotencyMessage | { op: '$alarm'; name: string; due_ms: number }, now: number) {
  const context: TurnContext = { now, kind: 'idempotency', key: '["t","k"]', request_id: null, newId: () => 'id' };
  return stepIdempotency(state, message, context);
}

describe('idempotency step', () => {
  it('begin on a new key proceeds, records in_progress and sets the retention alarm', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0);
    expect(begun.reply).toEqual({ outcome: 'proceed' });
    expect(begun.state).toEqual({ status: 'in_progress', fingerprint: 'f1', started_at_ms: T0, response: null });
    expect(begun.alarms).toEqual([{ name: 'expiry', due_ms: T0 + RETENTION_MS }]);
  });

  it('complete stores the response; begin again replays it', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0).state;
    const done = send(begun, { op: 'complete', fingerprint: 'f1', response }, T0 + 5);
    expect(done.state).toEqual({ status: 'done', fingerprint: 'f1', started_at_ms: T0, response });
    const replay = send(done.state, { op: 'begin', fingerprint: 'f1' }, T0 + 10);
    expect(replay.reply).toEqual({ outcome: 'replay', response });
    expect(replay.state).toBe(done.state);
    // Long after the in-progress lease, still a replay.
    expect(send(done.state, { op: 'begin', fingerprint: 'f1' }, T0 + RETENTION_MS - 1).reply).toEqual({ outcome: 'replay', response });
  });

  it('a different fingerprint is idempotency_key_reused, in progress or done', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0).state;
    expect(codeOf(() => send(begun, { op: 'begin', fingerprint: 'f2' }, T0 + 1))).toBe('idempotency_key_reused');
    const done = send(begun, { op: 'complete', fingerprint: 'f1', response }, T0 + 5).state;
    expect(codeOf(() => send(done, { op: 'begin', fingerprint: 'f2' }, T0 + 6))).toBe('idempotency_key_reused');
  });

  it('a retry while in progress is refused until the lease runs out, then it may proceed', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0).state;
    let error: unknown;
    try {
      send(begun, { op: 'begin', fingerprint: 'f1' }, T0 + IN_PROGRESS_LEASE_MS - 1);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe('idempotency_in_progress');
    expect((error as ServiceError).retryAfterSeconds).toBe(1);
    const takeover = send(begun, { op: 'begin', fingerprint: 'f1' }, T0 + IN_PROGRESS_LEASE_MS);
    expect(takeover.reply).toEqual({ outcome: 'proceed' });
    expect(takeover.state).toMatchObject({ status: 'in_progress', started_at_ms: T0 + IN_PROGRESS_LEASE_MS });
    expect(takeover.alarms).toEqual([{ name: 'expiry', due_ms: T0 + IN_PROGRESS_LEASE_MS + RETENTION_MS }]);
  });

  it('complete or abort with another fingerprint, or when not in progress, changes nothing', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0).state;
    expect(send(begun, { op: 'complete', fingerprint: 'f2', response }, T0).state).toBe(begun);
    expect(send(begun, { op: 'abort', fingerprint: 'f2' }, T0).state).toBe(begun);
    expect(send(null, { op: 'complete', fingerprint: 'f1', response }, T0).state).toBeNull();
    const done = send(begun, { op: 'complete', fingerprint: 'f1', response }, T0).state;
    expect(send(done, { op: 'complete', fingerprint: 'f1', response: { ...response, body: 'other' } }, T0).state).toBe(done);
    expect(send(done, { op: 'abort', fingerprint: 'f1' }, T0).state).toBe(done);
  });

  it('abort forgets the key and cancels the alarm, so the same request may run again', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0).state;
    const aborted = send(begun, { op: 'abort', fingerprint: 'f1' }, T0 + 1);
    expect(aborted.state).toBeNull();
    expect(aborted.alarms).toEqual([{ name: 'expiry', due_ms: null }]);
    expect(send(aborted.state, { op: 'begin', fingerprint: 'f2' }, T0 + 2).reply).toEqual({ outcome: 'proceed' });
  });

  it('the expiry alarm forgets the key; afterwards any request may use it', () => {
    const begun = send(null, { op: 'begin', fingerprint: 'f1' }, T0).state;
    const done = send(begun, { op: 'complete', fingerprint: 'f1', response }, T0 + 1).state;
    const expired = send(done, { op: '$alarm', name: 'expiry', due_ms: T0 + RETENTION_MS }, T0 + RETENTION_MS);
    expect(expired.state).toBeNull();
    expect(send(expired.state, { op: 'begin', fingerprint: 'f2' }, T0 + RETENTION_MS + 1).reply).toEqual({ outcome: 'proceed' });
  });
});
