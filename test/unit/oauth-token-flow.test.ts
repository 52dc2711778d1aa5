import { describe, expect, it } from 'vitest';
import { ServiceError, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { initialOAuthClientState, loadOAuthClient, stepOAuthClient, type OAuthClientState } from '../../actors/oauth/client-state.js';
import type { FlowAnswer, FlowCall } from '../../actors/flow-call.js';
import { s256Challenge, type OAuthClientMessage, type TokenRequest } from '../../actors/oauth/messages.js';

/** The token endpoint's flow in the oauth-client actor (actors/oauth/flows.ts), step by step. */
let ids = 0;
const ctx = (now: number, request_id: string | null = 'req-1'): TurnContext => ({ now, kind: 'oauth-client', key: 'oc_1', request_id, newId: (p = '') => `${p}${++ids}` });
const VERIFIER = 'v'.repeat(50);
const REDIRECT = 'https://app.example/cb';

function run(state: OAuthClientState, message: OAuthClientMessage, now = 1_000, request_id: string | null = 'req-1') {
  return stepOAuthClient(state, message, ctx(now, request_id));
}

function client(grant_types: ('authorization_code' | 'refresh_token' | 'client_credentials')[], secret_hash: string | null = 'secret'): OAuthClientState {
  return run(initialOAuthClientState(), {
    op: 'register',
    client: {
      client_name: 'App',
      redirect_uris: [REDIRECT],
      grant_types,
      response_types: grant_types.includes('authorization_code') ? ['code'] : [],
      token_endpoint_auth_method: secret_hash === null ? 'none' : 'client_secret_basic',
      scope: ['locks:read', 'auth:read'],
      secret_hash,
    },
  }).state;
}

function token(fields: Partial<TokenRequest>): TokenRequest {
  return {
    op: 'token',
    auth_method: 'client_secret_basic',
    secret_hash: 'secret',
    new_refresh_hash: 'rh-new',
    new_session_refresh_hash: 'srh-new',
    session: { ttl_seconds: 3600, ip_address: '127.0.0.1', user_agent: 'test' },
    ...fields,
  };
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof ServiceError) return error.code;
    throw error;
  }
  return undefined;
}

/** The flow-call the turn sent to the user actor. */
function userCall(result: TurnResult<OAuthClientState, unknown>): FlowCall<{ op: string; [k: string]: unknown }> & { key: string } {
  expect(result.sends).toHaveLength(1);
  const [send] = result.sends!;
  expect(send.kind).toBe('user');
  return { ...(send.message as FlowCall<{ op: string }>), key: send.key };
}

function answer(call: FlowCall, outcome: { ok: true; reply: unknown } | { ok: false; error: { code: 'not_found' | 'internal_error' | 'forbidden'; message: string } }): FlowAnswer {
  return { op: 'flow-answer', flow_id: call.reply_to.flow_id, step: call.reply_to.step, ...outcome } as FlowAnswer;
}

function withCode(state: OAuthClientState) {
  return run(state, { op: 'issue-code', code_hash: 'code-1', user_id: 'usr_1', redirect_uri: REDIRECT, code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256', scope: ['locks:read'] }).state;
}

describe('oauth token flow', () => {
  it('refuses a bad client, a missing or unknown grant_type, and a grant the client did not register, in that order', () => {
    const state = client(['authorization_code']);
    expect(codeOf(() => run(state, token({ secret_hash: 'wrong', grant_type: 'password' })))).toBe('oauth_invalid_client');
    expect(codeOf(() => run(state, token({ auth_method: 'client_secret_post', grant_type: 'authorization_code' })))).toBe('oauth_invalid_client');
    expect(codeOf(() => run(initialOAuthClientState(), token({ grant_type: 'authorization_code' })))).toBe('oauth_invalid_client');
    expect(codeOf(() => run(state, token({})))).toBe('oauth_invalid_request');
    expect(codeOf(() => run(state, token({ grant_type: 'password' })))).toBe('oauth_unsupported_grant_type');
    expect(codeOf(() => run(state, token({ grant_type: 'refresh_token' })))).toBe('oauth_unauthorized_client');
    expect(codeOf(() => run(state, token({ grant_type: 'authorization_code', redirect_uri: REDIRECT, code_verifier: VERIFIER })))).toBe('oauth_invalid_request');
  });

  it('client_credentials: answered at once, within the registered scope minus user-only scopes; never for a public client', () => {
    const state = client(['client_credentials']);
    expect(run(state, token({ grant_type: 'client_credentials' })).reply).toEqual({ grant: 'client_credentials', client_id: 'oc_1', scope: ['locks:read'], owner_user_id: null });
    expect(codeOf(() => run(state, token({ grant_type: 'client_credentials', scope: ['auth:read'] })))).toBe('oauth_invalid_scope');
    const pub = client(['authorization_code', 'client_credentials'], null);
    expect(codeOf(() => run(pub, token({ auth_method: 'none', secret_hash: null, grant_type: 'client_credentials' })))).toBe('oauth_unauthorized_client');
  });

  it('authorization_code: redeems the code, opens the session through the user actor, binds it and answers the deferred ask', () => {
    const state = withCode(client(['authorization_code', 'refresh_token']));
    const started = run(state, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER }));
    expect(started.defer).toBe(true);
    expect(started.reply).toBeUndefined();
    const call = userCall(started);
    expect(call.key).toBe('usr_1');
    expect(call.call).toMatchObject({ op: 'open-session', refresh_hash: 'srh-new', ttl_seconds: 3600 });
    expect(started.writes!.map((w) => w.subkey)).toEqual(['c:code-1', `f:${call.reply_to.flow_id}`]);

    // The pending grant survives a reload.
    const reloaded = loadOAuthClient('oc_1', [...[['client', state.client]], ...started.writes!.map((w) => [w.subkey, w.value])] as [string, unknown][]);
    expect(reloaded.grants.size).toBe(1);

    const done = run(started.state, answer(call, { ok: true, reply: { session_id: 'ses_1', user: {} } }), 1_100, null);
    expect(done.replies).toEqual([{ request_id: 'req-1', reply: { grant: 'authorization_code', client_id: 'oc_1', user_id: 'usr_1', session_id: 'ses_1', scope: ['locks:read'], refresh: true } }]);
    expect(done.state.grants.size).toBe(0);
    expect(done.state.sessions.get('ses_1')).toMatchObject({ user_id: 'usr_1', refresh_hash: 'rh-new', session_refresh_hash: 'srh-new' });
    // A second (duplicate) answer does nothing.
    expect(run(done.state, answer(call, { ok: true, reply: { session_id: 'ses_1' } }), 1_200, null).replies).toBeUndefined();

    // The session's refresh: rotated here, then in the user actor.
    const refreshing = run(done.state, token({ grant_type: 'refresh_token', refresh_token: { client_id: 'oc_1', session_id: 'ses_1', presented_hash: 'rh-new' }, new_refresh_hash: 'rh-2', new_session_refresh_hash: 'srh-2', scope: [] }));
    const refreshCall = userCall(refreshing);
    expect(refreshCall.call).toMatchObject({ op: 'refresh', session_id: 'ses_1', presented_hash: 'srh-new', new_hash: 'srh-2' });
    const refreshed = run(refreshing.state, answer(refreshCall, { ok: true, reply: { reused: false, session_id: 'ses_1' } }), 1_300, null);
    expect(refreshed.replies).toEqual([{ request_id: 'req-1', reply: { grant: 'refresh_token', client_id: 'oc_1', user_id: 'usr_1', session_id: 'ses_1', scope: [], refresh: true } }]);
  });

  it('a refused session is invalid_grant; a failing user actor passes its error on', () => {
    const state = withCode(client(['authorization_code']));
    const started = run(state, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER }));
    const refused = run(started.state, answer(userCall(started), { ok: false, error: { code: 'forbidden', message: 'This account is banned.' } }), 1_100, null);
    expect(refused.replies).toEqual([{ request_id: 'req-1', error: { code: 'oauth_invalid_grant', message: 'The user can no longer sign in.' } }]);
    expect(refused.state.sessions.size).toBe(0);

    const again = withCode(client(['authorization_code']));
    const second = run(again, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER }));
    const failed = run(second.state, answer(userCall(second), { ok: false, error: { code: 'internal_error', message: 'boom' } }), 1_100, null);
    expect(failed.replies![0].error!.code).toBe('internal_error');
  });

  it('a wrong verifier uses the code up and refuses through a deferred reply of the same turn', () => {
    const state = withCode(client(['authorization_code']));
    const wrong = run(state, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: 'w'.repeat(50) }));
    expect(wrong.defer).toBe(true);
    expect(wrong.writes!.map((w) => w.subkey)).toEqual(['c:code-1']);
    expect(wrong.replies).toEqual([{ request_id: 'req-1', error: { code: 'oauth_invalid_grant', message: 'code_verifier does not match the code_challenge.' } }]);
    expect(codeOf(() => run(wrong.state, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER })))).toBe('oauth_invalid_grant');
  });

  it('a replayed code ends the session it opened before the refusal, naming the user for the edge\'s session cache', () => {
    const state = withCode(client(['authorization_code']));
    const started = run(state, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER }));
    const opened = run(started.state, answer(userCall(started), { ok: true, reply: { session_id: 'ses_1' } }), 1_100, null).state;
    const replay = run(opened, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER }), 1_200, 'req-2');
    const end = userCall(replay);
    expect(end.call).toEqual({ op: 'end-session', session_id: 'ses_1' });
    expect(replay.defer).toBe(true);
    const refused = run(replay.state, answer(end, { ok: true, reply: { ended: true } }), 1_300, null);
    expect(refused.replies).toEqual([{ request_id: 'req-2', error: { code: 'oauth_invalid_grant', message: 'The authorization code was already used.', details: { revoked_user_ids: ['usr_1'] } } }]);
  });

  it('a refresh token: wider scope refused without rotating; a reused one ends the session; a foreign one is invalid_grant', () => {
    const state = withCode(client(['authorization_code', 'refresh_token']));
    const started = run(state, token({ grant_type: 'authorization_code', code_hash: 'code-1', redirect_uri: REDIRECT, code_verifier: VERIFIER }));
    const opened = run(started.state, answer(userCall(started), { ok: true, reply: { session_id: 'ses_1' } }), 1_100, null).state;
    const presented = { client_id: 'oc_1', session_id: 'ses_1', presented_hash: 'rh-new' };
    expect(codeOf(() => run(opened, token({ grant_type: 'refresh_token', refresh_token: presented, scope: ['auth:read'] })))).toBe('oauth_invalid_scope');
    expect(codeOf(() => run(opened, token({ grant_type: 'refresh_token', refresh_token: { ...presented, client_id: 'oc_2' } })))).toBe('oauth_invalid_grant');
    expect(codeOf(() => run(opened, token({ grant_type: 'refresh_token', refresh_token: null })))).toBe('oauth_invalid_grant');
    expect(codeOf(() => run(opened, token({ grant_type: 'refresh_token' })))).toBe('oauth_invalid_request');

    const first = run(opened, token({ grant_type: 'refresh_token', refresh_token: presented, new_refresh_hash: 'rh-2' }));
    const rotated = run(first.state, answer(userCall(first), { ok: true, reply: { reused: false } }), 1_200, null).state;
    const reuse = run(rotated, token({ grant_type: 'refresh_token', refresh_token: presented }), 1_300, 'req-3');
    const end = userCall(reuse);
    expect(end.call).toEqual({ op: 'end-session', session_id: 'ses_1' });
    expect(reuse.state.sessions.has('ses_1')).toBe(false);
    const refused = run(reuse.state, answer(end, { ok: true, reply: { ended: true } }), 1_400, null);
    expect(refused.replies![0]).toMatchObject({ request_id: 'req-3', error: { code: 'oauth_invalid_grant', details: { revoked_user_ids: ['usr_1'] } } });
  });
});
