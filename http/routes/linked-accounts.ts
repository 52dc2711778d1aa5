import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { isServiceError, ServiceError, type ActorClient } from '../../runtime/index.js';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { IDENTITY_INDEX_KIND, IDENTITY_LINKS_KIND } from '../../actors/linked-accounts/messages.js';
import { identityIndexKey, type LinkRecord } from '../../actors/linked-accounts/messages.js';
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
  return actors.ask<LinkRecord[]>(IDENTITY_LINKS_KIND, user_id, { op: 'list' });
}

/** Whether `holder` still really holds the identity (a live user with the link). */
async function holdsIdentity(actors: ActorClient, holder: string, provider: string, subject: string): Promise<boolean> {
  try {
    await actors.ask(USER_KIND, holder, { op: 'get' });
  } catch (error) {
    if (isServiceError(error) && error.code === 'not_found') return false;
    throw error;
  }
  const link = await actors.ask<LinkRecord | null>(IDENTITY_LINKS_KIND, holder, { op: 'get', provider });
  return link !== null && link.subject === subject;
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
    const provider = Object.hasOwn(services.config.oauthProviders, name) ? services.config.oauthProviders[name] : undefined;
    if (!provider) {
      throw new ServiceError('BAD_REQUEST', `Unknown provider ${name}.`, {
        details: [{ field: 'body.provider', message: `must be one of: ${Object.keys(services.config.oauthProviders).join(', ') || '(none configured)'}` }],
      });
    }
    const identity = await exchangeCodeForIdentity(provider, { code, redirect_uri, code_verifier });
    const indexKey = identityIndexKey(name, identity.subject);
    let claim = await actors.ask<{ claimed: boolean; held_by: string }>(IDENTITY_INDEX_KIND, indexKey, { op: 'claim', user_id: principal.user_id });
    if (!claim.claimed && !(await holdsIdentity(actors, claim.held_by, name, identity.subject))) {
      // A stale claim (a link that failed half-way, or a deleted user): take it over.
      claim = await actors.ask(IDENTITY_INDEX_KIND, indexKey, { op: 'claim', user_id: principal.user_id, replaces: claim.held_by });
    }
    if (!claim.claimed) throw new ServiceError('account_already_linked', `This ${provider.display_name} account is already linked to another user.`);
    let link: LinkRecord;
    try {
      link = await actors.ask<LinkRecord>(IDENTITY_LINKS_KIND, principal.user_id, {
        op: 'add',
        provider: name,
        subject: identity.subject,
        provider_display_name: provider.display_name,
        provider_email: identity.email,
      });
    } catch (error) {
      await actors.ask(IDENTITY_INDEX_KIND, indexKey, { op: 'release', user_id: principal.user_id });
      throw error;
    }
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
    const link = await actors.ask<LinkRecord>(IDENTITY_LINKS_KIND, principal.user_id, { op: 'remove', provider: request.body.provider });
    // The outbox releases the claim too; asking now lets a link right after this succeed.
    await actors.ask(IDENTITY_INDEX_KIND, identityIndexKey(link.provider, link.subject), { op: 'release', user_id: principal.user_id });
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
