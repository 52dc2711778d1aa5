import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../runtime/index.js';

/**
 * The JSON body parser: Fastify's own (secure-json-parse, `__proto__` and
 * `constructor.prototype` refused) behind three checks it does not make.
 * - The bytes must be valid UTF-8 (RFC 8259). Decoding them leniently would
 *   turn different byte strings into the same U+FFFD text: two clients with
 *   different invalid owner_ids would share one lock.
 * - Arrays and objects nest at most JSON_DEPTH_MAX levels, so nothing after
 *   the parser (JSON.stringify for fingerprints and size checks, msgpack in
 *   storage, the response serialiser) can overflow the stack: a 400, not a 500.
 * - No string or key may hold an unpaired surrogate (`"\ud800"` is valid JSON
 *   syntax). Storage encodes strings as UTF-8, which cannot carry one: the
 *   value would come back changed after a reload (a lock owner that can no
 *   longer release its own lock).
 */
export const JSON_DEPTH_MAX = 100;

export function registerJsonBody(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  addJsonMediaType(app, 'application/json');
}

/**
 * Parses `media_type` (a JSON media type such as SCIM's
 * `application/scim+json`) in `scope` exactly like application/json.
 */
export function addJsonMediaType(scope: FastifyInstance, media_type: string): void {
  const parse = scope.getDefaultJsonParser('error', 'error');
  scope.addContentTypeParser(media_type, { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) {
      done(new ServiceError('BAD_REQUEST', 'The request body is not valid UTF-8.'), undefined);
      return;
    }
    const text = bytes.toString('utf8');
    if (nestingExceeds(text, JSON_DEPTH_MAX)) {
      done(new ServiceError('BAD_REQUEST', `The request body nests arrays and objects deeper than ${JSON_DEPTH_MAX} levels.`), undefined);
      return;
    }
    parse(request, text, (error, value) => {
      if (error && isPlainJson(text)) {
        // Fastify's parser says "not valid JSON" for a refused __proto__ or constructor.prototype key too.
        done(new ServiceError('BAD_REQUEST', 'The request body holds a __proto__ or constructor.prototype key; such keys are refused.'), undefined);
        return;
      }
      // Only a \u escape can produce a lone surrogate: the bytes are valid UTF-8.
      if (!error && text.includes('\\u') && hasLoneSurrogate(value)) {
        done(new ServiceError('BAD_REQUEST', 'The request body holds a string with an unpaired UTF-16 surrogate escape.'), undefined);
        return;
      }
      done(error, value);
    });
  });
}

/**
 * JSON that comes in another envelope (a multipart form's `data` field), read
 * with the body parser's rules: nesting at most JSON_DEPTH_MAX levels, no
 * `__proto__` or `constructor.prototype` key (storage would not give them
 * back as they came), no unpaired surrogate. The problem reads after the
 * field's name: "is not JSON".
 */
export function parseJsonText(text: string): { value: unknown } | { problem: string } {
  if (nestingExceeds(text, JSON_DEPTH_MAX)) return { problem: `nests arrays and objects deeper than ${JSON_DEPTH_MAX} levels` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: 'is not JSON' };
  }
  if (hasPrototypeKey(value)) return { problem: 'holds a __proto__ or constructor.prototype key; such keys are refused' };
  if (text.includes('\\u') && hasLoneSurrogate(value)) return { problem: 'holds a string with an unpaired UTF-16 surrogate escape' };
  return { value };
}

/** The keys secure-json-parse refuses (Fastify's body parser): `__proto__`, and `constructor` holding `prototype`. */
function hasPrototypeKey(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasPrototypeKey);
  if (value === null || typeof value !== 'object') return false;
  for (const [key, item] of Object.entries(value)) {
    if (key === '__proto__') return true;
    if (key === 'constructor' && item !== null && typeof item === 'object' && Object.hasOwn(item, 'prototype')) return true;
    if (hasPrototypeKey(item)) return true;
  }
  return false;
}

/** Whether the text parses as JSON at all (asked only after the secure parser refused it). */
function isPlainJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const LONE_SURROGATE = /\p{Cs}/u;

/** Walks a parsed body (at most JSON_DEPTH_MAX deep, so recursion is bounded). */
function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === 'string') return LONE_SURROGATE.test(value);
  if (Array.isArray(value)) return value.some(hasLoneSurrogate);
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) if (LONE_SURROGATE.test(key) || hasLoneSurrogate(item)) return true;
  }
  return false;
}

/** True when brackets outside strings nest deeper than `depth_max`. Linear, no recursion. */
export function nestingExceeds(text: string, depth_max: number): boolean {
  // Deeper than depth_max needs more than depth_max opening brackets.
  if (text.length <= depth_max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > depth_max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}
