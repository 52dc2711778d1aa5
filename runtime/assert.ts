/**
 * Assertions catch programmer errors; expected operating errors are
 * ServiceErrors. The two are never confused: an AssertionError is a defect.
 */
export class AssertionError extends Error {
  override name = 'AssertionError';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}
