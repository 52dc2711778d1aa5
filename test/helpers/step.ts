import { ServiceError, type TurnContext } from '../../runtime/index.js';

/** Helpers for pure step tests: a fixed turn context, and the code a step rejects with. */

let idCounter = 0;

/** A turn context at `now`, with deterministic ids (`<prefix>1`, `<prefix>2`, ...). */
export function fixedContext(now: number, kind = 'test', key = 'k'): TurnContext {
  return { now, kind, key, request_id: null, newId: (prefix = '') => `${prefix}${++idCounter}` };
}

/** The ServiceError code `run` throws, or undefined if it returns. Other errors propagate. */
export function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof ServiceError) return error.code;
    throw error;
  }
  return undefined;
}
