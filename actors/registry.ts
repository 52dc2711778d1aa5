import type { ActorDefinition } from '../runtime/index.js';
import { directoryActor, userActor } from './account/actor.js';
import { apiKeyActor, userApiKeysActor } from './api-key/actor.js';
import { identityIndexActor, identityLinksActor } from './identity-link/actor.js';
import { scimDirectoryActor } from './scim/actor.js';
import { idempotencyActor } from './idempotency/state.js';
import { livenessActor, livenessIndexActor } from './liveness/actor.js';
import { lockActor } from './lock/actor.js';
import { loginThrottleActor } from './login-throttle/state.js';
import { cliLoginActor } from './cli-login/state.js';
import { presenceContextActor, presenceSubjectActor } from './presence/actor.js';
import { signingKeyActor } from './system/signing-key.js';
import { oauthClientActor } from './oauth/actor.js';
import { organizationActors } from './organization/actor.js';
import { waitingRoomActor, waitingRoomDirectoryActor } from './waiting-room/actor.js';

/** Every actor kind the node runs. Add a kind by adding its definition here. */
export const allActors: ActorDefinition[] = [
  signingKeyActor,
  userActor,
  directoryActor,
  apiKeyActor, userApiKeysActor,
  oauthClientActor,
  identityLinksActor, identityIndexActor,
  scimDirectoryActor,
  idempotencyActor,
  lockActor,
  loginThrottleActor, cliLoginActor,
  livenessActor, livenessIndexActor,
  presenceContextActor, presenceSubjectActor,
  waitingRoomActor, waitingRoomDirectoryActor,
  ...organizationActors,
];
