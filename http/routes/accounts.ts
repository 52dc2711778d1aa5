import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type PublicUser } from '../../actors/accounts/messages.js';
import { ServiceError } from '../../runtime/index.js';
import { Accounts, type ClientInfo } from '../auth/accounts.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { publicBase } from '../public-base.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Getting a token (conventions "Getting a token"): register, login, refresh, logout, me; password change and reset. */
export const UserSchema = Type.Object(
  {
    id: Type.String(),
    email: Type.String(),
    username: Type.String(),
    display_name: Type.String(),
    role: Type.String({ description: 'user or admin' }),
    email_verified: Type.Boolean(),
    two_factor_enabled: Type.Boolean(),
    banned: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'User' },
);

const TokenBodySchema = Type.Object({
  user: UserSchema,
  access_token: Type.String(),
  refresh_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ description: 'Access token lifetime in seconds.' }),
});

const RegisterBody = Type.Object({
  email: Type.String({ format: 'email', maxLength: 254 }),
  username: Type.String({ pattern: '^[A-Za-z0-9_.-]{3,32}$', description: '3 to 32 letters, digits, _ . -' }),
  password: Type.String({ minLength: 8, maxLength: 256 }),
  display_name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
});
const LoginBody = Type.Object({
  login: Type.String({ minLength: 1, maxLength: 254, description: 'E-mail or username.' }),
  password: Type.String({ minLength: 1, maxLength: 256 }),
});
const RefreshBody = Type.Object({ refresh_token: Type.String({ minLength: 1, maxLength: 512 }) });
const TwoFactorRequired = Type.Object({ requires_2fa: Type.Literal(true), two_factor_token: Type.String() });
const TwoFactorVerifyBody = Type.Object({
  two_factor_token: Type.String({ minLength: 1, maxLength: 2048 }),
  code: Type.String({ minLength: 1, maxLength: 32, description: 'A 6-digit TOTP code or a backup code.' }),
});

const PasswordChangeBody = Type.Object({
  current_password: Type.String({ minLength: 1, maxLength: 256 }),
  new_password: Type.String({ minLength: 8, maxLength: 256, description: 'The rules of registration: 8 to 256 characters.' }),
});
const ResetRequestBody = Type.Object({
  email: Type.String({ format: 'email', maxLength: 254 }),
  redirect_url: Type.Optional(
    Type.String({
      maxLength: 2048,
      description: 'http(s) URL on the public base URL\'s origin or one of PASSWORD_RESET_REDIRECT_ORIGINS; the link is this URL with the token as its `token` query parameter.',
    }),
  ),
});
const ResetConfirmBody = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 512 }),
  new_password: Type.String({ minLength: 8, maxLength: 256, description: 'The rules of registration: 8 to 256 characters.' }),
});

/**
 * The base of a reset link: `redirect_url` when given, an http(s) URL on an allowed origin (the
 * public base URL's, or PASSWORD_RESET_REDIRECT_ORIGINS), else the confirm endpoint on the public
 * base URL. Never the Host header, and never a caller's arbitrary URL: anyone may ask for a reset
 * of anyone's account, so an arbitrary origin would carry the victim's token to the asker's site.
 */
function resetLinkBase(request: FastifyRequest, redirect_url: string | undefined, allowed: string[]): URL {
  const base = new URL('/api/v1/auth/password/reset/confirm', publicBase(request));
  if (redirect_url === undefined) return base;
  const refuse = (message: string) =>
    new ServiceError('BAD_REQUEST', message, { details: [{ field: 'redirect_url', message: 'Must be an absolute http(s) URL on the public base URL\'s origin or one of PASSWORD_RESET_REDIRECT_ORIGINS.' }] });
  let url: URL;
  try {
    url = new URL(redirect_url);
  } catch {
    throw refuse('redirect_url is not a URL.');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw refuse('redirect_url must be http or https.');
  if (url.origin !== base.origin && !allowed.includes(url.origin)) throw refuse('redirect_url is not on an allowed origin.');
  return url;
}

export function userView(user: PublicUser) {
  return {
    id: user.id,
    email: user.email,
    username: user.username,
    display_name: user.display_name,
    role: user.role,
    email_verified: user.email_verified,
    two_factor_enabled: user.two_factor_enabled,
    banned: user.banned,
    created_at: isoTime(user.created_at_ms)!,
  };
}

function clientInfo(request: FastifyRequest): ClientInfo {
  const agent = request.headers['user-agent'];
  return { ip_address: request.ip, user_agent: typeof agent === 'string' ? agent.slice(0, 512) : '' };
}

export function accountRoutes(app: FastifyInstance, services: AppServices): void {
  const accounts = new Accounts(services);
  const authenticate = bearerAuthentication(services);
  const tokenResponse = (body: Awaited<ReturnType<Accounts['openSession']>>) => ({ ...body, user: userView(body.user) });

  app.post<{ Body: Static<typeof RegisterBody> }>('/api/v1/auth/register', {
    schema: {
      tags: ['auth'],
      summary: 'Create an account and sign in. Duplicate e-mail or username: 409. Throttled per client address: 429.',
      body: RegisterBody,
      response: { 201: TokenBodySchema, ...errorResponses(400, 409, 413, 415, 429, 503) },
    },
  }, async (request, reply) => {
    // Only the documented fields: unknown ones (a `role`, say) are ignored, never used.
    const { email, username, password, display_name } = request.body;
    // One login flow: the address's place, the KDF here, then the names, the user and its session.
    const tokens = await accounts.registerAndSignIn({ email, username, password, display_name }, clientInfo(request));
    return reply.code(201).send(tokenResponse(tokens));
  });

  app.post<{ Body: Static<typeof LoginBody> }>('/api/v1/auth/login', {
    schema: {
      tags: ['auth'],
      summary: 'Sign in with e-mail or username. Unknown user and wrong password give the same 401. With two-factor on: requires_2fa and a two_factor_token instead of tokens.',
      body: LoginBody,
      response: { 200: Type.Union([TokenBodySchema, TwoFactorRequired]), ...errorResponses(400, 401, 403, 413, 415, 429, 503) },
    },
  }, async (request) => {
    // One login flow: the throttle places and the password hash, the KDF here, then the verdict and the session.
    const outcome = await accounts.login(request.body.login, request.body.password, clientInfo(request));
    if (outcome.requires_2fa) return { requires_2fa: true as const, two_factor_token: outcome.two_factor_token };
    const { requires_2fa: _no, ...tokens } = outcome;
    return tokenResponse(tokens);
  });

  app.post<{ Body: Static<typeof TwoFactorVerifyBody> }>('/api/v1/auth/2fa/verify', {
    schema: {
      tags: ['auth'],
      summary: 'Second login step: the two_factor_token from login and a TOTP or backup code. Wrong code: 401; five wrong codes end the challenge.',
      body: TwoFactorVerifyBody,
      response: { 200: TokenBodySchema, ...errorResponses(400, 401, 403, 413, 415, 429, 503) },
    },
  }, async (request) => tokenResponse(await accounts.completeTwoFactorLogin(request.body.two_factor_token, request.body.code, clientInfo(request))));

  app.post<{ Body: Static<typeof RefreshBody> }>('/api/v1/auth/refresh', {
    schema: {
      tags: ['auth'],
      summary: 'New tokens for a refresh token; the old refresh token stops working. Reusing a rotated token ends the session, except by the client that rotated it within 5 s (two concurrent refreshes): 401 only.',
      body: RefreshBody,
      response: { 200: TokenBodySchema, ...errorResponses(400, 401, 413, 415, 503) },
    },
  }, async (request) => tokenResponse(await accounts.refresh(request.body.refresh_token, clientInfo(request))));

  app.post('/api/v1/auth/logout', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'End the session of this access token: it and its refresh token stop working at once.',
      security: bearerSecurity,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    await accounts.endSession(principal.user_id, principal.session_id);
    return { message: 'Logged out.' };
  });

  app.post<{ Body: Static<typeof PasswordChangeBody> }>('/api/v1/auth/password/change', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary:
        'Change the password with the current one. Every other session of the user ends at once; this one stays. Wrong current password: 401 invalid_credentials, counted like a wrong login (429 when locked). Impersonation sessions: 403; API keys and OAuth tokens: 403.',
      security: bearerSecurity,
      body: PasswordChangeBody,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    const principal = refuseImpersonation(request);
    // One login flow: the throttle places and the current hash, the KDF here (check and new hash), then the change.
    await accounts.changePassword(principal.user_id, principal.session_id, request.body.current_password, request.body.new_password, clientInfo(request));
    return { message: 'Password changed. Every other session has been signed out.' };
  });

  app.post<{ Body: Static<typeof ResetRequestBody> }>('/api/v1/auth/password/reset/request', {
    schema: {
      tags: ['auth'],
      summary:
        'Ask for a password reset link (no bearer). Always 202, whether or not the e-mail is an account\'s; the account\'s address gets a single-use link valid 30 minutes (at most one a minute). Throttled per client address: 429.',
      body: ResetRequestBody,
      response: { 202: MessageBody, ...errorResponses(400, 413, 415, 429, 503) },
    },
  }, async (request, reply) => {
    const link = resetLinkBase(request, request.body.redirect_url, services.config.passwordResetRedirectOrigins);
    // One login flow: the address's place, then the 202; the lookup, the token and the mail follow in the background.
    await accounts.requestPasswordReset(request.body.email, link, clientInfo(request), (error) => request.log.warn({ err: error }, 'password reset: no mail sent'));
    return reply.code(202).send({ message: 'If an account uses this e-mail address, a password reset link is on its way.' });
  });

  app.post<{ Body: Static<typeof ResetConfirmBody> }>('/api/v1/auth/password/reset/confirm', {
    schema: {
      tags: ['auth'],
      summary:
        'Set a new password with the token from the reset link (no bearer). Every session of the user ends; the e-mail counts as verified; login locks of the account and this address are lifted. Unknown, expired or used token: 400 invalid_reset_token.',
      body: ResetConfirmBody,
      response: { 200: MessageBody, ...errorResponses(400, 413, 415, 429, 503) },
    },
  }, async (request) => {
    // One login flow: the address's place and the token's check, the KDF here, then the token used and the password set.
    await accounts.confirmPasswordReset(request.body.token, request.body.new_password, clientInfo(request));
    return { message: 'Password changed. Sign in with the new password.' };
  });

  app.get('/api/v1/auth/me', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'The authenticated user.',
      security: bearerSecurity,
      response: { 200: UserSchema, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => userView(await accounts.getUser(requirePrincipal(request).user_id)));
}
