import { ServiceError } from '../../runtime/index.js';

/**
 * External OAuth 2.0 providers for linked accounts (docs/api/linked-accounts.md),
 * configured by the env variable OAUTH_PROVIDERS:
 *
 *   {"<name>": {"display_name", "authorization_endpoint"?, "token_endpoint",
 *               "userinfo_endpoint", "client_id", "client_secret"?,
 *               "token_endpoint_auth_method"?}}
 *
 * Linking exchanges an authorization code at the token endpoint (RFC 6749
 * §4.1.3, with the PKCE code_verifier when the caller has one), then reads the
 * provider's user from the userinfo endpoint with the access token. The
 * platform's own OAuth server works as a provider: token endpoint
 * `<base>/oauth/token`, userinfo `<base>/api/v1/auth/me` (the client needs the
 * `auth:read` scope).
 */
export interface OAuthProviderConfig {
  display_name: string;
  authorization_endpoint: string | null;
  token_endpoint: string;
  userinfo_endpoint: string;
  client_id: string;
  client_secret: string | null;
  /** How the client authenticates at the token endpoint (RFC 7591 names). Default client_secret_basic, or none without a secret. */
  token_endpoint_auth_method: 'client_secret_basic' | 'client_secret_post' | 'none';
}

export type OAuthProviders = Record<string, OAuthProviderConfig>;

export const PROVIDER_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** A provider call (token exchange or userinfo) is abandoned after this long. */
export const PROVIDER_TIMEOUT_MS = 10_000;
/** Provider replies larger than this are refused. */
export const PROVIDER_RESPONSE_BYTES_MAX = 256 * 1024;
const PROVIDERS_MAX = 20;
const AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'none'] as const;

function endpoint(value: unknown, where: string, required: boolean): string | null {
  if (value === undefined || value === null || value === '') {
    if (required) throw new Error(`OAUTH_PROVIDERS: ${where} is required`);
    return null;
  }
  if (typeof value !== 'string') throw new Error(`OAUTH_PROVIDERS: ${where} must be a URL string`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`OAUTH_PROVIDERS: ${where} must be an absolute URL, got ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`OAUTH_PROVIDERS: ${where} must be an http(s) URL`);
  return value;
}

function text(value: unknown, where: string, max: number): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max) throw new Error(`OAUTH_PROVIDERS: ${where} must be a non-empty string of at most ${max} characters`);
  return value;
}

/** Parses and validates OAUTH_PROVIDERS (absent or empty: no providers). Throws an Error naming the bad field. */
export function parseOAuthProviders(raw: string | undefined): OAuthProviders {
  if (raw === undefined || raw.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new Error('OAUTH_PROVIDERS must be a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('OAUTH_PROVIDERS must be a JSON object');
  const entries = Object.entries(parsed as Record<string, unknown>);
  if (entries.length > PROVIDERS_MAX) throw new Error(`OAUTH_PROVIDERS: at most ${PROVIDERS_MAX} providers`);
  const providers: OAuthProviders = {};
  for (const [name, value] of entries) {
    if (!PROVIDER_NAME_PATTERN.test(name)) throw new Error(`OAUTH_PROVIDERS: provider name ${JSON.stringify(name)} must match ${PROVIDER_NAME_PATTERN}`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`OAUTH_PROVIDERS: ${name} must be an object`);
    const p = value as Record<string, unknown>;
    const client_secret = p.client_secret === undefined || p.client_secret === null || p.client_secret === '' ? null : text(p.client_secret, `${name}.client_secret`, 1024);
    const method = p.token_endpoint_auth_method ?? (client_secret === null ? 'none' : 'client_secret_basic');
    if (!AUTH_METHODS.includes(method as (typeof AUTH_METHODS)[number])) {
      throw new Error(`OAUTH_PROVIDERS: ${name}.token_endpoint_auth_method must be one of ${AUTH_METHODS.join(', ')}`);
    }
    if (method !== 'none' && client_secret === null) throw new Error(`OAUTH_PROVIDERS: ${name}.client_secret is required with ${method as string}`);
    providers[name] = {
      display_name: p.display_name === undefined ? name : text(p.display_name, `${name}.display_name`, 100),
      authorization_endpoint: endpoint(p.authorization_endpoint, `${name}.authorization_endpoint`, false),
      token_endpoint: endpoint(p.token_endpoint, `${name}.token_endpoint`, true)!,
      userinfo_endpoint: endpoint(p.userinfo_endpoint, `${name}.userinfo_endpoint`, true)!,
      client_id: text(p.client_id, `${name}.client_id`, 512),
      client_secret,
      token_endpoint_auth_method: method as OAuthProviderConfig['token_endpoint_auth_method'],
    };
  }
  return providers;
}

export interface ProviderIdentity {
  /** The provider's stable user id (`sub`, else `id`). */
  subject: string;
  email: string;
}

function linkFailed(message: string): ServiceError {
  return new ServiceError('link_failed', message);
}

/** Fetches with a time-out and reads a JSON object of bounded size; every failure is a `link_failed`. */
async function fetchJson(url: string, init: RequestInit, what: string): Promise<{ status: number; body: Record<string, unknown> | null }> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
  } catch (error) {
    const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
    throw linkFailed(timedOut ? `The provider's ${what} did not answer in time.` : `The provider's ${what} could not be reached.`);
  }
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > PROVIDER_RESPONSE_BYTES_MAX) {
    await response.body?.cancel();
    throw linkFailed(`The provider's ${what} reply is too large.`);
  }
  let raw = '';
  try {
    const reader = response.body?.getReader();
    const decoder = new TextDecoder();
    let bytes = 0;
    while (reader) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > PROVIDER_RESPONSE_BYTES_MAX) {
        await reader.cancel();
        throw linkFailed(`The provider's ${what} reply is too large.`);
      }
      raw += decoder.decode(value, { stream: true });
    }
    raw += decoder.decode();
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw linkFailed(`The provider's ${what} reply could not be read.`);
  }
  let body: unknown = null;
  try {
    body = raw ? JSON.parse(raw) : null;
  } catch {
    body = null;
  }
  return { status: response.status, body: typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : null };
}

/**
 * Exchanges `code` at the provider and returns the provider user's identity.
 * Provider errors (refused code, unreachable, malformed reply) are 400 `link_failed`, never a 5xx.
 */
export async function exchangeCodeForIdentity(
  provider: OAuthProviderConfig,
  input: { code: string; redirect_uri: string; code_verifier?: string },
): Promise<ProviderIdentity> {
  const form = new URLSearchParams({ grant_type: 'authorization_code', code: input.code, redirect_uri: input.redirect_uri });
  if (input.code_verifier) form.set('code_verifier', input.code_verifier);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (provider.token_endpoint_auth_method === 'client_secret_basic') {
    const id = encodeURIComponent(provider.client_id);
    const secret = encodeURIComponent(provider.client_secret ?? '');
    headers.authorization = `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
  } else {
    form.set('client_id', provider.client_id);
    if (provider.token_endpoint_auth_method === 'client_secret_post') form.set('client_secret', provider.client_secret ?? '');
  }
  const token = await fetchJson(provider.token_endpoint, { method: 'POST', headers, body: form.toString() }, 'token endpoint');
  if (token.status !== 200 || !token.body || typeof token.body.access_token !== 'string' || token.body.access_token === '') {
    const reason = token.body && typeof token.body.error === 'string' ? `: ${token.body.error.slice(0, 100)}` : ` (HTTP ${token.status})`;
    throw linkFailed(`The provider refused the authorization code${reason}.`);
  }
  const info = await fetchJson(
    provider.userinfo_endpoint,
    { method: 'GET', headers: { authorization: `Bearer ${token.body.access_token}`, accept: 'application/json' } },
    'userinfo endpoint',
  );
  if (info.status !== 200 || !info.body) throw linkFailed(`The provider's userinfo endpoint answered HTTP ${info.status}.`);
  // OIDC userinfo names the user `sub`; the platform's own /api/v1/auth/me (and GitHub-style APIs) `id`.
  const user = typeof info.body.user === 'object' && info.body.user !== null && !('sub' in info.body) && !('id' in info.body) ? (info.body.user as Record<string, unknown>) : info.body;
  const rawSubject = user.sub ?? user.id;
  const subject = typeof rawSubject === 'number' && Number.isSafeInteger(rawSubject) ? String(rawSubject) : rawSubject;
  if (typeof subject !== 'string' || subject === '' || subject.length > 256) throw linkFailed("The provider's userinfo reply has no user id (sub or id).");
  const email = typeof user.email === 'string' ? user.email.slice(0, 254) : '';
  return { subject, email };
}
