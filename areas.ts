import type { ActorDefinition } from './runtime/index.js';
import type { AreaRoutes } from './http/area-routes.js';
import { directoryActor, loginFlowActor, loginThrottleActor, userActor } from './actors/accounts/actor.js';
import { apiKeyActor, userApiKeysActor } from './actors/api-keys/actor.js';
import { cliLoginActor } from './actors/cli-login/actor.js';
import { idempotencyActor } from './actors/idempotency/state.js';
import { itemActors } from './actors/items/actor.js';
import { identityIndexActor, identityLinksActor } from './actors/linked-accounts/actor.js';
import { jobActors } from './actors/jobs/actor.js';
import { livenessActor, livenessIndexActor } from './actors/liveness/actor.js';
import { lockActor } from './actors/locks/actor.js';
import { mqActors } from './actors/mq/actor.js';
import { oauthClientActor } from './actors/oauth/actor.js';
import { organizationActors } from './actors/organizations/actor.js';
import { rateLimitRulesActor, rateLimitWindowActor } from './actors/rate-limits/actor.js';
import { presenceContextActor, presenceDirectoryActor, presenceMultiplexActor, presenceSubjectActor } from './actors/presence/actor.js';
import { scimDirectoryActor } from './actors/scim/actor.js';
import { signingKeyActor } from './actors/system/signing-key.js';
import { talentActors } from './actors/talent/actor.js';
import { waitingRoomActor, waitingRoomDirectoryActor } from './actors/waiting-rooms/actor.js';
import { webhookActors } from './actors/webhooks/actor.js';
import { vaultActors } from './actors/vault/actor.js';
import { agentActors } from './actors/agents/actor.js';
import { x402Actors } from './actors/x402/actor.js';
import { lineageActors } from './actors/lineage/actor.js';
import { throttleActors } from './actors/throttle/actor.js';
import { ritualActors } from './actors/rituals/actor.js';
import { ledgerActors } from './actors/ledger/actor.js';
import { auctionActors } from './actors/auctions/actor.js';
import { ecsIndexActor } from './actors/ecs/actor.js';
import { handshakeActors } from './actors/handshake/actor.js';
import { formActors } from './actors/forms/actor.js';
import { accountRoutes } from './http/routes/accounts.js';
import { adminRoutes } from './http/routes/admin.js';
import { apiKeyRoutes } from './http/routes/api-keys.js';
import { cliLoginRoutes } from './http/routes/cli-login.js';
import { emailVerificationRoutes } from './http/routes/email-verification.js';
import { itemRoutes } from './http/routes/items.js';
import { jobRoutes } from './http/routes/jobs.js';
import { linkedAccountRoutes } from './http/routes/linked-accounts.js';
import { livenessRoutes } from './http/routes/liveness.js';
import { lockRoutes } from './http/routes/locks.js';
import { mqRoutes } from './http/routes/mq.js';
import { oauthRoutes } from './http/routes/oauth.js';
import { organizationRoutes } from './http/routes/organizations.js';
import { presenceRoutes } from './http/routes/presence.js';
import { rateLimitRoutes } from './http/routes/rate-limits.js';
import { scimRoutes } from './http/routes/scim.js';
import { talentRoutes } from './http/routes/talent.js';
import { twoFactorRoutes } from './http/routes/two-factor.js';
import { waitingRoomRoutes } from './http/routes/waiting-rooms.js';
import { webhookRoutes } from './http/routes/webhooks.js';
import { vaultRoutes } from './http/routes/vault.js';
import { agentRoutes } from './http/routes/agents.js';
import { x402Routes } from './http/routes/x402.js';
import { lineageRoutes } from './http/routes/lineage.js';
import { throttleRoutes } from './http/routes/throttle.js';
import { ritualRoutes } from './http/routes/rituals.js';
import { ledgerRoutes } from './http/routes/ledger.js';
import { auctionRoutes } from './http/routes/auctions.js';
import { ecsRoutes } from './http/routes/ecs.js';
import { handshakeRoutes } from './http/routes/handshake.js';
import { formRoutes } from './http/routes/forms.js';

/**
 * Every area of the service, in one list: an area registers its actor kinds
 * and its routes together, here and nowhere else.
 *
 * An area called `name` is the folder `actors/<name>/` (messages.ts, state.ts,
 * actor.ts, flows.ts), the plugin `http/routes/<name>.ts`, the page
 * `docs/api/<name>.md`, and tests `test/unit/<name>*.test.ts` and
 * `test/http/<name>*.test.ts` (docs/architecture.md, "The area shape";
 * test/unit/area-shape.test.ts keeps it so). An area that only sends messages
 * to another area's actors (two-factor and the user actor, for instance) has
 * no folder of its own and owns no kinds.
 */
export interface Area {
  name: string;
  /** The actor kinds this area owns. */
  actors: ActorDefinition[];
  routes: AreaRoutes;
}

export const areas: Area[] = [
  { name: 'accounts', actors: [userActor, directoryActor, loginThrottleActor, loginFlowActor], routes: accountRoutes },
  { name: 'two-factor', actors: [], routes: twoFactorRoutes },
  { name: 'linked-accounts', actors: [identityLinksActor, identityIndexActor], routes: linkedAccountRoutes },
  { name: 'scim', actors: [scimDirectoryActor], routes: scimRoutes },
  { name: 'oauth', actors: [oauthClientActor], routes: oauthRoutes },
  { name: 'email-verification', actors: [], routes: emailVerificationRoutes },
  { name: 'cli-login', actors: [cliLoginActor], routes: cliLoginRoutes },
  { name: 'admin', actors: [], routes: adminRoutes },
  { name: 'organizations', actors: organizationActors, routes: organizationRoutes },
  { name: 'api-keys', actors: [apiKeyActor, userApiKeysActor], routes: apiKeyRoutes },
  { name: 'locks', actors: [lockActor], routes: lockRoutes },
  { name: 'liveness', actors: [livenessActor, livenessIndexActor], routes: livenessRoutes },
  { name: 'presence', actors: [presenceContextActor, presenceSubjectActor, presenceMultiplexActor, presenceDirectoryActor], routes: presenceRoutes },
  { name: 'waiting-rooms', actors: [waitingRoomActor, waitingRoomDirectoryActor], routes: waitingRoomRoutes },
  { name: 'webhooks', actors: webhookActors, routes: webhookRoutes },
  { name: 'vault', actors: vaultActors, routes: vaultRoutes },
  { name: 'agents', actors: agentActors, routes: agentRoutes },
  { name: 'x402', actors: x402Actors, routes: x402Routes },
  { name: 'talent', actors: talentActors, routes: talentRoutes },
  { name: 'lineage', actors: lineageActors, routes: lineageRoutes },
  { name: 'throttle', actors: throttleActors, routes: throttleRoutes },
  { name: 'mq', actors: mqActors, routes: mqRoutes },
  { name: 'rituals', actors: ritualActors, routes: ritualRoutes },
  { name: 'items', actors: itemActors, routes: itemRoutes },
  { name: 'rate-limits', actors: [rateLimitRulesActor, rateLimitWindowActor], routes: rateLimitRoutes },
  { name: 'jobs', actors: jobActors, routes: jobRoutes },
  { name: 'ledger', actors: ledgerActors, routes: ledgerRoutes },
  { name: 'auctions', actors: auctionActors, routes: auctionRoutes },
  { name: 'ecs', actors: [ecsIndexActor], routes: ecsRoutes },
  { name: 'handshake', actors: handshakeActors, routes: handshakeRoutes },
  { name: 'forms', actors: formActors, routes: formRoutes },
];

/** Kinds of the node itself rather than of an area: the token signing key and the edge's idempotency records. */
export const nodeActors: ActorDefinition[] = [signingKeyActor, idempotencyActor];

/** Every actor kind the node runs. */
export const allActors: ActorDefinition[] = [...nodeActors, ...areas.flatMap((area) => area.actors)];
