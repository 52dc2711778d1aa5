/**
 * One of Fastify's internal symbols on an object it made (a request, a
 * reply), found by its description, with a check that the value under it is
 * what the caller expects; null if none is. Fastify does not export its
 * symbols: the hot-path helpers that read its internals (route-config.ts,
 * reply-headers.ts) find theirs once, from the first object they see, and
 * fall back to the public API on null.
 */
export function fastifySymbol(target: object, description: string, accepts: (value: unknown) => boolean): symbol | null {
  for (const symbol of Object.getOwnPropertySymbols(target)) {
    if (symbol.description === description && accepts((target as Record<symbol, unknown>)[symbol])) return symbol;
  }
  return null;
}
