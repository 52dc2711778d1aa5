import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import {
  lineagePolicy as policy,
  type CatalogMessage,
  type ListQuery,
  type Page,
  type SpeciesDefinition,
  type SpeciesInput,
  type SpeciesVersion,
  type TraitDefinition,
  type TraitInput,
} from './messages.js';
import { previewBreeding } from './preview.js';
import { verifyChain } from './provenance.js';

/**
 * A tenant's breeding rules: pure domain logic of the `lineage-catalog`
 * actor (storage `records`, key = lineageTenantKey(tenant)). Records:
 * `t:<trait_id>` a trait, `s:<species_id>` a species' current definition
 * (with `deleted`), `v:<species_id>:<version>` each species version with its
 * traits' definitions as they were then. Versions are never removed: a
 * genome names the version it was bred under and provenance replays it.
 *
 * Traits and species live in one actor so that a species and the traits it
 * names are checked and versioned together in one turn: a species naming an
 * unknown or conflicting trait is refused, a trait in use cannot be deleted,
 * and replacing a trait makes a new version of every species that uses it.
 * The same actor computes previews and re-derives provenance chains over
 * genomes the edge read, since it holds the versions they need.
 */
export interface CatalogState {
  traits: Map<string, TraitDefinition>;
  species: Map<string, { definition: SpeciesDefinition; deleted: boolean }>;
  versions: Map<string, SpeciesVersion>;
}

type Result = TurnResult<CatalogState, unknown>;

const versionKey = (species_id: string, version: number) => `${species_id}:${String(version).padStart(6, '0')}`;

export function loadCatalog(_key: string, records: Iterable<[string, unknown]>): CatalogState {
  const state: CatalogState = { traits: new Map(), species: new Map(), versions: new Map() };
  for (const [subkey, value] of records) {
    const id = subkey.slice(2);
    if (subkey.startsWith('t:')) state.traits.set(id, value as TraitDefinition);
    else if (subkey.startsWith('s:')) state.species.set(id, value as { definition: SpeciesDefinition; deleted: boolean });
    else if (subkey.startsWith('v:')) state.versions.set(id, value as SpeciesVersion);
  }
  return state;
}

const bad = (field: string, message: string) => new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });

/** The rules a trait definition must follow (the edge's schema checks the types; these are the relations). */
export function checkTrait(state: CatalogState, trait_id: string, input: TraitInput): void {
  if (input.kind === 'mendelian') {
    if (input.alleles.length === 0) throw bad('body.alleles', 'must name at least one allele for a mendelian trait');
    if (input.alleles.length > policy.alleles_per_trait_max) throw bad('body.alleles', `may hold at most ${policy.alleles_per_trait_max} alleles`);
    if (new Set(input.alleles.map((allele) => allele.id)).size !== input.alleles.length) throw bad('body.alleles', 'must have distinct ids');
    if (input.expression !== 'highest_dominance' && input.expression !== 'codominant') throw bad('body.expression', 'must be highest_dominance or codominant for a mendelian trait');
  } else {
    if (!input.range) throw bad('body.range', 'is required for a numeric trait ({min, max, decimals?})');
    if (!(input.range.min < input.range.max)) throw bad('body.range', 'must have min < max');
    if (input.alleles.length > 0) throw bad('body.alleles', 'apply to mendelian traits only');
    if (input.expression !== 'blend') throw bad('body.expression', 'must be blend for a numeric trait');
  }
  if (input.mutation.offset_min > input.mutation.offset_max) throw bad('body.mutation', 'must have offset_min <= offset_max');
  for (const other of input.conflicts_with) {
    if (other === trait_id) throw bad('body.conflicts_with', 'may not name the trait itself');
    if (!state.traits.has(other)) throw bad('body.conflicts_with', `names unknown trait ${other}`);
  }
}

/** The relations a species must satisfy with the traits it names. */
function checkSpecies(state: CatalogState, input: SpeciesInput): TraitDefinition[] {
  const { min, max } = input.parent_count;
  if (!(min >= 1 && min <= max && max <= policy.parents_max)) throw bad('body.parent_count', `must have 1 <= min <= max <= ${policy.parents_max}`);
  if (input.traits.length > policy.traits_per_species_max) throw bad('body.traits', `may name at most ${policy.traits_per_species_max} traits`);
  if (new Set(input.traits).size !== input.traits.length) throw bad('body.traits', 'must not repeat a trait');
  const traits = input.traits.map((id) => {
    const trait = state.traits.get(id);
    if (!trait) throw bad('body.traits', `names unknown trait ${id}`);
    return trait;
  });
  for (const trait of traits) {
    for (const other of traits) {
      if (trait.conflicts_with.includes(other.trait_id)) throw bad('body.traits', `${trait.trait_id} conflicts with ${other.trait_id}; a species may not carry both`);
    }
  }
  const coefficient = input.lineage.inbreeding.max_coefficient;
  if (!(coefficient >= 0 && coefficient <= 1)) throw bad('body.lineage.inbreeding.max_coefficient', 'must lie in [0, 1]');
  return traits;
}

function liveSpecies(state: CatalogState, species_id: string): SpeciesDefinition {
  const entry = state.species.get(species_id);
  if (!entry || entry.deleted) throw new ServiceError('not_found', `No species ${species_id}.`);
  return entry.definition;
}

function liveTrait(state: CatalogState, trait_id: string): TraitDefinition {
  const trait = state.traits.get(trait_id);
  if (!trait) throw new ServiceError('not_found', `No trait ${trait_id}.`);
  return trait;
}

/** Stores `definition` as a new version with its traits' current definitions. */
function putVersion(state: CatalogState, definition: SpeciesDefinition, writes: RecordWrite[]): void {
  const version: SpeciesVersion = { species: definition, traits: definition.traits.map((id) => state.traits.get(id)!) };
  state.species.set(definition.species_id, { definition, deleted: false });
  state.versions.set(versionKey(definition.species_id, definition.version), version);
  writes.push({ subkey: `s:${definition.species_id}`, value: { definition, deleted: false } });
  writes.push({ subkey: `v:${versionKey(definition.species_id, definition.version)}`, value: version });
}

function page<T extends { name: string; created_at_ms: number; updated_at_ms: number }>(items: T[], query: ListQuery): Page<T> {
  const field = query.sort_by === 'name' ? 'name' : query.sort_by === 'updated_at' ? 'updated_at_ms' : 'created_at_ms';
  const sign = query.sort_order === 'desc' ? -1 : 1;
  const sorted = [...items].sort((a, b) => {
    const x = a[field];
    const y = b[field];
    return (x < y ? -1 : x > y ? 1 : 0) * sign;
  });
  const start = (query.page - 1) * query.page_size;
  return { items: sorted.slice(start, start + query.page_size), total: sorted.length };
}

export function stepCatalog(state: CatalogState, message: CatalogMessage | AlarmMessage, context: TurnContext): Result {
  const now = context.now;
  switch (message.op) {
    case 'trait_create': {
      if (state.traits.has(message.trait_id)) throw new ServiceError('conflict', `A trait ${message.trait_id} already exists.`);
      if (state.traits.size >= policy.traits_per_tenant_max) throw new ServiceError('lineage_limit_reached', `A tenant may define at most ${policy.traits_per_tenant_max} traits.`);
      checkTrait(state, message.trait_id, message.input);
      const trait: TraitDefinition = { trait_id: message.trait_id, ...message.input, created_at_ms: now, created_by: message.by, updated_at_ms: now };
      state.traits.set(trait.trait_id, trait);
      return { state, reply: trait, writes: [{ subkey: `t:${trait.trait_id}`, value: trait }] };
    }

    case 'trait_replace': {
      const current = liveTrait(state, message.trait_id);
      checkTrait(state, message.trait_id, message.input);
      const users = [...state.species.values()].filter((entry) => !entry.deleted && entry.definition.traits.includes(message.trait_id));
      if (users.length > 0) {
        // Genomes of these species carry this trait's alleles: its kind and its alleles stay.
        const removed = current.alleles.filter((allele) => !message.input.alleles.some((kept) => kept.id === allele.id));
        if (message.input.kind !== current.kind || removed.length > 0) {
          throw new ServiceError('trait_in_use', `Trait ${message.trait_id} is used by species ${users.map((entry) => entry.definition.species_id).join(', ')}: its kind and alleles cannot change.`);
        }
        for (const entry of users) {
          const other = entry.definition;
          if (other.traits.some((id) => message.input.conflicts_with.includes(id))) {
            throw bad('body.conflicts_with', `names a trait that species ${other.species_id} carries together with ${message.trait_id}`);
          }
        }
        const full = users.find((entry) => entry.definition.version >= policy.versions_per_species_max);
        if (full) throw new ServiceError('lineage_limit_reached', `Species ${full.definition.species_id} has reached ${policy.versions_per_species_max} versions.`);
      }
      const trait: TraitDefinition = { trait_id: current.trait_id, ...message.input, created_at_ms: current.created_at_ms, created_by: current.created_by, updated_at_ms: now };
      state.traits.set(trait.trait_id, trait);
      const writes: RecordWrite[] = [{ subkey: `t:${trait.trait_id}`, value: trait }];
      for (const entry of users) putVersion(state, { ...entry.definition, version: entry.definition.version + 1, updated_at_ms: now }, writes);
      return { state, reply: trait, writes };
    }

    case 'trait_get':
      return { state, reply: liveTrait(state, message.trait_id) };

    case 'trait_delete': {
      liveTrait(state, message.trait_id);
      const users = [...state.species.values()].filter((entry) => !entry.deleted && entry.definition.traits.includes(message.trait_id));
      if (users.length > 0) {
        throw new ServiceError('trait_in_use', `Trait ${message.trait_id} is used by species ${users.map((entry) => entry.definition.species_id).join(', ')}; remove it from them first.`);
      }
      const referrers = [...state.traits.values()].filter((trait) => trait.conflicts_with.includes(message.trait_id));
      if (referrers.length > 0) {
        throw new ServiceError('trait_in_use', `Trait ${message.trait_id} is named in conflicts_with of ${referrers.map((trait) => trait.trait_id).join(', ')}.`);
      }
      state.traits.delete(message.trait_id);
      // Species versions that used it keep their own copy of its definition, so replay is unaffected.
      return { state, reply: { trait_id: message.trait_id }, writes: [{ subkey: `t:${message.trait_id}`, value: undefined }] };
    }

    case 'trait_list':
      return { state, reply: page([...state.traits.values()], message.query) };

    case 'species_create': {
      if (state.species.has(message.species_id)) throw new ServiceError('conflict', `A species ${message.species_id} exists or existed (its versions are kept for replay).`);
      if (state.species.size >= policy.species_per_tenant_max) throw new ServiceError('lineage_limit_reached', `A tenant may define at most ${policy.species_per_tenant_max} species.`);
      checkSpecies(state, message.input);
      const definition: SpeciesDefinition = { species_id: message.species_id, ...message.input, version: 1, created_at_ms: now, created_by: message.by, updated_at_ms: now };
      const writes: RecordWrite[] = [];
      putVersion(state, definition, writes);
      return { state, reply: definition, writes };
    }

    case 'species_update': {
      const current = liveSpecies(state, message.species_id);
      if (current.version >= policy.versions_per_species_max) throw new ServiceError('lineage_limit_reached', `Species ${message.species_id} has reached ${policy.versions_per_species_max} versions.`);
      const { species_id: _id, version: _version, created_at_ms: _created, created_by: _by, updated_at_ms: _updated, ...rest } = current;
      const patch = message.patch;
      const input: SpeciesInput = {
        name: patch.name ?? rest.name,
        parent_count: { ...rest.parent_count, ...patch.parent_count },
        compatibility: { ...rest.compatibility, ...patch.compatibility },
        lineage: {
          inbreeding: { ...rest.lineage.inbreeding, ...patch.lineage?.inbreeding },
          track_generations: patch.lineage?.track_generations ?? rest.lineage.track_generations,
        },
        max_lifetime_breedings: patch.max_lifetime_breedings ?? rest.max_lifetime_breedings,
        preview_quantization: { ...rest.preview_quantization, ...patch.preview_quantization },
        traits: patch.traits ?? rest.traits,
      };
      checkSpecies(state, input);
      const definition: SpeciesDefinition = { ...current, ...input, version: current.version + 1, updated_at_ms: now };
      const writes: RecordWrite[] = [];
      putVersion(state, definition, writes);
      return { state, reply: definition, writes };
    }

    case 'species_get':
      return { state, reply: liveSpecies(state, message.species_id) };

    case 'species_delete': {
      const definition = liveSpecies(state, message.species_id);
      state.species.set(message.species_id, { definition, deleted: true });
      return { state, reply: { species_id: message.species_id }, writes: [{ subkey: `s:${message.species_id}`, value: { definition, deleted: true } }] };
    }

    case 'species_list': {
      const live = [...state.species.values()].filter((entry) => !entry.deleted).map((entry) => entry.definition);
      return { state, reply: page(live, message.query) };
    }

    case 'rules': {
      const definition = liveSpecies(state, message.species_id);
      if (message.parent_count !== null) {
        const { min, max } = definition.parent_count;
        if (message.parent_count < min || message.parent_count > max) {
          throw bad('body.parents', `species ${definition.species_id} breeds with ${min === max ? min : `${min} to ${max}`} parent(s); ${message.parent_count} given`);
        }
      }
      return { state, reply: state.versions.get(versionKey(definition.species_id, definition.version))! };
    }

    case 'preview': {
      const definition = liveSpecies(state, message.species_id);
      const version = state.versions.get(versionKey(definition.species_id, definition.version))!;
      return { state, reply: previewBreeding(version, message.parents, message.exact) };
    }

    case 'verify':
      return { state, reply: verifyChain(message.genomes, message.root, (species_id, version) => state.versions.get(versionKey(species_id, version)) ?? null) };

    case 'flow-call':
      return answerFlowCall(stepCatalog, state, message as never, context);

    default:
      return { state };
  }
}
