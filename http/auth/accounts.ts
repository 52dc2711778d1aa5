import { ServiceError } from '../../runtime/index.js';
import { DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { DIRECTORY_KEY } from '../../actors/accounts/messages.js';
import { ACCOUNT_FAILURES_MAX, ADDRESS_FAILURES_MAX, LOGIN_THROTTLE_KIND, TWO_FACTOR_FAILURES_MAX, type ThrottleAttempt } from '../../actors/accounts/messages.js';
import { ssoRequiredError, type Credentials, type ImpersonationStart, type NewUser, type PublicUser, type Role, type UserMessage } from '../../actors/accounts/messages.js';
import { ORGANIZATION_KIND, USER_ORGS_KIND } from '../../actors/organizations/messages.js';
import { type Membership } from '../../actors/organizations/messages.js';
import { randomId } from '../../runtime/index.js';
import type { AppServices } from '../services.js';
import { hashPassword, UNUSABLE_PASSWORD_HASH, verifyPassword } from './passwords.js';
import { formatRefreshToken, hashSecret, newRefreshSecret, parseRefreshToken, type TokenBody } from './tokens.js';

/**
 * Account flows that span actors: registration (directory claim, then the
 * user), login (lookup, password check on the thread pool, new session) and
 * refresh rotation. The edge does the slow and random parts (KDF, secrets);
 * the actors hold the state.
 */
export interface ClientInfo {
  ip_address: string;
  user_agent: string;
}

export interface Registration {
  email: string;
  username: string;
  password: string;
  display_name?: string;
  role?: Role;
}

/** How long the password step of a two-factor login stays valid. */
export const TWO_FACTOR_CHALLENGE_TTL_SECONDS = 300;

/** A code as typed: digits for TOTP, and the hash of its normalised form for backup codes. */
export function presentedCode(code: string): { code: string; code_hash: string } {
  const trimmed = code.trim();
  return { code: trimmed, code_hash: hashSecret(normalizeBackupCode(trimmed)) };
}

export function normalizeBackupCode(code: string): string {
  return code.toLowerCase().replace(/[\s-]/g, '');
}

interface ThrottleSubject {
  key: string;
  limit: number;
}

/** A place reserved on one subject for an attempt in flight (see actors/accounts/login-throttle-state.ts). */
interface Reservation {
  subject: ThrottleSubject;
  reserved_at_ms: number;
}

/**
 * While a subject's reservations fill its limit, an attempt waits for one to end (a KDF run) and
 * asks again, every THROTTLE_POLL_MS, at most THROTTLE_POLLS_MAX times; then 429 with Retry-After 1.
 */
const THROTTLE_POLL_MS = 25;
const THROTTLE_POLLS_MAX = 200;

/** A failure the node caused (busy, unavailable partition, defect) rather than the caller's input. */
function isServerFailure(error: unknown): boolean {
  return !(error instanceof ServiceError) || error.statusCode >= 500;
}

/** The account subject (password or second-step counter) first, then the address (when known). */
function throttleSubjects(account: string, ip_address: string | undefined, step: 'password' | 'two_factor' = 'password'): ThrottleSubject[] {
  const subjects: ThrottleSubject[] = [
    step === 'password' ? { key: `acct:${account}`, limit: ACCOUNT_FAILURES_MAX } : { key: `2fa:${account}`, limit: TWO_FACTOR_FAILURES_MAX },
  ];
  if (ip_address) subjects.push({ key: `ip:${ip_address}`, limit: ADDRESS_FAILURES_MAX });
  return subjects;
}

export class Accounts {
  constructor(private readonly services: AppServices) {}

  /**
   * With a client address (POST /auth/register) and REGISTRATIONS_PER_ADDRESS_MAX
   * above 0, throttled per address: every registration counts, also one refused
   * as a duplicate (it cost a KDF run), except one the node failed to process
   * (5xx); at the limit 429 `rate_limited` before any hashing.
   */
  async register(input: Registration, ip_address?: string): Promise<PublicUser> {
    const limit = this.services.config.registrationsPerAddressMax;
    const reserved = ip_address && limit > 0 ? await this.throttleAttempt([{ key: `reg:${ip_address}`, limit }]) : [];
    let user: PublicUser;
    try {
      user = await this.createUser(input);
    } catch (error) {
      // The request's own error is the answer, whatever happens to the throttle call.
      await (isServerFailure(error) ? this.throttleRelease(reserved) : this.throttleCount(reserved)).catch(() => undefined);
      throw error;
    }
    // The account exists: a throttle actor that cannot be reached must not turn that into an error
    // (the reservation then lapses uncounted).
    await this.throttleCount(reserved).catch(() => undefined);
    return user;
  }

  private async createUser(input: Registration): Promise<PublicUser> {
    const { actors, config } = this.services;
    const user: NewUser = {
      id: randomId('usr_'),
      email: input.email.trim(),
      username: input.username.trim(),
      display_name: input.display_name?.trim() || input.username.trim(),
      role: input.role ?? 'user',
      password_hash: await hashPassword(input.password, config.passwordKdfCostLog2),
    };
    await actors.ask(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'claim', user });
    // The directory's outbox creates the user too; asking directly lets the
    // reply wait for it. `create` is idempotent, so the second one is a no-op.
    return actors.ask<PublicUser>(USER_KIND, user.id, { op: 'create', user });
  }

  async findUserId(login: string): Promise<string | null> {
    const { user_id } = await this.services.actors.ask<{ user_id: string | null }>(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'lookup', login });
    return user_id;
  }

  /**
   * Checks the password; the same error, after the same work, for an unknown login, an account
   * without a usable password (SCIM-provisioned) and a wrong password.
   * Throttled per account and per client address (429 `rate_limited`): the attempt reserves a
   * place on both before the KDF runs, so concurrent guesses cannot pass together; a wrong
   * password is counted on both, a right one clears the account's count and hands the address's
   * place back.
   */
  async verifyLogin(login: string, password: string, ip_address?: string): Promise<Credentials> {
    const user_id = await this.findUserId(login);
    const reserved = await this.throttleAttempt(throttleSubjects(user_id ?? `login:${login.trim().toLowerCase()}`, ip_address));
    let credentials: Credentials | null;
    try {
      credentials = await this.checkPassword(user_id, password);
    } catch (error) {
      // The password was not checked (a busy node, an unavailable partition): not a guess.
      await this.throttleRelease(reserved);
      throw error;
    }
    if (!credentials) {
      await this.throttleCount(reserved);
      throw new ServiceError('invalid_credentials', 'Invalid login or password.');
    }
    if (credentials.banned) {
      await this.throttleRelease(reserved);
      throw new ServiceError('forbidden', 'This account is banned.');
    }
    await this.throttleSucceeded(reserved);
    await this.checkSsoPolicy(credentials.user_id);
    return credentials;
  }

  /** The user's credentials if the password is theirs, else null: after one KDF run either way. */
  private async checkPassword(user_id: string | null, password: string): Promise<Credentials | null> {
    const cost = this.services.config.passwordKdfCostLog2;
    if (!user_id) {
      await verifyPassword(password, UNUSABLE_PASSWORD_HASH, cost);
      return null;
    }
    const credentials = await this.services.actors.ask<Credentials>(USER_KIND, user_id, { op: 'credentials' });
    return (await verifyPassword(password, credentials.password_hash, cost)) ? credentials : null;
  }

  /**
   * SSO policy (docs/api/organizations.md): a member of an organization that
   * enforces SSO, and is not on its exempt list, may not sign in with a
   * password (403 `sso_required`). Checked after the password, so it reveals
   * nothing to someone without it; existing sessions and refresh keep working.
   */
  async checkSsoPolicy(user_id: string): Promise<void> {
    const enforcing = await this.ssoEnforcedBy(user_id);
    if (enforcing !== null) throw ssoRequiredError(enforcing.name);
  }

  /** The first organization of the user that enforces SSO on them (not exempt), or null. */
  private async ssoEnforcedBy(user_id: string): Promise<{ name: string | null } | null> {
    const { actors } = this.services;
    const { memberships } = await actors.ask<{ memberships: Membership[] }>(USER_ORGS_KIND, user_id, { op: 'list' });
    const policies = await Promise.all(
      memberships.map((m) => actors.ask<{ name: string | null; enforced: boolean }>(ORGANIZATION_KIND, m.org_id, { op: 'sso_policy', user_id })),
    );
    return policies.find((p) => p.enforced) ?? null;
  }

  /**
   * Reserves a place on every subject for one attempt, atomically per subject (429 `rate_limited`
   * once a subject's count reached its limit). All or none: when one subject refuses or is full
   * of reservations in flight, the places taken on the others are handed back; a full subject
   * is asked again shortly (bounded), since reservations end within a KDF run.
   */
  private async throttleAttempt(subjects: ThrottleSubject[]): Promise<Reservation[]> {
    const { actors } = this.services;
    for (let poll = 0; ; poll++) {
      const results = await Promise.allSettled(subjects.map((s) => actors.ask<ThrottleAttempt>(LOGIN_THROTTLE_KIND, s.key, { op: 'attempt', limit: s.limit })));
      const reserved: Reservation[] = [];
      const refusals: unknown[] = [];
      let full = false;
      results.forEach((result, i) => {
        if (result.status === 'rejected') refusals.push(result.reason);
        else if (result.value.admitted) reserved.push({ subject: subjects[i], reserved_at_ms: result.value.reserved_at_ms });
        else full = true;
      });
      if (refusals.length === 0 && !full) return reserved;
      await this.throttleRelease(reserved);
      if (refusals.length > 0) {
        // A node failure outranks a refusal; of several refusals, the longest wait is the true one.
        throw (
          refusals.find(isServerFailure) ??
          refusals.reduce((a, b) => (((b as ServiceError).retryAfterSeconds ?? 0) > ((a as ServiceError).retryAfterSeconds ?? 0) ? b : a))
        );
      }
      if (poll >= THROTTLE_POLLS_MAX) throw new ServiceError('rate_limited', 'Too many attempts in progress; try again shortly.', { retryAfterSeconds: 1 });
      await new Promise((resolve) => setTimeout(resolve, THROTTLE_POLL_MS));
    }
  }

  /** The attempts count: a wrong password or code, or a registration. */
  private async throttleCount(reserved: Reservation[]): Promise<void> {
    const { actors } = this.services;
    await Promise.all(reserved.map((r) => actors.ask(LOGIN_THROTTLE_KIND, r.subject.key, { op: 'count', reserved_at_ms: r.reserved_at_ms })));
  }

  /**
   * Hands reserved places back: the check did not happen, or was no guess. Best effort: if a
   * throttle actor cannot be reached, the reservation lapses by itself (RESERVATION_TTL_MS) and
   * the request answers with its own outcome.
   */
  private async throttleRelease(reserved: Reservation[]): Promise<void> {
    const { actors } = this.services;
    await Promise.all(
      reserved.map((r) => actors.ask(LOGIN_THROTTLE_KIND, r.subject.key, { op: 'release', reserved_at_ms: r.reserved_at_ms }).catch(() => undefined)),
    );
  }

  /**
   * A correct password or code: its own count (the first subject, account or second step) is
   * cleared; the address only gets this place back, so an address that guesses across
   * accounts stays counted.
   */
  private async throttleSucceeded(reserved: Reservation[]): Promise<void> {
    const [own, ...others] = reserved;
    await Promise.all([
      this.services.actors.ask(LOGIN_THROTTLE_KIND, own.subject.key, { op: 'reset', reserved_at_ms: own.reserved_at_ms }),
      this.throttleRelease(others),
    ]);
  }

  /**
   * A two-factor code checked outside login (`check`: 2FA disable, backup code regeneration),
   * under the same per-user second-step throttle as /auth/2fa/verify (and the address's count):
   * reserved before the check, a wrong code (400 `invalid_two_factor_code`) is counted, a
   * right one clears the second-step count; any other outcome hands the place back.
   */
  async throttledCodeCheck<T>(user_id: string, ip_address: string, check: () => Promise<T>): Promise<T> {
    const reserved = await this.throttleAttempt(throttleSubjects(user_id, ip_address, 'two_factor'));
    let result: T;
    try {
      result = await check();
    } catch (error) {
      const wrongCode = error instanceof ServiceError && error.code === 'invalid_two_factor_code';
      await (wrongCode ? this.throttleCount(reserved) : this.throttleRelease(reserved));
      throw error;
    }
    await this.throttleSucceeded(reserved);
    return result;
  }

  async openSession(user_id: string, client: ClientInfo): Promise<TokenBody & { user: PublicUser }> {
    const { actors, config } = this.services;
    const refresh = newRefreshSecret();
    const opened = await actors.ask<{ session_id: string; user: PublicUser }>(USER_KIND, user_id, {
      op: 'open-session',
      refresh_hash: refresh.hash,
      ttl_seconds: config.refreshTokenTtlSeconds,
      ip_address: client.ip_address,
      user_agent: client.user_agent,
    });
    return this.tokenBody(user_id, opened.session_id, refresh.secret, opened.user);
  }

  /** The token for the second login step of a user with two-factor enabled. */
  twoFactorChallenge(user_id: string): Promise<string> {
    return this.services.tokens.signTwoFactorChallenge(user_id, randomId('chl_'), TWO_FACTOR_CHALLENGE_TTL_SECONDS);
  }

  /**
   * Second login step: the challenge token and a TOTP or backup code open a session.
   * Throttled like the password step (second-step count and address). The SSO policy is
   * checked again here, since it may have been switched on after the password step; the
   * user actor applies it (403 `sso_required`) to every challenge but an admin impersonation's.
   */
  async completeTwoFactorLogin(two_factor_token: string, code: string, client: ClientInfo): Promise<TokenBody & { user: PublicUser }> {
    const { actors, tokens, config } = this.services;
    const challenge = await tokens.verifyTwoFactorChallenge(two_factor_token);
    const reserved = await this.throttleAttempt(throttleSubjects(challenge.user_id, client.ip_address, 'two_factor'));
    const refresh = newRefreshSecret();
    let outcome: { ok: boolean; session_id?: string; user?: PublicUser };
    try {
      const enforcing = await this.ssoEnforcedBy(challenge.user_id);
      outcome = await actors.ask<{ ok: boolean; session_id?: string; user?: PublicUser }>(USER_KIND, challenge.user_id, {
        op: '2fa-login',
        challenge_id: challenge.challenge_id,
        presented: presentedCode(code),
        sso_required_by: enforcing === null ? null : { name: enforcing.name },
        refresh_hash: refresh.hash,
        ttl_seconds: config.refreshTokenTtlSeconds,
        ip_address: client.ip_address,
        user_agent: client.user_agent,
      });
    } catch (error) {
      // No code was judged (SSO required, a busy node): not a guess.
      await this.throttleRelease(reserved);
      throw error;
    }
    if (!outcome.ok) {
      await this.throttleCount(reserved);
      throw new ServiceError('invalid_credentials', 'Invalid two-factor code.');
    }
    await this.throttleSucceeded(reserved);
    return this.tokenBody(challenge.user_id, outcome.session_id!, refresh.secret, outcome.user!);
  }

  /**
   * Admin impersonation, one ask: the user actor refuses another admin or a banned user (403),
   * opens a session recording `impersonated_by` (at most 1 h), or, for a user with two-factor,
   * a challenge it remembers as this admin's, so /auth/2fa/verify records `impersonated_by`.
   */
  async impersonate(
    user_id: string,
    admin_id: string,
    client: ClientInfo,
  ): Promise<{ requires_2fa: false; tokens: TokenBody & { user: PublicUser } } | { requires_2fa: true; two_factor_token: string; user: PublicUser }> {
    const { actors, config, tokens } = this.services;
    const refresh = newRefreshSecret();
    const started = await actors.ask<ImpersonationStart>(USER_KIND, user_id, {
      op: 'admin-impersonate',
      admin_id,
      challenge_ttl_seconds: TWO_FACTOR_CHALLENGE_TTL_SECONDS,
      refresh_hash: refresh.hash,
      ttl_seconds: config.refreshTokenTtlSeconds,
      ip_address: client.ip_address,
      user_agent: client.user_agent,
    } satisfies UserMessage);
    if (started.requires_2fa) {
      const two_factor_token = await tokens.signTwoFactorChallenge(user_id, started.challenge_id, TWO_FACTOR_CHALLENGE_TTL_SECONDS);
      return { requires_2fa: true, two_factor_token, user: started.user };
    }
    return { requires_2fa: false, tokens: await this.tokenBody(user_id, started.session_id, refresh.secret, started.user) };
  }

  private async tokenBody(user_id: string, session_id: string, refreshSecret: string, user: PublicUser): Promise<TokenBody & { user: PublicUser }> {
    const access = await this.services.tokens.signAccessToken(user_id, session_id);
    return {
      user,
      access_token: access.token,
      refresh_token: formatRefreshToken(user_id, session_id, refreshSecret),
      token_type: 'Bearer',
      expires_in: access.expires_in,
    };
  }

  async refresh(refreshToken: string): Promise<TokenBody & { user: PublicUser }> {
    const parsed = parseRefreshToken(refreshToken);
    if (!parsed) throw new ServiceError('invalid_refresh_token', 'The refresh token is not valid.');
    const { actors, config } = this.services;
    const next = newRefreshSecret();
    const rotated = await actors.ask<{ reused: boolean; session_id: string; user: PublicUser }>(USER_KIND, parsed.user_id, {
      op: 'refresh',
      session_id: parsed.session_id,
      presented_hash: hashSecret(parsed.secret),
      new_hash: next.hash,
      ttl_seconds: config.refreshTokenTtlSeconds,
    });
    if (rotated.reused) throw new ServiceError('invalid_refresh_token', 'The refresh token was already used; the session has been ended.');
    return this.tokenBody(parsed.user_id, rotated.session_id, next.secret, rotated.user);
  }

  async endSession(user_id: string, session_id: string): Promise<void> {
    await this.services.actors.ask(USER_KIND, user_id, { op: 'end-session', session_id });
  }

  async getUser(user_id: string): Promise<PublicUser> {
    return this.services.actors.ask<PublicUser>(USER_KIND, user_id, { op: 'get' });
  }

  /** ADMIN_EMAIL/ADMIN_PASSWORD: create that admin unless a user with the e-mail exists. */
  async bootstrapAdmin(email: string, password: string): Promise<'created' | 'exists'> {
    if (await this.findUserId(email)) return 'exists';
    const base = email.split('@')[0].replace(/[^A-Za-z0-9_.-]/g, '').slice(0, 24) || 'admin';
    let username = base.length >= 3 ? base : `${base}-admin`;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.register({ email, username, password, display_name: 'Administrator', role: 'admin' });
        return 'created';
      } catch (error) {
        if (error instanceof ServiceError && error.code === 'username_taken' && attempt < 5) {
          username = `${base.slice(0, 20)}-${randomId().slice(0, 6)}`;
          continue;
        }
        // Several cluster nodes start at once and race to create it: one wins.
        if (error instanceof ServiceError && error.code === 'email_taken') return 'exists';
        // A partition changing hands while the cluster forms: try again.
        if (error instanceof ServiceError && error.statusCode === 503 && attempt < 20) {
          await new Promise((resolve) => setTimeout(resolve, 250));
          continue;
        }
        throw error;
      }
    }
  }
}
