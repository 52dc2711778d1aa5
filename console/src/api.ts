/**
 * The console's only way to the node: the public HTTP API with the signed-in administrator's
 * tokens. There are no console-only routes, so the console can never do what the API forbids.
 * Tokens live in sessionStorage (gone with the tab); a 401 refreshes once with the refresh token.
 */

export interface Session {
  access_token: string;
  refresh_token: string;
}

const STORAGE_KEY = 'platform-console-session';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export function loadSession(): Session | null {
  const raw = sessionStorage.getItem(STORAGE_KEY);
  return raw ? (JSON.parse(raw) as Session) : null;
}

export function saveSession(session: Session | null): void {
  if (session) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  else sessionStorage.removeItem(STORAGE_KEY);
  sessionListeners.forEach((listener) => listener(session));
}

const sessionListeners = new Set<(session: Session | null) => void>();
export function onSessionChange(listener: (session: Session | null) => void): () => void {
  sessionListeners.add(listener);
  return () => sessionListeners.delete(listener);
}

async function send(method: string, path: string, body: unknown, token: string | undefined): Promise<Response> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token) headers.authorization = `Bearer ${token}`;
  return fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function refreshed(session: Session): Promise<Session | null> {
  const response = await send('POST', '/api/v1/auth/refresh', { refresh_token: session.refresh_token }, undefined);
  if (!response.ok) return null;
  const body = (await response.json()) as Session;
  const next = { access_token: body.access_token, refresh_token: body.refresh_token };
  saveSession(next);
  return next;
}

async function errorOf(response: Response): Promise<ApiError> {
  const text = await response.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string; error?: string; details?: unknown };
    return new ApiError(response.status, body.code ?? body.error ?? String(response.status), body.message ?? text, body.details);
  } catch {
    return new ApiError(response.status, String(response.status), text || response.statusText);
  }
}

/** Calls the API as the signed-in administrator; resolves with the parsed body (undefined for 204). */
export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  let session = loadSession();
  let response = await send(method, path, body, session?.access_token);
  if (response.status === 401 && session) {
    session = await refreshed(session);
    if (!session) {
      saveSession(null);
      throw await errorOf(response);
    }
    response = await send(method, path, body, session.access_token);
  }
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Calls the API outside the session (sign-in): without credentials, or with a token not yet kept. */
export async function publicApi<T = any>(method: string, path: string, body?: unknown, token?: string): Promise<T> {
  const response = await send(method, path, body, token);
  if (!response.ok) throw await errorOf(response);
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** An error as one line for a page: the API's message with its stable code. */
export function errorText(error: unknown): string {
  if (error instanceof ApiError) return `${error.message} (${error.code})`;
  return error instanceof Error ? error.message : String(error);
}
