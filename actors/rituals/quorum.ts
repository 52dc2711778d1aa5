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

/**
 * The parts that could no longer perform if `part_id` performed now: those
 * before it (or before the latest performed part) in the effective order
 * that have not performed. More of them than the quorum leaves out
 * (`of - required`) and the attempt could never complete, so the performance
 * is out of order too. None in `any_order`.
 */
export function partsSkipped(definition: Pick<RitualDefinitionInput, 'ordering' | 'mode'>, performed: readonly string[], part_id: string): string[] {
  if (definition.mode === 'any_order') return [];
  const order = effectiveOrder(definition);
  const done = new Set([...performed, part_id]);
  const last = Math.max(...[...done].map((part) => order.indexOf(part)));
  return order.slice(0, last).filter((part) => !done.has(part));
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
