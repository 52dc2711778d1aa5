import type { FlowAnswer } from '../flow-call.js';
import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadForm, stepForm, type FormState } from './form-state.js';
import { loadFormIndex, stepFormIndex, type FormIndexState } from './index-state.js';
import { FORM_INDEX_KIND, FORM_KIND, FORM_STATE_MACHINE_KIND, type FormIndexMessage, type FormMessage, type StateMachineMessage } from './messages.js';
import { stepStateMachine, type StateMachineState } from './state-machine-state.js';

/** One form (key = formKey(tenant, form_id)): definition, versions, submissions, drafts. */
export const formActor: RecordsActorDefinition<FormState, FormMessage | FlowAnswer, unknown> = {
  kind: FORM_KIND,
  storage: 'records',
  load: loadForm,
  step: stepForm,
};

/** A tenant's forms list (key = formIndexKey(tenant)). */
export const formIndexActor: RecordsActorDefinition<FormIndexState, FormIndexMessage, unknown> = {
  kind: FORM_INDEX_KIND,
  storage: 'records',
  load: loadFormIndex,
  step: stepFormIndex,
};

/** A named state machine of a tenant (key = stateMachineKey(tenant, name)), moved by fsm hooks. */
export const formStateMachineActor: SnapshotActorDefinition<StateMachineState, StateMachineMessage, unknown> = {
  kind: FORM_STATE_MACHINE_KIND,
  storage: 'snapshot',
  initial: () => null,
  step: stepStateMachine,
};

export const formActors = [formActor, formIndexActor, formStateMachineActor];
