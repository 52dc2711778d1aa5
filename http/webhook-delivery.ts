import { lookup } from 'node:dns/promises';
import type { EventEmitter } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import net, { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ActorClient, PublishedEvent } from '../runtime/index.js';
import {
  WEBHOOK_ATTEMPT_EVENT,
  WEBHOOK_KIND,
  webhookPolicy,
  type AttemptResult,
  type LoggedResponse,
  type WebhookAttempt,
  type WebhookSettings,
} from '../actors/webhooks/messages.js';
import { blockedAddressReason } from './webhook-guard.js';
import { pinnedAgent, type PinnedRequestOptions } from './pinned-agent.js';

/**
 * The node's webhook delivery worker. The webhook actor emits a
 * `webhook.attempt` event (after its commit) when an attempt is due; this
 * worker performs the POST and tells the `attempt_result` back to the actor,
 * which decides (success, retry, dead-letter, disable). A lost attempt (the
 * queue is full, the node stops) is simply not answered: the actor's
 * in-flight deadline retries it. In a cluster the events are emitted on the
 * partition's leader, so the leader's worker delivers.
 *
 * The delivery guard: the target's host is resolved once, every address is
 * checked (http/webhook-guard.ts), and the connection goes to the checked
 * address (the socket is made here, never by a second DNS lookup), so a DNS
 * answer that changes between check and connect cannot reach a refused
 * address. Redirects (up to 3) are followed by hand, each hop checked the
 * same way. WEBHOOK_ALLOW_PRIVATE_TARGETS=1 lifts the address rule (tests).
 *
 * Bounds: at most concurrency_max attempts in flight per node and
 * per_host_max per target host (so a hanging target holds only its own
 * slots, each for at most its time-out), queue_max waiting in all and
 * per_host_queue_max per host: a target that hangs fills its own waiting
 * list, never the room other targets' attempts need (an attempt refused for
 * room is retried by its actor at its deadline).
 */
export interface WebhookNetwork {
  /** Every address of `hostname` (one lookup per hop). */
  resolve(hostname: string): Promise<string[]>;
  /** A connected socket to the checked address (TLS with `servername` for https). */
  connect(options: { address: string; port: number; tls: boolean; servername: string }): Duplex;
}

export const systemNetwork: WebhookNetwork = {
  async resolve(hostname) {
    const answers = await lookup(hostname, { all: true, verbatim: true });
    return answers.map((answer) => answer.address);
  },
  connect({ address, port, tls: secure, servername }) {
    if (!secure) return net.connect({ host: address, port });
    return tls.connect({ host: address, port, servername: isIP(servername) ? undefined : servername });
  },
};

export interface WebhookDeliveryOptions {
  events: EventEmitter;
  actors: ActorClient;
  settings: () => WebhookSettings;
  allowPrivateTargets: boolean;
  logger: Logger;
  network?: WebhookNetwork;
  concurrency_max?: number;
  per_host_max?: number;
  queue_max?: number;
  per_host_queue_max?: number;
}

const REDIRECTS_MAX = 3;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'platform-service-webhooks/1';

const RESET_CODES = new Set(['ECONNRESET', 'EPIPE']);

class Refused extends Error {}
class TimedOut extends Error {}

export class WebhookDeliveryWorker {
  /** Mutable so a test can answer DNS from a table and map addresses to local sockets. */
  network: WebhookNetwork;
  /**
   * Attempts waiting for a slot, one FIFO per target host (only hosts with
   * waiting attempts are present): a pump visits each waiting host once,
   * never each waiting attempt, and parses no URL.
   */
  private readonly waiting = new Map<string, WebhookAttempt[]>();
  private queued = 0;
  private readonly perHost = new Map<string, number>();
  private readonly active = new Set<http.ClientRequest>();
  /** Kept-alive connections to checked addresses (http/pinned-agent.ts); `network` makes each new one. */
  private readonly agents = {
    http: pinnedAgent(false, (target) => this.network.connect(target)),
    https: pinnedAgent(true, (target) => this.network.connect(target)),
  };
  private inFlight = 0;
  private stopped = false;
  private readonly concurrency_max: number;
  private readonly per_host_max: number;
  private readonly queue_max: number;
  private readonly per_host_queue_max: number;
  private readonly listener = (event: PublishedEvent) => {
    if (event.type === WEBHOOK_ATTEMPT_EVENT) this.enqueue(event.data as WebhookAttempt);
  };

  constructor(private readonly options: WebhookDeliveryOptions) {
    this.network = options.network ?? systemNetwork;
    this.concurrency_max = options.concurrency_max ?? 64;
    this.per_host_max = options.per_host_max ?? 8;
    this.queue_max = options.queue_max ?? 10_000;
    this.per_host_queue_max = options.per_host_queue_max ?? Math.max(1, Math.floor(this.queue_max / 8));
  }

  start(): void {
    this.options.events.on('event', this.listener);
  }

  /** Stops taking attempts and aborts those in flight (unanswered: their deadlines retry them). */
  stop(): void {
    this.stopped = true;
    this.options.events.off('event', this.listener);
    this.waiting.clear();
    this.queued = 0;
    for (const request of this.active) request.destroy();
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  private enqueue(attempt: WebhookAttempt): void {
    if (this.stopped) return;
    if (this.queued >= this.queue_max) {
      this.options.logger.warn({ webhook_id: attempt.webhook_id, event_id: attempt.event_id }, 'webhook delivery queue full; the attempt is retried at its deadline');
      return;
    }
    const host = hostOf(attempt.url);
    const list = this.waiting.get(host);
    if (list && list.length >= this.per_host_queue_max) {
      this.options.logger.warn({ webhook_id: attempt.webhook_id, event_id: attempt.event_id, host }, "webhook delivery queue of this target's host full; the attempt is retried at its deadline");
      return;
    }
    if (list) list.push(attempt);
    else this.waiting.set(host, [attempt]);
    this.queued++;
    this.pump();
  }

  /**
   * Starts waiting attempts while slots are free: per host up to
   * per_host_max, in all up to concurrency_max. Hosts are served in turn (a
   * host that still has attempts waiting goes to the back), so a busy or
   * hanging target never holds another target's attempts behind its own.
   */
  private pump(): void {
    if (this.inFlight >= this.concurrency_max || this.waiting.size === 0) return;
    for (const host of [...this.waiting.keys()]) {
      if (this.inFlight >= this.concurrency_max) break;
      const list = this.waiting.get(host)!;
      let busy = this.perHost.get(host) ?? 0;
      while (list.length > 0 && busy < this.per_host_max && this.inFlight < this.concurrency_max) {
        const attempt = list.shift()!;
        this.queued--;
        busy++;
        this.inFlight++;
        this.perHost.set(host, busy);
        void this.run(attempt).finally(() => this.done(host));
      }
      this.waiting.delete(host);
      if (list.length > 0) this.waiting.set(host, list);
    }
  }

  private done(host: string): void {
    this.inFlight--;
    const left = (this.perHost.get(host) ?? 1) - 1;
    if (left <= 0) this.perHost.delete(host);
    else this.perHost.set(host, left);
    this.pump();
  }

  private async run(attempt: WebhookAttempt): Promise<void> {
    const started = performance.now();
    const outcome = await this.perform(attempt, started + attempt.timeout_ms);
    if (this.stopped) return;
    const result: AttemptResult = {
      op: 'attempt_result',
      event_id: attempt.event_id,
      attempt: attempt.attempt,
      duration_ms: Math.round(performance.now() - started),
      settings: this.options.settings(),
      ...outcome,
    };
    try {
      this.options.actors.tell(WEBHOOK_KIND, attempt.webhook_id, result);
    } catch (error) {
      this.options.logger.warn({ err: error, webhook_id: attempt.webhook_id }, 'webhook attempt result not delivered; the attempt is retried at its deadline');
    }
  }

  /** One attempt: resolve, check, connect to the checked address, follow redirects by hand. */
  async perform(
    attempt: WebhookAttempt,
    deadline: number,
  ): Promise<Pick<AttemptResult, 'status_code' | 'error' | 'error_kind' | 'response_excerpt' | 'response'>> {
    let url: URL;
    try {
      url = new URL(attempt.url);
    } catch {
      return { status_code: null, error: 'target_refused: the URL does not parse', error_kind: 'refused', response_excerpt: null };
    }
    const origin = url.origin;
    let headers = attempt.headers;
    try {
      for (let hop = 0; ; hop++) {
        if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Refused(`target_refused: ${url.protocol} is not http or https`);
        if (hop > 0 && url.origin !== origin) {
          // As browsers and fetch drop Authorization across origins: the custom headers (credentials, as the
          // docs advise) stay with the target's own origin; the signed headers go on, they prove and reveal nothing.
          if (attempt.url.startsWith('https:') && url.protocol === 'http:') throw new Refused('target_refused: a redirect from https to http');
          headers = signedHeadersOf(attempt.headers);
        }
        const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
        const addresses = isIP(hostname) ? [hostname] : await withDeadline(this.network.resolve(hostname), deadline);
        if (addresses.length === 0) throw new Error(`no address for ${hostname}`);
        if (!this.options.allowPrivateTargets) {
          for (const address of addresses) {
            const reason = blockedAddressReason(address);
            if (reason) throw new Refused(`target_refused: ${address === hostname ? address : `${hostname} resolves to ${address}, which`} is a ${reason} address`);
          }
        }
        const response = await this.post(url, addresses[0], attempt, headers, deadline);
        if (REDIRECT_STATUSES.has(response.status) && response.location && hop < REDIRECTS_MAX) {
          url = new URL(response.location, url);
          continue;
        }
        return { status_code: response.status, error: null, error_kind: null, response_excerpt: response.excerpt, response: response.logged };
      }
    } catch (error) {
      if (error instanceof Refused) return { status_code: null, error: error.message, error_kind: 'refused', response_excerpt: null };
      if (error instanceof TimedOut) return { status_code: null, error: `timeout after ${attempt.timeout_ms} ms`, error_kind: 'timeout', response_excerpt: null };
      const message = error instanceof Error ? `${(error as NodeJS.ErrnoException).code ?? 'error'}: ${error.message}` : String(error);
      return { status_code: null, error: `connection failed: ${message}`.slice(0, 512), error_kind: 'connection', response_excerpt: null };
    }
  }

  private post(
    url: URL,
    address: string,
    attempt: WebhookAttempt,
    headers: Record<string, string>,
    deadline: number,
    retried = false,
  ): Promise<{ status: number; location: string | null; excerpt: string | null; logged: LoggedResponse }> {
    const secure = url.protocol === 'https:';
    const port = url.port ? Number(url.port) : secure ? 443 : 80;
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const remaining = deadline - performance.now();
    if (remaining <= 0) return Promise.reject(new TimedOut());
    const body = Buffer.from(attempt.body, 'utf8');
    return new Promise((resolve, reject) => {
      const options: PinnedRequestOptions = {
        method: 'POST',
        host: hostname,
        port,
        path: `${url.pathname}${url.search}`,
        headers: { ...headers, 'content-length': String(body.length), 'user-agent': USER_AGENT },
        // The agent connects to the checked address itself (never a second DNS lookup) and keeps the connection alive.
        agent: secure ? this.agents.https : this.agents.http,
        pinned_address: address,
        servername: hostname,
      };
      const request = (secure ? https : http).request(options);
      this.active.add(request);
      let settled = false;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.active.delete(request);
        fn();
      };
      /** Set once the answer's headers are in: the deadline then ends the body's reading, not the attempt. */
      let answered: (() => void) | null = null;
      const timer = setTimeout(() => {
        // The time-out covers DNS, connect, redirects and the answer's headers (docs/api/webhooks.md): a 2xx whose
        // body never ends was still answered, so it counts by its status, with what of the body came.
        if (answered) answered();
        else finish(() => reject(new TimedOut()));
        request.destroy();
      }, remaining);
      request.on('error', (error) => {
        // A kept-alive connection the receiver closed while it sat idle: the request never reached
        // it, so it is sent once more (on another or a new connection) within the same deadline.
        if (request.reusedSocket && !retried && RESET_CODES.has((error as NodeJS.ErrnoException).code ?? '')) {
          finish(() => resolve(this.post(url, address, attempt, headers, deadline, true)));
          return;
        }
        finish(() => reject(error));
      });
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let length = 0;
        // Read up to the logged body's bound (the excerpt is its start), then stop: a huge answer costs nothing more.
        const max = webhookPolicy.logged_response_body_max;
        const done = () =>
          finish(() => {
            const all = Buffer.concat(chunks).toString('utf8');
            const text = all.slice(0, webhookPolicy.response_excerpt_length_max);
            const location = response.headers.location ?? null;
            const status = response.statusCode ?? 0;
            const logged: LoggedResponse = { status_code: status, headers: loggedHeaders(response.headers), body: all.slice(0, max), body_truncated: all.length > max };
            resolve({ status, location, excerpt: text === '' ? null : text, logged });
            // Read to its end, the connection goes back to the pool; cut short, it cannot be reused.
            if (!response.complete) request.destroy();
          });
        answered = done;
        response.on('data', (chunk: Buffer) => {
          if (length <= max) {
            chunks.push(chunk);
            length += chunk.length;
          }
          if (length > max) done();
        });
        response.on('end', done);
        response.on('error', done);
        response.on('aborted', done);
      });
      request.end(body);
    });
  }
}

/** The headers a delivery carries whatever its target: the content type and the Standard Webhooks signature set. */
const SIGNED_HEADERS = new Set(['content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'service-signature']);

/** An attempt's headers without the custom ones, for a redirect to another origin. */
function signedHeadersOf(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => SIGNED_HEADERS.has(name.toLowerCase())));
}

/** A response's headers for the delivery log: the first logged_response_headers_max, values cut at logged_header_value_max. */
function loggedHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers).slice(0, webhookPolicy.logged_response_headers_max)) {
    if (value === undefined) continue;
    kept[name] = (Array.isArray(value) ? value.join(', ') : value).slice(0, webhookPolicy.logged_header_value_max);
  }
  return kept;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
}

function withDeadline<T>(promise: Promise<T>, deadline: number): Promise<T> {
  const remaining = deadline - performance.now();
  if (remaining <= 0) return Promise.reject(new TimedOut());
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimedOut()), remaining);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
