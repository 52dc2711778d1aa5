import { describe, expect, it } from 'vitest';
import { type NewUser, type UserMessage } from '../../actors/accounts/messages.js';
import {
  EMAIL_VERIFICATION_RESEND_MS,
  EMAIL_VERIFICATION_TTL_MS,
  initialUserState,
  stepUser,
  type UserState,
} from '../../actors/accounts/user-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests: e-mail verification on the user actor. */
const T0 = Date.UTC(2026, 0, 1);

describe('user: e-mail verification', () => {
  const alice: NewUser = { id: 'usr_1', email: 'a@example.com', username: 'alice', display_name: 'A', role: 'user', password_hash: 'x' };
  const send = (state: UserState, message: UserMessage, now: number) => stepUser(state, message, fixedContext(now, 'user', 'usr_1'));
  const fresh = () => send(initialUserState(), { op: 'create', user: alice }, T0).state;

  it('confirm with the sent hash verifies once and sends the summary', () => {
    const sent = send(fresh(), { op: 'email-verify-send', token_hash: 'h' }, T0);
    expect(codeOf(() => send(sent.state, { op: 'email-verify-confirm', token_hash: 'other' }, T0))).toBe('invalid_verification_token');
    const confirmed = send(sent.state, { op: 'email-verify-confirm', token_hash: 'h' }, T0 + 1);
    expect(confirmed.state.user!.email_verified).toBe(true);
    expect(confirmed.sends).toEqual([expect.objectContaining({ kind: 'user-directory', message: expect.objectContaining({ user: expect.objectContaining({ email_verified: true }) }) })]);
    expect(codeOf(() => send(confirmed.state, { op: 'email-verify-confirm', token_hash: 'h' }, T0 + 2))).toBe('invalid_verification_token');
    expect(codeOf(() => send(confirmed.state, { op: 'email-verify-send', token_hash: 'h2' }, T0 + 2 + EMAIL_VERIFICATION_RESEND_MS))).toBe('conflict');
  });

  it('resend is limited to one a minute; links expire', () => {
    const sent = send(fresh(), { op: 'email-verify-send', token_hash: 'h' }, T0);
    expect(codeOf(() => send(sent.state, { op: 'email-verify-send', token_hash: 'h2' }, T0 + EMAIL_VERIFICATION_RESEND_MS - 1))).toBe('rate_limited');
    expect(codeOf(() => send(sent.state, { op: 'email-verify-send', token_hash: 'h2' }, T0 + EMAIL_VERIFICATION_RESEND_MS))).toBeUndefined();
    expect(codeOf(() => send(sent.state, { op: 'email-verify-confirm', token_hash: 'h' }, T0 + EMAIL_VERIFICATION_TTL_MS))).toBe('invalid_verification_token');
  });
});
