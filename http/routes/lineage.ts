import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { randomId, ServiceError } from '../../runtime/index.js';
import {
  BREEDING_KIND,
  BREEDING_RECORDS_KIND,
  breedingKey,
  CARRIER_FLAG_PREFIX,
  GENOME_KIND,
  genomeKey,
  LINEAGE_CATALOG_KIND,
  lineagePolicy as policy,
  lineageTenantKey,
  type BreedingMessage,
  type BreedingRecord,
  type CatalogMessage,
  type Derivation,
  type GenomeMessage,
  type GenomeView,
  type ListedRecord,
  type Page,
  type Pedigree,
  type PreviewView,
  type RecordsMessage,
  type SpeciesDefinition,
  type SpeciesInput,
  type TraitDefinition,
  type TraitInput,
  type VerifyView,
} from '../../actors/lineage/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, NOT_PROTOTYPE_MEMBER, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Lineage: traits, species, genomes, breeding (spec doc 2 §2 Lineage, §4.3; docs/api/lineage.md). */
const tags = ['lineage'];
const base = '/api/v1/lineage';

// Entity and trait ids key pedigrees and allele maps (plain objects): not a name of Object.prototype.
const ID = Type.String({
  minLength: 1,
  maxLength: policy.id_length_max,
  pattern: `^${NOT_PROTOTYPE_MEMBER}[A-Za-z0-9][A-Za-z0-9._:-]*$`,
  description: 'Letters, digits and . _ : - (first a letter or digit); not a name of Object.prototype (`constructor`, `toString`, ...).',
});
const NAME = Type.String({ minLength: 1, maxLength: 200 });
const FLAG = Type.String({ minLength: 1, maxLength: 128 });
const FINITE = (options: { minimum: number; maximum: number; description?: string }) => Type.Number(options);
const Ts = Type.String({ format: 'date-time' });

const AlleleSchema = Type.Object({
  id: ID,
  label: Type.Optional(Type.String({ maxLength: 200, description: 'Default: the id.' })),
  dominance: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000, description: 'Higher shows over lower. Default 0.' })),
  carrier_only_visible: Type.Optional(Type.Boolean({ description: 'Carried but not expressed, it shows as the flag carrier:<trait_id>:<allele_id>. Default false.' })),
});
const InheritanceSchema = Type.Object({
  parent_weighting: Type.Optional(Type.Union([Type.Literal('equal'), Type.Literal('random')])),
  variance: Type.Optional(
    Type.Object({
      distribution: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('uniform'), Type.Literal('normal')])),
      stddev: Type.Optional(FINITE({ minimum: 0, maximum: 1e9 })),
    }),
  ),
});
const MutationSchema = Type.Object({
  rate: Type.Optional(FINITE({ minimum: 0, maximum: 1, description: 'Chance per inherited allele (mendelian) or per offspring value (numeric).' })),
  offset_min: Type.Optional(FINITE({ minimum: -1e9, maximum: 1e9 })),
  offset_max: Type.Optional(FINITE({ minimum: -1e9, maximum: 1e9 })),
});
const RangeSchema = Type.Object({
  min: FINITE({ minimum: -1e9, maximum: 1e9 }),
  max: FINITE({ minimum: -1e9, maximum: 1e9 }),
  decimals: Type.Optional(Type.Integer({ minimum: 0, maximum: policy.numeric_decimals_max, description: 'Default 2.' })),
});
const TraitFields = {
  kind: Type.Union([Type.Literal('mendelian'), Type.Literal('numeric')]),
  name: NAME,
  alleles: Type.Optional(Type.Array(AlleleSchema, { maxItems: policy.alleles_per_trait_max })),
  expression: Type.Optional(Type.Union([Type.Literal('highest_dominance'), Type.Literal('codominant'), Type.Literal('blend')], {
    description: 'mendelian: highest_dominance (default) or codominant; numeric: blend.',
  })),
  hidden: Type.Optional(Type.Boolean()),
  conflicts_with: Type.Optional(Type.Array(ID, { maxItems: 64 })),
  inheritance: Type.Optional(InheritanceSchema),
  mutation: Type.Optional(MutationSchema),
  range: Type.Optional(Type.Union([RangeSchema, Type.Null()], { description: 'numeric traits: required.' })),
};
const TraitCreateBody = Type.Object({ trait_id: Type.Optional(ID), ...TraitFields });
const TraitReplaceBody = Type.Object(TraitFields);
const Trait = Type.Object(
  {
    trait_id: Type.String(),
    name: Type.String(),
    kind: Type.String(),
    expression: Type.String(),
    alleles: Type.Array(Type.Object({ id: Type.String(), label: Type.String(), dominance: Type.Integer(), carrier_only_visible: Type.Boolean() })),
    hidden: Type.Boolean(),
    conflicts_with: Type.Array(Type.String()),
    inheritance: Type.Object({ parent_weighting: Type.String(), variance: Type.Object({ distribution: Type.String(), stddev: Type.Number() }) }),
    mutation: Type.Object({ rate: Type.Number(), offset_min: Type.Number(), offset_max: Type.Number() }),
    range: Type.Union([Type.Object({ min: Type.Number(), max: Type.Number(), decimals: Type.Integer() }), Type.Null()]),
    created_at: Ts,
    created_by: Type.String(),
    updated_at: Ts,
  },
  { title: 'Trait' },
);

const ParentCount = Type.Object({ min: Type.Integer({ minimum: 1, maximum: policy.parents_max }), max: Type.Integer({ minimum: 1, maximum: policy.parents_max }) });
const SpeciesFields = {
  name: NAME,
  parent_count: ParentCount,
  compatibility: Type.Optional(
    Type.Object({
      min_generation: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
      required_flags: Type.Optional(Type.Array(FLAG, { maxItems: policy.flags_per_genome_max })),
      self_compatible: Type.Optional(Type.Boolean()),
    }),
  ),
  lineage: Type.Optional(
    Type.Object({
      inbreeding: Type.Optional(
        Type.Object({
          compute: Type.Optional(Type.Boolean()),
          max_coefficient: Type.Optional(FINITE({ minimum: 0, maximum: 1 })),
          penalties_enabled: Type.Optional(Type.Boolean()),
        }),
      ),
      track_generations: Type.Optional(Type.Boolean()),
    }),
  ),
  max_lifetime_breedings: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: '0: unlimited (the default).' })),
  preview_quantization: Type.Optional(Type.Object({ bands: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.preview_bands_max })) })),
  traits: Type.Optional(Type.Array(ID, { maxItems: policy.traits_per_species_max })),
};
const SpeciesCreateBody = Type.Object({ species_id: Type.Optional(ID), ...SpeciesFields });
const SpeciesUpdateBody = Type.Object({
  ...SpeciesFields,
  name: Type.Optional(NAME),
  parent_count: Type.Optional(Type.Object({ min: Type.Optional(ParentCount.properties.min), max: Type.Optional(ParentCount.properties.max) })),
});
const Species = Type.Object(
  {
    species_id: Type.String(),
    name: Type.String(),
    version: Type.Integer(),
    parent_count: Type.Object({ min: Type.Integer(), max: Type.Integer() }),
    compatibility: Type.Object({ min_generation: Type.Integer(), required_flags: Type.Array(Type.String()), self_compatible: Type.Boolean() }),
    lineage: Type.Object({
      inbreeding: Type.Object({ compute: Type.Boolean(), max_coefficient: Type.Number(), penalties_enabled: Type.Boolean() }),
      track_generations: Type.Boolean(),
    }),
    max_lifetime_breedings: Type.Integer(),
    preview_quantization: Type.Object({ bands: Type.Integer() }),
    traits: Type.Array(Type.String()),
    created_at: Ts,
    created_by: Type.String(),
    updated_at: Ts,
  },
  { title: 'Species' },
);

const AllelePairSchema = Type.Object({ first: ID, second: ID });
const GenomeCreateBody = Type.Object({
  entity_id: ID,
  species_id: ID,
  owner: Type.Optional(Type.String({ minLength: 1, maxLength: policy.id_length_max, description: "Default: the caller's user id." })),
  seed: Type.Optional(Type.String({ minLength: 1, maxLength: policy.seed_length_max, description: 'Draws what is not given; default a random one (recorded).' })),
  alleles: Type.Optional(Type.Record(Type.String(), AllelePairSchema, { maxProperties: policy.traits_per_species_max })),
  numeric: Type.Optional(Type.Record(Type.String(), FINITE({ minimum: -1e9, maximum: 1e9 }), { maxProperties: policy.traits_per_species_max })),
  flags: Type.Optional(Type.Array(FLAG, { maxItems: policy.flags_per_genome_max })),
});
const Genome = Type.Object(
  {
    entity_id: Type.String(),
    species_id: Type.String(),
    species_version: Type.Integer(),
    owner: Type.String(),
    generation: Type.Integer(),
    breeding_count: Type.Integer(),
    expressed: Type.Record(Type.String(), Type.String()),
    numeric: Type.Record(Type.String(), Type.Number()),
    flags: Type.Array(Type.String()),
    raw_alleles: Type.Record(Type.String(), Type.Object({ first: Type.String(), second: Type.String() }), { description: 'Only with full=true (platform admins); {} otherwise.' }),
    inbreeding_coefficient: Type.Number(),
    parents: Type.Array(Type.String()),
    record_id: Type.Union([Type.String(), Type.Null()]),
    anchor_hash: Type.String(),
    full: Type.Boolean(),
    created_at: Ts,
  },
  { title: 'Genome' },
);
const GenomeQuery = Type.Object({
  full: Type.Optional(Type.Boolean({ description: 'Raw alleles and hidden traits: platform admins only (403 otherwise).' })),
  tenant: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Another tenant's genome (its organization id, or user id): platform admins only (403 otherwise)." })),
});
const EntityParams = Type.Object({ entity_id: ID });
const PedigreeQuery = Type.Object({
  depth: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: `Generations of ancestors; default 3, at most ${policy.pedigree_depth_max} (the pedigree window; larger is answered as ${policy.pedigree_depth_max}).` })),
});
const Pedigree = Type.Object(
  {
    entity_id: Type.String(),
    generation: Type.Integer(),
    inbreeding_coefficient: Type.Number(),
    depth: Type.Integer(),
    ancestors: Type.Array(Type.Object({ distance: Type.Integer(), entity_id: Type.String(), generation: Type.Integer() })),
  },
  { title: 'Pedigree' },
);
const Provenance = Type.Object(
  {
    entity_id: Type.String(),
    species_id: Type.String(),
    species_version: Type.Integer(),
    generation: Type.Integer(),
    owner: Type.String(),
    parents: Type.Array(Type.String()),
    record_id: Type.Union([Type.String(), Type.Null()]),
    seed: Type.String(),
    anchor_hash: Type.String(),
    anchor_artifact_id: Type.String(),
    chain_verified: Type.Boolean(),
    genomes_verified: Type.Integer(),
    failures: Type.Array(Type.Object({ entity_id: Type.String(), reason: Type.String() })),
  },
  { title: 'Provenance' },
);

const PARENTS = Type.Array(ID, { minItems: 1, maxItems: 8, description: `The species' parent_count applies (diploid: at most ${policy.parents_max}); a repeated id is selfing.` });
const BreedBody = Type.Object({
  parents: PARENTS,
  species_id: ID,
  seed: Type.Optional(Type.String({ minLength: 1, maxLength: policy.seed_length_max, description: 'Default: a fresh random seed. Same parents, species version and seed: same offspring.' })),
  offspring_entity_id: Type.Optional(ID),
});
const Offspring = Type.Object({
  anchor_artifact_id: Type.String(),
  anchor_hash: Type.String(),
  entity_id: Type.String(),
  generation: Type.Integer(),
  inbreeding_coefficient: Type.Number(),
});
const RecordFields = {
  record_id: Type.String(),
  species_id: Type.String(),
  species_version: Type.Integer(),
  parents: Type.Array(Type.String()),
  offspring: Type.Array(Offspring),
  mutations: Type.Array(Type.String()),
  requested_by: Type.String(),
  created_at: Ts,
};
const BreedingRecordSchema = Type.Object({ ...RecordFields, seed: Type.String() }, { title: 'BreedingRecord' });
const ListedRecordSchema = Type.Object(RecordFields, { title: 'BreedingRecordListed' });
const RecordsQuery = Type.Object({
  species_id: Type.Optional(ID),
  parent: Type.Optional(ID),
  requested_by: Type.Optional(Type.String({ minLength: 1, maxLength: policy.id_length_max })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { description: 'By created_at; default desc.' })),
});
const PreviewBody = Type.Object({
  parents: PARENTS,
  species_id: ID,
  exact: Type.Optional(Type.Boolean({ description: 'Exact odds and values beside the bands: platform admins only (403 otherwise).' })),
});
const Preview = Type.Object(
  {
    species_id: Type.String(),
    species_version: Type.Integer(),
    exact: Type.Boolean(),
    inbreeding_coefficient: Type.Number(),
    mutation_hint: Type.String({ description: 'none, rare (< 1%), occasional (< 10%) or frequent: the highest mutation rate of the species.' }),
    traits: Type.Array(Type.Object({ trait_id: Type.String(), band: Type.String(), exact: Type.Record(Type.String(), Type.Number()) })),
  },
  { title: 'Preview' },
);
const ListQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('name')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});
const SpeciesParams = Type.Object({ species_id: ID });
const TraitParams = Type.Object({ trait_id: ID });

function pageOf(query: { page?: number; page_size?: number }) {
  const page = Math.max(1, query.page ?? 1);
  const page_size = Math.min(100, query.page_size || 20);
  return { page, page_size };
}

function pagination(page: number, page_size: number, total: number) {
  return { page, page_size, total, has_more: page * page_size < total };
}

function traitInput(body: Static<typeof TraitReplaceBody>): TraitInput {
  const mendelian = body.kind === 'mendelian';
  const range = body.range ?? null;
  return {
    name: body.name,
    kind: body.kind,
    expression: body.expression ?? (mendelian ? 'highest_dominance' : 'blend'),
    alleles: (body.alleles ?? []).map((allele) => ({ id: allele.id, label: allele.label ?? allele.id, dominance: allele.dominance ?? 0, carrier_only_visible: allele.carrier_only_visible ?? false })),
    hidden: body.hidden ?? false,
    conflicts_with: [...new Set(body.conflicts_with ?? [])],
    inheritance: {
      parent_weighting: body.inheritance?.parent_weighting ?? 'equal',
      variance: { distribution: body.inheritance?.variance?.distribution ?? 'none', stddev: body.inheritance?.variance?.stddev ?? 0 },
    },
    mutation: { rate: body.mutation?.rate ?? 0, offset_min: body.mutation?.offset_min ?? 0, offset_max: body.mutation?.offset_max ?? 0 },
    range: range === null ? null : { min: range.min, max: range.max, decimals: range.decimals ?? 2 },
  };
}

function speciesInput(body: Static<typeof SpeciesCreateBody>): SpeciesInput {
  return {
    name: body.name,
    parent_count: body.parent_count,
    compatibility: {
      min_generation: body.compatibility?.min_generation ?? 0,
      required_flags: [...new Set(body.compatibility?.required_flags ?? [])],
      self_compatible: body.compatibility?.self_compatible ?? false,
    },
    lineage: {
      inbreeding: {
        compute: body.lineage?.inbreeding?.compute ?? true,
        max_coefficient: body.lineage?.inbreeding?.max_coefficient ?? 1,
        penalties_enabled: body.lineage?.inbreeding?.penalties_enabled ?? false,
      },
      track_generations: body.lineage?.track_generations ?? true,
    },
    max_lifetime_breedings: body.max_lifetime_breedings ?? 0,
    preview_quantization: { bands: body.preview_quantization?.bands ?? policy.preview_bands_default },
    traits: body.traits ?? [],
  };
}

function traitShape(trait: TraitDefinition) {
  const { created_at_ms, updated_at_ms, ...rest } = trait;
  return { ...rest, created_at: isoTime(created_at_ms)!, updated_at: isoTime(updated_at_ms)! };
}

function speciesShape(species: SpeciesDefinition) {
  const { created_at_ms, updated_at_ms, ...rest } = species;
  return { ...rest, created_at: isoTime(created_at_ms)!, updated_at: isoTime(updated_at_ms)! };
}

/** What a caller sees of a genome: hidden traits (their values and carrier flags) and raw alleles only with `full`. */
function genomeShape(view: GenomeView, full: boolean) {
  const hidden = new Set(full ? [] : view.hidden_traits);
  const visible = <T>(map: Record<string, T>) => Object.fromEntries(Object.entries(map).filter(([trait_id]) => !hidden.has(trait_id)));
  const flags = view.flags.filter((flag) => !flag.startsWith(CARRIER_FLAG_PREFIX) || !hidden.has(flag.slice(CARRIER_FLAG_PREFIX.length).split(':')[0]));
  return {
    entity_id: view.entity_id,
    species_id: view.species_id,
    species_version: view.species_version,
    owner: view.owner,
    generation: view.track_generations ? view.generation : 0,
    breeding_count: view.breeding_count,
    expressed: visible(view.expressed),
    numeric: visible(view.numeric),
    flags,
    raw_alleles: full ? view.raw_alleles : {},
    inbreeding_coefficient: view.inbreeding_coefficient,
    parents: view.parents,
    record_id: view.record_id,
    anchor_hash: view.anchor_hash,
    full,
    created_at: isoTime(view.created_at_ms)!,
  };
}

/** A breeding record as the caller sees it: the mutations of hidden traits for platform admins only (as their values). */
function recordShape<T extends ListedRecord>(record: T, admin: boolean) {
  const { created_at_ms, hidden_traits, mutations, ...rest } = record;
  // Trait ids may hold ':' themselves: a mutation is `<trait_id>:<change>`, matched by its prefix.
  const hidden = admin ? [] : (hidden_traits ?? []).map((trait_id) => `${trait_id}:`);
  return { ...rest, mutations: mutations.filter((mutation) => !hidden.some((prefix) => mutation.startsWith(prefix))), created_at: isoTime(created_at_ms)! };
}

function requireAdmin(principal: Principal, what: string): void {
  if (principal.role !== 'admin') throw new ServiceError('forbidden', `${what} is for platform admins only.`);
}

/** POSTs whose fields are all optional accept a missing body as {}. */
async function emptyBodyIsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

export function lineageRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, TSchema>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const catalog = <Reply>(principal: Principal, message: CatalogMessage, readOnly = false) =>
    readOnly
      ? services.actors.ask<Reply>(LINEAGE_CATALOG_KIND, lineageTenantKey(principal.tenant), message, { readOnly: true })
      : services.actors.ask<Reply>(LINEAGE_CATALOG_KIND, lineageTenantKey(principal.tenant), message);
  const readGenome = <Reply>(principal: Principal, entity_id: string, message: GenomeMessage) =>
    services.actors.ask<Reply>(GENOME_KIND, genomeKey(principal.tenant, entity_id), message, { readOnly: true });

  // Traits.
  app.get<{ Querystring: Static<typeof ListQuery> }>(`${base}/traits`, {
    onRequest: authenticate,
    schema: schema("The tenant's traits. sort_by created_at (default), updated_at or name.", { querystring: ListQuery }, {
      200: Type.Object({ pagination: Pagination, traits: Type.Array(Trait) }),
    }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { page, page_size } = pageOf(request.query);
    const query = { page, page_size, sort_by: request.query.sort_by ?? 'created_at', sort_order: request.query.sort_order ?? 'asc' } as const;
    const result = await catalog<Page<TraitDefinition>>(principal, { op: 'trait_list', query }, true);
    return { pagination: pagination(page, page_size, result.total), traits: result.items.map(traitShape) };
  });

  app.post<{ Body: Static<typeof TraitCreateBody> }>(`${base}/traits`, {
    onRequest: authenticate,
    schema: schema(
      'Create a trait: mendelian (alleles with dominance; expression highest_dominance or codominant) or numeric (range; expression blend). An id in use: 409 conflict; an unknown trait in conflicts_with: 400.',
      { body: TraitCreateBody },
      { 201: Trait },
      [409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const trait_id = request.body.trait_id ?? randomId('tr_');
    const trait = await catalog<TraitDefinition>(principal, { op: 'trait_create', trait_id, input: traitInput(request.body), by: principal.user_id });
    return reply.code(201).send(traitShape(trait));
  });

  app.get<{ Params: Static<typeof TraitParams> }>(`${base}/traits/:trait_id`, {
    onRequest: authenticate,
    schema: schema('One trait.', { params: TraitParams }, { 200: Trait }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return traitShape(await catalog<TraitDefinition>(principal, { op: 'trait_get', trait_id: request.params.trait_id }, true));
  });

  app.put<{ Params: Static<typeof TraitParams>; Body: Static<typeof TraitReplaceBody> }>(`${base}/traits/:trait_id`, {
    onRequest: authenticate,
    schema: schema(
      'Replace a trait (the whole definition, as on create). Every species using it gets a new version. In use: its kind and alleles cannot change (409 trait_in_use; new alleles may be added).',
      { params: TraitParams, body: TraitReplaceBody },
      { 200: Trait },
      [404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return traitShape(await catalog<TraitDefinition>(principal, { op: 'trait_replace', trait_id: request.params.trait_id, input: traitInput(request.body) }));
  });

  app.delete<{ Params: Static<typeof TraitParams> }>(`${base}/traits/:trait_id`, {
    onRequest: authenticate,
    schema: schema('Delete a trait. Used by a live species or named in a conflicts_with: 409 trait_in_use.', { params: TraitParams }, {
      200: Type.Object({ message: Type.String(), trait_id: Type.String() }),
    }, [404, 409]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await catalog(principal, { op: 'trait_delete', trait_id: request.params.trait_id });
    return { message: 'Trait deleted', trait_id: request.params.trait_id };
  });

  // Species.
  app.get<{ Querystring: Static<typeof ListQuery> }>(`${base}/species`, {
    onRequest: authenticate,
    schema: schema("The tenant's live species at their current versions. sort_by created_at (default), updated_at or name.", { querystring: ListQuery }, {
      200: Type.Object({ pagination: Pagination, species: Type.Array(Species) }),
    }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { page, page_size } = pageOf(request.query);
    const query = { page, page_size, sort_by: request.query.sort_by ?? 'created_at', sort_order: request.query.sort_order ?? 'asc' } as const;
    const result = await catalog<Page<SpeciesDefinition>>(principal, { op: 'species_list', query }, true);
    return { pagination: pagination(page, page_size, result.total), species: result.items.map(speciesShape) };
  });

  app.post<{ Body: Static<typeof SpeciesCreateBody> }>(`${base}/species`, {
    onRequest: authenticate,
    schema: schema(
      'Create a species (version 1). An unknown trait, two conflicting traits or a bad parent_count: 400; an id in use: 409 conflict.',
      { body: SpeciesCreateBody },
      { 201: Species },
      [409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const species_id = request.body.species_id ?? randomId('sp_');
    const species = await catalog<SpeciesDefinition>(principal, { op: 'species_create', species_id, input: speciesInput(request.body), by: principal.user_id });
    return reply.code(201).send(speciesShape(species));
  });

  app.get<{ Params: Static<typeof SpeciesParams> }>(`${base}/species/:species_id`, {
    onRequest: authenticate,
    schema: schema('One species at its current version.', { params: SpeciesParams }, { 200: Species }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    return speciesShape(await catalog<SpeciesDefinition>(principal, { op: 'species_get', species_id: request.params.species_id }, true));
  });

  app.put<{ Params: Static<typeof SpeciesParams>; Body: Static<typeof SpeciesUpdateBody> }>(`${base}/species/:species_id`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: schema(
      'Change a species: the fields given replace the current ones (nested objects field by field); version goes up by one. Earlier versions stay for replay.',
      { params: SpeciesParams, body: SpeciesUpdateBody },
      { 200: Species },
      [404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const patch = {
      ...(body.name !== undefined && { name: body.name }),
      ...(body.parent_count !== undefined && { parent_count: body.parent_count }),
      ...(body.compatibility !== undefined && { compatibility: body.compatibility }),
      ...(body.lineage !== undefined && { lineage: body.lineage }),
      ...(body.max_lifetime_breedings !== undefined && { max_lifetime_breedings: body.max_lifetime_breedings }),
      ...(body.preview_quantization !== undefined && { preview_quantization: body.preview_quantization }),
      ...(body.traits !== undefined && { traits: body.traits }),
    };
    return speciesShape(await catalog<SpeciesDefinition>(principal, { op: 'species_update', species_id: request.params.species_id, patch }));
  });

  app.delete<{ Params: Static<typeof SpeciesParams> }>(`${base}/species/:species_id`, {
    onRequest: authenticate,
    schema: schema('Delete a species: no more breeding or founders; its genomes and versions stay (provenance still replays them).', { params: SpeciesParams }, {
      200: Type.Object({ message: Type.String(), species_id: Type.String() }),
    }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    await catalog(principal, { op: 'species_delete', species_id: request.params.species_id });
    return { message: 'Species deleted', species_id: request.params.species_id };
  });

  // Genomes.
  app.post<{ Body: Static<typeof GenomeCreateBody> }>(`${base}/genomes`, {
    onRequest: authenticate,
    schema: schema(
      'Create a founder genome (generation 0) for an entity of a species: given alleles, values and flags are kept, the rest drawn from the seed. An entity with a genome: 409 conflict; unknown species: 404; an unknown trait or allele: 400.',
      { body: GenomeCreateBody },
      { 201: Genome },
      [404, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const message: GenomeMessage = {
      op: 'found',
      tenant: principal.tenant,
      species_id: body.species_id,
      owner: body.owner ?? principal.user_id,
      seed: body.seed ?? randomId('seed_'),
      input: { alleles: body.alleles ?? {}, numeric: body.numeric ?? {}, flags: [...new Set(body.flags ?? [])].sort() },
    };
    const view = await services.actors.ask<GenomeView>(GENOME_KIND, genomeKey(principal.tenant, body.entity_id), message);
    return reply.code(201).send(genomeShape(view, false));
  });

  app.get<{ Params: Static<typeof EntityParams>; Querystring: Static<typeof GenomeQuery> }>(`${base}/entities/:entity_id/genome`, {
    onRequest: authenticate,
    schema: schema('An entity\'s genome: expressed traits for everyone; full=true adds raw alleles and hidden traits, tenant=<id> reads another tenant\'s (platform admins; 403 otherwise).', {
      params: EntityParams,
      querystring: GenomeQuery,
    }, { 200: Genome }, [403, 404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const full = request.query.full === true;
    if (full) requireAdmin(principal, 'full=true');
    const tenant = request.query.tenant ?? principal.tenant;
    if (tenant !== principal.tenant) requireAdmin(principal, "Reading another tenant's genome");
    const { genome } = await services.actors.ask<{ genome: GenomeView }>(GENOME_KIND, genomeKey(tenant, request.params.entity_id), { op: 'get' } satisfies GenomeMessage, { readOnly: true });
    return genomeShape(genome, full);
  });

  app.get<{ Params: Static<typeof EntityParams>; Querystring: Static<typeof PedigreeQuery> }>(`${base}/entities/:entity_id/pedigree`, {
    onRequest: authenticate,
    schema: schema('Ancestors to a depth (default 3), nearest first, each at its fewest generations away.', { params: EntityParams, querystring: PedigreeQuery }, { 200: Pedigree }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const depth = Math.min(policy.pedigree_depth_max, request.query.depth ?? 3);
    const { genome, pedigree } = await readGenome<{ genome: GenomeView; pedigree: Pedigree }>(principal, request.params.entity_id, { op: 'get' });
    const ancestors = Object.entries(pedigree)
      .filter(([, entry]) => entry.distance <= depth)
      .map(([entity_id, entry]) => ({ distance: entry.distance, entity_id, generation: genome.track_generations ? entry.generation : 0 }))
      .sort((a, b) => a.distance - b.distance || (a.entity_id < b.entity_id ? -1 : 1));
    return {
      entity_id: genome.entity_id,
      generation: genome.track_generations ? genome.generation : 0,
      inbreeding_coefficient: genome.inbreeding_coefficient,
      depth,
      ancestors,
    };
  });

  app.get<{ Params: Static<typeof EntityParams> }>(`${base}/entities/:entity_id/provenance`, {
    onRequest: authenticate,
    schema: schema(
      `The entity's making, proven: it and its ancestors (nearest first, up to ${policy.provenance_depth_default} generations and ${policy.provenance_genomes_max} genomes) are re-derived from their seeds and parents under the species versions they name, and their anchors recomputed; chain_verified is true when every one matches.`,
      { params: EntityParams },
      { 200: Provenance },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    // A read walk (each ask read-only), generation by generation, bounded.
    const walked = new Map<string, Derivation>();
    let frontier = [request.params.entity_id];
    for (let depth = 0; depth <= policy.provenance_depth_default && frontier.length > 0; depth++) {
      const wanted = frontier.filter((id) => !walked.has(id)).slice(0, policy.provenance_genomes_max - walked.size);
      const found = await Promise.all(
        wanted.map((id) =>
          services.actors.ask<Derivation>(GENOME_KIND, genomeKey(principal.tenant, id), { op: 'derivation' } satisfies GenomeMessage, { readOnly: true }).catch((error: unknown) => {
            // The root must exist (404); an ancestor that is missing fails the chain below.
            if (depth > 0 && error instanceof ServiceError && error.code === 'not_found') return null;
            throw error;
          }),
        ),
      );
      frontier = [];
      for (const derivation of found) {
        if (!derivation) continue;
        walked.set(derivation.entity_id, derivation);
        frontier.push(...derivation.parents);
      }
    }
    const root = walked.get(request.params.entity_id)!;
    const verdict = await catalog<VerifyView>(principal, { op: 'verify', genomes: [...walked.values()], root: root.entity_id }, true);
    return {
      entity_id: root.entity_id,
      species_id: root.species_id,
      species_version: root.species_version,
      generation: root.generation,
      owner: root.owner,
      parents: root.parents,
      record_id: root.record_id,
      seed: root.seed,
      anchor_hash: root.anchor_hash,
      anchor_artifact_id: `anc_${root.anchor_hash.slice(0, 32)}`,
      chain_verified: verdict.chain_verified,
      genomes_verified: verdict.genomes_verified,
      failures: verdict.failures,
    };
  });

  // Breeding.
  app.post<{ Body: Static<typeof BreedBody> }>(`${base}/breed`, {
    onRequest: authenticate,
    schema: schema(
      'Breed: a flow that holds a lifetime breeding on each parent, computes the inbreeding coefficient from the pedigree, breeds the offspring from the recorded seed and creates its genome. Refusals, with nothing changed: unknown species or parent 404; wrong parent count 400; compatibility 409 breeding_incompatible; lifetime cap 409 breeding_limit_reached; inbreeding 409 inbreeding_limit_exceeded; offspring entity with a genome 409 conflict.',
      { body: BreedBody },
      { 201: BreedingRecordSchema },
      [404, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const record_id = randomId('br_');
    const message: BreedingMessage = {
      op: 'breed',
      tenant: principal.tenant,
      parents: body.parents,
      species_id: body.species_id,
      requested_by: principal.user_id,
      seed: body.seed ?? randomId('seed_'),
      offspring_entity_id: body.offspring_entity_id ?? randomId('ent_'),
    };
    const record = await services.actors.ask<BreedingRecord>(BREEDING_KIND, breedingKey(principal.tenant, record_id), message);
    return reply.code(201).send(recordShape(record, principal.role === 'admin'));
  });

  app.post<{ Body: Static<typeof PreviewBody> }>(`${base}/preview`, {
    onRequest: authenticate,
    schema: schema(
      'What a breeding of these parents would likely give, in quantized bands (exact values hidden; exact=true for platform admins). Breeds nothing, holds nothing.',
      { body: PreviewBody },
      { 200: Preview },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const exact = body.exact === true;
    if (exact) requireAdmin(principal, 'exact=true');
    const parents = await Promise.all(
      body.parents.map((id) =>
        services.actors.ask<{ genome: GenomeView; pedigree: Pedigree }>(GENOME_KIND, genomeKey(principal.tenant, id), { op: 'get' } satisfies GenomeMessage, { readOnly: true }),
      ),
    );
    const summaries = parents.map(({ genome, pedigree }) => {
      const { expressed: _expressed, breeding_count: _count, hidden_traits: _hidden, track_generations: _track, ...derivation } = genome;
      return { derivation, pedigree };
    });
    return catalog<PreviewView>(principal, { op: 'preview', species_id: body.species_id, parents: summaries, exact }, true);
  });

  app.get<{ Querystring: Static<typeof RecordsQuery> }>(`${base}/records`, {
    onRequest: authenticate,
    schema: schema("The tenant's breeding records (without seeds), newest first unless sort_order=asc; filters species_id, parent, requested_by.", { querystring: RecordsQuery }, {
      200: Type.Object({ pagination: Pagination, records: Type.Array(ListedRecordSchema) }),
    }),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { page, page_size } = pageOf(request.query);
    const { species_id, parent, requested_by } = request.query;
    const message: RecordsMessage = {
      op: 'list',
      query: { ...(species_id && { species_id }), ...(parent && { parent }), ...(requested_by && { requested_by }), page, page_size, sort_order: request.query.sort_order ?? 'desc' },
    };
    const result = await services.actors.ask<Page<ListedRecord>>(BREEDING_RECORDS_KIND, lineageTenantKey(principal.tenant), message, { readOnly: true });
    return { pagination: pagination(page, page_size, result.total), records: result.items.map((record) => recordShape(record, principal.role === 'admin')) };
  });
}
