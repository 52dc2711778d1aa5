import type { Pedigree, PedigreeEntry } from './messages.js';

/**
 * The inbreeding coefficient of an offspring, from its parents' pedigree
 * windows only (no asks: each parent's reservation returns its window).
 *
 * F is Wright's path coefficient, F = Σ over common ancestors A and over
 * the paths joining the two parents through A (1/2)^(n1+n2+1) (1+F_A). It is
 * computed with the equivalent coancestry recursion (Emik and Terrill;
 * Falconer's tabular method): F_X = f(sire, dam), where
 *   f(a, a) = (1 + F_a) / 2,
 *   f(a, b) = (f(p1(a), b) + f(p2(a), b)) / 2 with a the younger of the two
 *             (higher generation; a parent is always older than its child),
 *   f(a, b) = 0 when a has no known parents.
 * A selfed individual has one parent p counted twice. F_A is the ancestor's
 * own coefficient as recorded when it was bred. Ancestors beyond the window
 * are treated as unrelated founders. Pairs are memoised, and an ancestor
 * from which no common ancestor of the two parents is reachable is skipped
 * (its coancestry with anyone on the other side is 0), so an unrelated
 * 10-generation pedigree costs one pass over its ancestors.
 */

export interface PedigreeParent {
  entity_id: string;
  parents: string[];
  generation: number;
  inbreeding_coefficient: number;
  pedigree: Pedigree;
}

/** The offspring's pedigree window: its parents and their windows, one generation further, cut at depth_max. */
export function offspringPedigree(parents: PedigreeParent[], depth_max: number): Pedigree {
  const merged: Pedigree = {};
  const put = (id: string, parents_of: string[], generation: number, distance: number, inbreeding_coefficient: number) => {
    if (distance > depth_max) return;
    const current = merged[id];
    if (current === undefined || current.distance > distance) merged[id] = { parents: parents_of, generation, distance, inbreeding_coefficient };
  };
  for (const parent of parents) {
    put(parent.entity_id, parent.parents, parent.generation, 1, parent.inbreeding_coefficient);
    const window = parent.pedigree;
    for (const id in window) {
      const entry: PedigreeEntry = window[id];
      put(id, entry.parents, entry.generation, entry.distance + 1, entry.inbreeding_coefficient);
    }
  }
  return merged;
}

/**
 * F of an offspring of `parents` (one parent: selfing), over `pedigree` (the
 * offspring's window from offspringPedigree, which holds the parents).
 */
export function inbreedingCoefficient(parents: string[], pedigree: Pedigree): number {
  if (parents.length === 0) return 0;
  const sire = parents[0];
  const dam = parents.length > 1 ? parents[1] : parents[0];
  const sireEntry = pedigree[sire];
  const damEntry = pedigree[dam];
  if (sireEntry === undefined || damEntry === undefined) return 0;
  if (sire === dam) return (1 + sireEntry.inbreeding_coefficient) / 2;

  // Index the ancestors-or-self of both parents (within the window) as small integers, marking whose ancestors they are.
  const index = new Map<string, number>();
  const entries: PedigreeEntry[] = [];
  const marks: number[] = [];
  const visit = (start: string, bit: number) => {
    const stack = [start];
    while (stack.length > 0) {
      const id = stack.pop()!;
      let i = index.get(id);
      if (i === undefined) {
        const entry = pedigree[id];
        if (entry === undefined) continue;
        i = entries.length;
        index.set(id, i);
        entries.push(entry);
        marks.push(0);
      }
      if (marks[i] & bit) continue;
      marks[i] |= bit;
      for (const parent of entries[i].parents) stack.push(parent);
    }
  };
  visit(sire, 1);
  visit(dam, 2);
  if (!marks.includes(3)) return 0;
  const n = entries.length;
  const generation = new Float64Array(n);
  const coefficient = new Float64Array(n);
  const parentA = new Int32Array(n);
  const parentB = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const entry = entries[i];
    generation[i] = entry.generation;
    coefficient[i] = entry.inbreeding_coefficient;
    parentA[i] = entry.parents.length > 0 ? index.get(entry.parents[0]) ?? -1 : -1;
    // A selfed individual has one parent, who passes both gametes.
    parentB[i] = entry.parents.length > 1 ? index.get(entry.parents[1]) ?? -1 : parentA[i];
  }

  // relevant(i): a common ancestor is i or above i (computed on demand). Coancestry with a non-relevant individual is 0.
  const relevance = new Int8Array(n).fill(-1);
  const relevant = (i: number): boolean => {
    if (i < 0) return false;
    if (relevance[i] < 0) relevance[i] = marks[i] === 3 || relevant(parentA[i]) || relevant(parentB[i]) ? 1 : 0;
    return relevance[i] === 1;
  };

  const memo = new Map<number, number>();
  const coancestry = (a: number, b: number): number => {
    if (a < 0 || b < 0) return 0;
    if (a === b) return (1 + coefficient[a]) / 2;
    if (!relevant(a) || !relevant(b)) return 0;
    // Expand the younger (ties: either; neither is then an ancestor of the other).
    const swap = generation[b] > generation[a] || (generation[b] === generation[a] && b > a);
    const younger = swap ? b : a;
    const other = swap ? a : b;
    const key = younger * n + other;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const value = (coancestry(parentA[younger], other) + coancestry(parentB[younger], other)) / 2;
    memo.set(key, value);
    return value;
  };
  return coancestry(index.get(sire)!, index.get(dam)!);
}
