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
  const put = (id: string, entry: PedigreeEntry) => {
    if (entry.distance > depth_max) return;
    const current = merged[id];
    if (!current || current.distance > entry.distance) merged[id] = entry;
  };
  for (const parent of parents) {
    put(parent.entity_id, { parents: parent.parents, generation: parent.generation, distance: 1, inbreeding_coefficient: parent.inbreeding_coefficient });
    for (const [id, entry] of Object.entries(parent.pedigree)) put(id, { ...entry, distance: entry.distance + 1 });
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

  // Index the window: ids to small integers, parents as indices (-1 unknown).
  const ids = Object.keys(pedigree);
  const index = new Map<string, number>();
  ids.forEach((id, i) => index.set(id, i));
  const n = ids.length;
  const generation = new Float64Array(n);
  const coefficient = new Float64Array(n);
  const parentA = new Int32Array(n).fill(-1);
  const parentB = new Int32Array(n).fill(-1);
  for (let i = 0; i < n; i++) {
    const entry = pedigree[ids[i]];
    generation[i] = entry.generation;
    coefficient[i] = entry.inbreeding_coefficient;
    const first = entry.parents.length > 0 ? index.get(entry.parents[0]) ?? -1 : -1;
    const second = entry.parents.length > 1 ? index.get(entry.parents[1]) ?? -1 : first;
    parentA[i] = first;
    parentB[i] = second;
  }
  const s = index.get(sire) ?? -1;
  const d = index.get(dam) ?? -1;
  if (s < 0 || d < 0) return 0;
  if (s === d) return (1 + coefficient[s]) / 2;

  // Ancestors-or-self of each parent; their intersection is the set of common ancestors.
  const mark = (start: number, bit: number, marks: Uint8Array) => {
    const stack = [start];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (i < 0 || marks[i] & bit) continue;
      marks[i] |= bit;
      stack.push(parentA[i], parentB[i]);
    }
  };
  const marks = new Uint8Array(n);
  mark(s, 1, marks);
  mark(d, 2, marks);
  // relevant[i]: some common ancestor is i or one of i's ancestors. Oldest first, so parents are settled before children.
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => generation[a] - generation[b]);
  const relevant = new Uint8Array(n);
  let common = 0;
  for (const i of order) {
    if (marks[i] === 3) {
      relevant[i] = 1;
      common++;
    } else if ((parentA[i] >= 0 && relevant[parentA[i]]) || (parentB[i] >= 0 && relevant[parentB[i]])) {
      relevant[i] = 1;
    }
  }
  if (common === 0) return 0;

  const memo = new Map<number, number>();
  const coancestry = (a: number, b: number): number => {
    if (a < 0 || b < 0) return 0;
    if (a === b) return (1 + coefficient[a]) / 2;
    if (!relevant[a] || !relevant[b]) return 0;
    // Expand the younger (ties: either; neither is then an ancestor of the other).
    let younger = a;
    let other = b;
    if (generation[b] > generation[a] || (generation[b] === generation[a] && b > a)) {
      younger = b;
      other = a;
    }
    const key = younger * n + other;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const value = (coancestry(parentA[younger], other) + coancestry(parentB[younger], other)) / 2;
    memo.set(key, value);
    return value;
  };
  return coancestry(s, d);
}
