import { holdsDeferredAsks, isQuiet, type Activation, type ActivationTable } from './activation.js';
import type { Limits } from './limits.js';

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
  return (activation) => !isBusy(activation) && now_ms - activation.lastActiveMs >= idle_ms;
}

/** May not leave memory whatever its idle time: a batch running or queued, or asks deferred. */
function isBusy(activation: Activation): boolean {
  return !isQuiet(activation) || holdsDeferredAsks(activation);
}

/** What the activation limit trims down to: nine tenths of activations_max, so a trim runs once per tenth of it. */
function trimTarget(activations_max: number): number {
  return Math.floor(activations_max * 0.9);
}

/**
 * Past the activation limit: passivates quiet actors idle for at least
 * `idle_ms`, the longest-resident first, until `target` remain (or none
 * qualifies any more). Returns how many left memory.
 */
function passivateOverLimit(activations: ActivationTable, now_ms: number, target: number, idle_ms: number): number {
  const excess = activations.count() - target;
  if (excess <= 0) return 0;
  return activations.dropWhere(idleFor(now_ms, idle_ms), excess);
}

/**
 * When the activation limit trims: past activations_max, or, after a trim
 * that could not reach its target (too few quiet and idle actors), past what
 * was left plus a tenth of the limit, so a burst of busy actors does not
 * cost a walk of the table per activation. The idle sweep brings it back to
 * activations_max once the count is under the target again.
 */
export class ActivationLimit {
  private trimAbove: number;

  constructor(
    private readonly activations: ActivationTable,
    private readonly limits: Pick<Limits, 'activations_max' | 'activations_probation_max' | 'activations_probation_idle_ms' | 'activations_evict_idle_ms'>,
  ) {
    this.trimAbove = limits.activations_max;
  }

  /** After an activation: is a trim due? */
  exceeded(): boolean {
    return this.activations.count() > this.trimAbove || this.activations.countOnProbation() > this.limits.activations_probation_max;
  }

  trim(now_ms: number): void {
    const { activations_max, activations_probation_max, activations_probation_idle_ms, activations_evict_idle_ms } = this.limits;
    // Actors asked once go first, the oldest first (probation.ts), down to nine tenths of their bound.
    if (this.activations.countOnProbation() > activations_probation_max) {
      this.activations.dropOnProbation(trimTarget(activations_probation_max), idleFor(now_ms, activations_probation_idle_ms), isBusy);
    }
    if (this.activations.count() <= this.trimAbove) return;
    passivateOverLimit(this.activations, now_ms, trimTarget(activations_max), activations_evict_idle_ms);
    const left = this.activations.count();
    this.trimAbove = left > trimTarget(activations_max) ? left + Math.ceil(activations_max / 10) : activations_max;
  }

  /** After the idle sweep. */
  swept(): void {
    if (this.activations.count() <= trimTarget(this.limits.activations_max)) this.trimAbove = this.limits.activations_max;
  }
}
