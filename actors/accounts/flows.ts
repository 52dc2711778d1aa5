import { ServiceError, type ActorSend, type AlarmMessage, type DeferredReply, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall, flowOutcome, type FlowAnswer as CallAnswer, type FlowError } from '../flow-call.js';
import {
  ACCOUNT_FAILURES_FREE,
  ADDRESS_FAILURES_FREE,
  PAIR_FAILURES_FREE,
  DIRECTORY_KEY,
  DIRECTORY_KIND,
  LOGIN_FLOW_KIND,
  LOGIN_THROTTLE_KIND,
  PASSWORD_RESETS_PER_ADDRESS_MAX,
  ssoRequiredError,
  TWO_FACTOR_FAILURES_MAX,
  USER_KIND,
  type CodeCheck,
  type Credentials,
  type DirectoryMessage,
  type FlowAnswer,
  type FlowRefusal,
  type LoginBegun,
  type LoginDone,
  type LoginFlowMessage,
  type LoginStep,
  type NewUser,
  type PasswordSet,
  type PublicUser,
  type Registered,
  type ResetIssued,
  type ResetMail,
  type SessionRequest,
  type ThrottleMessage,
  type ThrottlePolicy,
  type UserMessage,
} from './messages.js';
import { passwordFingerprint } from './password-fingerprint.js';

/**
 * The login flow (kind `login-flow`, one per attempt, key = a fresh id from
 * the edge): the login-throttle saga as a coordinator whose steps are pure.
 *
 * 1. Reserve: one place on each throttle subject, in a fixed order (the
 *    account or second-step subject, then the client address), through the
 *    outbox (`take`, answered `throttle`). A full subject queues the flow and
 *    answers when a place frees; a flow still waiting after THROTTLE_WAIT_MS
 *    leaves the queue and is refused (429, Retry-After 1). A subject at its
 *    count refuses at once (429 until its window ends); the places already
 *    taken are handed back. The fixed order means no two flows hold what the
 *    other waits for.
 * 2. Check: a password login answers the edge with the hash once the places
 *    are held (the edge runs the KDF, CPU work on its thread pool, and asks
 *    again with the verdict); a code check sends the code to the user actor;
 *    a registration answers the edge, which hashes the new password.
 * 3. Settle: a wrong password or code is counted on every subject, a right
 *    one clears its own subject's count and hands the address its place back,
 *    anything that judged nothing (a ban, an SSO refusal, a busy KDF) hands
 *    every place back; a registration counts on its address whatever happens
 *    to the names. Then the session is opened through the user actor.
 *
 * The directory and the user actor are called with flow-calls
 * (actors/flow-call.ts: flow_id = the flow's key, step = a LoginStep) and
 * answer with flow-answers, a refusal included; the throttle's `throttle`
 * is a notice of its queue (it may come long after `take`), not an answer.
 *
 * Password change, reset request and reset confirmation run the same way
 * (docs/api/accounts.md, Password change and Password reset): a change takes
 * the places of a login from the caller's address, answers the current hash,
 * and after the edge's KDF counts a wrong current password or has the user
 * actor set the new hash (`password-change`: every other session ends). A
 * reset request holds the address's `pwreset:` place and answers at once (the
 * edge answers 202 then, whatever the e-mail), then, on the edge's second
 * ask, counts, looks the e-mail up and has the user actor store the token's
 * hash; a confirmation holds the place while the user actor checks the token,
 * and after the KDF has it use the token and set the hash (every session
 * ends), then clears the account's `acct:` and this address's `pair:`
 * subjects. Their answers name the user (`revoked_user_ids`) so the edge
 * drops its cached session checks everywhere.
 *
 * The asks are answered from the turns that end their step (deferred
 * replies); refusals are answer values (FlowAnswer), so Retry-After reaches
 * the edge. A flow whose edge never comes back ends after FLOW_TTL_MS and
 * hands its places back; its state is deleted when it ends, and a late
 * admission that reaches an ended flow is handed back at once.
 */

/** How long a flow waits in a full subject's queue before it is refused. */
export const THROTTLE_WAIT_MS = 5_000;
/** A flow whose edge does not come back within this ends and hands back its places (they would lapse as well). */
export const FLOW_TTL_MS = 60_000;

const WAIT_ALARM = 'wait';
const EXPIRE_ALARM = 'expire';

interface Subject {
  key: string;
  policy: ThrottlePolicy;
}

interface Reservation {
  key: string;
  reserved_at_ms: number;
}

type Purpose = 'login' | 'register' | 'code-check' | 'change-password' | 'reset-request' | 'reset-confirm';
/**
 * `verifying`: a reset token is being checked; `issuing`: a reset request's
 * e-mail is being looked up and its token stored; `updating`: the user actor
 * is setting the new password.
 */
type Phase = 'lookup' | 'acquiring' | 'verifying' | 'checking' | 'issuing' | 'claiming' | 'creating' | 'opening' | 'updating';

export interface LoginFlowState {
  purpose: Purpose;
  phase: Phase;
  /** The edge's ask waiting for this step (null: none waiting). */
  request_id: string | null;
  /** The subjects to reserve, in order, and the places held (reserved[i] is subjects[i]'s). */
  subjects: Subject[];
  reserved: Reservation[];
  /** Password login: the normalised login and the client address until the subjects are known. */
  login?: string;
  ip_address?: string | null;
  user_id: string | null;
  /** Password login: the user's credentials (undefined: asked, not yet answered; null: no such user). */
  credentials?: Credentials | null;
  /** Password change: the caller's session, which stays. */
  session_id?: string;
  /** Password reset: the hash of the token being issued or presented. */
  token_hash?: string;
  /** Code check: what the user actor judges. */
  check?: CodeCheck;
  /** Registration: the user being created, the session asked for, the created user. */
  new_user?: NewUser;
  session?: SessionRequest | null;
  user?: PublicUser;
}

export type LoginFlowStateOrNone = LoginFlowState | null;
type State = LoginFlowStateOrNone;
type Result = TurnResult<State, unknown>;

/** A flow state is deleted when the flow ends. */
export function initialLoginFlowState(): State {
  return null;
}

const INVALID_LOGIN: FlowRefusal = { code: 'invalid_credentials', message: 'Invalid login or password.' };
const INVALID_CODE: FlowRefusal = { code: 'invalid_credentials', message: 'Invalid two-factor code.' };
const BANNED: FlowRefusal = { code: 'forbidden', message: 'This account is banned.' };
const BUSY: FlowRefusal = { code: 'rate_limited', message: 'Too many attempts in progress; try again shortly.', retry_after_seconds: 1 };
const WRONG_CURRENT_PASSWORD: FlowRefusal = { code: 'invalid_credentials', message: 'The current password is not correct.' };
const INVALID_RESET: FlowRefusal = { code: 'invalid_reset_token', message: 'The password reset link is not valid, expired or was already used.' };
const SESSION_GONE: FlowRefusal = { code: 'unauthorized', message: 'The access token is no longer valid.' };

/** Reset requests and confirmations with a bad token, per client address (a window, like registrations). */
function resetSubjects(ip_address: string | null): Subject[] {
  return ip_address ? [{ key: `pwreset:${ip_address}`, policy: { kind: 'window', limit: PASSWORD_RESETS_PER_ADDRESS_MAX } }] : [];
}

function addressSubject(ip_address: string | null | undefined, policy: ThrottlePolicy): Subject[] {
  return ip_address ? [{ key: `ip:${ip_address}`, policy }] : [];
}

const backoff = (free: number): ThrottlePolicy => ({ kind: 'backoff', free });

/**
 * The subjects a password guess is counted on, in their fixed order
 * (docs/api/accounts.md, Login throttling): the account from this address;
 * the account from anywhere, unless this address is one the account signed in
 * from or the account has two-factor on (a guessed password alone opens
 * nothing then); this address against any account, unless the account knows
 * it. So an attacker's failures lock the attacker's own address out of the
 * account, not the owner at home.
 */
function passwordSubjects(account: string, ip_address: string | null | undefined, credentials: Credentials | null): Subject[] {
  const known = credentials?.known_address === true;
  const subjects: Subject[] = [];
  if (ip_address) subjects.push({ key: `pair:${account}|${ip_address}`, policy: backoff(PAIR_FAILURES_FREE) });
  if (!known && !credentials?.two_factor_enabled) subjects.push({ key: `acct:${account}`, policy: backoff(ACCOUNT_FAILURES_FREE) });
  if (!known) subjects.push(...addressSubject(ip_address, backoff(ADDRESS_FAILURES_FREE)));
  // No address and nothing else: the account subject is the floor.
  if (subjects.length === 0) subjects.push({ key: `acct:${account}`, policy: backoff(ACCOUNT_FAILURES_FREE) });
  return subjects;
}

function throttle(key: string, message: ThrottleMessage): ActorSend {
  return { kind: LOGIN_THROTTLE_KIND, key, message };
}

/** A step of the user actor; its flow-answer comes back here (flow_id: this flow's key). */
function toUser(user_id: string, step: LoginStep, message: UserMessage, context: TurnContext): ActorSend {
  return flowCall(USER_KIND, user_id, message, { kind: LOGIN_FLOW_KIND, key: context.key, flow_id: context.key, step });
}

function toDirectory(step: LoginStep, message: DirectoryMessage, context: TurnContext): ActorSend {
  return flowCall(DIRECTORY_KIND, DIRECTORY_KEY, message, { kind: LOGIN_FLOW_KIND, key: context.key, flow_id: context.key, step });
}

/** A refusal of the user actor or the directory, as the flow's own. */
function refusalOf(error: FlowError): FlowRefusal {
  return { code: error.code, message: error.message };
}

/** How the places held end: counted (a wrong guess, a registration), cleared (a right guess) or handed back. */
type Settlement = 'count' | 'succeed' | 'release';

function settle(reserved: Reservation[], how: Settlement): ActorSend[] {
  return reserved.map((r, i) => {
    const op = how === 'count' ? 'count' : how === 'succeed' && i === 0 ? 'reset' : 'release';
    return throttle(r.key, { op, reserved_at_ms: r.reserved_at_ms });
  });
}

function answered<T>(request_id: string | null, answer: FlowAnswer<T>): DeferredReply[] {
  return request_id === null ? [] : [{ request_id, reply: answer }];
}

/** The flow ends: its places settled, the waiting ask answered, its alarms cancelled and its state deleted. */
function end<T>(state: LoginFlowState, how: Settlement, answer: FlowAnswer<T>, extra: ActorSend[] = []): Result {
  return {
    state: null,
    sends: [...settle(state.reserved, how), ...extra],
    replies: answered(state.request_id, answer),
    alarms: [
      { name: WAIT_ALARM, due_ms: null },
      { name: EXPIRE_ALARM, due_ms: null },
    ],
  };
}

const refused = (refusal: FlowRefusal): FlowAnswer<never> => ({ ok: false, refusal });

/** Starts a flow: it asks for its first place (if any), holds the ask, and expires if the edge never comes back. */
function begin(context: TurnContext, flow: LoginFlowState, sends: ActorSend[]): Result {
  const alarms = [{ name: EXPIRE_ALARM, due_ms: context.now + FLOW_TTL_MS }];
  if (flow.phase === 'acquiring') return acquireNext(context, flow, sends, alarms);
  return { state: flow, sends, alarms };
}

/** Asks for the next subject's place, or goes on once every place is held. */
function acquireNext(context: TurnContext, flow: LoginFlowState, sends: ActorSend[] = [], alarms: { name: string; due_ms: number | null }[] = []): Result {
  const next = flow.subjects[flow.reserved.length];
  if (next) {
    const take = throttle(next.key, { op: 'take', policy: next.policy, flow: context.key });
    const waiting = flow.reserved.length === 0 ? [{ name: WAIT_ALARM, due_ms: context.now + THROTTLE_WAIT_MS }] : [];
    return { state: { ...flow, phase: 'acquiring' }, sends: [...sends, take], alarms: [...alarms, ...waiting] };
  }
  const held = acquired(context, { ...flow, phase: 'acquiring' });
  return { ...held, sends: [...sends, ...(held.sends ?? [])], alarms: [...alarms, ...(held.alarms ?? []), { name: WAIT_ALARM, due_ms: null }] };
}

/** Every place is held: on to the check. */
function acquired(context: TurnContext, flow: LoginFlowState): Result {
  switch (flow.purpose) {
    case 'login':
    case 'change-password': {
      // The password is checked at the edge once the credentials are here too.
      if (flow.credentials === undefined) return { state: flow };
      const begun: LoginBegun = { user_id: flow.user_id, password_hash: flow.credentials?.password_hash ?? null };
      return { state: { ...flow, phase: 'checking', request_id: null }, replies: answered(flow.request_id, { ok: true, value: begun }) };
    }
    case 'register':
    case 'reset-request':
      return { state: { ...flow, phase: 'checking', request_id: null }, replies: answered(flow.request_id, { ok: true, value: null }) };
    case 'reset-confirm':
      // The token is checked before the edge spends a KDF run on the new password.
      return { state: { ...flow, phase: 'verifying' }, sends: [toUser(flow.user_id!, 'password-reset-check', { op: 'password-reset-check', token_hash: flow.token_hash! }, context)] };
    case 'code-check':
      return { state: { ...flow, phase: 'checking' }, sends: [toUser(flow.user_id!, 'code-check', flow.check!, context)] };
  }
}

/**
 * One turn. An ask the turn answers (its step ended at once) gets `reply`; an
 * ask the flow now holds (state.request_id) is deferred, answered by the turn
 * that ends its step.
 */
export function stepLoginFlow(state: State, message: LoginFlowMessage | AlarmMessage, context: TurnContext): Result {
  const result = stepFlow(state, message, context);
  const asked = context.request_id;
  if (asked === null || result.reply !== undefined) return result;
  const own = result.replies?.find((r) => r.request_id === asked);
  if (own) return { ...result, replies: result.replies!.filter((r) => r !== own), reply: own.reply };
  if (result.state?.request_id === asked) return { ...result, defer: true };
  return result;
}

function stepFlow(state: State, message: LoginFlowMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'login': {
      if (state) throw new ServiceError('conflict', 'This login flow has already started.');
      const login = message.login.trim().toLowerCase();
      const flow: LoginFlowState = {
        purpose: 'login',
        phase: 'lookup',
        request_id: context.request_id,
        subjects: [],
        reserved: [],
        login,
        ip_address: message.ip_address,
        user_id: null,
      };
      return begin(context, flow, [toDirectory('lookup', { op: 'lookup', login }, context)]);
    }

    case 'register': {
      if (state) throw new ServiceError('conflict', 'This login flow has already started.');
      const limit = message.limit > 0 ? message.limit : 0;
      const subjects: Subject[] = message.ip_address && limit > 0 ? [{ key: `reg:${message.ip_address}`, policy: { kind: 'window', limit } }] : [];
      const flow: LoginFlowState = { purpose: 'register', phase: 'acquiring', request_id: context.request_id, subjects, reserved: [], user_id: null };
      return begin(context, flow, []);
    }

    case 'code-check': {
      if (state) throw new ServiceError('conflict', 'This login flow has already started.');
      const subjects = [{ key: `2fa:${message.user_id}`, policy: { kind: 'window', limit: TWO_FACTOR_FAILURES_MAX } as ThrottlePolicy }, ...addressSubject(message.ip_address, backoff(ADDRESS_FAILURES_FREE))];
      const flow: LoginFlowState = {
        purpose: 'code-check',
        phase: 'acquiring',
        request_id: context.request_id,
        subjects,
        reserved: [],
        user_id: message.user_id,
        check: message.check,
      };
      return begin(context, flow, []);
    }

    case 'change-password': {
      if (state) throw new ServiceError('conflict', 'This login flow has already started.');
      // The account's credentials decide the subjects, as for a login; the caller's session stays.
      const flow: LoginFlowState = {
        purpose: 'change-password',
        phase: 'lookup',
        request_id: context.request_id,
        subjects: [],
        reserved: [],
        ip_address: message.ip_address,
        user_id: message.user_id,
        session_id: message.session_id,
      };
      return begin(context, flow, [toUser(message.user_id, 'credentials', { op: 'credentials', ip_address: message.ip_address }, context)]);
    }

    case 'current-password-checked': {
      if (!state || state.purpose !== 'change-password' || state.phase !== 'checking') throw new ServiceError('flow_interrupted', 'The password change ended; try again.');
      const flow: LoginFlowState = { ...state, request_id: context.request_id };
      const credentials = flow.credentials;
      // A wrong current password is a wrong guess, counted like a login's.
      if (!message.verified || !credentials) return end(flow, 'count', refused(WRONG_CURRENT_PASSWORD));
      if (credentials.banned) return end(flow, 'release', refused(BANNED));
      if (message.new_password_hash === null) return end(flow, 'release', refused(BUSY));
      const change = toUser(credentials.user_id, 'password-change', { op: 'password-change', password_hash: message.new_password_hash, keep_session_id: flow.session_id! }, context);
      return { state: { ...flow, phase: 'updating', reserved: [] }, sends: [...settle(flow.reserved, 'succeed'), change] };
    }

    case 'reset-request': {
      if (state) throw new ServiceError('conflict', 'This login flow has already started.');
      const flow: LoginFlowState = { purpose: 'reset-request', phase: 'acquiring', request_id: context.request_id, subjects: resetSubjects(message.ip_address), reserved: [], user_id: null };
      return begin(context, flow, []);
    }

    case 'reset-issue': {
      if (!state || state.purpose !== 'reset-request' || state.phase !== 'checking') throw new ServiceError('flow_interrupted', 'The password reset request ended; try again.');
      // Every request counts on its address, whether or not the e-mail is an account's.
      const flow: LoginFlowState = { ...state, phase: 'issuing', request_id: context.request_id, reserved: [], token_hash: message.token_hash };
      const lookup = toDirectory('reset-lookup', { op: 'lookup', login: message.email.trim().toLowerCase() }, context);
      return { state: flow, sends: [...settle(state.reserved, 'count'), lookup] };
    }

    case 'reset-confirm': {
      if (state) throw new ServiceError('conflict', 'This login flow has already started.');
      const flow: LoginFlowState = {
        purpose: 'reset-confirm',
        phase: 'acquiring',
        request_id: context.request_id,
        subjects: resetSubjects(message.ip_address),
        reserved: [],
        ip_address: message.ip_address,
        user_id: message.user_id,
        token_hash: message.token_hash,
      };
      return begin(context, flow, []);
    }

    case 'reset-complete': {
      if (!state || state.purpose !== 'reset-confirm' || state.phase !== 'checking') throw new ServiceError('flow_interrupted', 'The password reset ended; try again.');
      const complete = toUser(state.user_id!, 'password-reset-complete', { op: 'password-reset-complete', token_hash: state.token_hash!, password_hash: message.password_hash }, context);
      return { state: { ...state, phase: 'updating', request_id: context.request_id }, sends: [complete] };
    }

    case 'throttle': {
      const waitedFor = state?.phase === 'acquiring' ? state.subjects[state.reserved.length] : undefined;
      if (!state || waitedFor?.key !== message.subject) {
        // Not waited for (the flow ended, or gave up): a place given now is handed back at once.
        const back = message.outcome.admitted ? [throttle(message.subject, { op: 'release', reserved_at_ms: message.outcome.reserved_at_ms })] : [];
        return { state, sends: back };
      }
      if (!message.outcome.admitted) {
        return end(state, 'release', refused({ code: 'rate_limited', message: 'Too many attempts; try again later.', retry_after_seconds: message.outcome.retry_after_seconds }));
      }
      const reserved = [...state.reserved, { key: message.subject, reserved_at_ms: message.outcome.reserved_at_ms }];
      return acquireNext(context, { ...state, reserved });
    }

    case 'flow-answer':
      return callAnswered(state, message, context);

    case 'password-checked': {
      if (!state || state.purpose !== 'login' || state.phase !== 'checking') throw new ServiceError('flow_interrupted', 'The login attempt ended; sign in again.');
      const flow: LoginFlowState = { ...state, request_id: context.request_id };
      const credentials = flow.credentials;
      if (!message.verified || !credentials) return end(flow, 'count', refused(INVALID_LOGIN));
      if (credentials.banned) return end(flow, 'release', refused(BANNED));
      if (message.sso_required_by) {
        return end(flow, 'succeed', refused({ code: 'sso_required', message: ssoRequiredError(message.sso_required_by.name).message }));
      }
      if (credentials.two_factor_enabled) {
        const done: LoginDone = { requires_2fa: true, user_id: credentials.user_id, password_fingerprint: passwordFingerprint(credentials.password_hash) };
        return end(flow, 'succeed', { ok: true, value: done });
      }
      // The places are settled now; the session opens in the user actor.
      const open = toUser(credentials.user_id, 'open-session', { op: 'open-session', ...message.session, password_fingerprint: passwordFingerprint(credentials.password_hash) }, context);
      return { state: { ...flow, phase: 'opening', reserved: [] }, sends: [...settle(flow.reserved, 'succeed'), open] };
    }

    case 'create-user': {
      if (!state || state.purpose !== 'register' || state.phase !== 'checking') throw new ServiceError('flow_interrupted', 'The registration ended; try again.');
      const flow: LoginFlowState = { ...state, phase: 'claiming', request_id: context.request_id, new_user: message.user, session: message.session, user_id: message.user.id };
      return { state: flow, sends: [toDirectory('claim', { op: 'claim', user: message.user }, context)] };
    }

    case 'abandon': {
      if (!state) return { state, reply: { ok: true, value: null } };
      const ended = end(state, 'release', refused(BUSY));
      return { ...ended, reply: { ok: true, value: null } };
    }

    case '$alarm': {
      if (!state) return { state };
      if (message.name === WAIT_ALARM && state.phase === 'acquiring') {
        const waitedFor = state.subjects[state.reserved.length];
        const leave = waitedFor ? [throttle(waitedFor.key, { op: 'give-up', flow: context.key })] : [];
        return end(state, 'release', refused(BUSY), leave);
      }
      if (message.name === EXPIRE_ALARM) {
        const waitedFor = state.phase === 'acquiring' ? state.subjects[state.reserved.length] : undefined;
        const leave = waitedFor ? [throttle(waitedFor.key, { op: 'give-up', flow: context.key })] : [];
        return end(state, 'release', refused({ code: 'flow_interrupted', message: 'The login attempt took too long; try again.' }), leave);
      }
      return { state };
    }
  }
}

/** What the directory or the user actor answered, by the step it answers and the phase the flow is at. */
function callAnswered(state: State, message: CallAnswer, context: TurnContext): Result {
  // An answer to an ended flow (or to another run under this key) changes nothing.
  if (!state || message.flow_id !== context.key) return { state };
  const step = message.step as LoginStep;
  switch (step) {
    case 'lookup': {
      if (state.phase !== 'lookup') return { state };
      const looked = flowOutcome<{ user_id: string | null }>(message);
      const user_id = looked.ok ? looked.reply.user_id : null;
      // A known user: which subjects apply depends on the credentials (a known address, two-factor), so they come first.
      if (user_id) return { state: { ...state, user_id }, sends: [toUser(user_id, 'credentials', { op: 'credentials', ip_address: state.ip_address }, context)] };
      const flow: LoginFlowState = { ...state, user_id, subjects: passwordSubjects(`login:${state.login}`, state.ip_address, null), credentials: null };
      return acquireNext(context, flow);
    }
    case 'credentials': {
      if ((state.purpose !== 'login' && state.purpose !== 'change-password') || state.phase !== 'lookup' || state.credentials !== undefined) return { state };
      const answer = flowOutcome<Credentials>(message);
      if (state.purpose === 'change-password') {
        // The caller's user is gone (deleted since its token was checked).
        if (!answer.ok) return end(state, 'release', refused(SESSION_GONE));
        return acquireNext(context, { ...state, credentials: answer.reply, subjects: passwordSubjects(state.user_id!, state.ip_address, answer.reply) });
      }
      // No such user any more (deleted since the lookup): checked like an unknown login.
      const credentials = answer.ok ? answer.reply : null;
      const account = credentials ? state.user_id! : `login:${state.login}`;
      return acquireNext(context, { ...state, credentials, subjects: passwordSubjects(account, state.ip_address, credentials) });
    }
    case 'code-check': {
      if (state.purpose !== 'code-check' || state.phase !== 'checking') return { state };
      const answer = flowOutcome<unknown>(message);
      if (!answer.ok) {
        // A wrong code counts; a refusal that judged no code (not enabled, SSO required, ...) does not.
        return end(state, answer.error.code === 'invalid_two_factor_code' ? 'count' : 'release', refused(refusalOf(answer.error)));
      }
      if (state.check!.op === '2fa-login' && !(answer.reply as { ok: boolean }).ok) return end(state, 'count', refused(INVALID_CODE));
      return end(state, 'succeed', { ok: true, value: answer.reply });
    }
    case 'claim': {
      if (state.phase !== 'claiming') return { state };
      // A name already taken still counts: the attempt cost a KDF run.
      if (!message.ok) return end(state, 'count', refused(refusalOf(message.error)));
      const create = toUser(state.new_user!.id, 'create', { op: 'create', user: state.new_user! }, context);
      return { state: { ...state, phase: 'creating' }, sends: [create] };
    }
    case 'create': {
      if (state.phase !== 'creating') return { state };
      const answer = flowOutcome<PublicUser>(message);
      if (!answer.ok) return end(state, 'count', refused(refusalOf(answer.error)));
      const user = answer.reply;
      // Every registration counts on its address.
      if (!state.session) return end(state, 'count', { ok: true, value: { user, session_id: null } satisfies Registered });
      const open = toUser(user.id, 'open-session', { op: 'open-session', ...state.session }, context);
      return { state: { ...state, phase: 'opening', user, reserved: [] }, sends: [...settle(state.reserved, 'count'), open] };
    }
    case 'open-session': {
      if (state.phase !== 'opening') return { state };
      const answer = flowOutcome<{ session_id: string; user: PublicUser }>(message);
      if (!answer.ok) return end(state, 'release', refused(refusalOf(answer.error)));
      const opened = answer.reply;
      if (state.purpose === 'register') return end(state, 'release', { ok: true, value: { user: opened.user, session_id: opened.session_id } satisfies Registered });
      const done: LoginDone = { requires_2fa: false, session_id: opened.session_id, user: opened.user };
      return end(state, 'release', { ok: true, value: done });
    }
    case 'password-change':
    case 'password-reset-complete': {
      if (state.phase !== 'updating' || (step === 'password-change') !== (state.purpose === 'change-password')) return { state };
      const answer = flowOutcome<PasswordSet>(message);
      if (state.purpose === 'change-password') {
        if (!answer.ok) return end(state, 'release', refused(refusalOf(answer.error)));
        return end(state, 'release', { ok: true, value: answer.reply, revoked_user_ids: [answer.reply.user_id] });
      }
      // Used or replaced between the check and now (two confirmations at once): counted like a bad token.
      if (!answer.ok) return end(state, 'count', refused(INVALID_RESET));
      // The reset lifts the login locks of the account (from anywhere) and of this address (docs/api/accounts.md).
      const user_id = answer.reply.user_id;
      const lifted = [throttle(`acct:${user_id}`, { op: 'clear' }), ...(state.ip_address ? [throttle(`pair:${user_id}|${state.ip_address}`, { op: 'clear' })] : [])];
      return end(state, 'release', { ok: true, value: answer.reply, revoked_user_ids: [user_id] }, lifted);
    }
    case 'password-reset-check': {
      if (state.purpose !== 'reset-confirm' || state.phase !== 'verifying') return { state };
      if (!message.ok) return end(state, 'count', refused(INVALID_RESET));
      // The place stays held while the edge hashes the new password.
      return { state: { ...state, phase: 'checking', request_id: null }, replies: answered(state.request_id, { ok: true, value: null }) };
    }
    case 'reset-lookup': {
      if (state.purpose !== 'reset-request' || state.phase !== 'issuing' || state.user_id !== null) return { state };
      const looked = flowOutcome<{ user_id: string | null }>(message);
      const user_id = looked.ok ? looked.reply.user_id : null;
      if (!user_id) return end(state, 'release', { ok: true, value: null });
      const issue = toUser(user_id, 'password-reset-issue', { op: 'password-reset-issue', token_hash: state.token_hash! }, context);
      return { state: { ...state, user_id }, sends: [issue] };
    }
    case 'password-reset-issue': {
      if (state.purpose !== 'reset-request' || state.phase !== 'issuing') return { state };
      const issued = flowOutcome<ResetIssued>(message);
      const mail: ResetMail | null = issued.ok && issued.reply.issued ? { user_id: state.user_id!, email: issued.reply.email, expires_at_ms: issued.reply.expires_at_ms } : null;
      return end(state, 'release', { ok: true, value: mail });
    }
    default:
      return { state };
  }
}
