import { randomInt } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type PublicUser } from '../../actors/accounts/messages.js';
import { CLI_LOGIN_KIND, CLI_POLL_INTERVAL_S, CLI_SESSION_TTL_MS, type CliMessage, type PollReply } from '../../actors/cli-login/messages.js';
import { randomId } from '../../runtime/index.js';
import { Accounts } from '../auth/accounts.js';
import { hashSecret, newRefreshSecret } from '../auth/tokens.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime } from '../schemas.js';
import type { AppServices } from '../services.js';
import { UserSchema, userView } from './accounts.js';
import { publicBase } from '../public-base.js';

/**
 * CLI login (spec doc 1 §4.2 `POST /api/v1/auth/cli/session/{id}/complete`;
 * create and poll designed here, after the OAuth device flow, RFC 8628):
 * the CLI creates a session and shows the user_code and verification_uri,
 * a signed-in user completes it, the CLI polls with its secret poll_token
 * and receives the tokens once.
 */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const PollBody = Type.Object({ poll_token: Type.String({ minLength: 1, maxLength: 256 }) });

const CliSessionCreated = Type.Object(
  {
    id: Type.String(),
    user_code: Type.String({ description: 'Shown by the CLI so the user can check it matches the one in the browser.' }),
    verification_uri: Type.String({ description: 'Where a signed-in user completes the session (POST, bearer).' }),
    poll_token: Type.String({ description: 'Secret: only the CLI that created the session can collect its tokens.' }),
    expires_in: Type.Integer({ description: 'Seconds until the session expires.' }),
    interval: Type.Integer({ description: 'Minimum seconds between polls.' }),
  },
  { title: 'CliSession' },
);
const PollPending = Type.Object({ status: Type.Literal('pending'), interval: Type.Integer() });
const PollComplete = Type.Object({
  status: Type.Literal('complete'),
  user: UserSchema,
  access_token: Type.String(),
  refresh_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
});

function newUserCode(): string {
  let code = '';
  for (let i = 0; i < 8; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

export function cliLoginRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const accounts = new Accounts(services);
  const ask = <T>(id: string, message: CliMessage) => services.actors.ask<T>(CLI_LOGIN_KIND, id, message);

  app.post('/api/v1/auth/cli/session', {
    schema: {
      tags: ['auth'],
      summary: 'Start a CLI login (no bearer): an id, a user_code, a verification_uri and a secret poll_token, valid 10 minutes.',
      response: { 201: CliSessionCreated, ...errorResponses(400, 413, 415, 503) },
    },
  }, async (request, reply) => {
    const id = randomId('cli_');
    const poll = newRefreshSecret();
    const user_code = newUserCode();
    await ask(id, { op: 'create', id, poll_hash: poll.hash, user_code });
    return reply.code(201).send({
      id,
      user_code,
      verification_uri: `${publicBase(request)}/api/v1/auth/cli/session/${id}/complete`,
      poll_token: poll.secret,
      expires_in: CLI_SESSION_TTL_MS / 1000,
      interval: CLI_POLL_INTERVAL_S,
    });
  });

  app.get<{ Params: Static<typeof IdParams> }>('/api/v1/auth/cli/session/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'What a browser page shows before approving: the user_code and status of a CLI login. Unknown or expired: 404.',
      security: bearerSecurity,
      params: IdParams,
      response: {
        200: Type.Object({ id: Type.String(), user_code: Type.String(), status: Type.Union([Type.Literal('pending'), Type.Literal('completed')]), expires_at: Type.String({ format: 'date-time' }) }),
        ...errorResponses(...bearerErrors, 404),
      },
    },
  }, async (request) => {
    requirePrincipal(request);
    const info = await ask<{ id: string; user_code: string; status: 'pending' | 'completed'; expires_at_ms: number }>(request.params.id, { op: 'info' });
    return { id: info.id, user_code: info.user_code, status: info.status, expires_at: isoTime(info.expires_at_ms)! };
  });

  app.post<{ Params: Static<typeof IdParams> }>('/api/v1/auth/cli/session/:id/complete', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Approve a CLI login as the signed-in user. Unknown or expired: 404; already completed: 409. Empty 204 response.',
      security: bearerSecurity,
      params: IdParams,
      response: { 204: Type.Null({ description: 'Empty.' }), ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request, reply) => {
    // The CLI receives an ordinary session: an impersonation may not approve one.
    const principal = refuseImpersonation(request);
    await ask(request.params.id, { op: 'complete', user_id: principal.user_id, session_id: principal.session_id });
    return reply.code(204).send();
  });

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof PollBody> }>('/api/v1/auth/cli/session/:id/poll', {
    schema: {
      tags: ['auth'],
      summary: 'Poll a CLI login with its poll_token (no bearer): pending, or the tokens exactly once. Wrong token, unknown or expired: 404; tokens already delivered: 409; faster than interval: 429.',
      params: IdParams,
      body: PollBody,
      response: { 200: Type.Union([PollPending, PollComplete]), ...errorResponses(400, 404, 409, 413, 415, 429, 503) },
    },
  }, async (request) => {
    // One ask: a completed login opens the user's session (through the outbox) before it answers.
    const agent = request.headers['user-agent'];
    const refresh = newRefreshSecret();
    const session = { refresh_hash: refresh.hash, ttl_seconds: services.config.refreshTokenTtlSeconds, ip_address: request.ip, user_agent: typeof agent === 'string' ? agent.slice(0, 512) : '' };
    const outcome = await ask<PollReply>(request.params.id, { op: 'poll', poll_hash: hashSecret(request.body.poll_token), session });
    if (outcome.status === 'pending') return { status: 'pending' as const, interval: CLI_POLL_INTERVAL_S };
    const body = await accounts.tokensFor(outcome.user_id, outcome.session_id!, refresh.secret, outcome.user as PublicUser);
    return { status: 'complete' as const, ...body, user: userView(body.user) };
  });
}
