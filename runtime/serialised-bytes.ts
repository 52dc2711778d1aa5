/**
 * A JSON value's size as the service's "at most N bytes serialised" bounds
 * count it: the UTF-8 bytes of its JSON text, not its UTF-16 characters (a
 * "€" is one character and three bytes).
 */
export function serialisedBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '');
}
