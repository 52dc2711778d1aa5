import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type PublicUser } from '../../actors/accounts/messages.js';
import { Accounts, type ClientInfo } from '../auth/accounts.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Getting a token (conventions "Getting a token"): register, login, refresh, logout, me. */
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

export function authRoutes(app: FastifyInstance, services: AppServices): void {
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
      summary: 'New tokens for a refresh token; the old refresh token stops working. Reusing a rotated token ends the session.',
      body: RefreshBody,
      response: { 200: TokenBodySchema, ...errorResponses(400, 401, 413, 415, 503) },
    },
  }, async (request) => tokenResponse(await accounts.refresh(request.body.refresh_token)));

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
