import type { IncomingMessage } from 'node:http';
import { randomId } from '../runtime/index.js';

/**
 * The request ids the node makes (`request.id`, the `request_id` of log
 * lines, when the request names none: requestIdOf): a random part drawn once
 * per process, then a counter. Unique across processes and restarts as a
 * random id per request would be (96 random bits tell two runs apart; the
 * counter tells the requests of one run apart).
 *
 * Why not a random id per request: it cost 0.8 µs of the edge's 80 µs per
 * lock acquisition (a pool slice and a base64url encoding, docs/performance.md),
 * for a guarantee the counter gives too.
 */
export function requestIdGenerator(): () => string {
  // 16 base64url characters: 96 random bits, a fixed length, so the counter that follows cannot be mistaken for part of it.
  const run = randomId('req_').slice(0, 4 + 16);
  let next = 0;
  return () => run + (next++).toString(36);
}

/** An X-Request-Id a client may name its request with: 1 to 128 visible ASCII characters. */
const CLIENT_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Fastify's genReqId: the request's X-Request-Id when it is a plausible one
 * (so a client's or a proxy's trace id shows in this node's log lines), else
 * a made one. A longer or stranger value is not carried into every log line
 * of its request: the request gets an id of its own. The id is for tracing
 * only: the client chooses it, so nothing may take it for unique
 * (http/plugins/x402.ts makes its charge ids itself).
 */
export function requestIdOf(generate: () => string): (request: IncomingMessage) => string {
  return (request) => {
    const named = request.headers['x-request-id'];
    return typeof named === 'string' && CLIENT_REQUEST_ID.test(named) ? named : generate();
  };
}
