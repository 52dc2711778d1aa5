import { ServiceError } from '../../runtime/index.js';
import { CARRIER_FLAG_PREFIX, lineagePolicy, type AllelePair, type Derivation, type FounderInput, type SpeciesVersion, type TraitDefinition } from './messages.js';
import { TraitRandom } from './random.js';

/**
 * Pure genetics: a founder from its seed, an offspring from its parents and
 * seed, and how a genotype is expressed. The same inputs always give the
 * same genome (random.ts); provenance re-runs these functions.
 *
 * Per trait of the species version, in its own generator (random.ts):
 * - mendelian: each parent passes one of its two alleles (a draw of 0 or 1
 *   per parent, first parent first; one parent passes two gametes). Then per
 *   passed allele, in the same order: a draw u < mutation.rate mutates it,
 *   moving it by an integer offset drawn from [ceil(offset_min),
 *   floor(offset_max)] without 0 along the trait's allele list (clamped to
 *   the list); with no such offset, to another allele drawn uniformly.
 * - numeric: the parents' values blended (equal: their mean; random: a
 *   weight w drawn, w*first + (1-w)*second), plus variance (uniform:
 *   (2u-1)*stddev*sqrt(3); normal: stddev * Irwin-Hall), plus a mutation
 *   (u < rate: an offset drawn uniformly from [offset_min, offset_max]);
 *   with inbreeding penalties on, pulled toward the range's minimum by F
 *   (value - F*(value - min)); then clamped to the range and rounded to its
 *   decimals.
 * Founders: given alleles and values are kept; the others are drawn (two
 * alleles uniformly; a value uniformly in the range).
 */

export interface Offspring {
  raw_alleles: Record<string, AllelePair>;
  numeric: Record<string, number>;
  flags: string[];
  mutations: string[];
  generation: number;
}

const round = (value: number, decimals: number) => {
  const scale = 10 ** decimals;
  return Math.round(value * scale) / scale;
};

function clampRound(trait: TraitDefinition, value: number): number {
  const range = trait.range!;
  return round(Math.min(range.max, Math.max(range.min, value)), range.decimals);
}

/** The allele ids a genotype expresses, in allele-list order. */
export function expressedAlleles(trait: TraitDefinition, pair: AllelePair): string[] {
  const position = (id: string) => trait.alleles.findIndex((allele) => allele.id === id);
  const dominance = (id: string) => trait.alleles[position(id)]?.dominance ?? 0;
  const both = [pair.first, pair.second].sort((a, b) => position(a) - position(b));
  if (both[0] === both[1]) return [both[0]];
  const top = Math.max(dominance(both[0]), dominance(both[1]));
  const winners = both.filter((id) => dominance(id) === top);
  // highest_dominance: one allele shows (a tie goes to the one listed first); codominant: tied alleles show together.
  return trait.expression === 'codominant' ? winners : [winners[0]];
}

/** The phenotype string of a mendelian genotype: the expressed allele ids joined with '+'. */
export function phenotype(trait: TraitDefinition, pair: AllelePair): string {
  return expressedAlleles(trait, pair).join('+');
}

/** The phenotypes of a genome's mendelian traits. */
export function expressedTraits(traits: TraitDefinition[], raw: Record<string, AllelePair>): Record<string, string> {
  const expressed: Record<string, string> = {};
  for (const trait of traits) if (trait.kind === 'mendelian' && raw[trait.trait_id]) expressed[trait.trait_id] = phenotype(trait, raw[trait.trait_id]);
  return expressed;
}

/** `carrier:<trait_id>:<allele_id>` for each carrier_only_visible allele carried but not expressed. */
export function carrierFlags(traits: TraitDefinition[], raw: Record<string, AllelePair>): string[] {
  const flags: string[] = [];
  for (const trait of traits) {
    const pair = raw[trait.trait_id];
    if (trait.kind !== 'mendelian' || !pair) continue;
    const shown = expressedAlleles(trait, pair);
    for (const id of new Set([pair.first, pair.second])) {
      const allele = trait.alleles.find((candidate) => candidate.id === id);
      if (allele?.carrier_only_visible && !shown.includes(id)) flags.push(`${CARRIER_FLAG_PREFIX}${trait.trait_id}:${id}`);
    }
  }
  return flags;
}

export function customFlags(flags: string[]): string[] {
  return flags.filter((flag) => !flag.startsWith(CARRIER_FLAG_PREFIX));
}

const sortedUnique = (flags: string[]) => [...new Set(flags)].sort();

function mutateAllele(trait: TraitDefinition, id: string, random: TraitRandom): string {
  const n = trait.alleles.length;
  const from = trait.alleles.findIndex((allele) => allele.id === id);
  const low = Math.ceil(trait.mutation.offset_min);
  const high = Math.floor(trait.mutation.offset_max);
  const offsets: number[] = [];
  for (let k = low; k <= high && offsets.length <= 2 * n; k++) if (k !== 0) offsets.push(k);
  let to: number;
  if (offsets.length > 0) {
    to = Math.min(n - 1, Math.max(0, from + offsets[random.int(0, offsets.length - 1)]));
  } else if (n > 1) {
    const pick = random.int(0, n - 2);
    to = pick >= from ? pick + 1 : pick;
  } else {
    to = from;
  }
  return trait.alleles[to].id;
}

/** The offspring of `parents` (one: selfing) under `version` with `seed`, given its inbreeding coefficient. */
export function breedOffspring(version: SpeciesVersion, parents: Derivation[], seed: string, inbreeding_coefficient: number): Offspring {
  const first = parents[0];
  const second = parents.length > 1 ? parents[1] : parents[0];
  const raw_alleles: Record<string, AllelePair> = {};
  const numeric: Record<string, number> = {};
  const mutations: string[] = [];
  const penalties = version.species.lineage.inbreeding.penalties_enabled;
  for (const trait of version.traits) {
    const random = new TraitRandom(seed, trait.trait_id);
    if (trait.kind === 'mendelian') {
      const gamete = (parent: Derivation) => {
        const pair = parent.raw_alleles[trait.trait_id] ?? { first: trait.alleles[0].id, second: trait.alleles[0].id };
        return random.int(0, 1) === 0 ? pair.first : pair.second;
      };
      const passed = [gamete(first), gamete(second)];
      for (let i = 0; i < 2; i++) {
        if (trait.mutation.rate > 0 && random.unit() < trait.mutation.rate) {
          const mutated = mutateAllele(trait, passed[i], random);
          if (mutated !== passed[i]) mutations.push(`${trait.trait_id}:${passed[i]}->${mutated}`);
          passed[i] = mutated;
        }
      }
      raw_alleles[trait.trait_id] = { first: passed[0], second: passed[1] };
    } else {
      const range = trait.range!;
      const valueOf = (parent: Derivation) => parent.numeric[trait.trait_id] ?? range.min;
      const weight = trait.inheritance.parent_weighting === 'random' ? random.unit() : 0.5;
      let value = weight * valueOf(first) + (1 - weight) * valueOf(second);
      const { distribution, stddev } = trait.inheritance.variance;
      if (distribution === 'uniform') value += (2 * random.unit() - 1) * stddev * Math.sqrt(3);
      else if (distribution === 'normal') value += stddev * random.normal();
      if (trait.mutation.rate > 0 && random.unit() < trait.mutation.rate) {
        const offset = round(trait.mutation.offset_min + random.unit() * (trait.mutation.offset_max - trait.mutation.offset_min), range.decimals);
        if (offset !== 0) mutations.push(`${trait.trait_id}:${offset > 0 ? '+' : ''}${offset}`);
        value += offset;
      }
      if (penalties) value -= inbreeding_coefficient * (value - range.min);
      numeric[trait.trait_id] = clampRound(trait, value);
    }
  }
  const shared = customFlags(first.flags).filter((flag) => parents.every((parent) => parent.flags.includes(flag)));
  return {
    raw_alleles,
    numeric,
    flags: sortedUnique([...shared, ...carrierFlags(version.traits, raw_alleles)]),
    mutations,
    generation: Math.max(...parents.map((parent) => parent.generation)) + 1,
  };
}

const badFounder = (field: string, message: string) => new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });

/** Refuses a founder's given alleles, values and flags that the species version does not know (400, nothing created). */
export function checkFounderInput(version: SpeciesVersion, input: FounderInput): void {
  const traits = new Map(version.traits.map((trait) => [trait.trait_id, trait]));
  for (const [trait_id, pair] of Object.entries(input.alleles)) {
    const trait = traits.get(trait_id);
    if (!trait) throw badFounder('body.alleles', `names ${trait_id}, which is not a trait of species ${version.species.species_id}`);
    if (trait.kind !== 'mendelian') throw badFounder('body.alleles', `names ${trait_id}, a numeric trait (give it in numeric)`);
    for (const id of [pair.first, pair.second]) {
      if (!trait.alleles.some((allele) => allele.id === id)) throw badFounder('body.alleles', `${trait_id}: unknown allele ${id}`);
    }
  }
  for (const [trait_id, value] of Object.entries(input.numeric)) {
    const trait = traits.get(trait_id);
    if (!trait) throw badFounder('body.numeric', `names ${trait_id}, which is not a trait of species ${version.species.species_id}`);
    if (trait.kind !== 'numeric') throw badFounder('body.numeric', `names ${trait_id}, a mendelian trait (give it in alleles)`);
    if (value < trait.range!.min || value > trait.range!.max) throw badFounder('body.numeric', `${trait_id} must lie in [${trait.range!.min}, ${trait.range!.max}]`);
  }
  for (const flag of input.flags) {
    if (flag.startsWith(CARRIER_FLAG_PREFIX)) throw badFounder('body.flags', `may not use the service's prefix ${CARRIER_FLAG_PREFIX}`);
  }
  if (input.flags.length > lineagePolicy.flags_per_genome_max) throw badFounder('body.flags', `may hold at most ${lineagePolicy.flags_per_genome_max} flags`);
}

/** A founder under `version` from `seed`: what was given, the rest drawn. */
export function foundGenome(version: SpeciesVersion, seed: string, input: FounderInput): Pick<Offspring, 'raw_alleles' | 'numeric' | 'flags'> {
  const raw_alleles: Record<string, AllelePair> = {};
  const numeric: Record<string, number> = {};
  for (const trait of version.traits) {
    const random = new TraitRandom(seed, trait.trait_id);
    if (trait.kind === 'mendelian') {
      const given = input.alleles[trait.trait_id];
      const draw = () => trait.alleles[random.int(0, trait.alleles.length - 1)].id;
      raw_alleles[trait.trait_id] = given ? { first: given.first, second: given.second } : { first: draw(), second: draw() };
    } else {
      const given = input.numeric[trait.trait_id];
      const range = trait.range!;
      numeric[trait.trait_id] = given !== undefined ? clampRound(trait, given) : clampRound(trait, range.min + random.unit() * (range.max - range.min));
    }
  }
  return { raw_alleles, numeric, flags: sortedUnique([...input.flags, ...carrierFlags(version.traits, raw_alleles)]) };
}
