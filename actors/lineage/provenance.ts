import { anchorHash, canonicalJson } from './anchor.js';
import { breedOffspring, foundGenome } from './genetics.js';
import type { Derivation, SpeciesVersion, VerifyView } from './messages.js';

/**
 * Re-derives a provenance walk: `genomes` are the entity (`root`) and its
 * ancestors, nearest first, as stored. For each genome:
 * - its anchor hash is recomputed over its stored content (anchor.ts);
 * - a founder is made again from its seed and given input, an offspring is
 *   bred again from its parents (when the walk holds them) with its seed
 *   under the species version it names, and the outcome must equal what is
 *   stored (alleles, values, flags, mutations, generation);
 * - each parent's anchor must be the one the offspring recorded.
 * Genomes at the walk's edge (their parents beyond the walk's bounds) are
 * checked by their anchor alone, which commits to their parents' anchors.
 */
export function verifyChain(genomes: Derivation[], root: string, versionOf: (species_id: string, version: number) => SpeciesVersion | null): VerifyView {
  const byId = new Map(genomes.map((genome) => [genome.entity_id, genome]));
  const failures: { entity_id: string; reason: string }[] = [];
  const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
  for (const genome of genomes) {
    const fail = (reason: string) => failures.push({ entity_id: genome.entity_id, reason });
    const { anchor_hash, owner: _owner, created_at_ms: _created, ...content } = genome;
    if (anchorHash(content) !== anchor_hash) {
      fail('anchor_hash does not match the stored genome');
      continue;
    }
    const version = versionOf(genome.species_id, genome.species_version);
    if (!version) {
      fail(`species version ${genome.species_id}@${genome.species_version} is missing`);
      continue;
    }
    if (genome.parents.length === 0) {
      const again = foundGenome(version, genome.seed, genome.founder_input ?? { alleles: {}, numeric: {}, flags: [] });
      if (!same(again, { raw_alleles: genome.raw_alleles, numeric: genome.numeric, flags: genome.flags }) || genome.generation !== 0) fail('the founder does not re-derive from its seed');
      continue;
    }
    const parents = genome.parents.map((id) => byId.get(id));
    if (parents.some((parent) => parent === undefined)) continue;
    if (parents.some((parent, i) => parent!.anchor_hash !== genome.parent_anchors[i])) {
      fail("a parent's anchor is not the one recorded at breeding");
      continue;
    }
    const again = breedOffspring(version, parents as Derivation[], genome.seed, genome.inbreeding_coefficient);
    const stored = { raw_alleles: genome.raw_alleles, numeric: genome.numeric, flags: genome.flags, mutations: genome.mutations, generation: genome.generation };
    if (!same(again, stored)) fail('the offspring does not re-derive from its parents and seed');
  }
  if (!byId.has(root)) failures.push({ entity_id: root, reason: 'not in the walk' });
  return { chain_verified: failures.length === 0, genomes_verified: genomes.length, failures };
}
