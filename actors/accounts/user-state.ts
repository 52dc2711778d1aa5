import { ServiceError, type AlarmMessage, type DeferredReply, type TurnContext, type TurnResult, ownEntry } from '../../runtime/index.js';
import { sameHash } from '../same-hash.js';
import { passwordFingerprint } from './password-fingerprint.js';
import { answerFlowCall, flowCall, type FlowError } from '../flow-call.js';
import {
  beginSetup,
  CHALLENGE_FAILURES_MAX,
  challengeFailures,
  completeSetup,
  emptyTwoFactor,
  recordChallenge,
  verifyCode,
  type TwoFactorState,
} from './two-factor.js';
import {
  DIRECTORY_KEY,
  DIRECTORY_KIND,
  PASSWORD_RESET_RESEND_MS,
  PASSWORD_RESET_TTL_MS,
  REFRESH_REUSE_GRACE_MS,
  ssoRequiredError,
  USER_KIND,
  type AdminPatch,
  type BanRecord,
  type ImpersonationStart,
  type Credentials,
  type PasswordSet,
  type RefreshClient,
  type ResetIssued,
  type PublicUser,
  type Role,
  type SessionPrincipal,
  type SessionRequest,
  type SessionView,
  type SummarySync,
  type UserMessage,
} from './messages.js';

export { sessionUserId } from './messages.js';

/**
 * One user: profile, password hash and sessions, as one actor (kind `user`,
 * key = user id). Pure domain logic; the edge hashes passwords and secrets,
 * so nothing here is slow or random beyond context.newId.
 */

/** What the user actor stores: the public view plus what never leaves it. */
export interface UserRecord extends PublicUser {
  updated_at_ms: number;
  password_hash: string;
}

export interface SessionRecord {
  id: string;
  created_at_ms: number;
  expires_at_ms: number;
  /** sha256 of the current refresh secret. */
  refresh_hash: string;
  /** sha256 of the secret it replaced: presenting it again means theft. */
  previous_refresh_hash: string | null;
  /** When the last refresh rotated the secret, and by which client (absent on sessions never refreshed with a client): the reuse grace. */
  rotated_at_ms?: number;
  rotated_by?: RefreshClient | null;
  ended_at_ms: number | null;
  ip_address: string;
  user_agent: string;
  impersonated_by: string | null;
}

export interface UserState {
  user: UserRecord | null;
  sessions: Record<string, SessionRecord>;
  /** Absent on users stored before two-factor existed: read as emptyTwoFactor(). */
  two_factor?: TwoFactorState;
  /** Revision of the summary last sent to the directory (absent = 0). */
  summary_rev?: number;
  /** Set while banned (absent on users stored before bans had details). */
  ban?: BanRecord | null;
  /** Set once an admin deleted the user: the actor stays a tombstone. */
  deleted_at_ms?: number | null;
  /** The pending e-mail verification (absent or null: none). */
  email_verification?: EmailVerification | null;
  /** The pending password reset (absent or null: none). */
  password_reset?: PasswordReset | null;
  /** Two-factor challenges opened by an admin impersonation: [challenge_id, admin_id, expires_at_ms]. */
  impersonation_challenges?: [string, string, number][];
  /**
   * Asks answered once the directory has applied summary `rev` (read-your-writes
   * for the admin list): [request_id, rev, reply]. Absent: none.
   */
  awaiting_sync?: [string, number, unknown][];
  /** Renames waiting for the directory to reserve their names, by flow id. Absent: none. */
  renames?: Record<string, { request_id: string | null; patch: AdminPatch }>;
}

export interface EmailVerification {
  /** sha256 of the secret in the link; single-use. */
  token_hash: string;
  /** The address it was sent to: a changed e-mail makes the link invalid. */
  email: string;
  sent_at_ms: number;
  expires_at_ms: number;
}

export interface PasswordReset {
  /** sha256 of the secret in the link; single-use. */
  token_hash: string;
  /** The address it was sent to: a changed e-mail makes the link invalid. */
  email: string;
  sent_at_ms: number;
  expires_at_ms: number;
}

/** A verification link is valid this long. */
export const EMAIL_VERIFICATION_TTL_MS = 24 * 3600_000;
/** At most one verification e-mail per user in this interval. */
export const EMAIL_VERIFICATION_RESEND_MS = 60_000;
/** An impersonation session lasts at most this long, refreshes included. */
export const IMPERSONATION_SESSION_TTL_MS = 3600_000;
/** Impersonation challenges kept per user (older ones are forgotten). */
const IMPERSONATION_CHALLENGES_KEPT = 10;
/** Replies held for the directory, and renames in flight, per user (beyond: answered at once / refused busy). */
const AWAITING_SYNC_MAX = 64;

/** Sessions kept per user; the oldest ended or expired ones go first. */
export const SESSIONS_PER_USER_MAX = 100;
/** Ended and expired sessions stay listed this long, then are dropped. */
export const ENDED_SESSION_RETENTION_MS = 7 * 24 * 3600_000;

export function initialUserState(): UserState {
  return { user: null, sessions: {} };
}

export function publicUser(user: UserRecord): PublicUser {
  return {
    id: user.id,
    email: user.email,
    username: user.username,
    display_name: user.display_name,
    role: user.role,
    email_verified: user.email_verified,
    two_factor_enabled: user.two_factor_enabled,
    banned: user.banned,
    created_at_ms: user.created_at_ms,
  };
}

export function isSessionLive(session: SessionRecord | undefined, now_ms: number): boolean {
  return session !== undefined && session.ended_at_ms === null && session.expires_at_ms > now_ms;
}

function requireUser(state: UserState): UserRecord {
  if (!state.user) throw new ServiceError('not_found', 'No such user.');
  return state.user;
}

/** Drops sessions that ended long ago, then the oldest dead ones past the cap. */
function prunedSessions(sessions: Record<string, SessionRecord>, now_ms: number): Record<string, SessionRecord> {
  const kept = Object.values(sessions).filter(
    (s) => isSessionLive(s, now_ms) || now_ms - (s.ended_at_ms ?? s.expires_at_ms) < ENDED_SESSION_RETENTION_MS,
  );
  kept.sort((a, b) => Number(isSessionLive(b, now_ms)) - Number(isSessionLive(a, now_ms)) || b.created_at_ms - a.created_at_ms);
  const result: Record<string, SessionRecord> = {};
  for (const session of kept.slice(0, SESSIONS_PER_USER_MAX - 1)) result[session.id] = session;
  return result;
}

export function stepUser(state: UserState, message: UserMessage | AlarmMessage, context: TurnContext): TurnResult<UserState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'create': {
      if (state.user) {
        // Idempotent: the directory's outbox and the edge may both deliver it.
        if (state.user.id !== message.user.id) throw new ServiceError('conflict', 'User id already in use.');
        return { state, reply: publicUser(state.user) };
      }
      if (state.deleted_at_ms) throw new ServiceError('conflict', 'This user was deleted.');
      const user: UserRecord = {
        ...message.user,
        email_verified: false,
        two_factor_enabled: false,
        banned: false,
        created_at_ms: now,
        updated_at_ms: now,
      };
      return summarized({ user, sessions: {} }, publicUser(user), {});
    }

    case 'get':
      return { state, reply: publicUser(requireUser(state)) };

    case 'credentials': {
      const user = requireUser(state);
      const reply: Credentials = {
        user_id: user.id,
        password_hash: user.password_hash,
        banned: user.banned,
        two_factor_enabled: user.two_factor_enabled,
        known_address: message.ip_address ? Object.values(state.sessions).some((s) => s.ip_address === message.ip_address && !s.impersonated_by) : false,
      };
      if (state.summary_rev === undefined) return summarized(state, reply, {});
      return { state, reply };
    }

    case 'open-session':
      // A password login that raced a change or reset of the password: its check was of the old one.
      if (message.password_fingerprint !== undefined && state.user && passwordFingerprint(state.user.password_hash) !== message.password_fingerprint) {
        throw new ServiceError('invalid_credentials', 'The password changed while signing in; sign in again.');
      }
      if (message.approving_session_id !== undefined) {
        const approving = ownEntry(state.sessions, message.approving_session_id);
        if (!approving || !isSessionLive(approving, now)) {
          throw new ServiceError('conflict', 'The session that approved this login has ended (signed out, password changed or reset, or banned): start a new CLI login.');
        }
      }
      return openSession(state, message, context);

    case 'authenticate': {
      const user = state.user;
      const session = state.sessions[message.session_id];
      if (!user || user.banned || !session || !isSessionLive(session, now)) {
        throw new ServiceError('unauthorized', 'The access token is no longer valid.');
      }
      const reply: SessionPrincipal = {
        user_id: user.id,
        session_id: session.id,
        role: user.role,
        expires_at_ms: session.expires_at_ms,
        impersonated_by: session.impersonated_by ?? null,
      };
      // Users stored before the admin list existed publish their summary once.
      if (state.summary_rev === undefined) return summarized(state, reply, {});
      return { state, reply };
    }

    case 'refresh': {
      const user = state.user;
      const session = state.sessions[message.session_id];
      if (!user || user.banned || !session || !isSessionLive(session, now)) {
        throw new ServiceError('invalid_refresh_token', 'The refresh token is not valid.');
      }
      if (!sameHash(session.refresh_hash, message.presented_hash)) {
        if (session.previous_refresh_hash !== null && sameHash(session.previous_refresh_hash, message.presented_hash)) {
          // The same client refreshing the same token twice at once (two tabs, a retry): the other
          // refresh got the new token, so this one is refused and the session goes on.
          if (withinReuseGrace(session, message.client, now)) {
            throw new ServiceError('invalid_refresh_token', 'The refresh token was just rotated by another refresh of this client; use the newer one.');
          }
          // A rotated-out token came back: it was copied. End the session so
          // neither copy works (refresh token reuse detection).
          const ended: SessionRecord = { ...session, ended_at_ms: now };
          return {
            state: { ...state, sessions: { ...state.sessions, [session.id]: ended } },
            reply: { reused: true },
          };
        }
        throw new ServiceError('invalid_refresh_token', 'The refresh token is not valid.');
      }
      const rotated: SessionRecord = {
        ...session,
        refresh_hash: message.new_hash,
        previous_refresh_hash: session.refresh_hash,
        rotated_at_ms: now,
        rotated_by: message.client ?? null,
        // An impersonation session never outlives its first hour.
        expires_at_ms: session.impersonated_by
          ? Math.min(now + message.ttl_seconds * 1000, session.created_at_ms + IMPERSONATION_SESSION_TTL_MS)
          : now + message.ttl_seconds * 1000,
      };
      return {
        state: { ...state, sessions: { ...state.sessions, [session.id]: rotated } },
        reply: { reused: false, session_id: session.id, user: publicUser(user) },
      };
    }

    case 'end-session': {
      const session = state.sessions[message.session_id];
      if (!state.user || !session || session.ended_at_ms !== null) return { state, reply: { ended: false } };
      const ended: SessionRecord = { ...session, ended_at_ms: now };
      return { state: { ...state, sessions: { ...state.sessions, [session.id]: ended } }, reply: { ended: true } };
    }

    case '2fa-setup': {
      const user = requireUser(state);
      const two_factor = beginSetup(twoFactorOf(state), message.secret_b32, message.backup_hashes);
      return { state: { ...state, two_factor }, reply: { email: user.email } };
    }

    case '2fa-verify-setup': {
      const user = requireUser(state);
      const two_factor = completeSetup(twoFactorOf(state), message.code, now);
      return summarized({ ...state, user: { ...user, two_factor_enabled: true, updated_at_ms: now }, two_factor }, null, {});
    }

    case '2fa-status': {
      requireUser(state);
      const two_factor = twoFactorOf(state);
      return { state, reply: { enabled: two_factor.enabled, backup_codes_remaining: two_factor.enabled ? two_factor.backup_hashes.length : 0 } };
    }

    case '2fa-disable': {
      const user = requireUser(state);
      const two_factor = twoFactorOf(state);
      if (!two_factor.enabled) throw new ServiceError('conflict', 'Two-factor authentication is not enabled.');
      if (!verifyCode(two_factor, message.presented, now, true).ok) throw new ServiceError('invalid_two_factor_code', 'The code is not valid.');
      return summarized({ ...state, user: { ...user, two_factor_enabled: false, updated_at_ms: now }, two_factor: emptyTwoFactor() }, null, {});
    }

    case '2fa-regenerate': {
      requireUser(state);
      const two_factor = twoFactorOf(state);
      if (!two_factor.enabled) throw new ServiceError('conflict', 'Two-factor authentication is not enabled.');
      const verdict = verifyCode(two_factor, message.presented, now, false);
      if (!verdict.ok) throw new ServiceError('invalid_two_factor_code', 'The code is not valid.');
      return { state: { ...state, two_factor: { ...verdict.state, backup_hashes: message.backup_hashes } }, reply: null };
    }

    case '2fa-login': {
      // Wrong codes are counted, so they are answered with a value, not a throw
      // (a throw would discard the count).
      // A challenge issued before the user was deleted just fails (401 at the edge, not 404).
      if (!state.user) return { state, reply: { ok: false } };
      const user = state.user;
      const two_factor = twoFactorOf(state);
      const failures = challengeFailures(two_factor, message.challenge_id);
      if (user.banned || !two_factor.enabled || failures < 0 || failures >= CHALLENGE_FAILURES_MAX) {
        return { state, reply: { ok: false } };
      }
      // A challenge opened by an admin impersonation opens an impersonation session.
      const impersonation = (state.impersonation_challenges ?? []).find(([id, , expires]) => id === message.challenge_id && expires > now);
      // Any other is a login's: its token carries the fingerprint of the password it checked, which must still be
      // this account's. A token without one (an impersonation's no longer listed) is no login challenge at all.
      if (!impersonation && message.password_fingerprint !== passwordFingerprint(user.password_hash)) return { state, reply: { ok: false } };
      // SSO enforcement switched on after the password step still applies; impersonation is not gated
      // (docs/api/organizations.md). Refused before the code is judged: nothing is used up.
      if (message.sso_required_by && !impersonation) throw ssoRequiredError(message.sso_required_by.name);
      const verdict = verifyCode(two_factor, message.presented, now, true);
      if (!verdict.ok) {
        return { state: { ...state, two_factor: recordChallenge(two_factor, message.challenge_id, failures + 1) }, reply: { ok: false } };
      }
      const verified = { ...state, two_factor: recordChallenge(verdict.state, message.challenge_id, -1) };
      if (impersonation) {
        verified.impersonation_challenges = (state.impersonation_challenges ?? []).filter(([id]) => id !== message.challenge_id);
      }
      const opened = impersonation
        ? openSession(verified, { ...message, ttl_seconds: impersonationTtlSeconds(message.ttl_seconds) }, context, impersonation[1])
        : openSession(verified, message, context);
      return { state: opened.state, reply: { ok: true, ...(opened.reply as object) } };
    }

    case 'admin-detail': {
      const user = requireUser(state);
      const active_session_count = Object.values(state.sessions).filter((s) => isSessionLive(s, now)).length;
      return { state, reply: { user: publicUser(user), active_session_count, ban: user.banned ? (state.ban ?? null) : null } };
    }

    case 'admin-patch': {
      requireUser(state);
      const patch = message.patch;
      if (patch.email === undefined && patch.username === undefined) return applyPatch(state, patch, now, context.request_id);
      // New names are claimed first (the directory keeps them unique), then applied when its answer comes back.
      const renames = state.renames ?? {};
      if (Object.keys(renames).length >= AWAITING_SYNC_MAX) throw new ServiceError('server_busy', 'Too many renames of this user in flight.');
      const flow_id = context.newId('ren_');
      const reserve = { op: 'reserve', user_id: context.key, email: patch.email, username: patch.username } as const;
      return {
        state: { ...state, renames: { ...renames, [flow_id]: { request_id: context.request_id, patch } } },
        sends: [flowCall(DIRECTORY_KIND, DIRECTORY_KEY, reserve, { kind: USER_KIND, key: context.key, flow_id, step: 'reserve' })],
        defer: true,
      };
    }

    case 'flow-answer': {
      // The directory's answer to a rename's `reserve` (the only call this actor makes).
      const renames = state.renames ?? {};
      const flow = renames[message.flow_id];
      if (!flow || message.step !== 'reserve') return { state };
      const { [message.flow_id]: _done, ...rest } = renames;
      const next: UserState = { ...state, renames: Object.keys(rest).length > 0 ? rest : undefined };
      const answer = (error: FlowError): DeferredReply[] => (flow.request_id ? [{ request_id: flow.request_id, error }] : []);
      if (!message.ok) return { state: next, replies: answer(message.error) };
      if (!next.user) {
        // Deleted while the names were reserved: give them back (compensation).
        const release = { op: 'release', user_id: context.key, email: flow.patch.email, username: flow.patch.username };
        return { state: next, replies: answer({ code: 'not_found', message: 'No such user.' }), sends: [{ kind: DIRECTORY_KIND, key: DIRECTORY_KEY, message: release }] };
      }
      return applyPatch(next, flow.patch, now, flow.request_id);
    }

    case 'sync-applied': {
      const awaiting = state.awaiting_sync ?? [];
      const ready = awaiting.filter(([, rev]) => rev <= message.rev);
      if (ready.length === 0) return { state };
      const kept = awaiting.filter(([, rev]) => rev > message.rev);
      return {
        state: { ...state, awaiting_sync: kept.length > 0 ? kept : undefined },
        replies: ready.map(([request_id, , reply]) => ({ request_id, reply })),
      };
    }

    case 'ban': {
      const user = requireUser(state);
      // Banning a banned user keeps the first ban: retries are harmless.
      if (user.banned) return { state, reply: { changed: false, sync: null } };
      const ban: BanRecord = { reason: message.reason, banned_at_ms: now, banned_by: message.banned_by };
      // Every live session ends too, so an unban does not bring old tokens back.
      const sessions: Record<string, SessionRecord> = {};
      for (const [id, session] of Object.entries(state.sessions)) {
        sessions[id] = session.ended_at_ms === null ? { ...session, ended_at_ms: now } : session;
      }
      return summarized({ ...state, user: { ...user, banned: true, updated_at_ms: now }, ban, sessions }, { changed: true }, {}, { waiter: context.request_id });
    }

    case 'unban': {
      const user = requireUser(state);
      if (!user.banned) return { state, reply: { changed: false, sync: null } };
      return summarized({ ...state, user: { ...user, banned: false, updated_at_ms: now }, ban: null }, { changed: true }, {}, { waiter: context.request_id });
    }

    case 'admin-delete': {
      const user = requireUser(state);
      // Every session ends with the user: `authenticate` and `refresh` find no user.
      const tombstone: UserState = { user: null, sessions: {}, summary_rev: state.summary_rev, deleted_at_ms: now, ban: null, awaiting_sync: state.awaiting_sync, renames: state.renames };
      return summarySent(tombstone, user.id, null, { email: user.email, username: user.username }, {}, { waiter: context.request_id });
    }

    case 'list-sessions': {
      const user = requireUser(state);
      const sessions: SessionView[] = Object.values(state.sessions)
        .map((s) => sessionView(user.id, s, now))
        .sort((a, b) => b.created_at_ms - a.created_at_ms || (a.id < b.id ? -1 : 1));
      return { state, reply: sessions };
    }

    case 'admin-end-session': {
      const user = requireUser(state);
      const session = state.sessions[message.session_id];
      if (!session) throw new ServiceError('not_found', 'No such session.');
      if (session.ended_at_ms !== null) return { state, reply: { ended: false, user_id: user.id } };
      const ended: SessionRecord = { ...session, ended_at_ms: now };
      return { state: { ...state, sessions: { ...state.sessions, [session.id]: ended } }, reply: { ended: true, user_id: user.id } };
    }

    case 'email-verify-send': {
      const user = requireUser(state);
      if (user.email_verified) throw new ServiceError('conflict', 'The e-mail address is already verified.');
      const pending = state.email_verification;
      if (pending && pending.email === user.email && now - pending.sent_at_ms < EMAIL_VERIFICATION_RESEND_MS) {
        const retry = Math.max(1, Math.ceil((pending.sent_at_ms + EMAIL_VERIFICATION_RESEND_MS - now) / 1000));
        throw new ServiceError('rate_limited', 'A verification e-mail was sent less than a minute ago.', { retryAfterSeconds: retry });
      }
      // A new link replaces the previous one.
      const email_verification: EmailVerification = {
        token_hash: message.token_hash,
        email: user.email,
        sent_at_ms: now,
        expires_at_ms: now + EMAIL_VERIFICATION_TTL_MS,
      };
      return { state: { ...state, email_verification }, reply: { email: user.email, expires_at_ms: email_verification.expires_at_ms } };
    }

    case 'email-verify-confirm': {
      const user = state.user;
      const pending = state.email_verification;
      if (!user || !pending || !sameHash(pending.token_hash, message.token_hash) || now >= pending.expires_at_ms || pending.email !== user.email) {
        throw new ServiceError('invalid_verification_token', 'The verification link is not valid, expired or was already used.');
      }
      const verified: UserRecord = { ...user, email_verified: true, updated_at_ms: now };
      return summarized({ ...state, user: verified, email_verification: null }, { user: publicUser(verified) }, {}, { waiter: context.request_id });
    }

    case 'password-change': {
      const user = requireUser(state);
      if (user.banned) throw new ServiceError('forbidden', 'This account is banned.');
      const { sessions, ended } = endedSessions(state.sessions, now, message.keep_session_id);
      const reply: PasswordSet = { user_id: user.id, sessions_ended: ended };
      // A pending reset link would set another password over this one: it goes.
      return { state: { ...state, user: { ...user, password_hash: message.password_hash, updated_at_ms: now }, sessions, password_reset: null }, reply };
    }

    case 'password-reset-issue': {
      const user = state.user;
      const none: ResetIssued = { issued: false };
      if (!user || user.banned) return { state, reply: none };
      const pending = state.password_reset;
      // At most one mail a minute: later requests change nothing (the link already sent stays valid).
      if (pending && pending.email === user.email && now - pending.sent_at_ms < PASSWORD_RESET_RESEND_MS) return { state, reply: none };
      const password_reset: PasswordReset = { token_hash: message.token_hash, email: user.email, sent_at_ms: now, expires_at_ms: now + PASSWORD_RESET_TTL_MS };
      const reply: ResetIssued = { issued: true, email: user.email, expires_at_ms: password_reset.expires_at_ms };
      return { state: { ...state, password_reset }, reply };
    }

    case 'password-reset-check':
      validResetToken(state, message.token_hash, now);
      return { state, reply: null };

    case 'password-reset-complete': {
      const user = validResetToken(state, message.token_hash, now);
      const { sessions, ended } = endedSessions(state.sessions, now, null);
      const reply: PasswordSet = { user_id: user.id, sessions_ended: ended };
      // The link reached the address: it counts as verified (a pending verification link is moot).
      const next: UserState = {
        ...state,
        user: { ...user, password_hash: message.password_hash, email_verified: true, updated_at_ms: now },
        sessions,
        password_reset: null,
        email_verification: user.email_verified ? state.email_verification : null,
      };
      return user.email_verified ? { state: next, reply } : summarized(next, reply, {});
    }

    case 'admin-impersonate': {
      const user = requireUser(state);
      if (user.role === 'admin') throw new ServiceError('forbidden', 'Admins cannot be impersonated.');
      if (user.banned) throw new ServiceError('forbidden', 'This account is banned.');
      if (user.two_factor_enabled) {
        const challenge_id = context.newId('chl_');
        const kept = (state.impersonation_challenges ?? []).filter(([, , expires]) => expires > now);
        const impersonation_challenges: [string, string, number][] = [
          ...kept,
          [challenge_id, message.admin_id, now + message.challenge_ttl_seconds * 1000] as [string, string, number],
        ].slice(-IMPERSONATION_CHALLENGES_KEPT);
        const reply: ImpersonationStart = { requires_2fa: true, challenge_id, user: publicUser(user) };
        return { state: { ...state, impersonation_challenges }, reply };
      }
      const opened = openSession(state, { ...message, ttl_seconds: impersonationTtlSeconds(message.ttl_seconds) }, context, message.admin_id);
      const reply: ImpersonationStart = { requires_2fa: false, ...(opened.reply as { session_id: string; user: PublicUser }) };
      return { state: opened.state, reply };
    }

    case '$alarm':
      return { state };

    // A flow's step (login, CLI login, SCIM, OAuth): the same messages, answered to the flow that sent them.
    case 'flow-call':
      return answerFlowCall<UserState, UserMessage>(stepUser, state, message, context);
  }
}

/** The refresh that rotated this token out was this client's, less than REFRESH_REUSE_GRACE_MS ago. */
function withinReuseGrace(session: SessionRecord, client: RefreshClient | undefined, now: number): boolean {
  const by = session.rotated_by;
  if (!client || !by || session.rotated_at_ms === undefined) return false;
  return now - session.rotated_at_ms < REFRESH_REUSE_GRACE_MS && by.ip_address === client.ip_address && by.user_agent === client.user_agent;
}

/** Every session not ended yet ends now, but `keep` (the caller's, on a password change); `ended` counts the live ones. */
function endedSessions(sessions: Record<string, SessionRecord>, now: number, keep: string | null): { sessions: Record<string, SessionRecord>; ended: number } {
  const result: Record<string, SessionRecord> = {};
  let ended = 0;
  for (const [id, session] of Object.entries(sessions)) {
    if (id === keep || session.ended_at_ms !== null) {
      result[id] = session;
      continue;
    }
    if (isSessionLive(session, now)) ended++;
    result[id] = { ...session, ended_at_ms: now };
  }
  return { sessions: result, ended };
}

/** The user whose pending reset token this is, unused, unexpired and sent to the current e-mail; else 400 invalid_reset_token. */
function validResetToken(state: UserState, token_hash: string, now: number): UserRecord {
  const user = state.user;
  const pending = state.password_reset;
  if (!user || user.banned || !pending || !sameHash(pending.token_hash, token_hash) || now >= pending.expires_at_ms || pending.email !== user.email) {
    throw new ServiceError('invalid_reset_token', 'The password reset link is not valid, expired or was already used.');
  }
  return user;
}

function impersonationTtlSeconds(ttl_seconds: number): number {
  return Math.min(ttl_seconds, IMPERSONATION_SESSION_TTL_MS / 1000);
}

export function sessionView(user_id: string, session: SessionRecord, now_ms: number): SessionView {
  return {
    id: session.id,
    user_id,
    active: isSessionLive(session, now_ms),
    created_at_ms: session.created_at_ms,
    expires_at_ms: session.expires_at_ms,
    ip_address: session.ip_address,
    user_agent: session.user_agent,
    impersonated_by: session.impersonated_by,
  };
}

/**
 * A turn that changed what the admin list shows: bumps the summary revision
 * and sends the new summary to the directory (ordered by revision there, so a
 * late delivery never undoes a newer one). With `waiter` (the ask of an admin
 * change), the reply is held until the directory answers `sync-applied`, so
 * the admin list shows the change once the caller has its answer; the reply
 * also carries the summary under `sync`.
 */
function summarized(state: UserState, reply: unknown, release: SummarySync['release'], hold?: Hold): TurnResult<UserState, unknown> {
  const user = state.user!;
  return summarySent(state, user.id, publicUser(user), release, reply, hold);
}

/** An admin change: its reply carries the summary, and is held for the directory when it was asked (`waiter`). */
interface Hold {
  waiter: string | null;
}

function summarySent(
  state: UserState,
  user_id: string,
  user: PublicUser | null,
  release: SummarySync['release'],
  reply: unknown,
  hold?: Hold,
): TurnResult<UserState, unknown> {
  const rev = (state.summary_rev ?? 0) + 1;
  const sync: SummarySync = { op: 'sync', user_id, rev, user, release };
  const awaiting = state.awaiting_sync ?? [];
  if (!hold) return { state: { ...state, summary_rev: rev }, reply, sends: [{ kind: DIRECTORY_KIND, key: DIRECTORY_KEY, message: sync }] };
  const full = { ...(reply as object), sync };
  if (hold.waiter === null || awaiting.length >= AWAITING_SYNC_MAX) {
    return { state: { ...state, summary_rev: rev }, reply: full, sends: [{ kind: DIRECTORY_KIND, key: DIRECTORY_KEY, message: sync }] };
  }
  return {
    state: { ...state, summary_rev: rev, awaiting_sync: [...awaiting, [hold.waiter, rev, full]] },
    sends: [{ kind: DIRECTORY_KIND, key: DIRECTORY_KEY, message: { ...sync, ack: true } }],
    defer: true,
  };
}

/** An admin's (or SCIM's) patch, applied: names no longer used are released by the summary. */
function applyPatch(state: UserState, patch: AdminPatch, now: number, waiter: string | null): TurnResult<UserState, unknown> {
  const user = requireUser(state);
  const next: UserRecord = { ...user, updated_at_ms: now };
  if (patch.display_name !== undefined) next.display_name = patch.display_name;
  if (patch.role !== undefined) next.role = patch.role;
  if (patch.email_verified !== undefined) next.email_verified = patch.email_verified;
  if (patch.email !== undefined) next.email = patch.email;
  if (patch.username !== undefined) next.username = patch.username;
  const release: SummarySync['release'] = {};
  if (next.email.toLowerCase() !== user.email.toLowerCase()) release.email = user.email;
  if (next.username.toLowerCase() !== user.username.toLowerCase()) release.username = user.username;
  return summarized({ ...state, user: next }, { user: publicUser(next) }, release, { waiter });
}

function twoFactorOf(state: UserState): TwoFactorState {
  return state.two_factor ?? emptyTwoFactor();
}

function openSession(state: UserState, request: SessionRequest, context: TurnContext, impersonated_by: string | null = null): TurnResult<UserState, unknown> {
  const now = context.now;
  const user = requireUser(state);
  if (user.banned) throw new ServiceError('forbidden', 'This account is banned.');
  const session: SessionRecord = {
    id: context.newId(`ses_${user.id}~`),
    created_at_ms: now,
    expires_at_ms: now + request.ttl_seconds * 1000,
    refresh_hash: request.refresh_hash,
    previous_refresh_hash: null,
    ended_at_ms: null,
    ip_address: request.ip_address,
    user_agent: request.user_agent,
    impersonated_by,
  };
  const sessions = prunedSessions(state.sessions, now);
  sessions[session.id] = session;
  return { state: { ...state, user, sessions }, reply: { session_id: session.id, user: publicUser(user) } };
}
