import { describe, expect, it } from 'vitest';
import { FLOW_TTL_MS, THROTTLE_WAIT_MS, stepLoginFlow, type LoginFlowStateOrNone } from '../../actors/accounts/flows.js';
import { initialThrottleState, stepThrottle, type ThrottleState } from '../../actors/accounts/login-throttle-state.js';
import { loadDirectory, stepDirectory, type DirectoryState } from '../../actors/accounts/directory-state.js';
import type { Credentials, DirectoryMessage, FlowAnswer, LoginFlowMessage, LoginStep, SessionRequest, ThrottleMessage, UserMessage } from '../../actors/accounts/messages.js';
import { initialUserState, stepUser, type UserState } from '../../actors/accounts/user-state.js';
import type { ActorSend, ErrorCode, TurnContext, TurnResult } from '../../runtime/index.js';
import { fixedContext } from '../helpers/step.js';
import { passwordFingerprint } from '../../actors/accounts/password-fingerprint.js';

/** Pure step tests of the login flow (actors/accounts/flows.ts) and the throttle's queue of waiting flows. */
const T0 = Date.UTC(2026, 0, 1);
const FLOW = 'lgf_1';
const session: SessionRequest = { refresh_hash: 'h', ttl_seconds: 3600, ip_address: '10.0.0.1', user_agent: 'ua' };
const credentials: Credentials = { user_id: 'usr_1', password_hash: 'scrypt$hash', banned: false, two_factor_enabled: false, known_address: false };

const flowCtx = (now = T0, request_id: string | null = null, key = FLOW): TurnContext => ({ ...fixedContext(now, 'login-flow', key), request_id });
type FlowResult = TurnResult<LoginFlowStateOrNone, unknown>;
const flow = (state: LoginFlowStateOrNone, message: LoginFlowMessage, request_id: string | null = null, now = T0): FlowResult =>
  stepLoginFlow(state, message, flowCtx(now, request_id));

const throttleCtx = (key: string, now = T0) => fixedContext(now, 'login-throttle', key);
const throttle = (state: ThrottleState, key: string, message: ThrottleMessage, now = T0) => stepThrottle(state, message, throttleCtx(key, now));

/** The flow's call of `step` (actors/flow-call.ts), and the callee's answer or refusal. */
const call = (step: LoginStep, message: unknown) => ({ op: 'flow-call', call: message, reply_to: { kind: 'login-flow', key: FLOW, flow_id: FLOW, step } });
const answer = (step: LoginStep, reply: unknown): LoginFlowMessage => ({ op: 'flow-answer', flow_id: FLOW, step, ok: true, reply });
const refusal = (step: LoginStep, code: ErrorCode, message: string): LoginFlowMessage => ({ op: 'flow-answer', flow_id: FLOW, step, ok: false, error: { code, message } });

const to = (sends: ActorSend[] | undefined, kind: string) => (sends ?? []).filter((s) => s.kind === kind);
const throttleOps = (result: FlowResult) => to(result.sends, 'login-throttle').map((s) => [s.key, (s.message as { op: string }).op]);

/** The subjects of a password login from 10.0.0.1 (an unknown address, no two-factor), in order. */
const subjectsOf = (account: string) => [`pair:${account}|10.0.0.1`, `acct:${account}`, 'ip:10.0.0.1'];

/** A password login up to the edge's KDF: lookup, credentials (which decide the subjects), every place. */
function begunLogin(user_id: string | null = 'usr_1', creds: Credentials | null = credentials) {
  const started = flow(null, { op: 'login', login: ' Alice ', ip_address: '10.0.0.1' }, 'req_1');
  expect(started.defer).toBe(true);
  expect(to(started.sends, 'user-directory')[0].message).toEqual(call('lookup', { op: 'lookup', login: 'alice' }));
  let state = flow(started.state, answer('lookup', { user_id }));
  if (user_id) {
    expect(to(state.sends, 'login-throttle')).toEqual([]);
    expect(to(state.sends, 'user').map((s) => s.message)).toEqual([call('credentials', { op: 'credentials', ip_address: '10.0.0.1' })]);
    state = flow(state.state, creds ? answer('credentials', creds) : refusal('credentials', 'not_found', 'No such user.'));
  }
  const account = user_id && creds ? user_id : 'login:alice';
  // Two-factor accounts are not counted account-wide.
  const subjects = subjectsOf(account).filter((key) => !(creds?.two_factor_enabled && key.startsWith('acct:')));
  for (let i = 0; i < subjects.length; i++) {
    expect(to(state.sends, 'login-throttle')).toEqual([{ kind: 'login-throttle', key: subjects[i], message: { op: 'take', policy: { kind: 'backoff', free: i === 0 ? 5 : 20 }, flow: FLOW } }]);
    state = flow(state.state, { op: 'throttle', subject: subjects[i], outcome: { admitted: true, reserved_at_ms: T0 + i } });
  }
  return { state: state.state, replies: state.replies ?? [] };
}

describe('login flow: password', () => {
  it('answers the hash once both places are held and the credentials are in, then opens the session for a right password', () => {
    const begun = begunLogin();
    expect(begun.replies).toEqual([{ request_id: 'req_1', reply: { ok: true, value: { user_id: 'usr_1', password_hash: 'scrypt$hash' } } }]);
    const checked = flow(begun.state, { op: 'password-checked', verified: true, sso_required_by: null, session }, 'req_2');
    expect(checked.defer).toBe(true);
    // The account's count is cleared, the address gets its place back; the session is asked of the user actor.
    expect(throttleOps(checked)).toEqual([['pair:usr_1|10.0.0.1', 'reset'], ['acct:usr_1', 'release'], ['ip:10.0.0.1', 'release']]);
    // Bound to the password the login checked (a change or reset meanwhile refuses it in the user actor).
    expect(to(checked.sends, 'user')[0].message).toEqual(call('open-session', { op: 'open-session', ...session, password_fingerprint: passwordFingerprint('scrypt$hash') }));
    const opened = flow(checked.state, answer('open-session', { session_id: 'ses_1', user: { id: 'usr_1' } }));
    expect(opened.replies).toEqual([{ request_id: 'req_2', reply: { ok: true, value: { requires_2fa: false, session_id: 'ses_1', user: { id: 'usr_1' } } } }]);
    expect(opened.state).toBeNull();
    expect(throttleOps(opened)).toEqual([]);
  });

  it('a wrong password is counted on both subjects and refused 401 at once (the ask is answered, not deferred)', () => {
    const begun = begunLogin();
    const checked = flow(begun.state, { op: 'password-checked', verified: false, sso_required_by: null, session }, 'req_2');
    expect(checked.defer).toBeUndefined();
    expect(checked.reply).toEqual({ ok: false, refusal: { code: 'invalid_credentials', message: 'Invalid login or password.' } });
    expect(throttleOps(checked)).toEqual([['pair:usr_1|10.0.0.1', 'count'], ['acct:usr_1', 'count'], ['ip:10.0.0.1', 'count']]);
    expect(checked.state).toBeNull();
  });

  it('an unknown login is checked against no hash and counted on its login subject', () => {
    const begun = begunLogin(null);
    expect(begun.replies).toEqual([{ request_id: 'req_1', reply: { ok: true, value: { user_id: null, password_hash: null } } }]);
    const checked = flow(begun.state, { op: 'password-checked', verified: true, sso_required_by: null, session }, 'req_2');
    expect((checked.reply as FlowAnswer<unknown>).ok).toBe(false);
    expect(throttleOps(checked)).toEqual([['pair:login:alice|10.0.0.1', 'count'], ['acct:login:alice', 'count'], ['ip:10.0.0.1', 'count']]);
  });

  it('a banned account is refused 403 and its places handed back; SSO is refused after a right password (count cleared)', () => {
    const banned = flow(begunLogin('usr_1', { ...credentials, banned: true }).state, { op: 'password-checked', verified: true, sso_required_by: null, session }, 'r');
    expect(banned.reply).toMatchObject({ ok: false, refusal: { code: 'forbidden' } });
    expect(throttleOps(banned)).toEqual([['pair:usr_1|10.0.0.1', 'release'], ['acct:usr_1', 'release'], ['ip:10.0.0.1', 'release']]);
    const sso = flow(begunLogin().state, { op: 'password-checked', verified: true, sso_required_by: { name: 'Acme' }, session }, 'r');
    expect(sso.reply).toMatchObject({ ok: false, refusal: { code: 'sso_required' } });
    expect(throttleOps(sso)).toEqual([['pair:usr_1|10.0.0.1', 'reset'], ['acct:usr_1', 'release'], ['ip:10.0.0.1', 'release']]);
  });

  it('an address the account knows is not counted account-wide nor per address: only the pair', () => {
    const started = flow(null, { op: 'login', login: 'alice', ip_address: '10.0.0.1' }, 'req_1');
    const looked = flow(started.state, answer('lookup', { user_id: 'usr_1' }));
    const credited = flow(looked.state, answer('credentials', { ...credentials, known_address: true }));
    expect(to(credited.sends, 'login-throttle').map((s) => s.key)).toEqual(['pair:usr_1|10.0.0.1']);
    const held = flow(credited.state, { op: 'throttle', subject: 'pair:usr_1|10.0.0.1', outcome: { admitted: true, reserved_at_ms: T0 } });
    expect(held.replies).toEqual([{ request_id: 'req_1', reply: { ok: true, value: { user_id: 'usr_1', password_hash: 'scrypt$hash' } } }]);
  });

  it('two-factor users get requires_2fa and no session', () => {
    const begun = begunLogin('usr_1', { ...credentials, two_factor_enabled: true });
    const checked = flow(begun.state, { op: 'password-checked', verified: true, sso_required_by: null, session }, 'r');
    expect(checked.reply).toEqual({ ok: true, value: { requires_2fa: true, user_id: 'usr_1', password_fingerprint: passwordFingerprint('scrypt$hash') } });
    expect(to(checked.sends, 'user')).toEqual([]);
  });

  it('a subject at its count refuses at once with its Retry-After; the places taken are handed back', () => {
    const started = flow(null, { op: 'login', login: 'alice', ip_address: '10.0.0.1' }, 'req_1');
    const looked = flow(started.state, answer('lookup', { user_id: 'usr_1' }));
    const credited = flow(looked.state, answer('credentials', credentials));
    const first = flow(credited.state, { op: 'throttle', subject: 'pair:usr_1|10.0.0.1', outcome: { admitted: true, reserved_at_ms: T0 } });
    const second = flow(first.state, { op: 'throttle', subject: 'acct:usr_1', outcome: { admitted: true, reserved_at_ms: T0 } });
    const refused = flow(second.state, { op: 'throttle', subject: 'ip:10.0.0.1', outcome: { admitted: false, retry_after_seconds: 600 } });
    expect(refused.replies).toEqual([{ request_id: 'req_1', reply: { ok: false, refusal: { code: 'rate_limited', message: expect.any(String), retry_after_seconds: 600 } } }]);
    expect(throttleOps(refused)).toEqual([['pair:usr_1|10.0.0.1', 'release'], ['acct:usr_1', 'release']]);
    // A late answer (credentials) or admission reaching the ended flow: the place goes straight back.
    expect(flow(null, answer('credentials', credentials)).sends ?? []).toEqual([]);
    expect(throttleOps(flow(null, { op: 'throttle', subject: 'ip:10.0.0.1', outcome: { admitted: true, reserved_at_ms: T0 } }))).toEqual([['ip:10.0.0.1', 'release']]);
  });

  it('a flow that waited THROTTLE_WAIT_MS leaves the queue and is refused 429 (Retry-After 1); one the edge abandons hands back', () => {
    const started = flow(null, { op: 'login', login: 'alice', ip_address: null }, 'req_1');
    const looked = flow(started.state, answer('lookup', { user_id: null }));
    expect(looked.alarms).toContainEqual({ name: 'wait', due_ms: T0 + THROTTLE_WAIT_MS });
    const late = flow(looked.state, { op: '$alarm', name: 'wait', due_ms: T0 + THROTTLE_WAIT_MS } as never, null, T0 + THROTTLE_WAIT_MS);
    expect(late.replies).toEqual([{ request_id: 'req_1', reply: { ok: false, refusal: { code: 'rate_limited', message: expect.any(String), retry_after_seconds: 1 } } }]);
    expect(to(late.sends, 'login-throttle')).toEqual([{ kind: 'login-throttle', key: 'acct:login:alice', message: { op: 'give-up', flow: FLOW } }]);

    const begun = begunLogin();
    const abandoned = flow(begun.state, { op: 'abandon' }, 'req_3');
    expect(abandoned.reply).toEqual({ ok: true, value: null });
    expect(throttleOps(abandoned)).toEqual([['pair:usr_1|10.0.0.1', 'release'], ['acct:usr_1', 'release'], ['ip:10.0.0.1', 'release']]);
    // An edge that never comes back: the flow ends by itself.
    const expired = flow(begun.state, { op: '$alarm', name: 'expire', due_ms: T0 + FLOW_TTL_MS } as never, null, T0 + FLOW_TTL_MS);
    expect(expired.state).toBeNull();
    expect(throttleOps(expired)).toEqual([['pair:usr_1|10.0.0.1', 'release'], ['acct:usr_1', 'release'], ['ip:10.0.0.1', 'release']]);
  });
});

describe('login flow: registration and code checks', () => {
  const newUser = { id: 'usr_9', email: 'n@example.com', username: 'newbie', display_name: 'newbie', role: 'user' as const, password_hash: 'x' };

  it('registration: the address place, then claim, create and session; it counts whatever happens to the names', () => {
    const started = flow(null, { op: 'register', ip_address: '10.0.0.1', limit: 3 }, 'req_1');
    expect(to(started.sends, 'login-throttle')[0]).toMatchObject({ key: 'reg:10.0.0.1', message: { op: 'take', policy: { kind: 'window', limit: 3 } } });
    const held = flow(started.state, { op: 'throttle', subject: 'reg:10.0.0.1', outcome: { admitted: true, reserved_at_ms: T0 } });
    expect(held.replies).toEqual([{ request_id: 'req_1', reply: { ok: true, value: null } }]);
    const claiming = flow(held.state, { op: 'create-user', user: newUser, session }, 'req_2');
    expect(to(claiming.sends, 'user-directory')[0].message).toEqual(call('claim', { op: 'claim', user: newUser }));
    const duplicate = flow(claiming.state, refusal('claim', 'email_taken', 'taken'));
    expect(duplicate.replies).toEqual([{ request_id: 'req_2', reply: { ok: false, refusal: { code: 'email_taken', message: 'taken' } } }]);
    expect(throttleOps(duplicate)).toEqual([['reg:10.0.0.1', 'count']]);

    const claimed = flow(claiming.state, answer('claim', { user_id: 'usr_9' }));
    expect(to(claimed.sends, 'user')[0].message).toEqual(call('create', { op: 'create', user: newUser }));
    // An answer to a step the flow is not at (a late or repeated one) changes nothing.
    expect(flow(claimed.state, answer('open-session', { session_id: 'ses_x', user: { id: 'usr_9' } }))).toEqual({ state: claimed.state });
    const created = flow(claimed.state, answer('create', { id: 'usr_9' }));
    expect(throttleOps(created)).toEqual([['reg:10.0.0.1', 'count']]);
    const opened = flow(created.state, answer('open-session', { session_id: 'ses_9', user: { id: 'usr_9' } }));
    expect(opened.replies).toEqual([{ request_id: 'req_2', reply: { ok: true, value: { user: { id: 'usr_9' }, session_id: 'ses_9' } } }]);
    expect(opened.state).toBeNull();
  });

  it('registration without an address (the bootstrap admin) or with the limit 0 is answered at once', () => {
    const started = flow(null, { op: 'register', ip_address: null, limit: 20 }, 'req_1');
    expect(started.reply).toEqual({ ok: true, value: null });
    expect(started.defer).toBeUndefined();
    expect(flow(null, { op: 'register', ip_address: '10.0.0.1', limit: 0 }, 'req_1').reply).toEqual({ ok: true, value: null });
  });

  it('code checks: a wrong code counts, a refusal that judged nothing hands back, a right code clears the second-step count', () => {
    const check = { op: '2fa-disable' as const, presented: { code: '000000', code_hash: 'x' } };
    const held = () => {
      const started = flow(null, { op: 'code-check', user_id: 'usr_1', ip_address: '10.0.0.1', check }, 'req_1');
      expect(to(started.sends, 'login-throttle')[0]).toMatchObject({ key: '2fa:usr_1', message: { op: 'take', policy: { kind: 'window', limit: 10 } } });
      const one = flow(started.state, { op: 'throttle', subject: '2fa:usr_1', outcome: { admitted: true, reserved_at_ms: T0 } });
      const both = flow(one.state, { op: 'throttle', subject: 'ip:10.0.0.1', outcome: { admitted: true, reserved_at_ms: T0 } });
      expect(to(both.sends, 'user')[0].message).toEqual(call('code-check', check));
      return both.state;
    };
    const wrong = flow(held(), refusal('code-check', 'invalid_two_factor_code', 'The code is not valid.'));
    expect(throttleOps(wrong)).toEqual([['2fa:usr_1', 'count'], ['ip:10.0.0.1', 'count']]);
    expect(wrong.replies![0].reply).toMatchObject({ ok: false, refusal: { code: 'invalid_two_factor_code' } });
    const notEnabled = flow(held(), refusal('code-check', 'conflict', 'Two-factor authentication is not enabled.'));
    expect(throttleOps(notEnabled)).toEqual([['2fa:usr_1', 'release'], ['ip:10.0.0.1', 'release']]);
    const right = flow(held(), answer('code-check', null));
    expect(throttleOps(right)).toEqual([['2fa:usr_1', 'reset'], ['ip:10.0.0.1', 'release']]);
    expect(right.replies).toEqual([{ request_id: 'req_1', reply: { ok: true, value: null } }]);
  });
});

describe('login flow: the directory and the user actor answer its calls (actors/flow-call.ts)', () => {
  const newUser = { id: 'usr_9', email: 'n@example.com', username: 'newbie', display_name: 'newbie', role: 'user' as const, password_hash: 'x' };
  const directoryTurn = (state: DirectoryState, message: unknown) => stepDirectory(state, message as DirectoryMessage, fixedContext(T0, 'user-directory', 'global'));
  const userTurn = (state: UserState, message: unknown) => stepUser(state, message as UserMessage, fixedContext(T0, 'user', 'usr_9'));
  const answerIn = (sends: ActorSend[] | undefined) => to(sends, 'login-flow').map((s) => s.message as LoginFlowMessage);

  it('a registration round trip: claim (and a name taken), create, open-session', () => {
    const held = flow(flow(null, { op: 'register', ip_address: '10.0.0.1', limit: 3 }, 'req_1').state, {
      op: 'throttle',
      subject: 'reg:10.0.0.1',
      outcome: { admitted: true, reserved_at_ms: T0 },
    });
    const claiming = flow(held.state, { op: 'create-user', user: newUser, session }, 'req_2');
    let directory = loadDirectory('global', []);
    const claim = directoryTurn(directory, to(claiming.sends, 'user-directory')[0].message);
    directory = claim.state;
    expect(answerIn(claim.sends)).toEqual([answer('claim', { user_id: 'usr_9' })]);
    // The same names again: refused, answered to the flow instead of thrown.
    const taken = directoryTurn(directory, to(claiming.sends, 'user-directory')[0].message);
    expect(answerIn(taken.sends)).toEqual([refusal('claim', 'email_taken', 'A user with this e-mail already exists.')]);

    const claimed = flow(claiming.state, answerIn(claim.sends)[0]);
    const create = userTurn(initialUserState(), to(claimed.sends, 'user')[0].message);
    const created = flow(claimed.state, answerIn(create.sends)[0]);
    const open = userTurn(create.state, to(created.sends, 'user')[0].message);
    const [opened] = answerIn(open.sends);
    expect(opened).toMatchObject({ op: 'flow-answer', step: 'open-session', ok: true, reply: { session_id: expect.any(String), user: { id: 'usr_9' } } });
    const done = flow(created.state, opened);
    expect(done.replies).toEqual([{ request_id: 'req_2', reply: { ok: true, value: { user: expect.objectContaining({ id: 'usr_9' }), session_id: expect.any(String) } } }]);
    expect(done.state).toBeNull();
  });
});

describe('login throttle: flows wait in a queue', () => {
  const KEY = 'ip:10.0.0.1';
  const outcomes = (result: TurnResult<ThrottleState, unknown>) =>
    (result.sends ?? []).map((s) => [s.key, (s.message as { outcome: unknown }).outcome]);

  it('a full subject queues the flow and admits it when a place frees, first come first served', () => {
    let state = initialThrottleState();
    const places: number[] = [];
    for (let i = 0; i < 2; i++) {
      const taken = throttle(state, KEY, { op: 'take', policy: { kind: 'window', limit: 2 }, flow: `f${i}` }, T0 + i);
      expect(outcomes(taken)).toEqual([[`f${i}`, { admitted: true, reserved_at_ms: T0 + i }]]);
      state = taken.state;
      places.push(T0 + i);
    }
    const queued = throttle(state, KEY, { op: 'take', policy: { kind: 'window', limit: 2 }, flow: 'f2' }, T0 + 5);
    expect(queued.sends).toEqual([]);
    state = throttle(queued.state, KEY, { op: 'take', policy: { kind: 'window', limit: 2 }, flow: 'f3' }, T0 + 6).state;
    expect(state.waiting!.map((w) => w.flow)).toEqual(['f2', 'f3']);
    const freed = throttle(state, KEY, { op: 'release', reserved_at_ms: places[0] }, T0 + 10);
    expect(outcomes(freed)).toEqual([['f2', { admitted: true, reserved_at_ms: T0 + 10 }]]);
    expect(freed.state.waiting!.map((w) => w.flow)).toEqual(['f3']);
    // A flow that gave up leaves the queue.
    expect(throttle(freed.state, KEY, { op: 'give-up', flow: 'f3' }).state.waiting).toBeUndefined();
  });

  it('once the count reaches the limit every waiter is refused until the window ends', () => {
    let state = initialThrottleState();
    state = throttle(state, KEY, { op: 'take', policy: { kind: 'window', limit: 1 }, flow: 'f0' }).state;
    state = throttle(state, KEY, { op: 'take', policy: { kind: 'window', limit: 1 }, flow: 'f1' }, T0 + 1).state;
    state = throttle(state, KEY, { op: 'take', policy: { kind: 'window', limit: 1 }, flow: 'f2' }, T0 + 2).state;
    const counted = throttle(state, KEY, { op: 'count', reserved_at_ms: T0 }, T0 + 1000);
    expect(outcomes(counted)).toEqual([
      ['f1', { admitted: false, retry_after_seconds: 15 * 60 - 1 }],
      ['f2', { admitted: false, retry_after_seconds: 15 * 60 - 1 }],
    ]);
    expect(counted.state.waiting).toBeUndefined();
    expect(outcomes(throttle(counted.state, KEY, { op: 'take', policy: { kind: 'window', limit: 1 }, flow: 'f3' }, T0 + 2000))).toEqual([['f3', { admitted: false, retry_after_seconds: 15 * 60 - 2 }]]);
  });

  it('while flows wait, the oldest reservation lapsing frees a place (alarm)', () => {
    let state = throttle(initialThrottleState(), KEY, { op: 'take', policy: { kind: 'window', limit: 1 }, flow: 'f0' }).state;
    const queued = throttle(state, KEY, { op: 'take', policy: { kind: 'window', limit: 1 }, flow: 'f1' }, T0 + 1);
    expect(queued.alarms).toContainEqual({ name: 'lapse', due_ms: T0 + 60_000 });
    state = queued.state;
    const lapsed = throttle(state, KEY, { op: '$alarm', name: 'lapse', due_ms: T0 + 60_000 } as never, T0 + 60_000);
    expect(outcomes(lapsed)).toEqual([['f1', { admitted: true, reserved_at_ms: T0 + 60_000 }]]);
  });
});
