import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall, flowCall, type FlowAnswer, type FlowCall } from '../flow-call.js';
import { anchorHash } from './anchor.js';
import { checkFounderInput, expressedTraits, foundGenome } from './genetics.js';
import {
  GENOME_KIND,
  LINEAGE_CATALOG_KIND,
  lineageTenantKey,
  type CatalogMessage,
  type Derivation,
  type GenomeMessage,
  type GenomeView,
  type ParentSummary,
  type Pedigree,
  type SpeciesVersion,
} from './messages.js';

/**
 * One entity's genome: pure domain logic of the `lineage-genome` actor
 * (storage `snapshot`, key = genomeKey(tenant, entity_id)).
 *
 * - A founder (`found`, POST /genomes) is a small flow: the genome asks the
 *   tenant's catalog for the species' current version (`rules`, through the
 *   outbox), waits `pending` (a second create meanwhile is 409), then draws
 *   what was not given from its seed and answers the deferred ask.
 * - As a parent it holds the caps of a breeding in its own turn (`reserve`:
 *   species, minimum generation, required flags, lifetime breedings counted
 *   and taken at once, so concurrent breedings cannot pass the cap), and
 *   answers its derivation and pedigree window so the breed flow needs no
 *   further asks. `release` gives a reservation back (compensation),
 *   `confirm` drops it once the offspring exists.
 * - As an offspring it is created by the breed flow (`create_offspring`);
 *   an entity that already has a genome refuses (409).
 */
export type GenomeState =
  | null
  | { status: 'pending'; flow_id: string; request_id: string | null; species_id: string; owner: string; seed: string; input: Extract<GenomeMessage, { op: 'found' }>['input'] }
  | Live;

export interface Live {
  status: 'live';
  derivation: Derivation;
  expressed: Record<string, string>;
  pedigree: Pedigree;
  breeding_count: number;
  /** Breedings held and not yet confirmed or released (record ids). */
  reservations: string[];
  hidden_traits: string[];
  track_generations: boolean;
}

type Result = TurnResult<GenomeState, unknown>;

export function initialGenome(): GenomeState {
  return null;
}

const entityOf = (key: string) => (JSON.parse(key) as [string, string])[1];

export function genomeView(live: Live): GenomeView {
  return { ...live.derivation, expressed: live.expressed, breeding_count: live.breeding_count, hidden_traits: live.hidden_traits, track_generations: live.track_generations };
}

function requireLive(state: GenomeState, context: TurnContext): Live {
  if (state === null || state.status !== 'live') throw new ServiceError('not_found', `No genome for entity ${entityOf(context.key)}.`);
  return state;
}

function summary(live: Live): ParentSummary {
  return { derivation: live.derivation, pedigree: live.pedigree };
}

export function stepGenome(state: GenomeState, message: GenomeMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'found': {
      if (state !== null) throw new ServiceError('conflict', `Entity ${entityOf(context.key)} already has a genome.`);
      const flow_id = context.newId('gf_');
      const pending: GenomeState = { status: 'pending', flow_id, request_id: context.request_id, species_id: message.species_id, owner: message.owner, seed: message.seed, input: message.input };
      const call: CatalogMessage = { op: 'rules', species_id: message.species_id, parent_count: null };
      return {
        state: pending,
        sends: [flowCall(LINEAGE_CATALOG_KIND, lineageTenantKey(message.tenant), call, { kind: GENOME_KIND, key: context.key, flow_id, step: 'rules' })],
        defer: true,
      };
    }

    case 'flow-answer':
      return foundAnswered(state, message, context);

    case 'get': {
      const live = requireLive(state, context);
      return { state, reply: { genome: genomeView(live), pedigree: live.pedigree } };
    }

    case 'derivation':
      return { state, reply: requireLive(state, context).derivation };

    case 'reserve': {
      const live = requireLive(state, context);
      const entity = live.derivation.entity_id;
      if (live.reservations.includes(message.record_id)) return { state, reply: summary(live) };
      if (live.derivation.species_id !== message.species_id) {
        throw new ServiceError('breeding_incompatible', `Entity ${entity} is of species ${live.derivation.species_id}, not ${message.species_id}.`, { details: { entity_id: entity, rule: 'species' } });
      }
      if (live.derivation.generation < message.min_generation) {
        throw new ServiceError('breeding_incompatible', `Entity ${entity} is of generation ${live.derivation.generation}; the species breeds from generation ${message.min_generation}.`, {
          details: { entity_id: entity, rule: 'min_generation' },
        });
      }
      const missing = message.required_flags.filter((flag) => !live.derivation.flags.includes(flag));
      if (missing.length > 0) {
        throw new ServiceError('breeding_incompatible', `Entity ${entity} lacks the required flag(s) ${missing.join(', ')}.`, { details: { entity_id: entity, rule: 'required_flags', missing } });
      }
      if (message.max_lifetime_breedings > 0 && live.breeding_count >= message.max_lifetime_breedings) {
        throw new ServiceError('breeding_limit_reached', `Entity ${entity} has bred ${live.breeding_count} times, the species' lifetime maximum.`, {
          details: { entity_id: entity, breeding_count: live.breeding_count, max_lifetime_breedings: message.max_lifetime_breedings },
        });
      }
      const next: Live = { ...live, breeding_count: live.breeding_count + 1, reservations: [...live.reservations, message.record_id] };
      return { state: next, reply: summary(next) };
    }

    case 'release': {
      if (state === null || state.status !== 'live' || !state.reservations.includes(message.record_id)) return { state, reply: { released: false } };
      const next: Live = { ...state, breeding_count: state.breeding_count - 1, reservations: state.reservations.filter((id) => id !== message.record_id) };
      return { state: next, reply: { released: true } };
    }

    case 'confirm': {
      if (state === null || state.status !== 'live' || !state.reservations.includes(message.record_id)) return { state };
      return { state: { ...state, reservations: state.reservations.filter((id) => id !== message.record_id) } };
    }

    case 'create_offspring': {
      if (state !== null) throw new ServiceError('conflict', `Entity ${entityOf(context.key)} already has a genome.`);
      const live: Live = {
        status: 'live',
        derivation: message.genome,
        expressed: message.expressed,
        pedigree: message.pedigree,
        breeding_count: 0,
        reservations: [],
        hidden_traits: message.hidden_traits,
        track_generations: message.track_generations,
      };
      return { state: live, reply: genomeView(live) };
    }

    case 'flow-call':
      return answerFlowCall(stepGenome, state, message as FlowCall<GenomeMessage>, context);

    default:
      return { state };
  }
}

/** The catalog's answer to a founder's `rules`: make the founder, or drop the pending create. */
function foundAnswered(state: GenomeState, answer: FlowAnswer, context: TurnContext): Result {
  if (state === null || state.status !== 'pending' || answer.flow_id !== state.flow_id || answer.step !== 'rules') return { state };
  const request_id = state.request_id;
  const refuse = (error: { code: never; message: string; details?: unknown }) => ({ state: null, replies: request_id ? [{ request_id, error }] : [] });
  if (!answer.ok) return refuse(answer.error as never);
  const version = answer.reply as SpeciesVersion;
  try {
    checkFounderInput(version, state.input);
  } catch (error) {
    if (!(error instanceof ServiceError)) throw error;
    return refuse({ code: error.code as never, message: error.message, details: error.details });
  }
  const made = foundGenome(version, state.seed, state.input);
  const content = {
    entity_id: entityOf(context.key),
    species_id: version.species.species_id,
    species_version: version.species.version,
    generation: 0,
    ...made,
    inbreeding_coefficient: 0,
    parents: [],
    parent_anchors: [],
    record_id: null,
    seed: state.seed,
    founder_input: state.input,
    mutations: [],
  };
  const anchor_hash = anchorHash(content);
  const live: Live = {
    status: 'live',
    derivation: { ...content, owner: state.owner, anchor_hash, created_at_ms: context.now },
    expressed: expressedTraits(version.traits, made.raw_alleles),
    pedigree: {},
    breeding_count: 0,
    reservations: [],
    hidden_traits: version.traits.filter((trait) => trait.hidden).map((trait) => trait.trait_id),
    track_generations: version.species.lineage.track_generations,
  };
  return { state: live, replies: request_id ? [{ request_id, reply: genomeView(live) }] : [] };
}

