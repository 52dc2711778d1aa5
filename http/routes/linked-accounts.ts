import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ServiceError, type ActorClient, ownEntry } from '../../runtime/index.js';
import { IDENTITY_LINKS_KIND, type IdentityLinksMessage, type LinkRecord } from '../../actors/linked-accounts/messages.js';
import { exchangeCodeForIdentity } from '../auth/oauth-providers.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';

/**
 * Linked external accounts (spec doc 1 §4.2): link an account of a configured
 * OAuth provider (OAUTH_PROVIDERS) by an authorization code, unlink it, list
 * the links. See docs/api/linked-accounts.md.
 */
export const LinkedAccountSchema = Type.Object(
  {
    id: Type.String(),
    linked_at: Type.String({ format: 'date-time' }),
    provider: Type.String(),
    provider_display_name: Type.String({ description: "The provider's display name from its configuration (e.g. \"GitHub\")." }),
    provider_email: Type.String({ description: "The e-mail the provider reported for the account ('' when it reported none)." }),
  },
  { title: 'LinkedAccount' },
);

const LinkBody = Type.Object({
  code: Type.String({ minLength: 1, maxLength: 2048 }),
  provider: Type.String({ minLength: 1, maxLength: 64 }),
  redirect_uri: Type.String({ minLength: 1, maxLength: 2000 }),
  code_verifier: Type.Optional(
    Type.String({ minLength: 43, maxLength: 128, pattern: '^[A-Za-z0-9._~-]+$', description: 'The PKCE verifier of the authorization request, when it had a code_challenge.' }),
  ),
});
const UnlinkBody = Type.Object({ provider: Type.String({ minLength: 1, maxLength: 64 }) });

export function linkedAccountView(link: LinkRecord) {
  return {
    id: link.id,
    linked_at: isoTime(link.linked_at_ms)!,
    provider: link.provider,
    provider_display_name: link.provider_display_name,
    provider_email: link.provider_email,
  };
}

/** The user's linked accounts, oldest first (also used by the admin user detail). */
export async function linkedAccountsOf(actors: ActorClient, user_id: string): Promise<LinkRecord[]> {
  return actors.ask<LinkRecord[]>(IDENTITY_LINKS_KIND, user_id, { op: 'list' } satisfies IdentityLinksMessage, { readOnly: true });
}

export function linkedAccountRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const { actors } = services;

  app.post<{ Body: Static<typeof LinkBody> }>('/api/v1/auth/account/link', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Link an external account: exchanges the authorization code at the provider and records the provider user. One external account links to one user only.',
      security: bearerSecurity,
      body: LinkBody,
      response: { 200: LinkedAccountSchema, ...errorResponses(...bearerErrors, 403, 409) },
    },
  }, async (request) => {
    const principal = refuseImpersonation(request);
    const { provider: name, code, redirect_uri, code_verifier } = request.body;
    const provider = ownEntry(services.config.oauthProviders, name);
    if (!provider) {
      throw new ServiceError('BAD_REQUEST', `Unknown provider ${name}.`, {
        details: [{ field: 'body.provider', message: `must be one of: ${Object.keys(services.config.oauthProviders).join(', ') || '(none configured)'}` }],
      });
    }
    // The edge's I/O: the code exchange at the provider (no actor decision comes before it).
    const identity = await exchangeCodeForIdentity(provider, { code, redirect_uri, code_verifier });
    // The flow (actors/linked-accounts/flows.ts): claim the identity (taking over a stale claim), then add the link.
    const link = await actors.ask<LinkRecord>(IDENTITY_LINKS_KIND, principal.user_id, {
      op: 'link',
      provider: name,
      subject: identity.subject,
      provider_display_name: provider.display_name,
      provider_email: identity.email,
    } satisfies IdentityLinksMessage);
    return linkedAccountView(link);
  });

  app.post<{ Body: Static<typeof UnlinkBody> }>('/api/v1/auth/account/unlink', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: "Unlink the user's account of a provider: the external account can then be linked again (to any user).",
      security: bearerSecurity,
      body: UnlinkBody,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    const principal = refuseImpersonation(request);
    // The outbox releases the claim; a link by another user before it arrives takes the stale claim over.
    const link = await actors.ask<LinkRecord>(IDENTITY_LINKS_KIND, principal.user_id, { op: 'remove', provider: request.body.provider } satisfies IdentityLinksMessage);
    return { message: `${link.provider_display_name} account unlinked.` };
  });

  app.get('/api/v1/auth/accounts', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: "The user's linked external accounts, oldest first.",
      security: bearerSecurity,
      response: { 200: Type.Object({ accounts: Type.Array(LinkedAccountSchema) }), ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return { accounts: (await linkedAccountsOf(actors, principal.user_id)).map(linkedAccountView) };
  });
}
