import type { SnapshotActorDefinition } from '../../runtime/index.js';
import { initialIdentityIndex, initialIdentityLinks, stepIdentityIndex, stepIdentityLinks, type IdentityIndexState, type IdentityLinksState } from './state.js';
import { IDENTITY_INDEX_KIND, IDENTITY_LINKS_KIND, type IdentityIndexMessage, type IdentityLinksMessage } from './messages.js';

/** A user's links (key = user id); it coordinates the link flow (flows.ts). */
export const identityLinksActor: SnapshotActorDefinition<IdentityLinksState, IdentityLinksMessage, unknown> = {
  kind: IDENTITY_LINKS_KIND,
  storage: 'snapshot',
  initial: initialIdentityLinks,
  step: stepIdentityLinks,
};

/** Which user holds an external identity (key = identityIndexKey(provider, subject)). */
export const identityIndexActor: SnapshotActorDefinition<IdentityIndexState, IdentityIndexMessage, unknown> = {
  kind: IDENTITY_INDEX_KIND,
  storage: 'snapshot',
  initial: initialIdentityIndex,
  step: stepIdentityIndex,
};
