import { randomBytes } from 'node:crypto';
import { ServiceError } from '../../runtime/index.js';
import { DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { DIRECTORY_KEY } from '../../actors/accounts/messages.js';
import { LOGIN_FLOW_KIND, type CodeCheck, type FlowAnswer, type LoginBegun, type LoginDone, type LoginFlowMessage, type Registered, type SessionRequest } from '../../actors/accounts/messages.js';
import { type PasswordSet, type ResetMail } from '../../actors/accounts/messages.js';
import { type ImpersonationStart, type NewUser, type PublicUser, type Role, type UserMessage } from '../../actors/accounts/messages.js';
import { USER_ORGS_KIND } from '../../actors/organizations/messages.js';
import { randomId } from '../../runtime/index.js';
import type { AppServices } from '../services.js';
import { hashPassword, UNUSABLE_PASSWORD_HASH, verifyPassword } from './passwords.js';
import { formatRefreshToken, hashSecret, newRefreshSecret, parseRefreshToken, type TokenBody } from './tokens.js';

/**
 * The edge's part of the account operations. Login, registration and the
 * two-factor code checks are login flows (actors/accounts/flows.ts), which
 * make every decision (throttle, ban, SSO, session); the edge runs only what
 * cannot run in a pure turn: the password KDF on the thread pool between the
 * flow's two asks, the random secrets, and signing tokens. Refresh, logout,
 * impersonation and /me are one ask of the user actor each.
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

/** `prt.<user id>.<secret>`: the user id routes the confirmation to the right actor; only sha256(secret) is stored. */
export function formatResetToken(user_id: string, secret: string): string {
  return `prt.${user_id}.${secret}`;
}

export function parseResetToken(token: string): { user_id: string; secret: string } | null {
  const parts = token.trim().split('.');
  if (parts.length !== 3 || parts[0] !== 'prt' || parts.some((p) => p.length === 0 || p.length > 128)) return null;
  return { user_id: parts[1], secret: parts[2] };
}

const INVALID_RESET_TOKEN = 'The password reset link is not valid, expired or was already used.';

/** A login flow's answer, as the edge sees it: the value, or the refusal thrown as a ServiceError. */
function settled<T>(answer: FlowAnswer<T>): T {
  if (answer.ok) return answer.value;
  const { code, message, retry_after_seconds } = answer.refusal;
  throw new ServiceError(code, message, retry_after_seconds === undefined ? {} : { retryAfterSeconds: retry_after_seconds });
}

export class Accounts {
  constructor(private readonly services: AppServices) {}

  /** Asks a login flow (actors/accounts/flows.ts): one flow per attempt, keyed by a fresh id. */
  private askFlow<T>(flow: string, message: LoginFlowMessage): Promise<FlowAnswer<T>> {
    return this.services.actors.ask<FlowAnswer<T>>(LOGIN_FLOW_KIND, flow, message);
  }

  /** The edge could not run its check (a busy KDF): the flow hands its places back. Best effort: they lapse anyway. */
  private async abandon(flow: string): Promise<void> {
    await this.askFlow(flow, { op: 'abandon' }).catch(() => undefined);
  }

  /**
   * Creates an account, and opens a session for it when `client` is given. With a client address
   * and REGISTRATIONS_PER_ADDRESS_MAX above 0, throttled per address by the flow: every
   * registration counts, also one refused as a duplicate (it cost a KDF run), except one the node
   * failed to process (a busy KDF); at the limit 429 `rate_limited` before any hashing.
   * Two asks of one flow around the KDF: reserve, then claim + create + session.
   */
  async register(input: Registration, ip_address?: string): Promise<PublicUser> {
    return (await this.createAccount(input, ip_address, null)).created.user;
  }

  private async createAccount(input: Registration, ip_address: string | undefined, client: ClientInfo | null): Promise<{ created: Registered; refresh_secret: string | null }> {
    const { config } = this.services;
    const flow = randomId('lgf_');
    settled(await this.askFlow<null>(flow, { op: 'register', ip_address: ip_address ?? null, limit: config.registrationsPerAddressMax }));
    let password_hash: string;
    try {
      password_hash = await hashPassword(input.password, config.passwordKdfCostLog2);
    } catch (error) {
      await this.abandon(flow);
      throw error;
    }
    const user: NewUser = {
      id: randomId('usr_'),
      email: input.email.trim(),
      username: input.username.trim(),
      display_name: input.display_name?.trim() || input.username.trim(),
      role: input.role ?? 'user',
      password_hash,
    };
    const refresh = client ? newRefreshSecret() : null;
    const session = client && refresh ? this.sessionRequest(refresh.hash, client) : null;
    const created = settled(await this.askFlow<Registered>(flow, { op: 'create-user', user, session }));
    return { created, refresh_secret: refresh?.secret ?? null };
  }

  /** Registration and sign-in (POST /auth/register): the tokens of the new account's first session. */
  async registerAndSignIn(input: Registration, client: ClientInfo): Promise<TokenBody & { user: PublicUser }> {
    const { created, refresh_secret } = await this.createAccount(input, client.ip_address, client);
    return this.tokenBody(created.user.id, created.session_id!, refresh_secret!, created.user);
  }

  async findUserId(login: string): Promise<string | null> {
    const { user_id } = await this.services.actors.ask<{ user_id: string | null }>(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'lookup', login }, { readOnly: true });
    return user_id;
  }

  /**
   * Password login. The same error, after the same work, for an unknown login, an account without
   * a usable password (SCIM-provisioned) and a wrong password. Throttled per account and per
   * client address (429 `rate_limited`) by a login flow: its first ask reserves a place on both
   * and answers the password hash, the edge runs the KDF on its thread pool, and the second ask
   * hands the verdict to the flow, which counts a wrong password on both, clears the account's
   * count for a right one (the address gets its place back), refuses a banned account (403) or an
   * SSO-gated one (403 `sso_required`, checked after the password so it reveals nothing to
   * someone without it), and opens the session or answers that two-factor is required.
   */
  async login(login: string, password: string, client: ClientInfo): Promise<{ requires_2fa: true; two_factor_token: string } | ({ requires_2fa: false } & TokenBody & { user: PublicUser })> {
    const { config } = this.services;
    const flow = randomId('lgf_');
    const begun = settled(await this.askFlow<LoginBegun>(flow, { op: 'login', login, ip_address: client.ip_address || null }));
    let verified: boolean;
    let sso_required_by: { name: string | null } | null = null;
    try {
      verified = await verifyPassword(password, begun.password_hash ?? UNUSABLE_PASSWORD_HASH, config.passwordKdfCostLog2);
      verified = verified && begun.password_hash !== null;
      if (verified && begun.user_id) sso_required_by = await this.ssoEnforcedBy(begun.user_id);
    } catch (error) {
      // The password was not checked (a busy node, an unavailable partition): not a guess.
      await this.abandon(flow);
      throw error;
    }
    const refresh = newRefreshSecret();
    const done = settled(
      await this.askFlow<LoginDone>(flow, { op: 'password-checked', verified, sso_required_by, session: this.sessionRequest(refresh.hash, client) }),
    );
    if (done.requires_2fa) return { requires_2fa: true, two_factor_token: await this.twoFactorChallenge(done.user_id, done.password_fingerprint) };
    return { requires_2fa: false, ...(await this.tokenBody(done.user.id, done.session_id, refresh.secret, done.user)) };
  }

  /**
   * SSO policy (docs/api/organizations.md): the first organization of the user that enforces SSO
   * on them (not exempt), or null. Read-only reads of the organizations area, handed to the flow
   * or the user actor, which apply the policy.
   */
  /**
   * The first organization of the user that enforces SSO on them (not exempt), or null: one read
   * of user-orgs, which keeps each organization's name and policy (actors/organizations/messages.ts).
   */
  private async ssoEnforcedBy(user_id: string): Promise<{ name: string | null } | null> {
    const { enforced_by } = await this.services.actors.ask<{ enforced_by: { org_id: string; name: string } | null }>(USER_ORGS_KIND, user_id, { op: 'sso_policy' }, { readOnly: true });
    return enforced_by ? { name: enforced_by.name } : null;
  }

  /**
   * A two-factor code checked outside login (2FA disable, backup code regeneration), by the user
   * actor inside a login flow, under the same per-user second-step throttle as /auth/2fa/verify
   * (and the address's count): a wrong code (400 `invalid_two_factor_code`) is counted, a right
   * one clears the second-step count; any other outcome hands the place back. One ask.
   */
  async checkCode<T>(user_id: string, ip_address: string, check: CodeCheck): Promise<T> {
    return settled(await this.askFlow<T>(randomId('lgf_'), { op: 'code-check', user_id, ip_address: ip_address || null, check }));
  }

  private sessionRequest(refresh_hash: string, client: ClientInfo): SessionRequest {
    return { refresh_hash, ttl_seconds: this.services.config.refreshTokenTtlSeconds, ip_address: client.ip_address, user_agent: client.user_agent };
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

  /** The token for the second login step of a user with two-factor enabled, bound to the password the first step checked. */
  twoFactorChallenge(user_id: string, password_fingerprint: string): Promise<string> {
    return this.services.tokens.signTwoFactorChallenge(user_id, randomId('chl_'), TWO_FACTOR_CHALLENGE_TTL_SECONDS, password_fingerprint);
  }

  /**
   * Second login step: the challenge token and a TOTP or backup code open a session.
   * Throttled like the password step (second-step count and address). The SSO policy is
   * checked again here, since it may have been switched on after the password step; the
   * user actor applies it (403 `sso_required`) to every challenge but an admin impersonation's.
   */
  async completeTwoFactorLogin(two_factor_token: string, code: string, client: ClientInfo): Promise<TokenBody & { user: PublicUser }> {
    const { tokens } = this.services;
    const challenge = await tokens.verifyTwoFactorChallenge(two_factor_token);
    const sso_required_by = await this.ssoEnforcedBy(challenge.user_id);
    const refresh = newRefreshSecret();
    const opened = await this.checkCode<{ ok: true; session_id: string; user: PublicUser }>(challenge.user_id, client.ip_address, {
      op: '2fa-login',
      challenge_id: challenge.challenge_id,
      password_fingerprint: challenge.password_fingerprint,
      presented: presentedCode(code),
      sso_required_by,
      ...this.sessionRequest(refresh.hash, client),
    });
    return this.tokenBody(challenge.user_id, opened.session_id, refresh.secret, opened.user);
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

  /** The tokens of a session a flow opened (the CLI login's): the access token signed here. */
  tokensFor(user_id: string, session_id: string, refreshSecret: string, user: PublicUser): Promise<TokenBody & { user: PublicUser }> {
    return this.tokenBody(user_id, session_id, refreshSecret, user);
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

  /**
   * POST /auth/password/change: one login flow, like a login. Its first ask reserves the places of
   * the caller's account and address and answers the current hash; the edge checks the current
   * password and hashes the new one (the KDF); the second ask hands both to the flow, which counts
   * a wrong current password like a wrong login (401 `invalid_credentials`) or stores the new hash
   * and ends every other session of the user. The answer names the user, so its cached session
   * checks are dropped on every node before this returns.
   */
  async changePassword(user_id: string, session_id: string, current_password: string, new_password: string, client: ClientInfo): Promise<PasswordSet> {
    const { config } = this.services;
    const flow = randomId('lgf_');
    const begun = settled(await this.askFlow<LoginBegun>(flow, { op: 'change-password', user_id, session_id, ip_address: client.ip_address || null }));
    let verified: boolean;
    let new_password_hash: string | null = null;
    try {
      verified = (await verifyPassword(current_password, begun.password_hash ?? UNUSABLE_PASSWORD_HASH, config.passwordKdfCostLog2)) && begun.password_hash !== null;
      if (verified) new_password_hash = await hashPassword(new_password, config.passwordKdfCostLog2);
    } catch (error) {
      await this.abandon(flow);
      throw error;
    }
    return settled(await this.askFlow<PasswordSet>(flow, { op: 'current-password-checked', verified, new_password_hash }));
  }

  /**
   * POST /auth/password/reset/request. The first ask of a login flow reserves (or refuses, 429)
   * the address's place and is all the caller waits for, so the 202 takes as long whether or not
   * the e-mail is an account's. The flow's second ask (after the answer, in the background) looks
   * the e-mail up and stores the token's hash; the mail goes out if it answers whom to send it to.
   * `failed` hears a failure of that background part (logged by the route).
   */
  async requestPasswordReset(email: string, link: URL, client: ClientInfo, failed: (error: unknown) => void): Promise<void> {
    const flow = randomId('lgf_');
    settled(await this.askFlow<null>(flow, { op: 'reset-request', ip_address: client.ip_address || null }));
    void this.issuePasswordReset(flow, email, link).catch(failed);
  }

  private async issuePasswordReset(flow: string, email: string, link: URL): Promise<void> {
    const secret = randomBytes(32).toString('base64url');
    const mail = settled(await this.askFlow<ResetMail | null>(flow, { op: 'reset-issue', email, token_hash: hashSecret(secret) }));
    if (!mail) return;
    const url = new URL(link);
    url.searchParams.set('token', formatResetToken(mail.user_id, secret));
    const minutes = Math.round((mail.expires_at_ms - this.services.clock.now()) / 60_000);
    await this.services.mail.send({
      to: mail.email,
      subject: 'Reset your password',
      text: `Someone asked to reset the password of your account. Open this link within ${minutes} minutes to choose a new password:\n\n${url}\n\nIf you did not ask for this, ignore this message: your password stays as it is.`,
      link: url.toString(),
    });
  }

  /**
   * POST /auth/password/reset/confirm: one login flow. Its first ask reserves the address's place
   * and has the user actor check the token (400 `invalid_reset_token`, counted), so no KDF runs for
   * a bad token; the edge hashes the new password; the second ask uses the token (single use),
   * stores the hash, ends every session and lifts the account's login locks.
   */
  async confirmPasswordReset(token: string, new_password: string, client: ClientInfo): Promise<PasswordSet> {
    const parsed = parseResetToken(token);
    if (!parsed) throw new ServiceError('invalid_reset_token', INVALID_RESET_TOKEN);
    const flow = randomId('lgf_');
    settled(await this.askFlow<null>(flow, { op: 'reset-confirm', user_id: parsed.user_id, token_hash: hashSecret(parsed.secret), ip_address: client.ip_address || null }));
    let password_hash: string;
    try {
      password_hash = await hashPassword(new_password, this.services.config.passwordKdfCostLog2);
    } catch (error) {
      await this.abandon(flow);
      throw error;
    }
    return settled(await this.askFlow<PasswordSet>(flow, { op: 'reset-complete', password_hash }));
  }

  async refresh(refreshToken: string, client?: ClientInfo): Promise<TokenBody & { user: PublicUser }> {
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
      ...(client ? { client: { ip_address: client.ip_address, user_agent: client.user_agent } } : {}),
    } satisfies UserMessage);
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
