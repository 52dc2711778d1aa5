import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadAttestation, stepAttestation, type AttestationState } from './attestation-state.js';
import { loadAttestationIndex, stepAttestationIndex, type AttestationIndexState } from './index-state.js';
import { ATTESTATION_INDEX_KIND, ATTESTATION_KIND, type AttestationIndexMessage, type AttestationMessage } from './messages.js';

/** One attestation (key = attestation id): the lock, its sealed material, progress and history. */
export const attestationActor: RecordsActorDefinition<AttestationState, AttestationMessage, unknown> = {
  kind: ATTESTATION_KIND,
  storage: 'records',
  load: loadAttestation,
  step: stepAttestation,
};

/** A tenant's attestations (key = attestationIndexKey(tenant)): summaries for the list. */
export const attestationIndexActor: RecordsActorDefinition<AttestationIndexState, AttestationIndexMessage, unknown> = {
  kind: ATTESTATION_INDEX_KIND,
  storage: 'records',
  load: loadAttestationIndex,
  step: stepAttestationIndex,
};

export const vaultActors = [attestationActor, attestationIndexActor];
