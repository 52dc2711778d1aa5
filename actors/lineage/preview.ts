import { ServiceError } from '../../runtime/index.js';
import { phenotype } from './genetics.js';
import { inbreedingCoefficient, offspringPedigree } from './inbreeding.js';
import { lineagePolicy, type ParentSummary, type PreviewTrait, type PreviewView, type SpeciesVersion } from './messages.js';

/**
 * What a breeding of these parents would likely give, without breeding:
 * per visible trait a band (quantized into the species'
 * preview_quantization.bands), and the exact figures only when `exact`
 * (platform admins). Mendelian: the most likely phenotype over the four
 * equally likely gamete pairs and the band of its probability
 * ("black 50-75%"). Numeric: the band of the range holding the expected
 * value (the parents' mean, less the inbreeding penalty). Mutation is not
 * modelled; `mutation_hint` tells how likely one is.
 */
export function previewBreeding(version: SpeciesVersion, parents: ParentSummary[], exact: boolean): PreviewView {
  const species = version.species;
  const { min, max } = species.parent_count;
  if (parents.length < min || parents.length > max) {
    throw new ServiceError('BAD_REQUEST', `species ${species.species_id} breeds with ${min === max ? min : `${min} to ${max}`} parent(s); ${parents.length} given`, {
      details: [{ field: 'body.parents', message: 'wrong number of parents' }],
    });
  }
  for (const parent of parents) {
    if (parent.derivation.species_id !== species.species_id) {
      throw new ServiceError('breeding_incompatible', `Entity ${parent.derivation.entity_id} is of species ${parent.derivation.species_id}, not ${species.species_id}.`);
    }
  }
  const ids = parents.map((parent) => parent.derivation.entity_id);
  const pedigree = offspringPedigree(
    parents.map((parent) => ({ ...parent.derivation, pedigree: parent.pedigree })),
    lineagePolicy.pedigree_depth_max,
  );
  const inbreeding_coefficient = species.lineage.inbreeding.compute ? inbreedingCoefficient(ids, pedigree) : 0;
  const bands = species.preview_quantization.bands;
  const first = parents[0].derivation;
  const second = (parents[1] ?? parents[0]).derivation;
  const traits: PreviewTrait[] = [];
  let mutation_rate_max = 0;
  for (const trait of version.traits) {
    // A hidden trait tells nothing, not even how often it mutates, unless exact.
    if (trait.hidden && !exact) continue;
    mutation_rate_max = Math.max(mutation_rate_max, trait.mutation.rate);
    if (trait.kind === 'mendelian') {
      const fallback = { first: trait.alleles[0].id, second: trait.alleles[0].id };
      const a = first.raw_alleles[trait.trait_id] ?? fallback;
      const b = second.raw_alleles[trait.trait_id] ?? fallback;
      const odds: Record<string, number> = {};
      for (const x of [a.first, a.second]) for (const y of [b.first, b.second]) {
        const shown = phenotype(trait, { first: x, second: y });
        odds[shown] = (odds[shown] ?? 0) + 0.25;
      }
      const [top, p] = Object.entries(odds).sort((u, v) => v[1] - u[1] || (u[0] < v[0] ? -1 : 1))[0];
      const index = Math.min(bands - 1, Math.floor(p * bands));
      const band = `${top} ${Math.round((index * 100) / bands)}-${Math.round(((index + 1) * 100) / bands)}%`;
      traits.push({ trait_id: trait.trait_id, band, exact: exact ? odds : {} });
    } else {
      const range = trait.range!;
      const mean0 = ((first.numeric[trait.trait_id] ?? range.min) + (second.numeric[trait.trait_id] ?? range.min)) / 2;
      const mean = species.lineage.inbreeding.penalties_enabled ? mean0 - inbreeding_coefficient * (mean0 - range.min) : mean0;
      const width = (range.max - range.min) / bands;
      const index = Math.min(bands - 1, Math.max(0, Math.floor((mean - range.min) / width)));
      const scale = 10 ** range.decimals;
      const edge = (value: number) => Math.round(value * scale) / scale;
      const band = `${edge(range.min + index * width)}..${edge(range.min + (index + 1) * width)}`;
      const stddev = trait.inheritance.variance.distribution === 'none' ? 0 : trait.inheritance.variance.stddev;
      traits.push({ trait_id: trait.trait_id, band, exact: exact ? { mean: edge(mean), stddev } : {} });
    }
  }
  const mutation_hint = mutation_rate_max === 0 ? 'none' : mutation_rate_max < 0.01 ? 'rare' : mutation_rate_max < 0.1 ? 'occasional' : 'frequent';
  return { species_id: species.species_id, species_version: species.version, exact, inbreeding_coefficient, mutation_hint, traits };
}
