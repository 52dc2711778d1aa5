import type { RecordsActorDefinition } from '../../runtime/index.js';
import { ECS_INDEX_KIND, type EcsMessage } from './messages.js';
import { loadIndex, stepIndex, type IndexState } from './state.js';

/** One actor per ECS index: key JSON [tenant, index]; keyed records so a mutation costs O(change). */
export const ecsIndexActor: RecordsActorDefinition<IndexState, EcsMessage, unknown> = {
  kind: ECS_INDEX_KIND,
  storage: 'records',
  load: loadIndex,
  step: stepIndex,
};
