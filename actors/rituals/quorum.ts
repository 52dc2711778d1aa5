import type { Performance, RitualDefinitionInput } from './messages.js';

/**
 * Ordering and quorum, pure. The effective order is `ordering` for mode
 * `forward`, reversed for `reverse`; `any_order` has none. A performance is
 * in order when every part that has already performed comes before it in the
 * effective order (with a quorum below all parts, a part may be skipped, but
 * no part may perform after one that follows it).
 */
export function effectiveOrder(definition: Pick<RitualDefinitionInput, 'ordering' | 'mode'>): string[] {
  return definition.mode === 'reverse' ? [...definition.ordering].reverse() : [...definition.ordering];
}

/** The already-performed part that `part_id` may not follow, or null when it is in order. */
export function orderViolation(definition: Pick<RitualDefinitionInput, 'ordering' | 'mode'>, performed: readonly string[], part_id: string): string | null {
  if (definition.mode === 'any_order') return null;
  const order = effectiveOrder(definition);
  const position = order.indexOf(part_id);
  for (const done of performed) if (order.indexOf(done) > position) return done;
  return null;
}

/** Between the first and the last performance; null with none. */
export function spreadOf(performances: readonly Performance[]): number | null {
  if (performances.length === 0) return null;
  const times = performances.map((p) => p.server_ts_ms);
  return Math.max(...times) - Math.min(...times);
}

/** Late performances within this many ms count as near misses: one window length, at least near_miss_ms_min. */
export function nearMissMs(window_ms: number, minimum: number): number {
  return Math.max(minimum, window_ms);
}
