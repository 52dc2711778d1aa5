import vm from 'node:vm';

/**
 * Runs a synchronous function under a time bound: V8 stops it when the bound
 * passes, wherever it is, even deep in a regular expression's backtracking.
 * A form schema's patterns that RE2 cannot read (lookaround,
 * backreferences) run on JavaScript's backtracking engine; a submission's
 * validation against such a schema runs here, so no pattern and no input
 * can hold the node's event loop past the bound (docs/api/forms.md,
 * "Schema"). Node's `vm` timeout is the mechanism: its watchdog terminates
 * the script's execution, functions it calls included.
 *
 * Each call starts a watchdog thread (about 0.1 ms here): only schemas with
 * such patterns pay it, once per validation.
 */
export class TimeBoundExceeded extends Error {
  constructor(readonly bound_ms: number) {
    super(`stopped after ${bound_ms} ms`);
  }
}

const context = vm.createContext({ task: null as (() => unknown) | null });
const script = new vm.Script('task()');

export function runWithin<T>(bound_ms: number, task: () => T): T {
  const outer = context.task;
  context.task = task;
  try {
    return script.runInContext(context, { timeout: bound_ms }) as T;
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw new TimeBoundExceeded(bound_ms);
    throw error;
  } finally {
    context.task = outer;
  }
}
