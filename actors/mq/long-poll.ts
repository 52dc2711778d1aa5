import type { AlarmChange, TurnContext } from '../../runtime/index.js';
import { hasReceivable, nextVisibleAt, take, type QueueState, type TurnOutput } from './queue-messages.js';

/**
 * Long polling: receives that found no message wait in the queue actor's
 * memory (never on disk: a reloaded activation has none, and the runtime
 * answers their asks flow_interrupted) until a turn can serve them (a send,
 * a message becoming visible) or their deadline, kept by the wake alarm.
 */
export type Waiter =
  | { type: 'receive'; request_id: string; max_messages: number; visibility_ms: number | null; deadline: number }
  | { type: 'await'; request_id: string; deadline: number };

export const WAKE_ALARM = 'wake';

/** Answers waiting receives that can be served now, and those whose wait is over. */
export function serveWaiters(state: QueueState, now: number, context: TurnContext, out: TurnOutput): void {
  if (state.waiters.length === 0 || !state.config) return;
  const still: Waiter[] = [];
  // Once a receive finds less than it asked for, the queue has nothing more to hand out in this turn:
  // the waiters after it only need their deadline checked.
  let exhausted = false;
  for (const waiter of state.waiters) {
    if (waiter.type === 'await') {
      const available = !exhausted && hasReceivable(state, now);
      if (available || waiter.deadline <= now) out.replies.push({ request_id: waiter.request_id, reply: { available } });
      else still.push(waiter);
      continue;
    }
    const messages = exhausted ? [] : take(state, now, waiter.max_messages, waiter.visibility_ms, context, out);
    if (messages.length < waiter.max_messages) exhausted = true;
    if (messages.length > 0 || waiter.deadline <= now) out.replies.push({ request_id: waiter.request_id, reply: messages });
    else still.push(waiter);
  }
  state.waiters = still;
}

/** The wake alarm: the next waiter's deadline or the next message becoming receivable, while receives wait. */
export function armWake(state: QueueState): AlarmChange[] {
  if (state.waiters.length === 0) return [];
  let due = Math.min(...state.waiters.map((waiter) => waiter.deadline));
  const visible = nextVisibleAt(state);
  if (visible !== null && visible < due) due = visible;
  if (due === state.wakeDue) return [];
  state.wakeDue = due;
  return [{ name: WAKE_ALARM, due_ms: due }];
}
