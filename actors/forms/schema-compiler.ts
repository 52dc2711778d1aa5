import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import formatsPlugin from 'ajv-formats';
import { runWithin } from './bounded-run.js';
import { capturingPatterns, formPatternEngine, linearRegExp } from './pattern-engine.js';

/**
 * Compiles a form's JSON Schema with ajv: once per form version (the form
 * actor keeps the compiled validator in memory beside the version), never per
 * submission. Strict mode, so a typo'd keyword or an unresolvable `$ref` is a
 * schema ajv refuses, and the form is refused with 400 invalid_json_schema.
 */
// ajv-formats is CommonJS: its default export sits under .default when loaded as ESM.
const addFormats = ((formatsPlugin as unknown as { default?: (ajv: Ajv) => Ajv }).default ?? formatsPlugin) as unknown as (ajv: Ajv) => Ajv;

/** A compiled form schema: call it with the data; `errors` as ajv's. */
export interface CompiledSchema {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

/**
 * How long one validation may run when the schema holds a pattern RE2 cannot
 * read (it runs on JavaScript's backtracking engine): past it the data is
 * refused (bounded-run.ts). A legitimate lookaround over the 64 KiB a
 * submission may hold takes well under a millisecond.
 */
export const BACKTRACKING_VALIDATION_MS = 50;

function freshAjv(): Ajv {
  // A fresh instance per compile: a schema's $id never collides with another form's.
  const ajv = new Ajv({
    allErrors: true,
    strict: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
    addUsedSchema: false,
    logger: false,
    // Patterns run in linear time where RE2 reads them (pattern-engine.ts).
    code: { regExp: formPatternEngine },
  });
  addFormats(ajv);
  return ajv;
}

/** A validation that runs in `BACKTRACKING_VALIDATION_MS` at most (it throws TimeBoundExceeded past it). */
function timeBound(validate: ValidateFunction): CompiledSchema {
  const bounded: CompiledSchema = (data: unknown) => {
    const valid = runWithin(BACKTRACKING_VALIDATION_MS, () => validate(data));
    bounded.errors = validate.errors;
    return valid;
  };
  return bounded;
}

/**
 * The compiled validator and every pattern it runs, or the reason ajv refused
 * the schema. A schema with a pattern RE2 cannot read validates under a time
 * bound.
 */
export function compileSchema(schema: object): { validate: CompiledSchema; patterns: string[] } | { error: string } {
  if ((schema as { type?: unknown }).type !== 'object') return { error: 'the schema must describe an object (type: "object"): a submission is a JSON object' };
  try {
    const { result: validate, patterns } = capturingPatterns(() => freshAjv().compile(schema));
    const backtracking = patterns.some((pattern) => linearRegExp(pattern) === null);
    return { validate: backtracking ? timeBound(validate) : validate, patterns };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/** ajv's errors as `"<path> <message>"` lines (path `/` for the root). */
export function describeErrors(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).slice(0, 50).map((error) => {
    const extra = error.keyword === 'required' ? ` (${(error.params as { missingProperty: string }).missingProperty})` : error.keyword === 'additionalProperties' ? ` (${(error.params as { additionalProperty: string }).additionalProperty})` : '';
    return `${error.instancePath || '/'} ${error.message ?? error.keyword}${extra}`;
  });
}
