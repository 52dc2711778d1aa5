import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { USER_KIND, type UserMessage } from '../accounts/messages.js';
import { flowCall, relayAnswer } from '../flow-call.js';
import { CLI_POLL_INTERVAL_S, CLI_SESSION_TTL_MS, type CliMessage, type CliStatus, type PollReply } from './messages.js';
import { sameHash } from '../same-hash.js';

/**
 * CLI login session (device-style flow), kind `cli-login`, key = session id.
 * The CLI creates it (with the hash of a secret poll token), a signed-in user
 * completes it in the browser, and the CLI polls: `pending` until completed,
 * then the user id exactly once (the edge opens the session and returns the
 * tokens). Expires after CLI_SESSION_TTL_MS (alarm; reads compare with now).
 */

export interface CliSession {
  id: string;
  poll_hash: string;
  user_code: string;
  created_at_ms: number;
  expires_at_ms: number;
  status: CliStatus;
  user_id: string | null;
  /**
   * The session that approved the login. The CLI's session opens only while it is live: a password change or
   * reset, a ban, or signing out of it between the approval and the poll cancels the approval.
   */
  approved_by_session?: string | null;
  last_poll_ms: number | null;
  /** The poll waiting for the session the user actor is opening (absent: none). */
  delivering?: string | null;
}

export interface CliState {
  session: CliSession | null;
}

export function initialCliState(): CliState {
  return { session: null };
}

function liveSession(state: CliState, now: number): CliSession {
  const session = state.session;
  if (!session || now >= session.expires_at_ms) throw new ServiceError('not_found', 'No such CLI login session, or it expired.');
  return session;
}

export function stepCli(state: CliState, message: CliMessage | AlarmMessage, context: TurnContext): TurnResult<CliState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'create': {
      if (state.session) {
        if (sameHash(state.session.poll_hash, message.poll_hash)) return { state, reply: null };
        throw new ServiceError('conflict', 'CLI session id in use.');
      }
      const session: CliSession = {
        id: message.id,
        poll_hash: message.poll_hash,
        user_code: message.user_code,
        created_at_ms: now,
        expires_at_ms: now + CLI_SESSION_TTL_MS,
        status: 'pending',
        user_id: null,
        last_poll_ms: null,
      };
      return { state: { session }, reply: null, alarms: [{ name: 'expire', due_ms: session.expires_at_ms }] };
    }
    case 'complete': {
      const session = liveSession(state, now);
      if (session.status !== 'pending') throw new ServiceError('conflict', 'This CLI login session was already completed.');
      return { state: { session: { ...session, status: 'completed', user_id: message.user_id, approved_by_session: message.session_id } }, reply: { user_code: session.user_code } };
    }
    case 'poll': {
      const session = liveSession(state, now);
      // A wrong poll token is answered as an unknown session: the id alone reveals nothing.
      if (!sameHash(session.poll_hash, message.poll_hash)) throw new ServiceError('not_found', 'No such CLI login session, or it expired.');
      if (session.last_poll_ms !== null && now - session.last_poll_ms < CLI_POLL_INTERVAL_S * 1000) {
        const retry = Math.max(1, Math.ceil((session.last_poll_ms + CLI_POLL_INTERVAL_S * 1000 - now) / 1000));
        throw new ServiceError('rate_limited', `Poll at most every ${CLI_POLL_INTERVAL_S} seconds.`, { retryAfterSeconds: retry });
      }
      if (session.status === 'delivered') throw new ServiceError('conflict', 'The tokens of this CLI login session were already delivered.');
      if (session.status === 'pending') {
        return { state: { session: { ...session, last_poll_ms: now } }, reply: { status: 'pending' } satisfies PollReply };
      }
      // Single delivery: the user id leaves once, then the session is spent.
      if (message.session) {
        // The user actor opens the session (it refuses a banned user) and answers here; the poll waits for it.
        const open: UserMessage = { op: 'open-session', ...message.session, ...(session.approved_by_session ? { approving_session_id: session.approved_by_session } : {}) };
        const reply_to = { kind: context.kind, key: context.key, flow_id: context.key, step: 'open-session' };
        return {
          state: { session: { ...session, status: 'delivered', last_poll_ms: now, delivering: context.request_id } },
          sends: [flowCall(USER_KIND, session.user_id!, open, reply_to)],
          defer: true,
        };
      }
      return {
        state: { session: { ...session, status: 'delivered', last_poll_ms: now } },
        reply: { status: 'completed', user_id: session.user_id! } satisfies PollReply,
      };
    }
    case 'flow-answer': {
      const session = state.session;
      const request_id = session?.delivering;
      if (!session || !request_id || message.flow_id !== context.key || message.step !== 'open-session') return { state };
      const next: CliState = { session: { ...session, delivering: null } };
      const delivered = (opened: { session_id: string; user: unknown }): PollReply => ({ status: 'completed', user_id: session.user_id!, session_id: opened.session_id, user: opened.user });
      return { state: next, replies: [relayAnswer(request_id, message, delivered)] };
    }
    case 'info': {
      const session = liveSession(state, now);
      return { state, reply: { id: session.id, user_code: session.user_code, status: session.status === 'pending' ? 'pending' : 'completed', expires_at_ms: session.expires_at_ms } };
    }
    case '$alarm':
      if (state.session && now >= state.session.expires_at_ms) return { state: initialCliState() };
      return { state };
  }
}
