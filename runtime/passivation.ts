import { holdsDeferredAsks, isQuiet, type Activation, type ActivationTable } from './activation.js';

/**
 * Passivation: an actor with no message for `idle_ms` leaves memory, so an
 * idle actor costs no RAM; its next message activates it again from the
 * store. Only quiet activations go (nothing running, nothing queued), so no
 * accepted message is ever lost by passivating; nor does one holding deferred
 * asks, whose askers wait on it in memory (bounded by deferred_reply_ms_max).
 */
export function passivateIdle(activations: ActivationTable, now_ms: number, idle_ms: number): number {
  return activations.dropWhere(idleFor(now_ms, idle_ms));
}

/** May leave memory: quiet, holding no deferred asks, and without a turn for `idle_ms`. */
function idleFor(now_ms: number, idle_ms: number): (activation: Activation) => boolean {
  return (activation) => isQuiet(activation) && !holdsDeferredAsks(activation) && now_ms - activation.lastActiveMs >= idle_ms;
}

/** What the activation limit trims down to: nine tenths of activations_max, so a trim runs once per tenth of it. */
export function trimTarget(activations_max: number): number {
  return Math.floor(activations_max * 0.9);
}

/**
 * Past the activation limit: passivates quiet actors idle for at least
 * `idle_ms`, the longest-resident first, until `target` remain (or none
 * qualifies any more). Returns how many left memory.
 */
export function passivateOverLimit(activations: ActivationTable, now_ms: number, target: number, idle_ms: number): number {
  const excess = activations.count() - target;
  if (excess <= 0) return 0;
  return activations.dropWhere(idleFor(now_ms, idle_ms), excess);
}
