import type { ActorDefinition } from '../runtime/index.js';
import { directoryActor, userActor } from './account/actor.js';
import { idempotencyActor } from './idempotency/state.js';
import { lockActor } from './lock/actor.js';
import { signingKeyActor } from './system/signing-key.js';

/** Every actor kind the node runs. Add a kind by adding its definition here. */
export const allActors: ActorDefinition[] = [
  signingKeyActor,
  userActor,
  directoryActor,
  idempotencyActor,
  lockActor,
];
