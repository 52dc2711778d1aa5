import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadOAuthClient, OAUTH_CLIENT_KIND, stepOAuthClient, type OAuthClientMessage, type OAuthClientState } from './client-state.js';

export { OAUTH_CLIENT_KIND };

/** One actor per registered client; key = client_id. */
export const oauthClientActor: RecordsActorDefinition<OAuthClientState, OAuthClientMessage, unknown> = {
  kind: OAUTH_CLIENT_KIND,
  storage: 'records',
  load: loadOAuthClient,
  step: stepOAuthClient,
};
