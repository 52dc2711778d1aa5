import { errorCodes, ServiceError, type DeferredReply, type ErrorCode, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { USER_KIND } from '../accounts/messages.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { liveClient, stepOAuthClient, type OAuthClientState } from './client-state.js';
import { GRANT_TYPES, OAUTH_CLIENT_KIND, type GrantType, type RedeemReply, type RotateReply, type TokenGrant, type TokenRequest } from './messages.js';
import { scopeSubset, USER_ONLY_SCOPES } from './scope.js';

/**
 * The token endpoint (RFC 6749 §3.2), decided in the oauth-client actor.
 *
 * One ask (`token`) carries the whole request. In that turn the actor
 * authenticates the client, checks the grant type against the registration,
 * and for a client_credentials grant answers at once with the scope to sign.
 * The two grants that touch a user session are a flow with the user actor:
 * - authorization_code: the code is redeemed (used up, PKCE and redirect_uri
 *   checked), the user actor is asked to `open-session` through the outbox,
 *   and its answer binds the session to the client and answers the ask;
 * - refresh_token: the client's binding is rotated (scope narrowed, reuse
 *   detected), the user actor is asked to `refresh` the session, and its
 *   answer answers the ask.
 * A replayed code or refresh token ends the session it opened
 * (`end-session`) before the ask is refused, so the refusal is seen only
 * once the session is gone. The ask is deferred while the user actor works;
 * the pending grant is a record (`f:<flow_id>`) until the answer arrives.
 * Errors are the registry's `oauth_*` codes (RFC 6749 §5.2 on the wire).
 * Token signing stays at the edge (TokenService): it is not an actor's work.
 */

/** Token requests one client may have waiting for the user actor at once. */
export const PENDING_GRANTS_MAX = 1_000;

export interface PendingGrant {
  flow_id: string;
  /** The deferred ask to answer (null: the request was not asked, nobody waits). */
  request_id: string | null;
  step: 'open-session' | 'refresh-session' | 'end-session';
  user_id: string;
  session_id: string | null;
  scope: string[];
  /** authorization_code: the redeemed code, bound to the session when it opens. */
  code_hash: string | null;
  refresh_hash: string;
  session_refresh_hash: string;
  /** Whether the client gets a refresh token (it has the refresh_token grant). */
  refresh: boolean;
  grant: 'authorization_code' | 'refresh_token';
  /** end-session: the refusal to answer once the session has ended. */
  refusal: FlowError | null;
  started_at_ms: number;
}

export function loadGrant(state: OAuthClientState, value: unknown): void {
  const grant = value as PendingGrant;
  state.grants.set(grant.flow_id, grant);
}

function refusal(code: ErrorCode, message: string): ServiceError {
  return new ServiceError(code, message);
}

/** The answer now (no change was made) or, after writes, through a deferred reply of this same turn. */
function refuseAfter(result: TurnResult<OAuthClientState, unknown>, context: TurnContext, error: FlowError): TurnResult<OAuthClientState, unknown> {
  if (context.request_id === null) return { ...result, reply: { refused: error } };
  return { ...result, reply: undefined, defer: true, replies: [...(result.replies ?? []), { request_id: context.request_id, error }] };
}

/** Starts a step with the user actor: the pending grant is stored, the ask deferred. */
function awaitUser(state: OAuthClientState, context: TurnContext, grant: PendingGrant, call: unknown, writes: RecordWrite[]): TurnResult<OAuthClientState, unknown> {
  state.grants.set(grant.flow_id, grant);
  return {
    state,
    defer: true,
    writes: [...writes, { subkey: `f:${grant.flow_id}`, value: grant }],
    sends: [flowCall(USER_KIND, grant.user_id, call, { kind: OAUTH_CLIENT_KIND, key: context.key, flow_id: grant.flow_id, step: grant.step })],
  };
}

export function stepTokenRequest(state: OAuthClientState, message: TokenRequest, context: TurnContext): TurnResult<OAuthClientState, unknown> {
  // Client authentication (RFC 6749 §2.3): one answer for every failure.
  const authenticated = stepOAuthClient(state, { op: 'authenticate', secret_hash: message.secret_hash }, context).reply as { ok: boolean; client?: { token_endpoint_auth_method: string } };
  const client = liveClient(state);
  if (!authenticated.ok || !client || client.token_endpoint_auth_method !== message.auth_method) {
    throw refusal('oauth_invalid_client', 'Client authentication failed.');
  }
  if (message.grant_type === undefined) throw refusal('oauth_invalid_request', 'grant_type is required.');
  if (!GRANT_TYPES.includes(message.grant_type as GrantType)) throw refusal('oauth_unsupported_grant_type', `grant_type ${message.grant_type} is not supported.`);
  const grant_type = message.grant_type as GrantType;
  if (!client.grant_types.includes(grant_type)) throw refusal('oauth_unauthorized_client', `This client may not use the ${grant_type} grant.`);
  const required = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) throw refusal('oauth_invalid_request', `${name} is required.`);
    return value;
  };

  if (grant_type === 'client_credentials') {
    if (client.token_endpoint_auth_method === 'none') throw refusal('oauth_unauthorized_client', 'Public clients cannot use client_credentials.');
    const allowed = client.scope.filter((item) => !USER_ONLY_SCOPES.includes(item));
    const scope = message.scope ?? allowed;
    if (!scopeSubset(scope, allowed)) {
      throw refusal('oauth_invalid_scope', `The requested scope exceeds the scope registered for this client (user-only scopes: ${USER_ONLY_SCOPES.join(' ')}).`);
    }
    return { state, reply: { grant: 'client_credentials', client_id: client.client_id, scope, owner_user_id: client.owner_user_id ?? null } satisfies TokenGrant };
  }

  if (state.grants.size >= PENDING_GRANTS_MAX) {
    throw new ServiceError('rate_limited', 'Too many token requests in progress for this client; try again shortly.', { retryAfterSeconds: 1 });
  }
  const pending = (step: PendingGrant['step'], user_id: string, rest: Partial<PendingGrant>): PendingGrant => ({
    flow_id: context.newId('tkf_'),
    request_id: context.request_id,
    step,
    user_id,
    session_id: null,
    scope: [],
    code_hash: null,
    refresh_hash: message.new_refresh_hash,
    session_refresh_hash: message.new_session_refresh_hash,
    refresh: client.grant_types.includes('refresh_token'),
    grant: grant_type,
    refusal: null,
    started_at_ms: context.now,
    ...rest,
  });

  if (grant_type === 'authorization_code') {
    const code_hash = required(message.code_hash, 'code');
    const redeemed = stepOAuthClient(state, {
      op: 'redeem-code',
      code_hash,
      redirect_uri: message.redirect_uri ?? null,
      code_verifier: required(message.code_verifier, 'code_verifier'),
    }, context);
    const reply = redeemed.reply as RedeemReply;
    if (!reply.ok) {
      const error: FlowError = { code: 'oauth_invalid_grant', message: reply.description };
      // A replayed code: end the session it opened, then refuse (RFC 6749 §4.1.2).
      if (reply.revoke) {
        const grant = pending('end-session', reply.revoke.user_id, { session_id: reply.revoke.session_id, refusal: error });
        return awaitUser(state, context, grant, { op: 'end-session', session_id: reply.revoke.session_id }, redeemed.writes ?? []);
      }
      if (!redeemed.writes?.length) throw refusal(error.code, error.message);
      return refuseAfter(redeemed, context, error);
    }
    const grant = pending('open-session', reply.user_id, { scope: reply.scope, code_hash });
    return awaitUser(state, context, grant, {
      op: 'open-session',
      refresh_hash: message.new_session_refresh_hash,
      ttl_seconds: message.session.ttl_seconds,
      ip_address: message.session.ip_address,
      user_agent: message.session.user_agent,
    }, redeemed.writes ?? []);
  }

  // refresh_token
  const presented = required(message.refresh_token, 'refresh_token');
  if (presented === null || presented.client_id !== client.client_id) {
    throw refusal('oauth_invalid_grant', 'The refresh token is invalid or was not issued to this client.');
  }
  const rotated = stepOAuthClient(state, {
    op: 'rotate-refresh',
    session_id: presented.session_id,
    presented_hash: presented.presented_hash,
    new_hash: message.new_refresh_hash,
    new_session_refresh_hash: message.new_session_refresh_hash,
    ...(message.scope === undefined ? {} : { scope: message.scope }),
  }, context);
  const reply = rotated.reply as RotateReply;
  if (!reply.ok) {
    if ('invalid_scope' in reply) throw refusal('oauth_invalid_scope', 'The requested scope exceeds the scope originally granted.');
    if (reply.reused && reply.user_id) {
      const error: FlowError = { code: 'oauth_invalid_grant', message: 'The refresh token was already used; the session has been ended.' };
      const grant = pending('end-session', reply.user_id, { session_id: presented.session_id, refusal: error });
      return awaitUser(state, context, grant, { op: 'end-session', session_id: presented.session_id }, rotated.writes ?? []);
    }
    throw refusal('oauth_invalid_grant', 'The refresh token is invalid or was not issued to this client.');
  }
  const grant = pending('refresh-session', reply.user_id, { session_id: presented.session_id, scope: message.scope ?? reply.scope });
  return awaitUser(state, context, grant, {
    op: 'refresh',
    session_id: presented.session_id,
    presented_hash: reply.session_refresh_hash,
    new_hash: message.new_session_refresh_hash,
    ttl_seconds: message.session.ttl_seconds,
  }, rotated.writes ?? []);
}

/** The user actor answered a step of a token flow: finish it and answer the deferred ask. */
export function stepTokenAnswer(state: OAuthClientState, message: FlowAnswer, context: TurnContext): TurnResult<OAuthClientState, unknown> {
  const grant = state.grants.get(message.flow_id);
  // Unknown (already finished) or an answer to another step: nothing to do.
  if (!grant || grant.step !== message.step) return { state };
  state.grants.delete(grant.flow_id);
  const writes: RecordWrite[] = [{ subkey: `f:${grant.flow_id}`, value: undefined }];
  const answer = (outcome: { reply: TokenGrant } | { error: FlowError }): DeferredReply[] =>
    grant.request_id === null ? [] : [{ request_id: grant.request_id, ...outcome }];
  const failed = (description: string): FlowError | null => {
    if (message.ok) return null;
    // A refusal by the user actor ends the grant; its failure (5xx) is passed on as is.
    return errorStatus(message.error.code) < 500 ? { code: 'oauth_invalid_grant', message: description } : message.error;
  };

  switch (grant.step) {
    case 'end-session': {
      // The edge drops the user's cached session checks before it answers (revoked_user_ids).
      const refusal = grant.refusal ?? { code: 'oauth_invalid_grant' as const, message: 'The grant is invalid.' };
      return { state, writes, replies: answer({ error: { ...refusal, details: revoked(grant.user_id) } }) };
    }

    case 'open-session': {
      const error = failed('The user can no longer sign in.');
      if (error) return { state, writes, replies: answer({ error }) };
      const session_id = (message as { reply: { session_id: string } }).reply.session_id;
      if (!liveClient(state)) {
        // Deleted while the session opened: the session goes too.
        return {
          state,
          writes,
          sends: [{ kind: USER_KIND, key: grant.user_id, message: { op: 'end-session', session_id } }],
          replies: answer({ error: { code: 'not_found', message: 'No such OAuth client.', details: revoked(grant.user_id) } }),
        };
      }
      const bound = stepOAuthClient(state, {
        op: 'bind-session',
        code_hash: grant.code_hash ?? '',
        session_id,
        user_id: grant.user_id,
        scope: grant.scope,
        refresh_hash: grant.refresh_hash,
        session_refresh_hash: grant.session_refresh_hash,
      }, context);
      const reply: TokenGrant = { grant: grant.grant, client_id: context.key, user_id: grant.user_id, session_id, scope: grant.scope, refresh: grant.refresh };
      return { state, writes: [...writes, ...(bound.writes ?? [])], replies: answer({ reply }) };
    }

    case 'refresh-session': {
      const reused = message.ok && (message.reply as { reused?: boolean } | null)?.reused === true;
      const error = reused ? { code: 'oauth_invalid_grant' as const, message: 'The session behind this refresh token has ended.' } : failed('The session behind this refresh token has ended.');
      // A reused session token ended the session; a failure may have: the edge drops the cached checks.
      const mayHaveEnded = reused || (!message.ok && errorStatus(message.error.code) >= 500);
      if (error) return { state, writes, replies: answer({ error: mayHaveEnded ? { ...error, details: revoked(grant.user_id) } : error }) };
      const reply: TokenGrant = { grant: grant.grant, client_id: context.key, user_id: grant.user_id, session_id: grant.session_id!, scope: grant.scope, refresh: grant.refresh };
      return { state, writes, replies: answer({ reply }) };
    }
  }
}

/** Names the user whose sessions a flow ended, for the edge's session cache (http/auth/revocation-aware-client.ts). */
function revoked(user_id: string): { revoked_user_ids: string[] } {
  return { revoked_user_ids: [user_id] };
}

function errorStatus(code: ErrorCode): number {
  return errorCodes[code]?.status ?? 500;
}
