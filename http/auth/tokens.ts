import { createHash, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT, type CryptoKey, type KeyObject } from 'jose';
import { ServiceError, type ActorClient } from '../../runtime/index.js';
import { SIGNING_KEY_KEY, SIGNING_KEY_KIND, type SigningKey } from '../../actors/system/signing-key.js';

/**
 * Access tokens are EdDSA (Ed25519) JWTs signed with the key held by the
 * signing-key actor, so they verify on every node and survive restarts.
 * Verified tokens are cached (token -> claims) until they expire: a repeat
 * request costs a map lookup, not a signature check. Revocation is not the
 * cache's job: every request also asks the user actor whether the session is
 * still live (see authenticate.ts).
 */
export interface AccessClaims {
  sub: string;
  sid: string;
  exp: number;
  /** OAuth user tokens only (the `scope` claim): what the client was granted. Absent: full rights. */
  scopes?: string[];
}

export interface TokenBody {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

const CACHE_ENTRIES_MAX = 100_000;
const ALGORITHM = 'EdDSA';

type VerifyKey = CryptoKey | KeyObject | Uint8Array;

export class TokenService {
  private readonly verified = new Map<string, AccessClaims>();

  private constructor(
    private readonly signKey: VerifyKey,
    private readonly verifyKey: VerifyKey,
    readonly kid: string,
    readonly publicJwk: Record<string, unknown>,
    private readonly issuer: string,
    readonly accessTtlSeconds: number,
    private readonly now: () => number,
  ) {}

  /** Loads the cluster's signing key, proposing a new one if there is none yet. */
  static async create(actors: ActorClient, options: { issuer: string; accessTtlSeconds: number; now: () => number }): Promise<TokenService> {
    const { privateKey, publicKey } = await generateKeyPair(ALGORITHM, { crv: 'Ed25519', extractable: true });
    const kid = randomBytes(8).toString('hex');
    const candidate = {
      kid,
      private_jwk: { ...(await exportJWK(privateKey)), kid, alg: ALGORITHM },
      public_jwk: { ...(await exportJWK(publicKey)), kid, alg: ALGORITHM, use: 'sig' },
    };
    const key = await actors.ask<SigningKey>(SIGNING_KEY_KIND, SIGNING_KEY_KEY, { op: 'init', candidate });
    const signKey = await importJWK(key.private_jwk, ALGORITHM);
    const verifyKey = await importJWK(key.public_jwk, ALGORITHM);
    return new TokenService(signKey, verifyKey, key.kid, key.public_jwk, options.issuer, options.accessTtlSeconds, options.now);
  }

  async signAccessToken(user_id: string, session_id: string): Promise<{ token: string; expires_in: number }> {
    const now_s = Math.floor(this.now() / 1000);
    const token = await new SignJWT({ sid: session_id })
      .setProtectedHeader({ alg: ALGORITHM, kid: this.kid, typ: 'at+jwt' })
      .setSubject(user_id)
      .setIssuer(this.issuer)
      .setIssuedAt(now_s)
      .setExpirationTime(now_s + this.accessTtlSeconds)
      .sign(this.signKey);
    return { token, expires_in: this.accessTtlSeconds };
  }

  /**
   * The token a login of a user with two-factor returns instead of tokens:
   * proves the password step for `ttl_seconds`; `jti` names the challenge so the
   * user actor can count wrong codes and refuse a second use.
   */
  async signTwoFactorChallenge(user_id: string, challenge_id: string, ttl_seconds: number, password_fingerprint: string | null = null): Promise<string> {
    const now_s = Math.floor(this.now() / 1000);
    // `pwf`: the fingerprint of the password the login checked (actors/accounts/password-fingerprint.ts); none for an impersonation's.
    return new SignJWT(password_fingerprint === null ? {} : { pwf: password_fingerprint })
      .setProtectedHeader({ alg: ALGORITHM, kid: this.kid, typ: '2fa+jwt' })
      .setSubject(user_id)
      .setJti(challenge_id)
      .setIssuer(this.issuer)
      .setIssuedAt(now_s)
      .setExpirationTime(now_s + ttl_seconds)
      .sign(this.signKey);
  }

  async verifyTwoFactorChallenge(token: string): Promise<{ user_id: string; challenge_id: string; password_fingerprint: string | null }> {
    try {
      const { payload } = await jwtVerify(token, this.verifyKey, {
        issuer: this.issuer,
        algorithms: [ALGORITHM],
        typ: '2fa+jwt',
        currentDate: new Date(this.now()),
      });
      if (typeof payload.sub !== 'string' || typeof payload.jti !== 'string') throw new Error('missing claims');
      return { user_id: payload.sub, challenge_id: payload.jti, password_fingerprint: typeof payload.pwf === 'string' ? payload.pwf : null };
    } catch {
      throw new ServiceError('invalid_credentials', 'The two-factor token is invalid or expired.');
    }
  }

  /**
   * The claims of a token verified before and not expired yet, or undefined
   * (then verifyAccessToken decides). Synchronous: the edge's hook for nearly
   * every request makes no promise for it.
   */
  verifiedClaims(token: string): AccessClaims | undefined {
    const cached = this.verified.get(token);
    return cached && cached.exp > this.now() / 1000 ? cached : undefined;
  }

  /** The token's claims, or a 401. */
  async verifyAccessToken(token: string): Promise<AccessClaims> {
    const fresh = this.verifiedClaims(token);
    if (fresh) return fresh;
    if (this.verified.delete(token)) throw new ServiceError('unauthorized', 'The access token has expired.');
    let claims: AccessClaims;
    try {
      const { payload } = await jwtVerify(token, this.verifyKey, {
        issuer: this.issuer,
        algorithms: [ALGORITHM],
        typ: 'at+jwt',
        currentDate: new Date(this.now()),
      });
      if (typeof payload.sub !== 'string' || typeof payload.sid !== 'string' || typeof payload.exp !== 'number') {
        throw new Error('missing claims');
      }
      claims = { sub: payload.sub, sid: payload.sid, exp: payload.exp };
      // OAuth user tokens (OAuthTokens.signUserAccessToken) carry their granted scope.
      if (typeof payload.scope === 'string') claims.scopes = payload.scope === '' ? [] : payload.scope.split(' ');
    } catch {
      throw new ServiceError('unauthorized', 'The access token is invalid or expired.');
    }
    if (this.verified.size >= CACHE_ENTRIES_MAX) {
      // Maps iterate in insertion order: drop the oldest entry.
      this.verified.delete(this.verified.keys().next().value as string);
    }
    this.verified.set(token, claims);
    return claims;
  }

  /** For the OAuth helpers at the end of this file: sign and verify with this key and issuer. */
  oauthKeyAccess(): { sign: (jwt: SignJWT) => Promise<string>; verify: (token: string, typ: string) => Promise<Record<string, unknown>>; now: () => number } {
    return {
      sign: (jwt) => jwt.setIssuer(this.issuer).sign(this.signKey),
      verify: async (token, typ) => {
        const { payload } = await jwtVerify(token, this.verifyKey, { issuer: this.issuer, algorithms: [ALGORITHM], typ, currentDate: new Date(this.now()) });
        return payload as Record<string, unknown>;
      },
      now: this.now,
    };
  }
}

/** A refresh token is `rt.<user_id>.<session_id>.<secret>`; only sha256(secret) is stored. */
export function newRefreshSecret(): { secret: string; hash: string } {
  const secret = randomBytes(32).toString('base64url');
  return { secret, hash: hashSecret(secret) };
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url');
}

export function formatRefreshToken(user_id: string, session_id: string, secret: string): string {
  return `rt.${user_id}.${session_id}.${secret}`;
}

export function parseRefreshToken(token: string): { user_id: string; session_id: string; secret: string } | null {
  const parts = token.split('.');
  if (parts.length !== 4 || parts[0] !== 'rt' || parts.some((part) => part.length === 0 || part.length > 128)) return null;
  return { user_id: parts[1], session_id: parts[2], secret: parts[3] };
}

// ---------------------------------------------------------------------------
// OAuth 2.0 (docs/api/oauth.md). Kept apart from the session tokens above.
// ---------------------------------------------------------------------------

/** The principal of a client_credentials access token: `sub` is `client:<client_id>`. */
export interface ClientAccessClaims {
  client_id: string;
  scopes: string[];
  exp: number;
}

/** A pending authorization request, carried as the signed `login_state`. */
export interface OAuthLoginState {
  client_id: string;
  redirect_uri: string;
  /** The authorization request named redirect_uri (false: the client's only one, by default): RFC 6749 §4.1.3 asks it back only then. */
  redirect_uri_given: boolean;
  code_challenge: string;
  code_challenge_method: 'S256' | 'plain';
  scope: string[];
  state: string | null;
}

export const CLIENT_SUBJECT_PREFIX = 'client:';
/** base64url of the first 12 bytes of every client token payload (`{"client_id"`): 16 characters, no padding. */
const CLIENT_PAYLOAD_PREFIX = Buffer.from('{"client_id"').toString('base64url');
const oauthHelpers = new WeakMap<TokenService, OAuthTokens>();

/**
 * Signing and verification helpers for the OAuth tokens, bound to a
 * TokenService's key and issuer. `TokenService.oauth()` below gives them.
 */
export class OAuthTokens {
  private readonly verified = new Map<string, ClientAccessClaims>();

  constructor(
    private readonly tokens: TokenService,
    private readonly sign: (jwt: SignJWT) => Promise<string>,
    private readonly verify: (token: string, typ: string) => Promise<Record<string, unknown>>,
    private readonly now: () => number,
  ) {}

  /**
   * An access token of a user session opened through an OAuth client: a
   * session token (same `sub`/`sid`, so logout, ban and delete cut it off)
   * plus the granted `scope`, enforced per route like an API key's.
   */
  async signUserAccessToken(user_id: string, session_id: string, scopes: string[]): Promise<{ token: string; expires_in: number }> {
    const now_s = Math.floor(this.now() / 1000);
    const ttl = this.tokens.accessTtlSeconds;
    const token = await this.sign(
      new SignJWT({ sid: session_id, scope: scopes.join(' ') })
        .setProtectedHeader({ alg: ALGORITHM, kid: this.tokens.kid, typ: 'at+jwt' })
        .setSubject(user_id)
        .setIssuedAt(now_s)
        .setExpirationTime(now_s + ttl),
    );
    return { token, expires_in: ttl };
  }

  async signClientAccessToken(client_id: string, scopes: string[]): Promise<{ token: string; expires_in: number }> {
    const now_s = Math.floor(this.now() / 1000);
    const ttl = this.tokens.accessTtlSeconds;
    const token = await this.sign(
      new SignJWT({ client_id, scope: scopes.join(' ') })
        .setProtectedHeader({ alg: ALGORITHM, kid: this.tokens.kid, typ: 'at+jwt' })
        .setSubject(CLIENT_SUBJECT_PREFIX + client_id)
        .setIssuedAt(now_s)
        .setExpirationTime(now_s + ttl),
    );
    return { token, expires_in: ttl };
  }

  /**
   * Whether a bearer looks like a client_credentials token: its payload
   * segment starts with base64url(`{"client_id"`), which signClientAccessToken
   * always writes first and a session token never does (a string compare, no
   * decoding; the signature and claims are checked by verifyClientAccessToken).
   */
  isClientAccessToken(token: string): boolean {
    const dot = token.indexOf('.');
    return dot > 0 && token.startsWith(CLIENT_PAYLOAD_PREFIX, dot + 1);
  }

  /** Claims of a client access token, or a 401. Cached like session tokens. */
  async verifyClientAccessToken(token: string): Promise<ClientAccessClaims> {
    const cache = this.verified;
    const now_s = this.now() / 1000;
    const cached = cache.get(token);
    if (cached) {
      if (cached.exp > now_s) return cached;
      cache.delete(token);
      throw new ServiceError('unauthorized', 'The access token has expired.');
    }
    let claims: ClientAccessClaims;
    try {
      const payload = await this.verify(token, 'at+jwt');
      const { sub, client_id, scope, exp } = payload;
      if (typeof client_id !== 'string' || sub !== CLIENT_SUBJECT_PREFIX + client_id || typeof scope !== 'string' || typeof exp !== 'number') {
        throw new Error('missing claims');
      }
      claims = { client_id, scopes: scope === '' ? [] : scope.split(' '), exp };
    } catch {
      throw new ServiceError('unauthorized', 'The access token is invalid or expired.');
    }
    if (cache.size >= CACHE_ENTRIES_MAX) cache.delete(cache.keys().next().value as string);
    cache.set(token, claims);
    return claims;
  }

  signLoginState(login: OAuthLoginState, ttl_seconds: number): Promise<string> {
    const now_s = Math.floor(this.now() / 1000);
    return this.sign(
      new SignJWT({ ...login })
        .setProtectedHeader({ alg: ALGORITHM, kid: this.tokens.kid, typ: 'oauth-login+jwt' })
        .setIssuedAt(now_s)
        .setExpirationTime(now_s + ttl_seconds),
    );
  }

  /** The pending request, or null when the login_state is forged or expired. */
  async verifyLoginState(token: string): Promise<OAuthLoginState | null> {
    try {
      const p = await this.verify(token, 'oauth-login+jwt');
      if (
        typeof p.client_id !== 'string' || typeof p.redirect_uri !== 'string' || typeof p.code_challenge !== 'string' ||
        (p.code_challenge_method !== 'S256' && p.code_challenge_method !== 'plain') || !Array.isArray(p.scope) ||
        (p.state !== null && typeof p.state !== 'string')
      ) return null;
      return {
        client_id: p.client_id,
        redirect_uri: p.redirect_uri,
        // A login_state signed before the claim existed: as it was treated then, given.
        redirect_uri_given: p.redirect_uri_given !== false,
        code_challenge: p.code_challenge,
        code_challenge_method: p.code_challenge_method,
        scope: p.scope.filter((s): s is string => typeof s === 'string'),
        state: p.state as string | null,
      };
    } catch {
      return null;
    }
  }
}

/** The OAuth helpers of a TokenService (one per service, created on first use). */
export function oauthTokens(tokens: TokenService): OAuthTokens {
  let helpers = oauthHelpers.get(tokens);
  if (!helpers) {
    const keys = tokens.oauthKeyAccess();
    helpers = new OAuthTokens(tokens, keys.sign, keys.verify, keys.now);
    oauthHelpers.set(tokens, helpers);
  }
  return helpers;
}
