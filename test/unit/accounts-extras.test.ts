import { describe, expect, it } from 'vitest';
import { type NewUser, type UserMessage } from '../../actors/accounts/messages.js';
import { ServiceError } from '../../runtime/index.js';
import {
  IMPERSONATION_SESSION_TTL_MS,
  initialUserState,
  stepUser,
  type UserState,
} from '../../actors/accounts/user-state.js';
import { base32Decode, totp } from '../../actors/accounts/totp.js';
import { codeOf, fixedContext } from '../helpers/step.js';
import { passwordFingerprint } from '../../actors/accounts/password-fingerprint.js';

/** Pure step tests: impersonation on the user (the login throttle: accounts-login-throttle.test.ts). */
const T0 = Date.UTC(2026, 0, 1);

describe('user: impersonation', () => {
  const alice: NewUser = { id: 'usr_1', email: 'a@example.com', username: 'alice', display_name: 'A', role: 'user', password_hash: 'x' };
  const send = (state: UserState, message: UserMessage, now: number) => stepUser(state, message, fixedContext(now, 'user', 'usr_1'));
  const fresh = () => send(initialUserState(), { op: 'create', user: alice }, T0).state;

  const impersonate = (state: UserState, now: number) =>
    send(state, { op: 'admin-impersonate', admin_id: 'usr_admin', challenge_ttl_seconds: 300, refresh_hash: 'r', ttl_seconds: 30 * 86400, ip_address: '::1', user_agent: '' }, now);

  it('admin-impersonate opens a session with impersonated_by and at most an hour', () => {
    const opened = impersonate(fresh(), T0);
    const session = Object.values(opened.state.sessions)[0];
    expect(session.impersonated_by).toBe('usr_admin');
    expect(session.expires_at_ms).toBe(T0 + IMPERSONATION_SESSION_TTL_MS);
    // The per-request check names the admin, so the edge can refuse what an impersonation may not do.
    expect(send(opened.state, { op: 'authenticate', session_id: session.id }, T0 + 1).reply).toMatchObject({ impersonated_by: 'usr_admin' });
    const refreshed = send(opened.state, { op: 'refresh', session_id: session.id, presented_hash: 'r', new_hash: 'r2', ttl_seconds: 30 * 86400 }, T0 + 1000);
    expect(refreshed.state.sessions[session.id].expires_at_ms).toBe(T0 + IMPERSONATION_SESSION_TTL_MS);
  });

  it('admin-impersonate of a user with two-factor opens a challenge instead of a session', () => {
    const state = fresh();
    const withTwoFactor: UserState = { ...state, user: { ...state.user!, two_factor_enabled: true } };
    const challenged = impersonate(withTwoFactor, T0);
    const { challenge_id } = challenged.reply as { requires_2fa: true; challenge_id: string };
    expect(challenged.reply).toMatchObject({ requires_2fa: true, challenge_id: expect.stringMatching(/^chl_/) });
    expect(challenged.state.sessions).toEqual({});
    expect(challenged.state.impersonation_challenges).toEqual([[challenge_id, 'usr_admin', T0 + 300_000]]);
  });

  it('2fa-login: SSO enforced since the password step refuses a login challenge before judging the code; an impersonation challenge is not gated', () => {
    const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
    const code = (at: number) => totp(base32Decode(SECRET)!, at);
    const setup = send(fresh(), { op: '2fa-setup', secret_b32: SECRET, backup_hashes: [] }, T0).state;
    const enabled = send(setup, { op: '2fa-verify-setup', code: code(T0) }, T0).state;
    const at = T0 + 60_000;
    const login = (state: UserState, challenge_id: string, sso_required_by: { name: string | null } | null, password_fingerprint: string | null = passwordFingerprint('x')) =>
      send(state, {
        op: '2fa-login',
        challenge_id,
        presented: { code: code(at), code_hash: 'none' },
        sso_required_by,
        password_fingerprint,
        refresh_hash: 'r',
        ttl_seconds: 3600,
        ip_address: '',
        user_agent: '',
      }, at);

    try {
      login(enabled, 'chl_login', { name: 'Strict Org' });
      expect.unreachable();
    } catch (error) {
      expect((error as ServiceError).code).toBe('sso_required');
      expect((error as ServiceError).message).toContain('Strict Org');
    }
    // Nothing was used up: without enforcement the same challenge and code open a session.
    const opened = login(enabled, 'chl_login', null);
    expect(opened.reply).toMatchObject({ ok: true, session_id: expect.any(String) });

    const challenged = impersonate(enabled, T0);
    const { challenge_id } = challenged.reply as { challenge_id: string };
    const impersonated = login(challenged.state, challenge_id, { name: 'Strict Org' }, null);
    expect(impersonated.reply).toMatchObject({ ok: true });
    const session = impersonated.state.sessions[(impersonated.reply as { session_id: string }).session_id];
    expect(session.impersonated_by).toBe('usr_admin');
  });

  it('a sign-in completes only while the password is the one its password step checked', () => {
    const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
    const code = (at: number) => totp(base32Decode(SECRET)!, at);
    const setup = send(fresh(), { op: '2fa-setup', secret_b32: SECRET, backup_hashes: [] }, T0).state;
    const enabled = send(setup, { op: '2fa-verify-setup', code: code(T0) }, T0).state;
    const at = T0 + 60_000;
    const session = { refresh_hash: 'r', ttl_seconds: 3600, ip_address: '', user_agent: '' };
    const changed = send(enabled, { op: 'password-change', password_hash: 'y', keep_session_id: 'none' }, at).state;
    // A login that checked the old password: neither its session nor its two-factor challenge opens.
    expect(codeOf(() => send(changed, { op: 'open-session', ...session, password_fingerprint: passwordFingerprint('x') }, at))).toBe('invalid_credentials');
    const stale = send(changed, { op: '2fa-login', challenge_id: 'chl_old', presented: { code: code(at), code_hash: 'none' }, password_fingerprint: passwordFingerprint('x'), ...session }, at);
    expect(stale.reply).toEqual({ ok: false });
    // A challenge token without a fingerprint (an impersonation's, no longer listed) is no login challenge.
    const bare = send(changed, { op: '2fa-login', challenge_id: 'chl_bare', presented: { code: code(at), code_hash: 'none' }, password_fingerprint: null, ...session }, at);
    expect(bare.reply).toEqual({ ok: false });
    // The new password's opens.
    expect(send(changed, { op: 'open-session', ...session, password_fingerprint: passwordFingerprint('y') }, at).reply).toMatchObject({ session_id: expect.any(String) });
    expect(send(changed, { op: '2fa-login', challenge_id: 'chl_new', presented: { code: code(at), code_hash: 'none' }, password_fingerprint: passwordFingerprint('y'), ...session }, at).reply).toMatchObject({ ok: true });
  });
});
