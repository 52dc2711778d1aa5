import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { initialMultiplexFlow, stepMultiplexFlow, type MultiplexFlowState } from './flows.js';
import { loadPresenceDirectory, stepPresenceDirectory, type PresenceDirectoryState } from './directory-state.js';
import {
  PRESENCE_CONTEXT_KIND,
  PRESENCE_DIRECTORY_KIND,
  PRESENCE_MULTIPLEX_KIND,
  PRESENCE_SUBJECT_KIND,
  type MultiplexMessage,
  type MultiplexReply,
  type PresenceDirectoryMessage,
  type PresenceDirectoryView,
  type PresenceMessage,
  type PresenceReply,
  type SubjectIndexState,
  type SubjectMessage,
} from './messages.js';
import { loadPresenceState, stepPresence, type PresenceState } from './state.js';
import { initialSubjectIndex, stepSubjectIndex } from './subject-state.js';

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

/** One coordinator per multiplex request (flows.ts); its state is deleted when the flow ends. */
export const presenceMultiplexActor: SnapshotActorDefinition<MultiplexFlowState | null, MultiplexMessage, MultiplexReply | undefined> = {
  kind: PRESENCE_MULTIPLEX_KIND,
  storage: 'snapshot',
  initial: initialMultiplexFlow,
  step: stepMultiplexFlow,
};

/** One per tenant: the tenant's context ids, for the administrators' list. */
export const presenceDirectoryActor: RecordsActorDefinition<PresenceDirectoryState, PresenceDirectoryMessage, PresenceDirectoryView | undefined> = {
  kind: PRESENCE_DIRECTORY_KIND,
  storage: 'records',
  load: loadPresenceDirectory,
  step: stepPresenceDirectory,
};
