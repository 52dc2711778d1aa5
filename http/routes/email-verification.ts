import { randomBytes } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { ServiceError } from '../../runtime/index.js';
import { hashSecret } from '../auth/tokens.js';
import { bearerAuthentication, refuseImpersonation } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';
import { publicBase } from '../public-base.js';

/**
 * E-mail verification (spec doc 1 §4.2 `POST /api/v1/auth/email/verify/send`,
 * confirm designed here): a single-use token valid 24 h, stored hashed on the
 * user, delivered as a link through services.mail. Confirming sets
 * email_verified, and the admin list follows through the summary sync.
 */
const SendBody = Type.Object({
  redirect_url: Type.Optional(Type.String({ maxLength: 2048, description: 'http(s) URL the link points to; the token is added as the `token` query parameter.' })),
});
const ConfirmBody = Type.Object({ token: Type.String({ minLength: 1, maxLength: 512 }) });
const ConfirmQuery = Type.Object({ token: Type.String({ minLength: 1, maxLength: 512 }) });

/** `evt.<user id>.<secret>`: the user id routes the confirm to the right actor. */
export function formatVerificationToken(user_id: string, secret: string): string {
  return `evt.${user_id}.${secret}`;
}

export function parseVerificationToken(token: string): { user_id: string; secret: string } | null {
  const parts = token.trim().split('.');
  if (parts.length !== 3 || parts[0] !== 'evt' || parts.some((p) => p.length === 0 || p.length > 128)) return null;
  return { user_id: parts[1], secret: parts[2] };
}

function linkBase(request: FastifyRequest, redirect_url: string | undefined): URL {
  if (redirect_url === undefined) return new URL('/api/v1/auth/email/verify/confirm', publicBase(request));
  let url: URL;
  try {
    url = new URL(redirect_url);
  } catch {
    throw new ServiceError('BAD_REQUEST', 'redirect_url is not a URL.', { details: [{ field: 'redirect_url', message: 'Must be an absolute http or https URL.' }] });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ServiceError('BAD_REQUEST', 'redirect_url must be http or https.', { details: [{ field: 'redirect_url', message: 'Must be an absolute http or https URL.' }] });
  }
  return url;
}

export function emailVerificationRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);

  app.post<{ Body: Static<typeof SendBody> }>('/api/v1/auth/email/verify/send', {
    onRequest: authenticate,
    // The body is optional: no body reads as {}.
    preValidation: async (request) => {
      if (request.body === undefined || request.body === null) request.body = {};
    },
    schema: {
      tags: ['auth'],
      summary: 'Send a verification link (valid 24 h, single-use) to the account e-mail. Already verified: 409; more than one per minute: 429.',
      security: bearerSecurity,
      body: SendBody,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 409) },
    },
  }, async (request) => {
    const principal = refuseImpersonation(request);
    const url = linkBase(request, request.body.redirect_url);
    const secret = randomBytes(32).toString('base64url');
    const token = formatVerificationToken(principal.user_id, secret);
    const sent = await services.actors.ask<{ email: string }>(USER_KIND, principal.user_id, { op: 'email-verify-send', token_hash: hashSecret(secret) });
    url.searchParams.set('token', token);
    const link = url.toString();
    await services.mail.send({
      to: sent.email,
      subject: 'Verify your e-mail address',
      text: `Open this link within 24 hours to verify your e-mail address:\n\n${link}\n\nIf you did not ask for this, ignore this message.`,
      link,
    });
    return { message: 'Verification e-mail sent.' };
  });

  const confirm = async (token: string) => {
    const parsed = parseVerificationToken(token);
    if (!parsed) throw new ServiceError('invalid_verification_token', 'The verification link is not valid, expired or was already used.');
    try {
      // Answered once the directory shows email_verified too (the user actor holds its reply for it).
      await services.actors.ask(USER_KIND, parsed.user_id, { op: 'email-verify-confirm', token_hash: hashSecret(parsed.secret) });
    } catch (error) {
      // An unknown user in the token is just an invalid token.
      if (error instanceof ServiceError && error.code === 'not_found') {
        throw new ServiceError('invalid_verification_token', 'The verification link is not valid, expired or was already used.');
      }
      throw error;
    }
    return { message: 'E-mail address verified.' };
  };

  app.post<{ Body: Static<typeof ConfirmBody> }>('/api/v1/auth/email/verify/confirm', {
    schema: {
      tags: ['auth'],
      summary: 'Confirm an e-mail address with the token from the link (no bearer). Unknown, expired or used token: 400 invalid_verification_token.',
      body: ConfirmBody,
      response: { 200: MessageBody, ...errorResponses(400, 413, 415, 503) },
    },
  }, async (request) => confirm(request.body.token));

  app.get<{ Querystring: Static<typeof ConfirmQuery> }>('/api/v1/auth/email/verify/confirm', {
    // The token is in the query: keep it out of the request log.
    config: { secretQuery: true },
    schema: {
      tags: ['auth'],
      summary: 'The same confirmation for the default link opened in a browser (token in the query).',
      querystring: ConfirmQuery,
      response: { 200: MessageBody, ...errorResponses(400, 503) },
    },
  }, async (request) => confirm(request.query.token));
}
