import { api, ApiError, loadSession } from './api.js';

/**
 * Reads a server-sent event stream of the public API (GET /admin/cluster/stream) with the
 * administrator's token in the Authorization header: EventSource cannot send it, so this is
 * fetch with a streamed body. A 401 refreshes the tokens once (through api(), which does it) and
 * reconnects; a stream the server ends (it does every minute) reconnects with the current token.
 */
export interface StreamHandlers {
  event(name: string, data: unknown): void;
  /** Connected (true) or waiting to reconnect (false, with the reason). */
  state(connected: boolean, error?: ApiError | Error): void;
}

const RECONNECT_MS = 1_000;

/** Follows `path` until `signal` aborts. */
export async function followStream(path: string, handlers: StreamHandlers, signal: AbortSignal): Promise<void> {
  let refreshedOnce = false;
  while (!signal.aborted) {
    try {
      const token = loadSession()?.access_token;
      const response = await fetch(path, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal });
      if (response.status === 401 && !refreshedOnce) {
        refreshedOnce = true;
        // api() refreshes the session on a 401 (or signs out when it cannot).
        await api('GET', '/api/v1/auth/me');
        continue;
      }
      if (!response.ok || !response.body) {
        const body = (await response.json().catch(() => ({}))) as { code?: string; message?: string };
        throw new ApiError(response.status, body.code ?? String(response.status), body.message ?? response.statusText);
      }
      refreshedOnce = false;
      handlers.state(true);
      await readEvents(response.body, handlers.event);
    } catch (error) {
      if (signal.aborted) return;
      handlers.state(false, error instanceof Error ? error : new Error(String(error)));
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return;
    }
    if (!signal.aborted) await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
  }
}

/** Splits a text/event-stream body into events (`event:` and one `data:` line of JSON each). */
async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (name: string, data: unknown) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const name = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (data !== undefined) onEvent(name, JSON.parse(data));
    }
  }
}
