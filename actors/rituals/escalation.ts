import type { EscalationStep } from './messages.js';

/**
 * Escalation timing, pure. A part that has not performed is expected to
 * check in every `interval_ms`, counted from its last check-in (or from the
 * arm). Missing that makes it `missed_at_ms = base + interval_ms`; step k
 * fires at `missed_at_ms + steps[k].after_missed_seconds * 1000`, each step
 * once, in order. A check-in starts the count over (steps_fired back to 0).
 */
export interface EscalationPart {
  part_id: string;
  last_checkin_ms: number | null;
  steps_fired: number;
  performed: boolean;
}

export interface DueStep {
  part_id: string;
  step: number;
  missed_at_ms: number;
  due_ms: number;
}

export function missedAt(armed_at_ms: number, interval_ms: number, part: EscalationPart): number {
  return (part.last_checkin_ms ?? armed_at_ms) + interval_ms;
}

/** The next step of each part that can still escalate, earliest first. */
export function nextSteps(armed_at_ms: number, interval_ms: number, steps: readonly EscalationStep[], parts: readonly EscalationPart[]): DueStep[] {
  if (interval_ms <= 0 || steps.length === 0) return [];
  const next: DueStep[] = [];
  for (const part of parts) {
    if (part.performed || part.steps_fired >= steps.length) continue;
    const missed_at_ms = missedAt(armed_at_ms, interval_ms, part);
    next.push({ part_id: part.part_id, step: part.steps_fired, missed_at_ms, due_ms: missed_at_ms + steps[part.steps_fired]!.after_missed_seconds * 1000 });
  }
  return next.sort((a, b) => a.due_ms - b.due_ms || (a.part_id < b.part_id ? -1 : 1));
}

/** When the next step falls due, or null when none can. */
export function nextEscalationMs(armed_at_ms: number, interval_ms: number, steps: readonly EscalationStep[], parts: readonly EscalationPart[]): number | null {
  return nextSteps(armed_at_ms, interval_ms, steps, parts)[0]?.due_ms ?? null;
}
