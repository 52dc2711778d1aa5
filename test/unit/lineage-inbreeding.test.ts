import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inbreedingCoefficient, offspringPedigree } from '../../actors/lineage/inbreeding.js';
import type { Pedigree } from '../../actors/lineage/messages.js';

/**
 * Wright's inbreeding coefficient from pedigree windows (actors/lineage/inbreeding.ts),
 * against hand-computed pedigrees and against a brute-force enumeration of Wright's paths.
 */
interface Animal {
  entity_id: string;
  parents: string[];
  generation: number;
  inbreeding_coefficient: number;
  pedigree: Pedigree;
}

/** A herd built the way the breed flow builds genomes: each newborn's window and F from its parents'. */
class Herd {
  readonly animals = new Map<string, Animal>();
  constructor(private readonly depth = 10) {}

  founder(id: string): void {
    this.animals.set(id, { entity_id: id, parents: [], generation: 0, inbreeding_coefficient: 0, pedigree: {} });
  }

  born(id: string, ...parents: string[]): number {
    const known = [...new Set(parents)].map((parent) => this.animals.get(parent)!);
    const pedigree = offspringPedigree(known, this.depth);
    const inbreeding_coefficient = inbreedingCoefficient(parents, pedigree);
    const generation = Math.max(...known.map((parent) => parent.generation)) + 1;
    this.animals.set(id, { entity_id: id, parents, generation, inbreeding_coefficient, pedigree });
    return inbreeding_coefficient;
  }

  /** F of a hypothetical offspring of a and b, without adding it. */
  mate(a: string, b: string): number {
    const known = [...new Set([a, b])].map((parent) => this.animals.get(parent)!);
    return inbreedingCoefficient([a, b], offspringPedigree(known, this.depth));
  }
}

describe('inbreeding coefficient, hand-computed pedigrees', () => {
  it('unrelated parents: 0', () => {
    const herd = new Herd();
    herd.founder('a');
    herd.founder('b');
    expect(herd.mate('a', 'b')).toBe(0);
  });

  it('full siblings: 0.25', () => {
    const herd = new Herd();
    herd.founder('sire');
    herd.founder('dam');
    herd.born('x', 'sire', 'dam');
    herd.born('y', 'sire', 'dam');
    expect(herd.mate('x', 'y')).toBe(0.25);
  });

  it('half siblings: 0.125', () => {
    const herd = new Herd();
    for (const id of ['sire', 'dam1', 'dam2']) herd.founder(id);
    herd.born('x', 'sire', 'dam1');
    herd.born('y', 'sire', 'dam2');
    expect(herd.mate('x', 'y')).toBe(0.125);
  });

  it('first cousins: 0.0625', () => {
    const herd = new Herd();
    for (const id of ['gs', 'gd', 'm1', 'm2']) herd.founder(id);
    herd.born('p1', 'gs', 'gd');
    herd.born('p2', 'gs', 'gd');
    herd.born('c1', 'p1', 'm1');
    herd.born('c2', 'p2', 'm2');
    expect(herd.mate('c1', 'c2')).toBe(0.0625);
  });

  it('parent and offspring: 0.25; selfing a founder: 0.5', () => {
    const herd = new Herd();
    herd.founder('a');
    herd.founder('b');
    herd.born('c', 'a', 'b');
    expect(herd.mate('a', 'c')).toBe(0.25);
    expect(herd.born('s', 'a')).toBe(0.5);
    expect(herd.mate('a', 'a')).toBe(0.5);
  });

  it('an inbred common ancestor counts (1 + F_A): half siblings through a sire with F 0.25 give 0.15625', () => {
    const herd = new Herd();
    for (const id of ['g1', 'g2', 'd1', 'd2']) herd.founder(id);
    herd.born('s1', 'g1', 'g2');
    herd.born('s2', 'g1', 'g2');
    expect(herd.born('sire', 's1', 's2')).toBe(0.25);
    herd.born('x', 'sire', 'd1');
    herd.born('y', 'sire', 'd2');
    // Path x-sire-y: (1/2)^3 (1 + 0.25); paths through g1 and g2 pass through the sire on both sides and do not count.
    expect(herd.mate('x', 'y')).toBeCloseTo(0.125 * 1.25, 12);
  });

  it('full siblings of full siblings (two generations of sib mating): 0.375', () => {
    const herd = new Herd();
    herd.founder('a');
    herd.founder('b');
    herd.born('c', 'a', 'b');
    herd.born('d', 'a', 'b');
    herd.born('e', 'c', 'd');
    herd.born('f', 'c', 'd');
    expect(herd.mate('e', 'f')).toBeCloseTo(0.375, 12);
  });

  it('ancestors beyond the window count as unrelated', () => {
    const herd = new Herd(2);
    for (const id of ['gs', 'gd', 'm1', 'm2', 'n1', 'n2']) herd.founder(id);
    herd.born('p1', 'gs', 'gd');
    herd.born('p2', 'gs', 'gd');
    herd.born('c1', 'p1', 'm1');
    herd.born('c2', 'p2', 'm2');
    herd.born('e1', 'c1', 'n1');
    herd.born('e2', 'c2', 'n2');
    // Second cousins share gs and gd 3 generations up; a window of 2 does not reach them.
    expect(herd.mate('e1', 'e2')).toBe(0);
  });
});

/** Wright's formula by brute force: every pair of ancestor paths meeting only at a common ancestor. */
function wrightByPaths(herd: Herd, sire: string, dam: string): number {
  const parentsOf = (id: string) => [...new Set(herd.animals.get(id)?.parents ?? [])];
  const paths = (from: string): string[][] => {
    const out: string[][] = [[from]];
    for (const parent of parentsOf(from)) for (const path of paths(parent)) out.push([from, ...path]);
    return out;
  };
  if (sire === dam) return (1 + herd.animals.get(sire)!.inbreeding_coefficient) / 2;
  let total = 0;
  for (const left of paths(sire)) {
    for (const right of paths(dam)) {
      const ancestor = left[left.length - 1];
      if (right[right.length - 1] !== ancestor) continue;
      const shared = left.filter((id) => right.includes(id));
      if (shared.length !== 1) continue;
      total += 0.5 ** (left.length - 1 + right.length - 1 + 1) * (1 + herd.animals.get(ancestor)!.inbreeding_coefficient);
    }
  }
  return total;
}

describe('inbreeding coefficient, property', () => {
  it('equals the sum over Wright paths on random small pedigrees (two parents, no selfing)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.nat()), { minLength: 1, maxLength: 14 }), (matings) => {
        const herd = new Herd();
        const ids = ['f0', 'f1', 'f2', 'f3'];
        for (const id of ids) herd.founder(id);
        matings.forEach(([a, b], i) => {
          const sire = ids[a % ids.length];
          let dam = ids[b % ids.length];
          if (dam === sire) dam = ids[(b + 1) % ids.length];
          const id = `x${i}`;
          const f = herd.born(id, sire, dam);
          expect(f).toBeCloseTo(wrightByPaths(herd, sire, dam), 10);
          ids.push(id);
        });
      }),
      { numRuns: 150 },
    );
  });
});
