import type { DeferredReply } from './actor.js';
import type { Clock, TimerHandle } from './clock.js';
import { errorCodes, ServiceError, type ErrorCode } from './errors.js';
import { randomId } from './ids.js';

/**
 * Deferred replies, the primitive flows (sagas, coordinators) are built on.
 * A turn that cannot answer its ask yet returns `defer: true`; after the
 * commit the asker's promise is parked here, in its activation, until a later
 * turn of the same actor answers it through `replies` (released after that
 * turn's commit). Held in memory only: the flow's persisted state is the
 * durable record, so when the wait cannot go on (timeout, the activation
 * dropped or reloaded, the runtime stopping) the asker gets flow_interrupted
 * and retries with its Idempotency-Key or reads the resource.
 */

/**
 * Every ask gets a number, unique within the process; the request id a turn
 * sees (context.request_id) is made from it only when a turn reads it or
 * defers. Why not a string per ask: the id lives in the envelope until the
 * batch's commit, long enough to be copied by the young-generation GC, and
 * making it for every ask cost in-process asks about a third of their rate
 * (1,000 actors x 10 in flight, with and without it, same build), although
 * only the turns of flows ever read it.
 */
let requestSequence = 0;
const requestIdPrefix = randomId().slice(0, 8);

export function nextRequestSeq(): number {
  return requestSequence++;
}

/** The request id of ask number `seq`: a random prefix per process and the number. */
export function requestIdOf(seq: number): string {
  return `${requestIdPrefix}.${seq.toString(36)}`;
}

interface PendingAsk {
  resolve: (reply: unknown) => void;
  reject: (error: unknown) => void;
  timer: TimerHandle;
}

function interrupted(): ServiceError {
  return new ServiceError('flow_interrupted', undefined, { retryAfterSeconds: 1 });
}

/** The asks one activation has deferred and not answered yet. */
export class DeferredAsks {
  private readonly pending = new Map<string, PendingAsk>();

  get size(): number {
    return this.pending.size;
  }

  /** Parks an ask until it is answered or `timeout_ms` passes on `clock`. */
  hold(requestId: string, resolve: (reply: unknown) => void, reject: (error: unknown) => void, clock: Clock, timeout_ms: number): void {
    const timer = clock.setTimer(timeout_ms, () => {
      if (this.pending.get(requestId)?.timer !== timer) return;
      this.pending.delete(requestId);
      reject(interrupted());
    });
    this.pending.set(requestId, { resolve, reject, timer });
  }

  /** Resolves or rejects the ask `reply` names; an unknown request_id is ignored. */
  answer(reply: DeferredReply): void {
    const ask = this.pending.get(reply.request_id);
    if (!ask) return;
    this.pending.delete(reply.request_id);
    ask.timer.cancel();
    if (reply.error === undefined) {
      ask.resolve(reply.reply);
      return;
    }
    // A code outside the registry is the actor's defect; the asker still gets an answer.
    const code: ErrorCode = Object.hasOwn(errorCodes, reply.error.code) ? reply.error.code : 'internal_error';
    ask.reject(new ServiceError(code, reply.error.message, { details: reply.error.details }));
  }

  /** Rejects every parked ask with flow_interrupted (the activation leaves memory or is reloaded). */
  interruptAll(): void {
    if (this.pending.size === 0) return;
    const asks = [...this.pending.values()];
    this.pending.clear();
    for (const ask of asks) {
      ask.timer.cancel();
      ask.reject(interrupted());
    }
  }
}
