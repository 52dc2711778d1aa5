import { describe, expect, it } from 'vitest';
import { CLI_POLL_INTERVAL_S, CLI_SESSION_TTL_MS, type CliMessage } from '../../actors/cli-login/messages.js';
import { initialCliState, stepCli, type CliState } from '../../actors/cli-login/state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests: the CLI login session. */
const T0 = Date.UTC(2026, 0, 1);

describe('CLI login session', () => {
  const run = (state: CliState, message: CliMessage, now: number) => stepCli(state, message, fixedContext(now, 'cli-login', 'cli_1'));
  const created = () => run(initialCliState(), { op: 'create', id: 'cli_1', poll_hash: 'ph', user_code: 'ABCD-EFGH' }, T0);

  it('create sets the expiry alarm; a retried create is a no-op, another hash a conflict', () => {
    const result = created();
    expect(result.alarms).toEqual([{ name: 'expire', due_ms: T0 + CLI_SESSION_TTL_MS }]);
    expect(run(result.state, { op: 'create', id: 'cli_1', poll_hash: 'ph', user_code: 'X' }, T0).state).toBe(result.state);
    expect(codeOf(() => run(result.state, { op: 'create', id: 'cli_1', poll_hash: 'other', user_code: 'X' }, T0))).toBe('conflict');
  });

  it('pending, completed, delivered once', () => {
    let state = created().state;
    const pending = run(state, { op: 'poll', poll_hash: 'ph' }, T0);
    expect(pending.reply).toEqual({ status: 'pending' });
    state = pending.state;
    expect(codeOf(() => run(state, { op: 'poll', poll_hash: 'ph' }, T0 + 1000))).toBe('rate_limited');
    expect(codeOf(() => run(state, { op: 'poll', poll_hash: 'wrong' }, T0 + 1000))).toBe('not_found');
    state = run(state, { op: 'complete', user_id: 'usr_1', session_id: 'ses_1' }, T0 + 2000).state;
    expect(codeOf(() => run(state, { op: 'complete', user_id: 'usr_2', session_id: 'ses_1' }, T0 + 2000))).toBe('conflict');
    const later = T0 + CLI_POLL_INTERVAL_S * 1000;
    const delivered = run(state, { op: 'poll', poll_hash: 'ph' }, later);
    expect(delivered.reply).toEqual({ status: 'completed', user_id: 'usr_1' });
    expect(codeOf(() => run(delivered.state, { op: 'poll', poll_hash: 'ph' }, later + CLI_POLL_INTERVAL_S * 1000))).toBe('conflict');
  });

  it('expired sessions are unknown before and after the alarm', () => {
    const state = created().state;
    const end = T0 + CLI_SESSION_TTL_MS;
    expect(codeOf(() => run(state, { op: 'complete', user_id: 'usr_1', session_id: 'ses_1' }, end))).toBe('not_found');
    expect(codeOf(() => run(state, { op: 'poll', poll_hash: 'ph' }, end))).toBe('not_found');
    expect(run(state, { op: 'info' }, end - 1).reply).toEqual({ id: 'cli_1', user_code: 'ABCD-EFGH', status: 'pending', expires_at_ms: end });
    expect(codeOf(() => run(state, { op: 'info' }, end))).toBe('not_found');
    expect(stepCli(state, { op: '$alarm', name: 'expire', due_ms: end }, fixedContext(end)).state).toEqual(initialCliState());
  });

  it('a poll that brings its session request opens the session through the user actor and answers when it is open', () => {
    let state = run(created().state, { op: 'complete', user_id: 'usr_1', session_id: 'ses_1' }, T0).state;
    const session = { refresh_hash: 'rh', ttl_seconds: 3600, ip_address: '::1', user_agent: 'cli' };
    const polled = stepCli(state, { op: 'poll', poll_hash: 'ph', session }, { ...fixedContext(T0 + 1, 'cli-login', 'cli_1'), request_id: 'req_1' });
    expect(polled.defer).toBe(true);
    const reply_to = { kind: 'cli-login', key: 'cli_1', flow_id: 'cli_1', step: 'open-session' };
    expect(polled.sends).toEqual([{ kind: 'user', key: 'usr_1', message: { op: 'flow-call', call: { op: 'open-session', ...session, approving_session_id: 'ses_1' }, reply_to } }]);
    state = polled.state;
    // Delivered once: another poll is refused even while the session is opening.
    expect(codeOf(() => run(state, { op: 'poll', poll_hash: 'ph' }, T0 + CLI_POLL_INTERVAL_S * 1000 + 1))).toBe('conflict');
    const answer = { op: 'flow-answer', flow_id: 'cli_1', step: 'open-session' } as const;
    const opened = run(state, { ...answer, ok: true, reply: { session_id: 'ses_1', user: { id: 'usr_1' } } }, T0 + 2);
    expect(opened.replies).toEqual([{ request_id: 'req_1', reply: { status: 'completed', user_id: 'usr_1', session_id: 'ses_1', user: { id: 'usr_1' } } }]);
    // A banned user: the refusal reaches the poll.
    const refused = run(state, { ...answer, ok: false, error: { code: 'forbidden', message: 'This account is banned.' } }, T0 + 2);
    expect(refused.replies).toEqual([{ request_id: 'req_1', error: { code: 'forbidden', message: 'This account is banned.' } }]);
    // An answer to another step (or another login's) changes nothing.
    expect(run(state, { ...answer, step: 'other', ok: true, reply: null }, T0 + 2).replies).toBeUndefined();
  });
});
