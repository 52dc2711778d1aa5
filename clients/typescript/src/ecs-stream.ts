import type { PlatformClient } from './client.js';

/**
 * The ECS tick stream (docs/api/ecs.md, "GET /ws") that survives a lost
 * connection: it reconnects with backoff and sends `resume` with the last
 * tick it applied, so the handler sees every tick once, in order, across
 * reconnects, node restarts and failovers. When the ticks it missed have left
 * the node's ring, the node answers a snapshot instead (handed to
 * `onSnapshot`), and the stream goes on from there.
 */

/** A change of one entity in a tick: its full state after the tick. */
export type EcsChange =
  | { entity_id: string; op: 'upsert'; version: number; components: Record<string, unknown> }
  | { entity_id: string; op: 'delete'; version: number };

export interface EcsTick {
  tick: number;
  /** RFC 3339: when the tick was committed. */
  at: string;
  changes: EcsChange[];
}

export interface EcsSnapshot {
  /** The tick the snapshot was taken at: ticks after it follow. */
  tick: number;
  entities: { entity_id: string; version: number; components: Record<string, unknown> }[];
}

export interface EcsHello {
  protocol: number;
  index: string;
  tick: number;
  running: boolean;
  tick_rate_ms: number | null;
  oldest_tick: number | null;
}

/**
 * The part of the WebSocket API this helper uses: the browser's, or the `ws`
 * package's in Node 20. (The handlers' events are `any`: the two declare
 * their own event classes, and this helper reads only `data`.)
 */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((event: any) => void) | null;
  onmessage: ((event: any) => void) | null;
  onclose: ((event: any) => void) | null;
  onerror: ((event: any) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface EcsStreamOptions {
  /** The node's http(s) URL. */
  baseUrl: string;
  index: string;
  /** The access token for each connection (sent in the query: browsers cannot set headers on a WebSocket). */
  token: () => string | null | undefined | Promise<string | null | undefined>;
  /**
   * Called after a connection closed before it opened (a bad token is refused
   * at the upgrade, which a browser reports only as a close): a chance to
   * refresh the token before the next attempt.
   */
  onConnectFailure?: () => Promise<void>;
  /** Default: the global WebSocket (browsers, Node 22+). In Node 20 pass `WebSocket` from the `ws` package. */
  WebSocket?: WebSocketConstructor;
  /**
   * Where the first connection starts: `snapshot` (default) the whole index,
   * then its ticks; `live` the ticks after the moment of connecting;
   * `{after: n}` every tick after n (a tick you applied before).
   */
  start?: 'snapshot' | 'live' | { after: number };
  onTick(tick: EcsTick): void;
  onSnapshot?(snapshot: EcsSnapshot): void;
  onHello?(hello: EcsHello): void;
  /** An `error` message of the node that this helper does not handle itself. */
  onServerError?(error: { code: string; message: string }): void;
  /** Connected (true) or lost (false); a lost stream is being reconnected unless closed. */
  onConnectionChange?(connected: boolean): void;
  /** Reconnect delays: doubled from minDelayMs up to maxDelayMs, with jitter; reset once a connection says hello. */
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  /**
   * Liveness (default 15000 ms; 0: off): a `ping` every period, and a
   * connection that brought nothing (no tick, no pong) for a whole period is
   * dropped and replaced. It notices a connection that died without a close
   * (a half-open TCP connection) instead of waiting on it for ever.
   */
  heartbeatMs?: number;
}

export interface EcsStream {
  /** The last tick applied (from a tick or a snapshot); null before the first. */
  readonly lastTick: number | null;
  /** Closes the connection; no reconnect. */
  close(): void;
}

const OPEN = 1;

function wsUrl(baseUrl: string, index: string, token: string | null | undefined): string {
  const url = new URL(`${baseUrl.replace(/\/+$/, '')}/api/v1/ecs/${encodeURIComponent(index)}/coordinator/ws`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  if (token) url.searchParams.set('token', token);
  return url.toString();
}

function messageText(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) return new TextDecoder().decode(data as ArrayBuffer);
  return String(data);
}

export function openEcsStream(options: EcsStreamOptions): EcsStream {
  const found = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!found) throw new Error('No global WebSocket (Node 20): pass the `ws` package\'s WebSocket as options.WebSocket.');
  const WebSocketImpl: WebSocketConstructor = found;
  const minDelay = options.reconnect?.minDelayMs ?? 250;
  const maxDelay = options.reconnect?.maxDelayMs ?? 10_000;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const start = options.start ?? 'snapshot';

  let lastTick: number | null = typeof start === 'object' ? start.after : null;
  let closed = false;
  let socket: WebSocketLike | null = null;
  let delay = minDelay;
  let timer: ReturnType<typeof setTimeout> | null = null;
  /** A resume (or snapshot) was asked on this connection and its first tick has not come yet: later ticks are skipped, they come again. */
  let catchingUp = false;
  let snapshotParts: EcsSnapshot['entities'][] = [];
  let heartbeat: ReturnType<typeof setInterval> | null = null;
  /** Something arrived on the connection since the last heartbeat. */
  let heard = false;

  function stopHeartbeat(): void {
    if (heartbeat) clearInterval(heartbeat);
    heartbeat = null;
  }

  function send(message: object): void {
    if (socket?.readyState === OPEN) socket.send(JSON.stringify(message));
  }

  function askForState(): void {
    if (lastTick !== null) {
      send({ type: 'resume', tick: lastTick });
      catchingUp = true;
    } else if (start === 'snapshot') {
      send({ type: 'snapshot' });
      catchingUp = true;
    }
    // live: the stream starts at hello's tick.
  }

  function onMessage(text: string): void {
    let message: { type?: string; [key: string]: unknown };
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    switch (message.type) {
      case 'hello': {
        delay = minDelay;
        const hello = message as unknown as EcsHello & { type: string };
        if (lastTick === null && start === 'live') lastTick = hello.tick;
        options.onHello?.(hello);
        return;
      }
      case 'tick': {
        const tick = message as unknown as EcsTick & { type: string };
        // Before the first snapshot: the snapshot will carry these changes.
        if (lastTick === null) return;
        if (tick.tick <= lastTick) return; // sent again by a resume: applied already
        if (tick.tick > lastTick + 1) {
          // A live tick ahead of the replay the resume asked for: it comes again, in order.
          if (!catchingUp) askForState();
          return;
        }
        catchingUp = false;
        lastTick = tick.tick;
        options.onTick({ tick: tick.tick, at: tick.at, changes: tick.changes });
        return;
      }
      case 'snapshot': {
        const part = message as unknown as { tick: number; part: number; parts: number; entities: EcsSnapshot['entities'] };
        if (part.part === 1) snapshotParts = [];
        snapshotParts.push(part.entities);
        if (part.part < part.parts) return;
        const entities = snapshotParts.flat();
        snapshotParts = [];
        catchingUp = false;
        lastTick = part.tick;
        options.onSnapshot?.({ tick: part.tick, entities });
        return;
      }
      case 'error': {
        const error = message as unknown as { code: string; message: string };
        if (error.code === 'resume_ahead') {
          // The index is behind the tick we saw (its data was removed): start again from its state.
          lastTick = null;
          send({ type: 'snapshot' });
          catchingUp = true;
          return;
        }
        if (error.code === 'stream_unavailable') {
          catchingUp = false;
          askForState();
          return;
        }
        options.onServerError?.(error);
        return;
      }
      default:
        return;
    }
  }

  async function connect(): Promise<void> {
    timer = null;
    if (closed) return;
    let token: string | null | undefined;
    try {
      token = await options.token();
    } catch {
      token = null;
    }
    if (closed) return;
    let opened = false;
    const ws = new WebSocketImpl(wsUrl(options.baseUrl, options.index, token));
    socket = ws;
    catchingUp = false;
    snapshotParts = [];
    const lost = () => {
      if (socket !== ws) return;
      socket = null;
      stopHeartbeat();
      if (opened) options.onConnectionChange?.(false);
      if (!closed) void reconnectLater(!opened);
    };
    ws.onopen = () => {
      opened = true;
      options.onConnectionChange?.(true);
      // Sent at once: the node answers it right after hello, before any live tick.
      askForState();
      if (heartbeatMs > 0) {
        heard = true;
        heartbeat = setInterval(() => {
          if (!heard) {
            // Silent for a whole period: replace it now, without waiting for a close that may never come.
            lost();
            const terminate = (ws as { terminate?: () => void }).terminate;
            if (terminate) terminate.call(ws);
            else ws.close(4000, 'no heartbeat');
            return;
          }
          heard = false;
          send({ type: 'ping' });
        }, heartbeatMs);
      }
    };
    ws.onmessage = (event: { data: unknown }) => {
      heard = true;
      onMessage(messageText(event.data));
    };
    ws.onerror = () => {
      // A close follows; it decides.
    };
    ws.onclose = lost;
  }

  async function reconnectLater(failedToOpen: boolean): Promise<void> {
    if (failedToOpen && options.onConnectFailure) await options.onConnectFailure().catch(() => undefined);
    if (closed) return;
    const wait = Math.round(delay / 2 + (Math.random() * delay) / 2);
    delay = Math.min(maxDelay, delay * 2);
    timer = setTimeout(() => void connect(), wait);
  }

  void connect();
  return {
    get lastTick() {
      return lastTick;
    },
    close() {
      closed = true;
      stopHeartbeat();
      if (timer) clearTimeout(timer);
      socket?.close(1000, 'closed by client');
      socket = null;
    },
  };
}

/**
 * The tick stream of an index, authenticated as the client's session: the
 * token comes from its token store, and a connection refused at the upgrade
 * (an expired token) makes the client check the session, refreshing it once.
 */
export function openClientEcsStream(
  client: PlatformClient,
  options: Omit<EcsStreamOptions, 'baseUrl' | 'token' | 'onConnectFailure'>,
): EcsStream {
  return openEcsStream({
    ...options,
    baseUrl: client.baseUrl,
    token: async () => (await client.tokens.get())?.access_token,
    // GET /auth/me goes through the client's transport: a 401 there refreshes the tokens.
    onConnectFailure: async () => {
      await client.get('/api/v1/auth/me');
    },
  });
}
