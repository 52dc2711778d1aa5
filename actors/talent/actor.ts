import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { initialAnalyticsState, stepAnalytics, type AnalyticsState } from './analytics-state.js';
import { stepCurve, type CurveState } from './curve-state.js';
import { loadTreeIndex, stepTreeIndex, type TreeIndexState } from './index-state.js';
import {
  TALENT_ANALYTICS_KIND,
  TALENT_CURVE_KIND,
  TALENT_TREE_INDEX_KIND,
  TALENT_TREE_KIND,
  TALENT_USER_KIND,
  type AnalyticsMessage,
  type CurveMessage,
  type TalentUserMessage,
  type TreeIndexMessage,
  type TreeMessage,
} from './messages.js';
import { initialTreeState, stepTree, type TreeState } from './tree-state.js';
import { loadTalentUser, talentUserWrites } from './user-records.js';
import { stepTalentUser, type TalentUserState } from './user-state.js';

/** One XP curve (key = talentCurveKey): a small immutable snapshot. */
export const talentCurveActor: SnapshotActorDefinition<CurveState, CurveMessage, unknown> = {
  kind: TALENT_CURVE_KIND,
  storage: 'snapshot',
  initial: () => null,
  step: stepCurve,
};

/** One tree with its stored versions (key = talentTreeKey); bounded by talentLimits (versions, nodes). */
export const talentTreeActor: SnapshotActorDefinition<TreeState, TreeMessage, unknown> = {
  kind: TALENT_TREE_KIND,
  storage: 'snapshot',
  initial: initialTreeState,
  step: stepTree,
};

/** A tenant's trees for the list (key = talentTreeIndexKey): one record per tree. */
export const talentTreeIndexActor: RecordsActorDefinition<TreeIndexState, TreeIndexMessage, unknown> = {
  kind: TALENT_TREE_INDEX_KIND,
  storage: 'records',
  load: loadTreeIndex,
  step: stepTreeIndex,
};

/** One user's wallet and allocations (key = talentUserKey), as records (user-records.ts): a turn writes what it changed. */
export const talentUserActor: RecordsActorDefinition<TalentUserState, TalentUserMessage, unknown> = {
  kind: TALENT_USER_KIND,
  storage: 'records',
  load: loadTalentUser,
  step(state, message, context) {
    const result = stepTalentUser(state, message, context);
    return { ...result, writes: talentUserWrites(state, result.state) };
  },
};

/** One tree's analytics (key = talentAnalyticsKey), kept from the user actors' deltas. */
export const talentAnalyticsActor: SnapshotActorDefinition<AnalyticsState, AnalyticsMessage, unknown> = {
  kind: TALENT_ANALYTICS_KIND,
  storage: 'snapshot',
  initial: initialAnalyticsState,
  step: stepAnalytics,
};

export const talentActors = [talentCurveActor, talentTreeActor, talentTreeIndexActor, talentUserActor, talentAnalyticsActor];
