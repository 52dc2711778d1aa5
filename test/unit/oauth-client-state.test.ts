import { describe, expect, it } from 'vitest';
import { ServiceError, type TurnContext } from '../../runtime/index.js';
import {
  CODE_TTL_MS,
  initialOAuthClientState,
  loadOAuthClient,
  CLIENT_SESSIONS_MAX,
  stepOAuthClient,
  type OAuthClientMessage,
  type OAuthClientState,
  type RedeemReply,
} from '../../actors/oauth/client-state.js';
import { s256Challenge } from '../../actors/oauth/pkce.js';

let ids = 0;
const ctx = (now: number): TurnContext => ({ now, kind: 'oauth-client', key: 'oc_1', request_id: null, newId: (p = '') => `${p}${++ids}` });
const VERIFIER = 'v'.repeat(50);
const REDIRECT = 'https://app.example/cb';

function run(state: OAuthClientState, message: OAuthClientMessage | { op: '$alarm'; name: string; due_ms: number }, now = 1_000) {
  return stepOAuthClient(state, message, ctx(now));
}

function registeredState(secret_hash: string | null = null): OAuthClientState {
  return run(initialOAuthClientState(), {
    op: 'register',
    client: {
      client_name: 'App',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: secret_hash === null ? 'none' : 'client_secret_basic',
      scope: ['locks:read'],
      secret_hash,
    },
  }).state;
}

function bind(code_hash: string, session_id: string, user_id: string, scope: string[]): OAuthClientMessage {
  return { op: 'bind-session', code_hash, session_id, user_id, scope, refresh_hash: `rh-${session_id}`, session_refresh_hash: `srh-${session_id}` };
}

function withCode(state: OAuthClientState, now = 1_000) {
  return run(state, {
    op: 'issue-code',
    code_hash: 'h1',
    user_id: 'usr_1',
    redirect_uri: REDIRECT,
    code_challenge: s256Challenge(VERIFIER),
    code_challenge_method: 'S256',
    scope: ['locks:read'],
  }, now);
}

describe('oauth-client step', () => {
  it('registers once, hides the secret hash, and refuses a second register', () => {
    const state = registeredState('hash');
    const view = run(state, { op: 'get' }).reply as Record<string, unknown>;
    expect(view.client_id).toBe('oc_1');
    expect(view.client_id_issued_at).toBe(1);
    expect(view).not.toHaveProperty('secret_hash');
    expect(() => run(state, { op: 'register', client: state.client! })).toThrow(ServiceError);
    expect(() => run(initialOAuthClientState(), { op: 'get' })).toThrow(/No such OAuth client/);
  });

  it('authenticates a confidential client only with its secret, a public client only without one', () => {
    const confidential = registeredState('hash');
    expect(run(confidential, { op: 'authenticate', secret_hash: 'hash' }).reply).toMatchObject({ ok: true });
    expect(run(confidential, { op: 'authenticate', secret_hash: 'other' }).reply).toEqual({ ok: false });
    expect(run(confidential, { op: 'authenticate', secret_hash: null }).reply).toEqual({ ok: false });
    const pub = registeredState(null);
    expect(run(pub, { op: 'authenticate', secret_hash: null }).reply).toMatchObject({ ok: true });
    expect(run(pub, { op: 'authenticate', secret_hash: 'x' }).reply).toEqual({ ok: false });
    expect(run(initialOAuthClientState(), { op: 'authenticate', secret_hash: null }).reply).toEqual({ ok: false });
  });

  it('issues a code bound to the redirect_uri with an expiry alarm, and redeems it once', () => {
    const issued = withCode(registeredState());
    expect(issued.alarms).toEqual([{ name: 'codes', due_ms: 1_000 + CODE_TTL_MS }]);
    const redeemed = run(issued.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER }, 2_000);
    expect(redeemed.reply).toEqual({ ok: true, user_id: 'usr_1', scope: ['locks:read'] });
    const again = run(redeemed.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER }, 3_000);
    expect((again.reply as RedeemReply).ok).toBe(false);
    expect(again.reply).toMatchObject({ reason: 'invalid_grant', description: expect.stringContaining('already used') });
  });

  it('a replay after the session was bound names the session to revoke', () => {
    const issued = withCode(registeredState());
    const redeemed = run(issued.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER });
    const bound = run(redeemed.state, bind('h1', 'ses_1', 'usr_1', ['locks:read']));
    const replay = run(bound.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(replay.reply).toMatchObject({ ok: false, revoke: { user_id: 'usr_1', session_id: 'ses_1' } });
  });

  it('rotates a client refresh token, and a rotated-out one is reuse: the binding is dropped', () => {
    const state = run(registeredState(), bind('h0', 'ses_1', 'usr_1', ['locks:read'])).state;
    const rotate = (presented: string, next: string) =>
      run(state, { op: 'rotate-refresh', session_id: 'ses_1', presented_hash: presented, new_hash: next, new_session_refresh_hash: `s-${next}` });
    expect(rotate('wrong', 'r2').reply).toEqual({ ok: false, reused: false });
    const first = rotate('rh-ses_1', 'r2');
    expect(first.reply).toEqual({ ok: true, user_id: 'usr_1', scope: ['locks:read'], session_refresh_hash: 'srh-ses_1' });
    expect(first.writes).toHaveLength(1);
    const second = rotate('r2', 'r3');
    expect(second.reply).toMatchObject({ ok: true, session_refresh_hash: 's-r2' });
    const reuse = rotate('r2', 'r4');
    expect(reuse.reply).toEqual({ ok: false, reused: true, user_id: 'usr_1' });
    expect(reuse.writes).toEqual([{ subkey: 's:ses_1', value: undefined }]);
    expect(rotate('r3', 'r5').reply).toEqual({ ok: false, reused: false });
    expect(run(state, { op: 'rotate-refresh', session_id: 'ses_x', presented_hash: 'r3', new_hash: 'x', new_session_refresh_hash: 'y' }).reply)
      .toEqual({ ok: false, reused: false });
  });

  it('rotates with a narrower scope, and refuses a wider one without changing anything', () => {
    const state = run(registeredState(), bind('h0', 'ses_1', 'usr_1', ['locks:read', 'locks:write'])).state;
    const rotate = (presented: string, next: string, scope?: string[]) =>
      run(state, { op: 'rotate-refresh', session_id: 'ses_1', presented_hash: presented, new_hash: next, new_session_refresh_hash: `s-${next}`, scope });
    const wider = rotate('rh-ses_1', 'r2', ['locks:read', 'presence:write']);
    expect(wider.reply).toEqual({ ok: false, reused: false, invalid_scope: true });
    expect(wider.writes ?? []).toEqual([]);
    expect(state.sessions.get('ses_1')).toMatchObject({ refresh_hash: 'rh-ses_1', previous_refresh_hash: null, session_refresh_hash: 'srh-ses_1' });
    // The same token still rotates (not taken for a reused one), with a narrower scope.
    const narrower = rotate('rh-ses_1', 'r3', ['locks:read']);
    expect(narrower.reply).toEqual({ ok: true, user_id: 'usr_1', scope: ['locks:read', 'locks:write'], session_refresh_hash: 'srh-ses_1' });
    // The grant keeps its original scope (RFC 6749 §6): the next refresh may ask for all of it.
    expect(rotate('r3', 'r4', ['locks:read', 'locks:write']).reply).toMatchObject({ ok: true });
  });

  it('a wider scope on a rotated-out token is still reuse', () => {
    const state = run(registeredState(), bind('h0', 'ses_1', 'usr_1', ['locks:read'])).state;
    run(state, { op: 'rotate-refresh', session_id: 'ses_1', presented_hash: 'rh-ses_1', new_hash: 'r2', new_session_refresh_hash: 's-r2' });
    const reuse = run(state, { op: 'rotate-refresh', session_id: 'ses_1', presented_hash: 'rh-ses_1', new_hash: 'r3', new_session_refresh_hash: 's-r3', scope: ['presence:write'] });
    expect(reuse.reply).toEqual({ ok: false, reused: true, user_id: 'usr_1' });
  });

  it('a wrong verifier or redirect_uri fails and uses the code up', () => {
    for (const attempt of [
      { redirect_uri: REDIRECT, code_verifier: 'w'.repeat(50), why: 'code_verifier' },
      { redirect_uri: 'https://app.example/other', code_verifier: VERIFIER, why: 'redirect_uri' },
    ]) {
      const issued = withCode(registeredState());
      const bad = run(issued.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: attempt.redirect_uri, code_verifier: attempt.code_verifier });
      expect(bad.reply).toMatchObject({ ok: false, description: expect.stringContaining(attempt.why) });
      const good = run(bad.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER });
      expect((good.reply as RedeemReply).ok).toBe(false);
    }
  });

  it('a code expires after 60 s, before and after its alarm', () => {
    const issued = withCode(registeredState());
    const late = run(issued.state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER }, 1_000 + CODE_TTL_MS);
    expect(late.reply).toMatchObject({ ok: false, description: expect.stringContaining('expired') });
    const swept = run(issued.state, { op: '$alarm', name: 'codes', due_ms: 1_000 + CODE_TTL_MS }, 1_000 + CODE_TTL_MS);
    expect(swept.state.codes.size).toBe(0);
    expect(swept.writes).toEqual([{ subkey: 'c:h1', value: undefined }]);
    expect(swept.alarms).toEqual([{ name: 'codes', due_ms: null }]);
  });

  it('refuses a code for an unregistered redirect_uri before changing anything', () => {
    const state = registeredState();
    expect(() => run(state, {
      op: 'issue-code', code_hash: 'h', user_id: 'u', redirect_uri: 'https://evil.example/cb',
      code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256', scope: [],
    })).toThrow(/redirect_uri/);
    expect(state.codes.size).toBe(0);
  });

  it('writes only what changed, and load() rebuilds the same state (sessions oldest first)', () => {
    const store = new Map<string, unknown>();
    const apply = (result: { writes?: { subkey: string; value: unknown }[] }) => {
      for (const write of result.writes ?? []) {
        if (write.value === undefined) store.delete(write.subkey);
        else store.set(write.subkey, structuredClone(write.value));
      }
    };
    let state = initialOAuthClientState();
    const steps: [OAuthClientMessage, number][] = [
      [{ op: 'register', client: { ...registeredState().client!, client_id: undefined } as never }, 1_000],
      [{ op: 'issue-code', code_hash: 'h1', user_id: 'usr_1', redirect_uri: REDIRECT, code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256', scope: [] }, 1_000],
      [{ op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER }, 2_000],
      [bind('h1', 'ses_b', 'usr_1', []), 3_000],
      [bind('none', 'ses_a', 'usr_2', ['locks:read']), 4_000],
    ];
    for (const [message, now] of steps) {
      const result = run(state, message, now);
      expect((result.writes ?? []).length).toBeLessThanOrEqual(2);
      apply(result);
      state = result.state;
    }
    const loaded = loadOAuthClient('oc_1', [...store.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
    expect(loaded.client).toEqual(state.client);
    expect([...loaded.codes]).toEqual([...state.codes]);
    expect([...loaded.sessions.keys()]).toEqual(['ses_b', 'ses_a']);
    expect(run(loaded, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER }).reply)
      .toMatchObject({ ok: false, revoke: { session_id: 'ses_b' } });
  });

  it('keeps at most CLIENT_SESSIONS_MAX session bindings, forgetting the oldest', () => {
    const state = registeredState();
    for (let i = 0; i < CLIENT_SESSIONS_MAX; i++) {
      state.sessions.set(`old_${i}`, { user_id: 'u', scope: [], bound_at_ms: i, refresh_hash: `rh-old_${i}`, previous_refresh_hash: null, session_refresh_hash: 'x' });
    }
    const result = run(state, bind('none', 'new', 'u', []));
    expect(result.state.sessions.size).toBe(CLIENT_SESSIONS_MAX);
    expect(result.writes).toContainEqual({ subkey: 's:old_0', value: undefined });
    const rotate = (session_id: string) => run(result.state, { op: 'rotate-refresh', session_id, presented_hash: `rh-${session_id}`, new_hash: 'n', new_session_refresh_hash: 'm' }).reply;
    expect(rotate('old_0')).toEqual({ ok: false, reused: false });
    expect(rotate('old_1')).toMatchObject({ ok: true });
    expect(rotate('new')).toMatchObject({ ok: true });
  });

  it('delete leaves a tombstone: the client is unknown to every operation, its codes and bindings go', () => {
    const issued = withCode(registeredState('hash'));
    const bound = run(issued.state, bind('h0', 'ses_1', 'usr_1', ['locks:read'])).state;
    run(bound, bind('h0', 'ses_2', 'usr_2', ['locks:read']));
    const deleted = run(bound, { op: 'delete', deleted_by: 'usr_admin' }, 5_000);
    expect(deleted.reply).toEqual({ sessions: [{ user_id: 'usr_1', session_id: 'ses_1' }, { user_id: 'usr_2', session_id: 'ses_2' }] });
    expect(deleted.writes).toEqual(expect.arrayContaining([
      { subkey: 's:ses_1', value: undefined },
      { subkey: 's:ses_2', value: undefined },
      { subkey: 'c:h1', value: undefined },
      { subkey: 'client', value: expect.objectContaining({ deleted_at_ms: 5_000, deleted_by: 'usr_admin', secret_hash: null }) },
    ]));
    expect(deleted.alarms).toEqual([{ name: 'codes', due_ms: null }]);
    const state = deleted.state;
    expect(() => run(state, { op: 'get' })).toThrow(/No such OAuth client/);
    expect(run(state, { op: 'authenticate', secret_hash: 'hash' }).reply).toEqual({ ok: false });
    expect(run(state, { op: 'authenticate', secret_hash: null }).reply).toEqual({ ok: false });
    expect(run(state, { op: 'rotate-refresh', session_id: 'ses_1', presented_hash: 'rh-ses_1', new_hash: 'n', new_session_refresh_hash: 'm' }).reply)
      .toEqual({ ok: false, reused: false });
    expect(() => run(state, { op: 'redeem-code', code_hash: 'h1', redirect_uri: REDIRECT, code_verifier: VERIFIER })).toThrow(/No such OAuth client/);
    expect(() => withCode(state)).toThrow(/No such OAuth client/);
    expect(() => run(state, bind('h0', 'ses_3', 'usr_3', []))).toThrow(/No such OAuth client/);
    expect(() => run(state, { op: 'delete', deleted_by: 'usr_admin' })).toThrow(/No such OAuth client/);
    expect(() => run(state, { op: 'register', client: { ...registeredState().client! } })).toThrow(/already in use/);
    // Loaded back from its records, it is still a tombstone.
    const loaded = loadOAuthClient('oc_1', [['client', state.client]]);
    expect(() => run(loaded, { op: 'get' })).toThrow(/No such OAuth client/);
  });

  it('records the owner given at registration, and never shows it', () => {
    const owned = run(initialOAuthClientState(), {
      op: 'register',
      client: { ...registeredState().client!, owner_user_id: 'usr_owner' },
    });
    expect(owned.state.client!.owner_user_id).toBe('usr_owner');
    expect(owned.reply).not.toHaveProperty('owner_user_id');
    expect(registeredState().client!.owner_user_id).toBeNull();
  });
});
