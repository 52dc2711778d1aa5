import type { SnapshotActorDefinition } from '../../runtime/index.js';
import {
  IDENTITY_INDEX_KIND,
  IDENTITY_LINKS_KIND,
  initialIdentityIndex,
  initialIdentityLinks,
  stepIdentityIndex,
  stepIdentityLinks,
  type IdentityIndexMessage,
  type IdentityIndexState,
  type IdentityLinksMessage,
  type IdentityLinksState,
} from './state.js';

export { IDENTITY_INDEX_KIND, IDENTITY_LINKS_KIND };

export const identityLinksActor: SnapshotActorDefinition<IdentityLinksState, IdentityLinksMessage, unknown> = {
  kind: IDENTITY_LINKS_KIND,
  storage: 'snapshot',
  initial: initialIdentityLinks,
  step: stepIdentityLinks,
};

export const identityIndexActor: SnapshotActorDefinition<IdentityIndexState, IdentityIndexMessage, unknown> = {
  kind: IDENTITY_INDEX_KIND,
  storage: 'snapshot',
  initial: initialIdentityIndex,
  step: stepIdentityIndex,
};
