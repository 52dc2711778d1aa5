import type { RecordsActorDefinition } from '../../runtime/index.js';
import { LIVENESS_INDEX_KIND, LIVENESS_KIND, type IndexListView, type IndexMessage, type IndexQuery, type LivenessMessage, type LivenessReply } from './messages.js';
import { loadIndex, stepIndex, type IndexState } from './index-state.js';
import { loadEntity, stepLiveness, type EntityState } from './state.js';

/** One actor per (tenant, entity): heartbeats, series, status, outages. */
export const livenessActor: RecordsActorDefinition<EntityState, LivenessMessage, LivenessReply> = {
  kind: LIVENESS_KIND,
  storage: 'records',
  load: loadEntity,
  step: stepLiveness,
};

/** One actor per tenant: the index the list endpoint filters. */
export const livenessIndexActor: RecordsActorDefinition<IndexState, IndexMessage | IndexQuery, IndexListView | undefined> = {
  kind: LIVENESS_INDEX_KIND,
  storage: 'records',
  load: loadIndex,
  step: stepIndex,
};
