import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { THROTTLE_PLANS_KIND, THROTTLE_STATS_KIND, THROTTLE_SUBJECT_KIND, type PlansMessage, type StatsMessage, type SubjectMessage } from './messages.js';
import { loadPlans, stepPlans, type PlansState } from './plans-state.js';
import { initialStats, stepStats, type StatsState } from './stats-state.js';
import { initialSubject, stepSubject, type SubjectState } from './subject-state.js';

/** A tenant's plans (key = throttlePlansKey(tenant)): one record per plan and the change counter. */
export const throttlePlansActor: RecordsActorDefinition<PlansState, PlansMessage, unknown> = {
  kind: THROTTLE_PLANS_KIND,
  storage: 'records',
  load: loadPlans,
  step: stepPlans,
};

/** One subject's bucket under one plan generation; the record is removed once the subject is idle. */
export const throttleSubjectActor: SnapshotActorDefinition<SubjectState | null, SubjectMessage, unknown> = {
  kind: THROTTLE_SUBJECT_KIND,
  storage: 'snapshot',
  initial: initialSubject,
  step: stepSubject,
};

/** A plan generation's totals, added to by its subjects through the outbox. */
export const throttleStatsActor: SnapshotActorDefinition<StatsState, StatsMessage, unknown> = {
  kind: THROTTLE_STATS_KIND,
  storage: 'snapshot',
  initial: initialStats,
  step: stepStats,
};

export const throttleActors = [throttlePlansActor, throttleSubjectActor, throttleStatsActor];
