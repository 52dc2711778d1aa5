import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadDirectory, stepDirectory, type DirectoryState } from './directory-state.js';
import { WAITING_ROOM_DIRECTORY_KIND, WAITING_ROOM_KIND, type DirectoryMessage, type RoomMessage } from './messages.js';
import { loadRoom, stepRoom, type RoomState } from './state.js';

/** One actor per room: key JSON [tenant, room_id]; keyed records so a turn costs O(change). */
export const waitingRoomActor: RecordsActorDefinition<RoomState, RoomMessage, unknown> = {
  kind: WAITING_ROOM_KIND,
  storage: 'records',
  load: loadRoom,
  step: stepRoom,
};

/** One directory per tenant: key JSON [tenant]; the room list index and the global bans. */
export const waitingRoomDirectoryActor: RecordsActorDefinition<DirectoryState, DirectoryMessage, unknown> = {
  kind: WAITING_ROOM_DIRECTORY_KIND,
  storage: 'records',
  load: loadDirectory,
  step: stepDirectory,
};
