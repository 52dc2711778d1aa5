import type { FastifyReply } from 'fastify';
import { fastifySymbol } from './fastify-symbol.js';

/**
 * The reply's header object, for a hot path that sets headers of its own
 * naming: `replyHeadersOf(reply)['x-name'] = value` is what
 * `reply.header('x-name', value)` does for a name already in lower case and
 * other than `set-cookie` (which Fastify keeps as a list), without what that
 * call costs on every request: `reply.header` lower-cases the name and reads
 * and writes the object by a variable key, which V8 serves from its
 * megamorphic caches once the service sets dozens of different headers.
 * With the name written in the code, the store is a plain property store.
 * (The edge rate limiter sets two headers on every limited response.)
 *
 * The object is Fastify's own (its `fastify.reply.headers` symbol, found
 * once): `reply.getHeader` and the response read it as they do after
 * `reply.header`. Null should a Fastify version not have it: the caller then
 * uses `reply.header`. test/unit/reply-headers.test.ts checks both give the
 * same response.
 */
export type ReplyHeaders = Record<string, unknown>;

let headersSymbol: symbol | null | undefined;

function findHeadersSymbol(reply: FastifyReply): symbol | null {
  return fastifySymbol(reply, 'fastify.reply.headers', (headers) => headers !== null && typeof headers === 'object' && !Array.isArray(headers));
}

export function replyHeadersOf(reply: FastifyReply): ReplyHeaders | null {
  if (headersSymbol === undefined) headersSymbol = findHeadersSymbol(reply);
  if (headersSymbol === null) return null;
  // Null, not a crash, for a reply without it (a second copy of Fastify has symbols of its own).
  return (reply as unknown as Record<symbol, ReplyHeaders | undefined>)[headersSymbol] ?? null;
}

/** Forgets the symbol found (tests: the fallback path). */
export function resetReplyHeadersSymbol(symbol?: symbol | null): void {
  headersSymbol = symbol;
}
