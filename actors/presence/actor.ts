import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadPresenceState, presenceContextKey, stepPresence, type PresenceMessage, type PresenceReply, type PresenceState } from './state.js';
import {
  initialSubjectIndex,
  PRESENCE_SUBJECT_KIND,
  presenceSubjectKey,
  stepSubjectIndex,
  type SubjectIndexState,
  type SubjectMessage,
} from './subject-state.js';

export const PRESENCE_CONTEXT_KIND = 'presence-context';
export { PRESENCE_SUBJECT_KIND, presenceContextKey, presenceSubjectKey };

/** One actor per (tenant, context id): keyed records, one per session. */
export const presenceContextActor: RecordsActorDefinition<PresenceState, PresenceMessage, PresenceReply> = {
  kind: PRESENCE_CONTEXT_KIND,
  storage: 'records',
  load: loadPresenceState,
  step: stepPresence,
};

/** One small actor per (tenant, subject id): last seen per context. */
export const presenceSubjectActor: SnapshotActorDefinition<SubjectIndexState, SubjectMessage, SubjectIndexState | undefined> = {
  kind: PRESENCE_SUBJECT_KIND,
  storage: 'snapshot',
  initial: initialSubjectIndex,
  step: stepSubjectIndex,
};
