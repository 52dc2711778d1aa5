import { ApiError } from './errors.js';
import { backoffMs, defaultSleep, retryAfterMs, type RetryOptions } from './retry-policy.js';
import type { Tokens, TokenStore } from './tokens.js';

/**
 * The fetch function every typed call goes through (openapi-fetch hands it
 * the Request it built). One place decides, per request:
 *
 * - the bearer token, read from the token store at each attempt (a refresh
 *   made by another request is picked up);
 * - on 401, one refresh with the refresh token, then the request again; 401s
 *   arriving together share one refresh (the refresh token rotates, so two
 *   refreshes of the same token would race each other);
 * - an `Idempotency-Key` on every POST (kept across its attempts), so a POST
 *   whose answer was lost or refused with 503 can be sent again and the node
 *   answers the stored result instead of running it twice
 *   (docs/api/common.md, Idempotency);
 * - 429 and 503 (and 409 `idempotency_in_progress`) are retried after their
 *   `Retry-After`, a bounded number of times; a lost connection is retried
 *   with backoff when the request is safe to repeat;
 * - any other error answer is thrown as an ApiError carrying `code`.
 *
 * It is a fetch wrapper rather than openapi-fetch middleware because retrying
 * means sending the request again, which middleware cannot do.
 */

export interface TransportOptions {
  baseUrl: string;
  tokens: TokenStore;
  retry?: RetryOptions;
  /** Add an Idempotency-Key to POSTs that have none (default true). */
  idempotencyKeys?: boolean;
  fetch?: (request: Request) => Promise<Response>;
  /** Called when the refresh token was refused: the session is over, sign in again. */
  onSessionEnded?: () => void;
}

/** POSTs whose successful answer carries the session's tokens: stored in the token store. */
const SIGN_IN_PATHS = new Set(['/api/v1/auth/register', '/api/v1/auth/login', '/api/v1/auth/2fa/verify']);
const SIGN_OUT_PATH = '/api/v1/auth/logout';
const REFRESH_PATH = '/api/v1/auth/refresh';
/** Repeating these changes nothing more than doing them once (RFC 9110 §9.2.2). */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

export class Transport {
  private readonly baseUrl: string;
  private readonly basePath: string;
  private readonly send: (request: Request) => Promise<Response>;
  private readonly maxAttempts: number;
  private readonly maxDelayMs: number;
  private readonly baseDelayMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private refreshing: Promise<Tokens | null> | null = null;

  constructor(private readonly options: TransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.basePath = new URL(this.baseUrl).pathname.replace(/\/+$/, '');
    this.send = options.fetch ?? ((request) => globalThis.fetch(request));
    this.maxAttempts = Math.max(1, options.retry?.maxAttempts ?? 4);
    this.maxDelayMs = options.retry?.maxDelayMs ?? 30_000;
    this.baseDelayMs = options.retry?.baseDelayMs ?? 200;
    this.sleep = options.retry?.sleep ?? defaultSleep;
  }

  /** The fetch function handed to openapi-fetch. */
  readonly fetch = async (request: Request): Promise<Response> => {
    const method = request.method.toUpperCase();
    // Buffered once: every attempt sends the same bytes (the idempotency fingerprint includes the body).
    const body = request.body ? await request.arrayBuffer() : undefined;
    const headers = new Headers(request.headers);
    const ownAuthorization = headers.has('authorization');
    if (method === 'POST' && this.options.idempotencyKeys !== false && !headers.has('idempotency-key')) {
      headers.set('idempotency-key', newIdempotencyKey());
    }
    let refreshed = false;
    for (let attempt = 1; ; ) {
      let usedToken: string | null = null;
      if (!ownAuthorization) {
        usedToken = (await this.options.tokens.get())?.access_token ?? null;
        if (usedToken) headers.set('authorization', `Bearer ${usedToken}`);
        else headers.delete('authorization');
      }
      let response: Response;
      try {
        response = await this.send(new Request(request.url, { method, headers, body, signal: request.signal, redirect: request.redirect }));
      } catch (error) {
        // The connection failed or was cut: the request may or may not have run.
        if (request.signal.aborted || !this.repeatable(method, headers) || attempt >= this.maxAttempts) throw error;
        await this.sleep(backoffMs(attempt, this.baseDelayMs, this.maxDelayMs));
        attempt++;
        continue;
      }
      if (response.status === 401 && usedToken !== null && !refreshed) {
        refreshed = true;
        const fresh = await this.tokensAfter(usedToken);
        if (fresh) {
          await response.body?.cancel();
          continue;
        }
      }
      const delay = await this.retryDelay(response, method, headers, attempt);
      if (delay !== null) {
        await response.body?.cancel();
        await this.sleep(delay);
        attempt++;
        continue;
      }
      if (!response.ok) throw await ApiError.fromResponse(response, method, request.url);
      if (method === 'POST') await this.noteSession(request.url, response);
      return response;
    }
  };

  /** A refresh with the stored refresh token (shared with any refresh already running); null: the session ended. */
  refreshTokens(): Promise<Tokens | null> {
    this.refreshing ??= (async () => {
      const current = await this.options.tokens.get();
      if (!current?.refresh_token) return null;
      return this.refresh(current.refresh_token);
    })().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  /** Tokens to retry with after `usedToken` was refused: newer ones already stored, or a refresh's. */
  private async tokensAfter(usedToken: string): Promise<Tokens | null> {
    if (this.refreshing) return this.refreshing;
    const current = await this.options.tokens.get();
    if (current && current.access_token !== usedToken) return current;
    return this.refreshTokens();
  }

  private async refresh(refreshToken: string): Promise<Tokens | null> {
    for (let attempt = 1; ; attempt++) {
      const response = await this.send(
        new Request(this.baseUrl + REFRESH_PATH, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ refresh_token: refreshToken }),
        }),
      );
      if (response.ok) {
        const tokens = (await response.json()) as Tokens;
        await this.options.tokens.set({ access_token: tokens.access_token, refresh_token: tokens.refresh_token });
        return tokens;
      }
      if (response.status === 401) {
        // Unknown, rotated or ended: this session is over.
        await response.body?.cancel();
        await this.options.tokens.set(null);
        this.options.onSessionEnded?.();
        return null;
      }
      // 429: refused before it ran, safe to send again. (A 503 may have rotated the token: not retried.)
      const delay = response.status === 429 && attempt < this.maxAttempts ? this.delayFromHeader(response, attempt) : null;
      if (delay === null) throw await ApiError.fromResponse(response, 'POST', this.baseUrl + REFRESH_PATH);
      await response.body?.cancel();
      await this.sleep(delay);
    }
  }

  /** How long to wait before sending again, or null: do not. */
  private async retryDelay(response: Response, method: string, headers: Headers, attempt: number): Promise<number | null> {
    if (attempt >= this.maxAttempts) return null;
    // Rate limited: refused at the edge before the route ran, so any request may be sent again.
    if (response.status === 429) return this.delayFromHeader(response, attempt);
    // Unavailable (overloaded, stopping, failing over): the write may have happened, so only a repeatable request.
    if (response.status === 503) return this.repeatable(method, headers) ? this.delayFromHeader(response, attempt) : null;
    // The same Idempotency-Key is still running (an earlier attempt whose answer was lost): its result comes soon.
    if (response.status === 409 && headers.has('idempotency-key')) {
      const code = await response.clone().json().then((body) => (body as { code?: unknown }).code, () => undefined);
      if (code === 'idempotency_in_progress') return this.delayFromHeader(response, attempt);
    }
    return null;
  }

  private delayFromHeader(response: Response, attempt: number): number | null {
    const delay = retryAfterMs(response.headers.get('retry-after'));
    if (delay === null) return backoffMs(attempt, this.baseDelayMs, this.maxDelayMs);
    return delay <= this.maxDelayMs ? delay : null;
  }

  /**
   * Safe to send again when it may already have run: an idempotent method, or
   * an authenticated POST with an Idempotency-Key (the node ignores the key
   * on unauthenticated POSTs: register, login, refresh).
   */
  private repeatable(method: string, headers: Headers): boolean {
    if (IDEMPOTENT_METHODS.has(method)) return true;
    return method === 'POST' && headers.has('idempotency-key') && headers.has('authorization');
  }

  /** A sign-in's answer stores its tokens; a sign-out forgets them. */
  private async noteSession(url: string, response: Response): Promise<void> {
    const path = new URL(url).pathname.slice(this.basePath.length);
    if (path === SIGN_OUT_PATH) {
      await this.options.tokens.set(null);
      return;
    }
    if (!SIGN_IN_PATHS.has(path)) return;
    const body = (await response.clone().json().catch(() => null)) as Partial<Tokens> | null;
    // A login with two-factor on answers a challenge, not tokens.
    if (typeof body?.access_token === 'string') {
      await this.options.tokens.set({ access_token: body.access_token, refresh_token: body.refresh_token ?? null });
    }
  }
}
