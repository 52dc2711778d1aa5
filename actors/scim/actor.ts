import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadScimDirectory, SCIM_DIRECTORY_KIND, stepScimDirectory, type ScimDirectoryMessage, type ScimDirectoryState } from './state.js';

export { SCIM_DIRECTORY_KIND };

export const scimDirectoryActor: RecordsActorDefinition<ScimDirectoryState, ScimDirectoryMessage, unknown> = {
  kind: SCIM_DIRECTORY_KIND,
  storage: 'records',
  load: loadScimDirectory,
  step: stepScimDirectory,
};
