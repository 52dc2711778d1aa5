import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadScimDirectory, stepScimDirectory, type ScimDirectoryState } from './state.js';
import { SCIM_DIRECTORY_KIND, type ScimDirectoryMessage } from './messages.js';

/** One SCIM directory per organization (key = org_id); it also coordinates the SCIM flows (flows.ts). */
export const scimDirectoryActor: RecordsActorDefinition<ScimDirectoryState, ScimDirectoryMessage, unknown> = {
  kind: SCIM_DIRECTORY_KIND,
  storage: 'records',
  load: loadScimDirectory,
  step: stepScimDirectory,
};
