/**
 * The presence area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { PRESENCE_CONTEXT_KIND, PRESENCE_SUBJECT_KIND, presenceContextKey, presenceSubjectKey } from './actor.js';
export { RADIUS_METERS_MAX } from './geo.js';
export { activities, cognitiveStates, geoPrecisions, overflowPolicies, presenceLimits, subjectKinds } from './state.js';
export type { ContextView, CountReply, HeartbeatInput, HeartbeatReply, LeaveReply, ListReply, NearbyReply, PresenceContextConfig, PresenceMessage, SessionView, StateReply, SubjectPresenceReply, SweepReply } from './state.js';
export type { SubjectIndexState } from './subject-state.js';
