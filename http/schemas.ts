import { Type, type TSchema } from '@sinclair/typebox';
import { formatIsoUtc } from './iso-format.js';

/** Schemas shared by every area: the error body, Message, pagination. */
export const ErrorBody = Type.Object(
  {
    statusCode: Type.Integer(),
    code: Type.String({ description: 'Stable machine-readable code; see docs/errors.md.' }),
    error: Type.String(),
    message: Type.String(),
    details: Type.Optional(Type.Unknown()),
  },
  { $id: 'ErrorBody', title: 'Error' },
);

export const MessageBody = Type.Object({ message: Type.String() }, { title: 'Message' });

export const Pagination = Type.Object({
  page: Type.Integer(),
  page_size: Type.Integer(),
  total: Type.Integer(),
  has_more: Type.Boolean(),
});

const errorRef = Type.Ref('ErrorBody');

/** Error responses for a route's OpenAPI entry (the body is always ErrorBody). */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  const responses: Record<number, TSchema> = {};
  for (const status of statuses) responses[status] = errorRef;
  return responses;
}

/** The error responses every bearer-authenticated JSON route can give. */
export const bearerErrors = [400, 401, 413, 415, 429, 503];

export const bearerSecurity = [{ bearerAuth: [] as string[] }];

/**
 * The strings isoTime made last, by the low 8 bits of their epoch-ms: under
 * load many responses carry the same millisecond (at 20,000 acquisitions a
 * second, twenty share each expiry instant), and `new Date(ms).toISOString()`
 * was 1.8% of the lock write path's JavaScript time. A miss is formatted in
 * arithmetic (http/iso-format.ts), not by V8's snprintf.
 */
const recentEpochMs = new Float64Array(256).fill(Number.NaN);
const recentIso: string[] = new Array<string>(256).fill('');

/** Epoch-ms to the RFC 3339 string the conventions use for `ts` fields. */
export function isoTime(epoch_ms: number | null | undefined): string | null {
  if (epoch_ms === null || epoch_ms === undefined) return null;
  const slot = epoch_ms & 255;
  if (recentEpochMs[slot] === epoch_ms) return recentIso[slot];
  // Throws RangeError for a time Date cannot hold, as before; nothing is stored then.
  const iso = formatIsoUtc(epoch_ms);
  recentEpochMs[slot] = epoch_ms;
  recentIso[slot] = iso;
  return iso;
}

/**
 * A regex prefix (a lookahead) for id patterns: the id is not the name of a
 * member of Object.prototype. Ids that key a plain object in an actor's
 * state would otherwise read an inherited function for a missing entry
 * (`constructor`), or, as `__proto__`, write the object's prototype.
 */
export const NOT_PROTOTYPE_MEMBER =
  '(?!(?:__proto__|__defineGetter__|__defineSetter__|__lookupGetter__|__lookupSetter__|constructor|hasOwnProperty|isPrototypeOf|propertyIsEnumerable|toLocaleString|toString|valueOf)$)';
