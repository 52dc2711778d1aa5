import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadOAuthClient, stepOAuthClient, type OAuthClientState } from './client-state.js';
import { OAUTH_CLIENT_KIND, type OAuthClientMessage } from './messages.js';

/** One actor per registered client; key = client_id. The token endpoint's flow is in flows.ts. */
export const oauthClientActor: RecordsActorDefinition<OAuthClientState, OAuthClientMessage, unknown> = {
  kind: OAUTH_CLIENT_KIND,
  storage: 'records',
  load: loadOAuthClient,
  step: stepOAuthClient,
};
