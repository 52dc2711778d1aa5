import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import type { Derivation } from './messages.js';

/**
 * RFC 8785 (JCS) canonical JSON. The package is CommonJS (module.exports is
 * the function), which its typings declare as a default export.
 */
export const canonicalJson = canonicalizeModule as unknown as (input: unknown) => string;

/**
 * The anchor of a genome: SHA-256 (hex) over the RFC 8785 JSON
 * Canonicalization Scheme encoding (the `canonicalize` package) of
 * {format: "lineage-anchor/v1", entity_id, species_id, species_version,
 * record_id, seed, parents, parent_anchors, generation,
 * inbreeding_coefficient, raw_alleles, numeric, flags, founder_input,
 * mutations}. It includes the parents' anchors, so each anchor commits to
 * the whole chain of ancestors above it, and the breeding record's id and
 * seed, so it commits to the record.
 */
export function anchorHash(derivation: Omit<Derivation, 'anchor_hash' | 'owner' | 'created_at_ms'>): string {
  const encoded = canonicalJson({
    format: 'lineage-anchor/v1',
    entity_id: derivation.entity_id,
    species_id: derivation.species_id,
    species_version: derivation.species_version,
    record_id: derivation.record_id,
    seed: derivation.seed,
    parents: derivation.parents,
    parent_anchors: derivation.parent_anchors,
    generation: derivation.generation,
    inbreeding_coefficient: derivation.inbreeding_coefficient,
    raw_alleles: derivation.raw_alleles,
    numeric: derivation.numeric,
    flags: derivation.flags,
    founder_input: derivation.founder_input,
    mutations: derivation.mutations,
  });
  return createHash('sha256').update(encoded).digest('hex');
}

/** The anchor's artifact id: a content address derived from its hash. */
export function anchorArtifactId(anchor_hash: string): string {
  return `anc_${anchor_hash.slice(0, 32)}`;
}
