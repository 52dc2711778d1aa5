import type { ActorDefinition, RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadCatalog, stepCatalog, type CatalogState } from './catalog-state.js';
import { initialBreeding, stepBreeding, type BreedingState } from './flows.js';
import { initialGenome, stepGenome, type GenomeState } from './genome-state.js';
import { BREEDING_KIND, BREEDING_RECORDS_KIND, GENOME_KIND, LINEAGE_CATALOG_KIND, type BreedingMessage, type CatalogMessage, type GenomeMessage, type RecordsMessage } from './messages.js';
import { loadRecords, stepRecords, type RecordsState } from './records-state.js';

/** A tenant's traits, species and species versions (key = lineageTenantKey(tenant)). */
export const lineageCatalogActor: RecordsActorDefinition<CatalogState, CatalogMessage, unknown> = {
  kind: LINEAGE_CATALOG_KIND,
  storage: 'records',
  load: loadCatalog,
  step: stepCatalog,
};

/** One entity's genome (key = genomeKey(tenant, entity_id)). */
export const genomeActor: SnapshotActorDefinition<GenomeState, GenomeMessage, unknown> = {
  kind: GENOME_KIND,
  storage: 'snapshot',
  initial: initialGenome,
  step: stepGenome,
};

/** One breeding: the breed flow's coordinator, then its record (key = breedingKey(tenant, record_id)). */
export const breedingActor: SnapshotActorDefinition<BreedingState, BreedingMessage, unknown> = {
  kind: BREEDING_KIND,
  storage: 'snapshot',
  initial: initialBreeding,
  step: stepBreeding,
};

/** A tenant's breeding records list (key = lineageTenantKey(tenant)). */
export const breedingRecordsActor: RecordsActorDefinition<RecordsState, RecordsMessage, unknown> = {
  kind: BREEDING_RECORDS_KIND,
  storage: 'records',
  load: loadRecords,
  step: stepRecords,
};

export const lineageActors: ActorDefinition[] = [lineageCatalogActor, genomeActor, breedingActor, breedingRecordsActor];
