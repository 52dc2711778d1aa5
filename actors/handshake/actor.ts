import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadIndex, stepIndex, type IndexState } from './index-state.js';
import { HANDSHAKE_INDEX_KIND, HANDSHAKE_SESSION_KIND, type IndexMessage, type SessionMessage } from './messages.js';
import { initialSession, stepSession, type SessionState } from './session-state.js';

/** One session (key = handshakeSessionKey(tenant, domain, session_id)): negotiation and its settlement flow. */
export const handshakeSessionActor: SnapshotActorDefinition<SessionState, SessionMessage, unknown> = {
  kind: HANDSHAKE_SESSION_KIND,
  storage: 'snapshot',
  initial: initialSession,
  step: stepSession,
};

/** A domain's session summaries (key = handshakeIndexKey(tenant, domain)): lists and the sweep. */
export const handshakeIndexActor: RecordsActorDefinition<IndexState, IndexMessage, unknown> = {
  kind: HANDSHAKE_INDEX_KIND,
  storage: 'records',
  load: loadIndex,
  step: stepIndex,
};

export const handshakeActors = [handshakeSessionActor, handshakeIndexActor];
