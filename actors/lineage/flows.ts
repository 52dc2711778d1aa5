import { ServiceError, type ActorSend, type AlarmMessage, type DeferredReply, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { anchorArtifactId, anchorHash } from './anchor.js';
import { breedOffspring, expressedTraits } from './genetics.js';
import { inbreedingCoefficient, offspringPedigree } from './inbreeding.js';
import {
  BREEDING_KIND,
  BREEDING_RECORDS_KIND,
  GENOME_KIND,
  genomeKey,
  LINEAGE_CATALOG_KIND,
  lineagePolicy,
  lineageTenantKey,
  type BreedingMessage,
  type BreedingRecord,
  type CatalogMessage,
  type Derivation,
  type GenomeMessage,
  type ParentSummary,
  type RecordsMessage,
  type SpeciesVersion,
} from './messages.js';

/**
 * The breed flow. Its coordinator is the breeding itself (`lineage-breeding`,
 * storage `snapshot`, key = breedingKey(tenant, record_id)); every step is
 * pure and talks to the other actors only through the outbox
 * (actors/flow-call.ts), so a crash between steps loses nothing.
 *
 * 1. `rules`: the catalog answers the species' current version, refusing an
 *    unknown species (404) or a wrong number of parents (400). A repeated
 *    parent or a single one is selfing: refused (409 breeding_incompatible)
 *    unless the species is self_compatible.
 * 2. `reserve:<entity>`: each distinct parent holds one lifetime breeding in
 *    its own turn (species, min_generation, required_flags and
 *    max_lifetime_breedings checked there, so concurrent breedings cannot
 *    pass the cap) and answers its derivation and pedigree window. The flow
 *    waits for every parent's answer.
 * 3. In the coordinator's turn: the offspring's pedigree window and Wright's
 *    coefficient (inbreeding.ts) from the parents' windows, no further asks;
 *    over max_coefficient (with compute on): 409 inbreeding_limit_exceeded.
 *    Then the offspring is bred from the recorded seed (genetics.ts) and
 *    anchored (anchor.ts).
 * 4. `create`: the offspring's genome actor stores it (an entity that already
 *    has a genome refuses: 409 conflict).
 * 5. `index`: the tenant's records list adds the record; then the breed
 *    answers (so a list right after the reply shows it). Parents' holds are
 *    confirmed.
 * Compensation: any refusal after step 2 releases every reservation that was
 * taken (`release`), so counts are as before; the caller gets the refusal.
 */
export type BreedingState = null | Running | { status: 'done'; record: BreedingRecord };

export interface Running {
  status: 'running';
  flow_id: string;
  request_id: string | null;
  tenant: string;
  record_id: string;
  parents: string[];
  species_id: string;
  requested_by: string;
  seed: string;
  offspring_entity_id: string;
  step: 'rules' | 'reserve' | 'create' | 'index';
  version: SpeciesVersion | null;
  /** Per distinct parent: its reservation's outcome once answered. */
  reservations: Record<string, { ok: true; summary: ParentSummary } | { ok: false; error: FlowError } | null>;
  record: BreedingRecord | null;
}

type Result = TurnResult<BreedingState, unknown>;

export function initialBreeding(): BreedingState {
  return null;
}

const distinct = (ids: string[]) => [...new Set(ids)];

function call(running: Running, step: string, kind: string, key: string, message: CatalogMessage | GenomeMessage | RecordsMessage): ActorSend {
  return flowCall(kind, key, message, { kind: BREEDING_KIND, key: breedingKey(running), flow_id: running.flow_id, step });
}

const breedingKey = (running: Running) => JSON.stringify([running.tenant, running.record_id]);

/** Ends the flow with a refusal: gives back every reservation taken, answers the asker, keeps nothing. */
function refuse(running: Running, error: FlowError): Result {
  const sends: ActorSend[] = [];
  for (const [entity_id, outcome] of Object.entries(running.reservations)) {
    if (outcome?.ok) sends.push({ kind: GENOME_KIND, key: genomeKey(running.tenant, entity_id), message: { op: 'release', record_id: running.record_id } satisfies GenomeMessage });
  }
  const replies: DeferredReply[] = running.request_id ? [{ request_id: running.request_id, error }] : [];
  return { state: null, sends, replies };
}

const asError = (error: ServiceError): FlowError => (error.details === undefined ? { code: error.code, message: error.message } : { code: error.code, message: error.message, details: error.details });

export function stepBreeding(state: BreedingState, message: BreedingMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'breed': {
      if (state !== null) throw new ServiceError('conflict', 'This breeding record already exists.');
      const record_id = (JSON.parse(context.key) as [string, string])[1];
      const running: Running = {
        status: 'running',
        flow_id: context.newId('bf_'),
        request_id: context.request_id,
        tenant: message.tenant,
        record_id,
        parents: message.parents,
        species_id: message.species_id,
        requested_by: message.requested_by,
        seed: message.seed,
        offspring_entity_id: message.offspring_entity_id,
        step: 'rules',
        version: null,
        reservations: {},
        record: null,
      };
      const rules: CatalogMessage = { op: 'rules', species_id: message.species_id, parent_count: message.parents.length };
      return { state: running, sends: [call(running, 'rules', LINEAGE_CATALOG_KIND, lineageTenantKey(message.tenant), rules)], defer: true };
    }

    case 'get':
      if (state === null || state.status !== 'done') throw new ServiceError('not_found', 'No such breeding record.');
      return { state, reply: state.record };

    case 'flow-answer':
      if (state === null || state.status !== 'running' || message.flow_id !== state.flow_id) return { state };
      return answered(state, message, context);

    default:
      return { state };
  }
}

function answered(running: Running, answer: FlowAnswer, context: TurnContext): Result {
  const step = answer.step;
  if (running.step === 'rules' && step === 'rules') {
    if (!answer.ok) return refuse(running, answer.error);
    const version = answer.reply as SpeciesVersion;
    const species = version.species;
    const parents = distinct(running.parents);
    if (parents.length < running.parents.length || running.parents.length === 1) {
      if (!species.compatibility.self_compatible) {
        return refuse(running, { code: 'breeding_incompatible', message: `Species ${species.species_id} is not self-compatible: a parent may not breed with itself.`, details: { rule: 'self_compatible' } });
      }
    }
    const next: Running = { ...running, step: 'reserve', version, reservations: Object.fromEntries(parents.map((id) => [id, null])) };
    const sends = parents.map((entity_id) =>
      call(next, `reserve:${entity_id}`, GENOME_KIND, genomeKey(running.tenant, entity_id), {
        op: 'reserve',
        record_id: running.record_id,
        species_id: species.species_id,
        species_version: species.version,
        max_lifetime_breedings: species.max_lifetime_breedings,
        min_generation: species.compatibility.min_generation,
        required_flags: species.compatibility.required_flags,
      }),
    );
    return { state: next, sends };
  }

  if (running.step === 'reserve' && step.startsWith('reserve:')) {
    const entity_id = step.slice('reserve:'.length);
    if (!(entity_id in running.reservations) || running.reservations[entity_id] !== null) return { state: running };
    const outcome = answer.ok ? { ok: true as const, summary: answer.reply as ParentSummary } : { ok: false as const, error: answer.error };
    const next: Running = { ...running, reservations: { ...running.reservations, [entity_id]: outcome } };
    if (Object.values(next.reservations).some((value) => value === null)) return { state: next };
    // Every parent answered: the first refusal in parent order wins.
    for (const id of distinct(next.parents)) {
      const result = next.reservations[id]!;
      if (!result.ok) return refuse(next, result.error);
    }
    return bred(next, context);
  }

  if (running.step === 'create' && step === 'create') {
    if (!answer.ok) return refuse(running, answer.error);
    const record = running.record!;
    const { seed: _seed, ...listed } = record;
    const sends: ActorSend[] = distinct(running.parents).map((entity_id) => ({
      kind: GENOME_KIND,
      key: genomeKey(running.tenant, entity_id),
      message: { op: 'confirm', record_id: running.record_id } satisfies GenomeMessage,
    }));
    const next: Running = { ...running, step: 'index' };
    sends.push(call(next, 'index', BREEDING_RECORDS_KIND, lineageTenantKey(running.tenant), { op: 'add', record: listed }));
    return { state: next, sends };
  }

  if (running.step === 'index' && step === 'index') {
    // The records list never refuses an add; the breeding is done either way.
    const record = running.record!;
    return { state: { status: 'done', record }, replies: running.request_id ? [{ request_id: running.request_id, reply: record }] : [] };
  }
  return { state: running };
}

/** Step 3: coefficient, caps, the offspring and its anchor; then asks its genome actor to store it. */
function bred(running: Running, context: TurnContext): Result {
  const version = running.version!;
  const species = version.species;
  const summaries = running.parents.map((id) => (running.reservations[id] as { ok: true; summary: ParentSummary }).summary);
  const ids = summaries.map((summary) => summary.derivation.entity_id);
  const pedigree = offspringPedigree(
    distinct(ids).map((id) => {
      const summary = summaries.find((candidate) => candidate.derivation.entity_id === id)!;
      return { ...summary.derivation, pedigree: summary.pedigree };
    }),
    lineagePolicy.pedigree_depth_max,
  );
  const inbreeding = species.lineage.inbreeding;
  const inbreeding_coefficient = inbreeding.compute ? inbreedingCoefficient(ids, pedigree) : 0;
  if (inbreeding.compute && inbreeding_coefficient > inbreeding.max_coefficient) {
    return refuse(running, {
      code: 'inbreeding_limit_exceeded',
      message: `The offspring's inbreeding coefficient ${inbreeding_coefficient} exceeds the species' max_coefficient ${inbreeding.max_coefficient}.`,
      details: { inbreeding_coefficient, max_coefficient: inbreeding.max_coefficient },
    });
  }
  const parents = summaries.map((summary) => summary.derivation);
  const offspring = breedOffspring(version, parents, running.seed, inbreeding_coefficient);
  const content: Omit<Derivation, 'anchor_hash' | 'owner' | 'created_at_ms'> = {
    entity_id: running.offspring_entity_id,
    species_id: species.species_id,
    species_version: species.version,
    generation: offspring.generation,
    raw_alleles: offspring.raw_alleles,
    numeric: offspring.numeric,
    flags: offspring.flags,
    inbreeding_coefficient,
    parents: running.parents,
    parent_anchors: parents.map((parent) => parent.anchor_hash),
    record_id: running.record_id,
    seed: running.seed,
    founder_input: null,
    mutations: offspring.mutations,
  };
  const anchor_hash = anchorHash(content);
  const genome: Derivation = { ...content, owner: running.requested_by, anchor_hash, created_at_ms: context.now };
  const record: BreedingRecord = {
    record_id: running.record_id,
    species_id: species.species_id,
    species_version: species.version,
    parents: running.parents,
    offspring: [{ anchor_artifact_id: anchorArtifactId(anchor_hash), anchor_hash, entity_id: genome.entity_id, generation: offspring.generation, inbreeding_coefficient }],
    mutations: offspring.mutations,
    hidden_traits: version.traits.filter((trait) => trait.hidden).map((trait) => trait.trait_id),
    requested_by: running.requested_by,
    seed: running.seed,
    created_at_ms: context.now,
  };
  const next: Running = { ...running, step: 'create', record };
  const create: GenomeMessage = {
    op: 'create_offspring',
    genome,
    expressed: expressedTraits(version.traits, offspring.raw_alleles),
    pedigree,
    hidden_traits: version.traits.filter((trait) => trait.hidden).map((trait) => trait.trait_id),
    track_generations: species.lineage.track_generations,
  };
  return { state: next, sends: [call(next, 'create', GENOME_KIND, genomeKey(running.tenant, running.offspring_entity_id), create)] };
}
