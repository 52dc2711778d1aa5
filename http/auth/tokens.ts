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
  async signTwoFactorChallenge(user_id: string, challenge_id: string, ttl_seconds: number): Promise<string> {
    const now_s = Math.floor(this.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: ALGORITHM, kid: this.kid, typ: '2fa+jwt' })
      .setSubject(user_id)
      .setJti(challenge_id)
      .setIssuer(this.issuer)
      .setIssuedAt(now_s)
      .setExpirationTime(now_s + ttl_seconds)
      .sign(this.signKey);
  }

  async verifyTwoFactorChallenge(token: string): Promise<{ user_id: string; challenge_id: string }> {
    try {
      const { payload } = await jwtVerify(token, this.verifyKey, {
        issuer: this.issuer,
        algorithms: [ALGORITHM],
        typ: '2fa+jwt',
        currentDate: new Date(this.now()),
      });
      if (typeof payload.sub !== 'string' || typeof payload.jti !== 'string') throw new Error('missing claims');
      return { user_id: payload.sub, challenge_id: payload.jti };
    } catch {
      throw new ServiceError('invalid_credentials', 'The two-factor token is invalid or expired.');
    }
  }

  /** The token's claims, or a 401. */
  async verifyAccessToken(token: string): Promise<AccessClaims> {
    const now_s = this.now() / 1000;
    const cached = this.verified.get(token);
    if (cached) {
      if (cached.exp > now_s) return cached;
      this.verified.delete(token);
      throw new ServiceError('unauthorized', 'The access token has expired.');
    }
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
