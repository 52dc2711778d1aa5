import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadForm, stepForm, type FormState } from './form-state.js';
import { loadFormIndex, stepFormIndex, type FormIndexState } from './index-state.js';
import { FORM_INDEX_KIND, FORM_KIND, type FormIndexMessage, type FormMessage } from './messages.js';

/** One form (key = formKey(tenant, form_id)): definition, versions, submissions, drafts. */
export const formActor: RecordsActorDefinition<FormState, FormMessage, unknown> = {
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

export const formActors = [formActor, formIndexActor];
