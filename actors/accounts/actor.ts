import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadDirectory, stepDirectory, type DirectoryMessage, type DirectoryState } from './directory-state.js';
import { initialUserState, stepUser, type UserMessage, type UserState } from './user-state.js';

export const USER_KIND = 'user';
export const DIRECTORY_KIND = 'user-directory';

export const userActor: SnapshotActorDefinition<UserState, UserMessage, unknown> = {
  kind: USER_KIND,
  storage: 'snapshot',
  initial: initialUserState,
  step: stepUser,
};

export const directoryActor: RecordsActorDefinition<DirectoryState, DirectoryMessage, unknown> = {
  kind: DIRECTORY_KIND,
  storage: 'records',
  load: loadDirectory,
  step: stepDirectory,
};
