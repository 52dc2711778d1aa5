/**
 * The waiting-rooms area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { WAITING_ROOM_DIRECTORY_KIND, WAITING_ROOM_KIND, waitingRoomDirectoryKey, waitingRoomKey } from './actor.js';
export { waitingRoomLimits } from './config.js';
export type { RoomConfig } from './config.js';
export { FILTER_FIELDS, FILTER_OPERATORS } from './directory.js';
export type { RoomFilter, RoomListView } from './directory.js';
export type { AdmitView, AnalyticsView, BanView, GroupStatusView, MemberView, MembersView, PositionView, RoomDetailView, RoomMessage, RoomSummary } from './state.js';
