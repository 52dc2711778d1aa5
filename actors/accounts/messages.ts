import type { FlowAnswer as CallAnswer, FlowCall } from '../flow-call.js';
import { ServiceError, type ErrorCode } from '../../runtime/index.js';

/**
 * The accounts area's public surface: the kinds (user, user-directory,
 * login-throttle), how their keys are built, the messages they take and the
 * views they answer with. Other layers and areas import this file only; the
 * pure TOTP helpers are re-exported from totp.ts by name.
 */
export { base32Decode, base32Encode, otpauthUri, totp } from './totp.js';

export const USER_KIND = 'user';
export const DIRECTORY_KIND = 'user-directory';

/** One user actor per user id; one directory actor for every user, under this key. */
export interface UserListQuery {
  q?: string;
  roles?: Role[];
  banned?: boolean;
  email_verified?: boolean;
  page: number;
  page_size: number;
}


/**
 * The directory's messages. Flows (login and registration, the user actor's
 * rename, SCIM provisioning, the OAuth token endpoint) send them wrapped as a
 * `flow-call` and hear the outcome as a `flow-answer` (actors/flow-call.ts).
 */
export type DirectoryMessage =
  /** Claims a new user's names and creates the user (through the outbox); 409 email_taken / username_taken. Answers {user_id}. */
  | { op: 'claim'; user: NewUser }
  /** Answers {user_id} (null: no such login). */
  | { op: 'lookup'; login: string }
  | SummarySync
  /** Claims new names for a user (the user actor's rename step); answers {reserved: true}. */
  | { op: 'reserve'; user_id: string; email?: string; username?: string }
  /** Compensation of a reserve whose rename did not happen: frees the names if they still point at the user and it does not use them. */
  | { op: 'release'; user_id: string; email?: string; username?: string }
  | ({ op: 'list' } & UserListQuery)
  /** A flow's step: any message above, answered through the outbox (actors/flow-call.ts). */
  | FlowCall<DirectoryMessage>;


export const DIRECTORY_KEY = 'global';


/** The longest free-text query the admin list accepts. */
export const USER_QUERY_MAX = 100;


export type Role = 'user' | 'admin';

/** 403 `sso_required`: password login is gated by an organization's SSO policy (docs/api/organizations.md). */
export function ssoRequiredError(organization_name: string | null): ServiceError {
  return new ServiceError('sso_required', `The organization "${organization_name}" requires single sign-on: sign in through its identity provider.`);
}


export interface BanRecord {
  reason: string;
  banned_at_ms: number;
  banned_by: string;
}


/** The directory message that keeps the admin list in step with this user. */
export interface SummarySync {
  op: 'sync';
  user_id: string;
  rev: number;
  /** null: the user was deleted. */
  user: PublicUser | null;
  /** Names this user no longer uses: the directory frees them if they still point here. */
  release: { email?: string; username?: string };
  /** Answer with `sync-applied` once applied (or superseded): the user actor holds a reply until then (read-your-writes). */
  ack?: boolean;
}


export interface AdminPatch {
  display_name?: string;
  role?: Role;
  email_verified?: boolean;
  email?: string;
  username?: string;
}


export interface SessionView {
  id: string;
  user_id: string;
  active: boolean;
  created_at_ms: number;
  expires_at_ms: number;
  ip_address: string;
  user_agent: string;
  impersonated_by: string | null;
}


export interface NewUser {
  id: string;
  email: string;
  username: string;
  display_name: string;
  role: Role;
  password_hash: string;
}


/** A code as typed: digits for TOTP, and the hash of its normalised form for backup codes. */
export interface PresentedCode {
  code: string;
  code_hash: string;
}

/** What opening a session needs: the hash of the edge's refresh secret, its lifetime and the client. */
export interface SessionRequest {
  refresh_hash: string;
  ttl_seconds: number;
  ip_address: string;
  user_agent: string;
}

/**
 * The user actor's messages. A flow (login, registration, code checks, the
 * CLI login, SCIM, OAuth) sends them wrapped as a `flow-call` and hears the
 * outcome, a refusal included, as a `flow-answer` (actors/flow-call.ts).
 */
export type UserMessage =
  | { op: 'create'; user: NewUser }
  | { op: 'get' }
  /** With `ip_address`, `known_address` says whether the user has signed in from it (a session, live or ended in the last 7 days). */
  | { op: 'credentials'; ip_address?: string | null }
  /**
   * `password_fingerprint` (a password login's): the session opens only while the password is still the one the
   * login checked (actors/accounts/password-fingerprint.ts).
   */
  | {
      op: 'open-session';
      refresh_hash: string;
      ttl_seconds: number;
      ip_address: string;
      user_agent: string;
      password_fingerprint?: string;
      /** A CLI login's: the session that approved it, which must still be live (actors/cli-login/state.ts). */
      approving_session_id?: string;
    }
  | { op: 'authenticate'; session_id: string }
  /**
   * Rotates the session's refresh token. With `client` (the edge's refresh), a
   * reuse of the token rotated out less than REFRESH_REUSE_GRACE_MS ago by the
   * same client (address and User-Agent) is refused without ending the session.
   */
  | { op: 'refresh'; session_id: string; presented_hash: string; new_hash: string; ttl_seconds: number; client?: RefreshClient }
  | { op: 'end-session'; session_id: string }
  /** Answers `{email}` (the account the authenticator shows). */
  | { op: '2fa-setup'; secret_b32: string; backup_hashes: string[] }
  | { op: '2fa-verify-setup'; code: string }
  | { op: '2fa-status' }
  | { op: '2fa-disable'; presented: PresentedCode }
  | { op: '2fa-regenerate'; presented: PresentedCode; backup_hashes: string[] }
  | ({
      op: '2fa-login';
      challenge_id: string;
      presented: PresentedCode;
      /** The organization enforcing SSO on the user now (the edge asks before this turn); absent or null: none. */
      sso_required_by?: { name: string | null } | null;
      /**
       * The password step's fingerprint, carried by the challenge token; null for a token without one (an
       * impersonation's). A login challenge completes only while the password is still that one.
       */
      password_fingerprint: string | null;
    } & SessionRequest)
  | { op: 'admin-detail' }
  /**
   * A new e-mail or username is first reserved in the directory (a flow-call
   * whose flow-answer comes back here), then applied. Like ban, unban,
   * admin-delete and email-verify-confirm, answered once the directory shows
   * the change.
   */
  | { op: 'admin-patch'; patch: AdminPatch }
  /** The directory's answer to a rename's `reserve` (step `reserve`, flow_id: the rename's). */
  | CallAnswer
  | { op: 'sync-applied'; rev: number }
  | { op: 'ban'; reason: string; banned_by: string }
  | { op: 'unban' }
  | { op: 'admin-delete' }
  | { op: 'list-sessions' }
  | { op: 'admin-end-session'; session_id: string }
  | { op: 'email-verify-send'; token_hash: string }
  /**
   * A new password hash after the current password was checked (the login
   * flow's password change): every session but `keep_session_id` ends, and a
   * pending reset token is dropped. Answers PasswordSet.
   */
  | { op: 'password-change'; password_hash: string; keep_session_id: string }
  /**
   * Stores a reset token's hash (valid PASSWORD_RESET_TTL_MS, replacing the
   * previous one) unless one was issued less than PASSWORD_RESET_RESEND_MS
   * ago or the user is banned. Answers ResetIssued (issued false: no mail).
   */
  | { op: 'password-reset-issue'; token_hash: string }
  /** Whether the token is the pending, unexpired one (nothing changes); 400 invalid_reset_token if not. */
  | { op: 'password-reset-check'; token_hash: string }
  /**
   * Uses the token (single use): the new hash, every session ended, the
   * e-mail verified (the link reached it). 400 invalid_reset_token. Answers PasswordSet.
   */
  | { op: 'password-reset-complete'; token_hash: string; password_hash: string }
  | { op: 'email-verify-confirm'; token_hash: string }
  /**
   * An admin signs in as this user, checked in one turn: another admin or a
   * banned user is refused (403); a user with two-factor gets a challenge
   * (valid `challenge_ttl_seconds`), any other a session recording
   * `impersonated_by`.
   */
  | ({ op: 'admin-impersonate'; admin_id: string; challenge_ttl_seconds: number } & SessionRequest)
  /** A flow's step: any message above, answered through the outbox (actors/flow-call.ts). */
  | FlowCall<UserMessage>;

/** The client of a refresh, for the reuse grace: the same address and User-Agent as the refresh that rotated the token. */
export interface RefreshClient {
  ip_address: string;
  user_agent: string;
}

/**
 * A rotated-out refresh token presented again this soon after its rotation,
 * by the same client, is refused (401) without ending the session: two
 * concurrent refreshes of one token by one client (two tabs, a retried
 * request). Later, or from another client, it is reuse: the session ends.
 */
export const REFRESH_REUSE_GRACE_MS = 5_000;

/** A password reset token is valid this long. */
export const PASSWORD_RESET_TTL_MS = 30 * 60_000;
/** At most one reset e-mail per account in this interval; requests within it send nothing. */
export const PASSWORD_RESET_RESEND_MS = 60_000;

/** The reply to `password-reset-issue`. */
export type ResetIssued = { issued: true; email: string; expires_at_ms: number } | { issued: false };

/** The reply to `password-change` and `password-reset-complete`. */
export interface PasswordSet {
  user_id: string;
  /** The sessions this ended. */
  sessions_ended: number;
}

/** The reply to `admin-impersonate`. */
export type ImpersonationStart =
  | { requires_2fa: false; session_id: string; user: PublicUser }
  | { requires_2fa: true; challenge_id: string; user: PublicUser };


export interface PublicUser {
  id: string;
  email: string;
  username: string;
  display_name: string;
  role: Role;
  email_verified: boolean;
  two_factor_enabled: boolean;
  banned: boolean;
  created_at_ms: number;
}


export interface SessionPrincipal {
  user_id: string;
  session_id: string;
  role: Role;
  /** When the session ends by itself (a cache of this answer must not outlive it). */
  expires_at_ms: number;
  /** The admin who opened this session by impersonation, null for the user's own sessions. */
  impersonated_by: string | null;
}


export interface Credentials {
  user_id: string;
  password_hash: string;
  banned: boolean;
  two_factor_enabled: boolean;
  /** The asked address is one the user signed in from (a session of theirs, live or ended in the last 7 days, not an impersonation). */
  known_address: boolean;
}


/**
 * Session ids carry their user: `ses_<user id>~<random>`, so an admin can end a
 * session by id alone. Ids from before this format (`ses_<random>`) give null.
 */
export function sessionUserId(session_id: string): string | null {
  if (!session_id.startsWith('ses_')) return null;
  const tilde = session_id.indexOf('~');
  if (tilde <= 4) return null;
  return session_id.slice(4, tilde);
}


// --- Login throttle (actors/accounts/login-throttle-state.ts) -----------------

export const LOGIN_THROTTLE_KIND = 'login-throttle';
/** Failures of one account from one address (key `pair:<account>|<address>`) before its backoff starts. */
export const PAIR_FAILURES_FREE = 5;
/**
 * Failures of one account from any address (key `acct:<account>`) before its
 * backoff starts. Not applied to a login from an address the account has
 * signed in from before, nor to an account with two-factor on.
 */
export const ACCOUNT_FAILURES_FREE = 20;
/** Failures from one address against any account (key `ip:<address>`); not applied to an address the account knows. */
export const ADDRESS_FAILURES_FREE = 20;
/** The first lock past the free failures; it doubles with each further failure. */
export const BACKOFF_BASE_MS = 15_000;
/** The longest lock. */
export const BACKOFF_MAX_MS = 15 * 60_000;
/** Remembered failures are forgotten this long after the last one (or at a success). */
export const FAILURE_MEMORY_MS = 6 * 3600_000;
/** The window of the `window` policy. */
export const THROTTLE_WINDOW_MS = 15 * 60_000;
/**
 * Wrong second-step codes per user (key `2fa:<user id>`, window policy). Counted apart from the
 * password failures because a correct password clears those: with one counter,
 * someone holding the password could guess codes without end.
 */
export const TWO_FACTOR_FAILURES_MAX = 10;
/**
 * Password reset attempts per client address and window (key `pwreset:<address>`):
 * every reset request, and every reset confirmation with a token that is not valid.
 */
export const PASSWORD_RESETS_PER_ADDRESS_MAX = 10;
/** Registrations per client address and window (key `reg:<address>`); the node's REGISTRATIONS_PER_ADDRESS_MAX overrides it. */
export const REGISTRATIONS_PER_ADDRESS_MAX = 20;

/** How a subject counts (actors/accounts/login-throttle-state.ts). */
export type ThrottlePolicy = { kind: 'backoff'; free: number } | { kind: 'window'; limit: number };

export type ThrottleMessage =
  /** A login flow's reservation: answered `throttle` through the outbox, at once or when a place frees. */
  | { op: 'take'; policy: ThrottlePolicy; flow: string }
  /** The flow stopped waiting (its own deadline): leave the queue. */
  | { op: 'give-up'; flow: string }
  | { op: 'count'; reserved_at_ms: number }
  | { op: 'release'; reserved_at_ms: number }
  | { op: 'reset'; reserved_at_ms: number }
  /** A completed password reset: the counted failures are forgotten (reservations in flight stay). */
  | { op: 'clear' };

/** The answer to `take`: a reservation (named by its time, for count/release/reset), or refused for Retry-After seconds. */
export type ThrottleOutcome = { admitted: true; reserved_at_ms: number } | { admitted: false; retry_after_seconds: number };



// --- Login flows (actors/accounts/flows.ts) ---------------------------------

/**
 * One login flow per attempt (key: a fresh id from the edge): password login,
 * registration, the second login step and the two-factor code checks,
 * password change, password reset request and confirmation. The
 * flow reserves the throttle places (account or second-step subject first,
 * then the address), gets what the check needs, and after the check (at the
 * edge for a password, in the user actor for a code) counts, clears or hands
 * back the places and opens the session. Every decision is the flow's; the
 * edge only runs the password KDF and signs tokens.
 */
export const LOGIN_FLOW_KIND = 'login-flow';

/** Why a flow refused: the edge throws ServiceError(code, message, {retryAfterSeconds}). */
export interface FlowRefusal {
  code: ErrorCode;
  message: string;
  retry_after_seconds?: number;
}

/**
 * Every answer of a login flow: a value, or a refusal (kept a value so
 * Retry-After survives the deferred reply). `revoked_user_ids` names the users
 * whose sessions the flow ended (a password change or reset): the edge drops
 * their cached session checks on every node before it answers
 * (http/auth/revocation-aware-client.ts).
 */
export type FlowAnswer<T> = { ok: true; value: T; revoked_user_ids?: string[] } | { ok: false; refusal: FlowRefusal };

/** The two-factor operations of the user actor a flow runs under the second-step throttle. */
export type CodeCheck = Extract<UserMessage, { op: '2fa-login' | '2fa-disable' | '2fa-regenerate' }>;

export type LoginFlowMessage =
  // Asked by the edge.
  /** Password login, first step: answers {user_id, password_hash} (null hash: no usable password) once the places are reserved. */
  | { op: 'login'; login: string; ip_address: string | null }
  /** Password login, second step: the KDF's verdict; answers the session, or requires_2fa. */
  | { op: 'password-checked'; verified: boolean; sso_required_by: { name: string | null } | null; session: SessionRequest }
  /** Registration, first step: answers null once the address's place is reserved (no address or limit 0: at once). */
  | { op: 'register'; ip_address: string | null; limit: number }
  /** Registration, second step: claims the names, creates the user, opens the session (if asked); answers {user, session_id}. */
  | { op: 'create-user'; user: NewUser; session: SessionRequest | null }
  /** A two-factor code judged by the user actor under the second-step throttle; answers the user actor's reply. */
  | { op: 'code-check'; user_id: string; ip_address: string | null; check: CodeCheck }
  /** Password change, first step: answers {user_id, password_hash} once the places (the caller's account and address, as a login) are held. */
  | { op: 'change-password'; user_id: string; session_id: string; ip_address: string | null }
  /** Password change, second step: the KDF's verdict on the current password and the new hash; answers PasswordSet (every other session ended). */
  | { op: 'current-password-checked'; verified: boolean; new_password_hash: string | null }
  /** Password reset request, first step: answers null once the address's place is held (the edge answers 202 then). */
  | { op: 'reset-request'; ip_address: string | null }
  /** Password reset request, second step (after the 202): counts, looks the e-mail up, issues the token; answers ResetMail or null (no mail). */
  | { op: 'reset-issue'; email: string; token_hash: string }
  /** Password reset confirmation, first step: answers null once the address's place is held and the token checked (400 invalid_reset_token). */
  | { op: 'reset-confirm'; user_id: string; token_hash: string; ip_address: string | null }
  /** Password reset confirmation, second step: the new hash; answers PasswordSet (every session ended, login locks of the account and this address lifted). */
  | { op: 'reset-complete'; password_hash: string }
  /** The edge could not run its check (the KDF was busy): every place is handed back. */
  | { op: 'abandon' }
  /** The throttle admitting (or refusing) this flow, at once or when a place frees: a notice of the queue, not a call's answer. */
  | { op: 'throttle'; subject: string; outcome: ThrottleOutcome }
  /** The directory's or the user actor's answer to one of this flow's calls (actors/flow-call.ts; flow_id: the flow's key, step: LoginStep). */
  | CallAnswer;

/** The calls a login flow makes, named as the `step` of their flow-call. */
export type LoginStep =
  | 'lookup'
  | 'credentials'
  | 'claim'
  | 'create'
  | 'open-session'
  | 'code-check'
  | 'password-change'
  | 'reset-lookup'
  | 'password-reset-issue'
  | 'password-reset-check'
  | 'password-reset-complete';

/** The answer to `reset-issue`: whom to mail (the edge formats the token with the user id). */
export interface ResetMail {
  user_id: string;
  email: string;
  expires_at_ms: number;
}

/** The first answer of a password login. */
export interface LoginBegun {
  user_id: string | null;
  password_hash: string | null;
}

/** The last answer of a password login. */
export type LoginDone = { requires_2fa: true; user_id: string; password_fingerprint: string } | { requires_2fa: false; session_id: string; user: PublicUser };

/** The last answer of a registration. */
export interface Registered {
  user: PublicUser;
  session_id: string | null;
}
