import { isAlarm, ServiceError, type ActorSend, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  PRESENCE_CONTEXT_KIND,
  presenceContextKey,
  presenceLimits,
  type MultiplexHeartbeatMessage,
  type MultiplexItemResult,
  type MultiplexMessage,
  type MultiplexReply,
} from './messages.js';

/**
 * The multiplex flow (POST /api/v1/presence/multiplex): heartbeats to many
 * contexts in one request, applied durably. One coordinator per request,
 * keyed by presenceMultiplexKey(tenant, id made at the edge), snapshot storage.
 *
 * - `start` (asked by the edge) sends `multiplex_heartbeat` to the context of
 *   every valid item through the outbox, keeps the ask's request_id and
 *   defers its answer. Items the edge already failed come with their result.
 * - Each context applies its item once (the outbox de-duplicates) and sends
 *   back `multiplex_result`, success or the error the item would have had on
 *   its own.
 * - When the last result is in, the coordinator answers the deferred ask with
 *   every result and deletes its state.
 * - No compensation: the items are independent and each fails alone. An alarm
 *   deletes the state `multiplex_cleanup_ms` after the start even if some
 *   result never came (answering, if the ask still waits, with those items
 *   failed as `flow_interrupted`); a result arriving after that is ignored.
 */

export const CLEANUP_ALARM = 'cleanup';

export interface MultiplexFlowState {
  /** The edge's ask, answered when the last result is in (null: it was not asked). */
  request_id: string | null;
  /** `results[i]` answers item i; null while its context has not answered. */
  results: (MultiplexItemResult | null)[];
  /** Items still waiting for their context. */
  pending: number;
}

/** No flow: never started, or finished and deleted. */
export function initialMultiplexFlow(): MultiplexFlowState | null {
  return null;
}

function tenantOfKey(key: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(key);
  } catch {
    parsed = null;
  }
  if (!Array.isArray(parsed) || typeof parsed[0] !== 'string') throw new ServiceError('BAD_REQUEST', 'A multiplex flow key is [tenant, id].');
  return parsed[0];
}

const interrupted: MultiplexItemResult = {
  success: false,
  error: 'flow_interrupted',
  message: 'This item had no result before the multiplex flow was cleaned up; it may still be applied.',
  status: 503,
};

function finish(state: MultiplexFlowState, results: MultiplexItemResult[]): TurnResult<MultiplexFlowState | null, MultiplexReply | undefined> {
  const reply: MultiplexReply = { results };
  return {
    state: null,
    replies: state.request_id !== null ? [{ request_id: state.request_id, reply }] : undefined,
    alarms: [{ name: CLEANUP_ALARM, due_ms: null }],
  };
}

export function stepMultiplexFlow(
  state: MultiplexFlowState | null,
  message: MultiplexMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<MultiplexFlowState | null, MultiplexReply | undefined> {
  if (isAlarm(message)) {
    // The runtime removed the alarm that woke us.
    if (state === null) return { state };
    const results = state.results.map((result) => result ?? interrupted);
    return { ...finish(state, results), alarms: undefined };
  }

  switch (message.op) {
    case 'start': {
      if (state !== null) throw new ServiceError('conflict', 'This multiplex flow has already started.');
      const { items } = message;
      if (items.length === 0 || items.length > presenceLimits.multiplex_items_max) {
        throw new ServiceError('BAD_REQUEST', `A multiplex has 1 to ${presenceLimits.multiplex_items_max} items.`);
      }
      const tenant = tenantOfKey(context.key);
      const sends: ActorSend[] = [];
      const results = items.map((item, index): MultiplexItemResult | null => {
        if ('result' in item) return item.result;
        const heartbeat: MultiplexHeartbeatMessage = { op: 'multiplex_heartbeat', flow: context.key, index, heartbeat: item.heartbeat };
        sends.push({ kind: PRESENCE_CONTEXT_KIND, key: presenceContextKey(tenant, item.context_id), message: heartbeat });
        return null;
      });
      // Every item already failed at the edge: nothing to wait for, nothing to keep.
      if (sends.length === 0) return { state: null, reply: { results: results as MultiplexItemResult[] } };
      return {
        state: { request_id: context.request_id, results, pending: sends.length },
        sends,
        defer: true,
        alarms: [{ name: CLEANUP_ALARM, due_ms: context.now + presenceLimits.multiplex_cleanup_ms }],
      };
    }

    case 'multiplex_result': {
      // Late (after the cleanup), or not an item waiting: nothing to do.
      if (state === null || state.results[message.index] !== null) return { state };
      const results = state.results.slice();
      results[message.index] = message.result;
      const pending = state.pending - 1;
      if (pending === 0) return finish(state, results as MultiplexItemResult[]);
      return { state: { ...state, results, pending } };
    }
  }
}
