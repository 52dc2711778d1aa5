import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadIndex, stepIndex, type IndexListView, type IndexQuery, type IndexState } from './index-state.js';
import { LIVENESS_INDEX_KIND, LIVENESS_KIND } from './keys.js';
import { loadEntity, stepLiveness, type EntityState, type IndexMessage, type LivenessMessage, type LivenessReply } from './state.js';

export { LIVENESS_INDEX_KIND, LIVENESS_KIND, livenessActorKey, livenessIndexKey } from './keys.js';

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
