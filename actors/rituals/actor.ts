import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { initialAttempt, stepAttempt, type AttemptState } from './attempt-state.js';
import { loadDefinitions, stepDefinitions, type DefinitionsState } from './definitions-state.js';
import { RITUAL_ATTEMPT_KIND, RITUAL_DEFINITIONS_KIND, RITUAL_RECORD_KIND, type AttemptMessage, type DefinitionsMessage, type RecordMessage } from './messages.js';
import { loadRecord, stepRecord, type RecordState } from './record-state.js';

/** A tenant's ritual definitions and their versions (key = ritualDefinitionsKey(tenant)). */
export const ritualDefinitionsActor: RecordsActorDefinition<DefinitionsState, DefinitionsMessage, unknown> = {
  kind: RITUAL_DEFINITIONS_KIND,
  storage: 'records',
  load: loadDefinitions,
  step: (state, message, context) => stepDefinitions(state, message as DefinitionsMessage, context),
};

/** One attempt (key = ritualAttemptKey(tenant, attempt_id)): small, so one snapshot record. */
export const ritualAttemptActor: SnapshotActorDefinition<AttemptState, AttemptMessage, unknown> = {
  kind: RITUAL_ATTEMPT_KIND,
  storage: 'snapshot',
  initial: initialAttempt,
  step: stepAttempt,
};

/** A definition's history and analytics (key = ritualRecordKey(tenant, def_id)). */
export const ritualRecordActor: RecordsActorDefinition<RecordState, RecordMessage, unknown> = {
  kind: RITUAL_RECORD_KIND,
  storage: 'records',
  load: loadRecord,
  step: (state, message, context) => stepRecord(state, message as RecordMessage, context),
};

export const ritualActors = [ritualDefinitionsActor, ritualAttemptActor, ritualRecordActor];
