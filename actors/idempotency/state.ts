import { ServiceError, type AlarmMessage, type SnapshotActorDefinition, type TurnContext, type TurnResult } from '../../runtime/index.js';

/**
 * One Idempotency-Key of one tenant (Stripe's semantics): the first request
 * runs and its response is stored; a retry with the same key and the same
 * request gets that response back; the same key with a different request is
 * refused; a retry while the first is still running is refused. A request
 * that died mid-way (node crash) is taken over after a lease. Keys are
 * forgotten after RETENTION_MS through a durable alarm.
 */
export interface StoredResponse {
  status_code: number;
  content_type: string;
  body: string;
}

export interface IdempotencyRecord {
  status: 'in_progress' | 'done';
  fingerprint: string;
  started_at_ms: number;
  response: StoredResponse | null;
}

export type IdempotencyMessage =
  | { op: 'begin'; fingerprint: string }
  | { op: 'complete'; fingerprint: string; response: StoredResponse }
  | { op: 'abort'; fingerprint: string };

export type BeginReply = { outcome: 'proceed' } | { outcome: 'replay'; response: StoredResponse };

export const RETENTION_MS = 24 * 3600_000;
/** An in-progress request older than this is presumed dead and may be retried. */
export const IN_PROGRESS_LEASE_MS = 60_000;
const EXPIRY_ALARM = 'expiry';

export function stepIdempotency(
  state: IdempotencyRecord | null,
  message: IdempotencyMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<IdempotencyRecord | null, BeginReply | null> {
  const now = context.now;
  switch (message.op) {
    case 'begin': {
      if (state && state.fingerprint !== message.fingerprint) {
        throw new ServiceError('idempotency_key_reused', 'This Idempotency-Key was used with a different request.');
      }
      if (state?.status === 'done' && state.response) return { state, reply: { outcome: 'replay', response: state.response } };
      if (state?.status === 'in_progress' && now - state.started_at_ms < IN_PROGRESS_LEASE_MS) {
        throw new ServiceError('idempotency_in_progress', 'A request with this Idempotency-Key is still in progress.', { retryAfterSeconds: 1 });
      }
      return {
        state: { status: 'in_progress', fingerprint: message.fingerprint, started_at_ms: now, response: null },
        reply: { outcome: 'proceed' },
        alarms: [{ name: EXPIRY_ALARM, due_ms: now + RETENTION_MS }],
      };
    }
    case 'complete':
      if (!state || state.status !== 'in_progress' || state.fingerprint !== message.fingerprint) return { state, reply: null };
      return { state: { ...state, status: 'done', response: message.response }, reply: null };
    case 'abort':
      if (!state || state.status !== 'in_progress' || state.fingerprint !== message.fingerprint) return { state, reply: null };
      return { state: null, reply: null, alarms: [{ name: EXPIRY_ALARM, due_ms: null }] };
    case '$alarm':
      return { state: null, reply: null };
  }
}

export const IDEMPOTENCY_KIND = 'idempotency';

export const idempotencyActor: SnapshotActorDefinition<IdempotencyRecord | null, IdempotencyMessage, BeginReply | null> = {
  kind: IDEMPOTENCY_KIND,
  storage: 'snapshot',
  initial: () => null,
  step: stepIdempotency,
};
