import { holdsDeferredAsks, isQuiet, type ActivationTable } from './activation.js';

/**
 * Passivation: an actor with no message for `idle_ms` leaves memory, so an
 * idle actor costs no RAM; its next message activates it again from the
 * store. Only quiet activations go (nothing running, nothing queued), so no
 * accepted message is ever lost by passivating; nor does one holding deferred
 * asks, whose askers wait on it in memory (bounded by deferred_reply_ms_max).
 */
export function passivateIdle(activations: ActivationTable, now_ms: number, idle_ms: number): number {
  return activations.dropWhere(
    (activation) => isQuiet(activation) && !holdsDeferredAsks(activation) && now_ms - activation.lastActiveMs >= idle_ms,
  );
}
