import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The lineage area's public surface (species, traits, genomes, breeding;
 * docs/api/lineage.md): the kinds and keys, the bounds, the definitions the
 * catalog keeps, the genome and breeding record shapes, the messages each
 * kind takes. Other layers import this file only.
 */

/** One actor per tenant (key = lineageTenantKey): the traits and species with every species version (records). */
export const LINEAGE_CATALOG_KIND = 'lineage-catalog';
/** One actor per entity (key = genomeKey): its genome, pedigree window, breeding count and reservations (snapshot). */
export const GENOME_KIND = 'lineage-genome';
/** One actor per breeding (key = breedingKey): the breed flow's coordinator, then the record (snapshot). */
export const BREEDING_KIND = 'lineage-breeding';
/** One actor per tenant (key = lineageTenantKey): the breeding records list (records). */
export const BREEDING_RECORDS_KIND = 'lineage-records';

export function lineageTenantKey(tenant: string): string {
  return JSON.stringify([tenant]);
}
export function genomeKey(tenant: string, entity_id: string): string {
  return JSON.stringify([tenant, entity_id]);
}
export function breedingKey(tenant: string, record_id: string): string {
  return JSON.stringify([tenant, record_id]);
}

/** Every bound of the area (unit last). docs/api/lineage.md documents each; change both together. */
export const lineagePolicy = {
  traits_per_tenant_max: 500,
  species_per_tenant_max: 200,
  /** Every version stays readable for replay, so their number is bounded instead. */
  versions_per_species_max: 200,
  traits_per_species_max: 32,
  alleles_per_trait_max: 32,
  flags_per_genome_max: 32,
  /** Diploid genetics: one parent (selfing) or two (a cross). */
  parents_max: 2,
  /** Generations of ancestors each genome keeps (its pedigree window; the inbreeding coefficient is computed over it). */
  pedigree_depth_max: 10,
  /** Provenance re-derives at most this many genomes (nearest ancestors first); beyond, the anchor chain stands for them. */
  provenance_genomes_max: 256,
  provenance_depth_default: 10,
  /** The records list keeps the newest this many per tenant; older breedings leave the list (their genomes and provenance stay). */
  records_listed_max: 100_000,
  preview_bands_default: 4,
  preview_bands_max: 100,
  /** Numeric trait values are kept with at most this many decimals. */
  numeric_decimals_max: 6,
  id_length_max: 128,
  seed_length_max: 128,
} as const;

export type TraitKind = 'mendelian' | 'numeric';
/** mendelian: highest_dominance, codominant; numeric: blend. */
export type TraitExpression = 'highest_dominance' | 'codominant' | 'blend';

export interface Allele {
  id: string;
  label: string;
  dominance: number;
  carrier_only_visible: boolean;
}

export interface TraitDefinition {
  trait_id: string;
  name: string;
  kind: TraitKind;
  expression: TraitExpression;
  alleles: Allele[];
  hidden: boolean;
  conflicts_with: string[];
  inheritance: { parent_weighting: 'equal' | 'random'; variance: { distribution: 'none' | 'uniform' | 'normal'; stddev: number } };
  mutation: { rate: number; offset_min: number; offset_max: number };
  /** numeric traits: the closed range values are clamped to, and the decimals they keep. */
  range: { min: number; max: number; decimals: number } | null;
  created_at_ms: number;
  created_by: string;
  updated_at_ms: number;
}

/** The fields a trait create or replace gives (the catalog fills the rest). */
export type TraitInput = Omit<TraitDefinition, 'trait_id' | 'created_at_ms' | 'created_by' | 'updated_at_ms'>;

export interface SpeciesDefinition {
  species_id: string;
  name: string;
  version: number;
  parent_count: { min: number; max: number };
  compatibility: { min_generation: number; required_flags: string[]; self_compatible: boolean };
  lineage: { inbreeding: { compute: boolean; max_coefficient: number; penalties_enabled: boolean }; track_generations: boolean };
  /** 0: unlimited. */
  max_lifetime_breedings: number;
  preview_quantization: { bands: number };
  traits: string[];
  created_at_ms: number;
  created_by: string;
  updated_at_ms: number;
}

export type SpeciesInput = Omit<SpeciesDefinition, 'species_id' | 'version' | 'created_at_ms' | 'created_by' | 'updated_at_ms'>;
/** A species PUT: every field optional; nested objects merge into the current ones. */
export interface SpeciesPatch {
  name?: string;
  parent_count?: Partial<SpeciesInput['parent_count']>;
  compatibility?: Partial<SpeciesInput['compatibility']>;
  lineage?: { inbreeding?: Partial<SpeciesInput['lineage']['inbreeding']>; track_generations?: boolean };
  max_lifetime_breedings?: number;
  preview_quantization?: Partial<SpeciesInput['preview_quantization']>;
  traits?: string[];
}

/** The rules a breeding runs under: a species version with its traits as they were then (kept forever for replay). */
export interface SpeciesVersion {
  species: SpeciesDefinition;
  traits: TraitDefinition[];
}

export interface AllelePair {
  first: string;
  second: string;
}

/** What a founder's creator gave; the rest is drawn from its seed. */
export interface FounderInput {
  alleles: Record<string, AllelePair>;
  numeric: Record<string, number>;
  flags: string[];
}

/** What provenance re-derives and hashes: every input and output of one genome's making. */
export interface Derivation {
  entity_id: string;
  species_id: string;
  species_version: number;
  owner: string;
  /** Generations since the founders (0 for a founder), kept even when the species does not show them. */
  generation: number;
  raw_alleles: Record<string, AllelePair>;
  numeric: Record<string, number>;
  flags: string[];
  inbreeding_coefficient: number;
  parents: string[];
  parent_anchors: string[];
  record_id: string | null;
  seed: string;
  founder_input: FounderInput | null;
  mutations: string[];
  anchor_hash: string;
  created_at_ms: number;
}

/** One ancestor in a genome's pedigree window. */
export interface PedigreeEntry {
  parents: string[];
  generation: number;
  /** Fewest generations between the genome and this ancestor (1 = parent). */
  distance: number;
  inbreeding_coefficient: number;
}

export type Pedigree = Record<string, PedigreeEntry>;

export interface GenomeView extends Derivation {
  /** Mendelian traits' phenotypes (genetics.ts `phenotype`), fixed when the genome was made. */
  expressed: Record<string, string>;
  breeding_count: number;
  hidden_traits: string[];
  track_generations: boolean;
}

/** What a parent's reservation returns into the breed flow: enough to breed and to compute the coefficient, with no further asks. */
export interface ParentSummary {
  derivation: Derivation;
  pedigree: Pedigree;
}

export interface OffspringEntry {
  anchor_artifact_id: string;
  anchor_hash: string;
  entity_id: string;
  generation: number;
  inbreeding_coefficient: number;
}

export interface BreedingRecord {
  record_id: string;
  species_id: string;
  species_version: number;
  parents: string[];
  offspring: OffspringEntry[];
  /** `<trait_id>:<change>` each. */
  mutations: string[];
  /** The species version's hidden traits: their mutations are shown to platform admins only (absent in records before 2026-11-30). */
  hidden_traits?: string[];
  requested_by: string;
  seed: string;
  created_at_ms: number;
}

/** A record as the list shows it: without its seed (only the breed's answer and provenance carry it). */
export type ListedRecord = Omit<BreedingRecord, 'seed'>;

export interface Caller {
  user_id: string;
  admin: boolean;
}

export interface ListQuery {
  page: number;
  page_size: number;
  sort_by: 'created_at' | 'updated_at' | 'name';
  sort_order: 'asc' | 'desc';
}

export interface RecordsQuery {
  species_id?: string;
  parent?: string;
  requested_by?: string;
  page: number;
  page_size: number;
  sort_order: 'asc' | 'desc';
}

export interface Page<T> {
  items: T[];
  total: number;
}

export type CatalogMessage =
  | { op: 'trait_create'; trait_id: string; input: TraitInput; by: string }
  | { op: 'trait_replace'; trait_id: string; input: TraitInput }
  | { op: 'trait_get'; trait_id: string }
  | { op: 'trait_delete'; trait_id: string }
  | { op: 'trait_list'; query: ListQuery }
  | { op: 'species_create'; species_id: string; input: SpeciesInput; by: string }
  | { op: 'species_update'; species_id: string; patch: SpeciesPatch }
  | { op: 'species_get'; species_id: string }
  | { op: 'species_delete'; species_id: string }
  | { op: 'species_list'; query: ListQuery }
  /** The current version of a live species, for a breeding of `parent_count` parents (or a founder, null). */
  | { op: 'rules'; species_id: string; parent_count: number | null }
  /** Preview over the parents' genomes the edge read. */
  | { op: 'preview'; species_id: string; parents: ParentSummary[]; exact: boolean }
  /** Re-derive every genome of a provenance walk against the species versions it was made under. */
  | { op: 'verify'; genomes: Derivation[]; root: string }
  | FlowCall;

export type GenomeMessage =
  | { op: 'found'; tenant: string; species_id: string; owner: string; seed: string; input: FounderInput }
  /** The genome with its pedigree window. */
  | { op: 'get' }
  /** Only what provenance re-derives. */
  | { op: 'derivation' }
  /** Hold one breeding of the parent's lifetime for `record_id` (rules checked in this turn); answers its ParentSummary. */
  | { op: 'reserve'; record_id: string; species_id: string; species_version: number; max_lifetime_breedings: number; min_generation: number; required_flags: string[] }
  | { op: 'release'; record_id: string }
  | { op: 'confirm'; record_id: string }
  | { op: 'create_offspring'; genome: Derivation; expressed: Record<string, string>; pedigree: Pedigree; hidden_traits: string[]; track_generations: boolean }
  | FlowCall
  | FlowAnswer;

export type BreedingMessage =
  | { op: 'breed'; tenant: string; parents: string[]; species_id: string; requested_by: string; seed: string; offspring_entity_id: string }
  | { op: 'get' }
  | FlowAnswer;

export type RecordsMessage =
  | { op: 'add'; record: ListedRecord }
  | { op: 'list'; query: RecordsQuery }
  | FlowCall;

export interface PreviewTrait {
  trait_id: string;
  band: string;
  exact: Record<string, number>;
}

export interface PreviewView {
  species_id: string;
  species_version: number;
  exact: boolean;
  inbreeding_coefficient: number;
  mutation_hint: string;
  traits: PreviewTrait[];
}

export interface VerifyView {
  chain_verified: boolean;
  genomes_verified: number;
  failures: { entity_id: string; reason: string }[];
}

/** Flags the service derives (carrier markers); a caller's own flags may not use the prefix. */
export const CARRIER_FLAG_PREFIX = 'carrier:';
