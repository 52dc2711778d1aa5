import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import formatsPlugin from 'ajv-formats';
import { formPatternEngine } from './pattern-engine.js';

/**
 * Compiles a form's JSON Schema with ajv: once per form version (the form
 * actor keeps the compiled validator in memory beside the version), never per
 * submission. Strict mode, so a typo'd keyword or an unresolvable `$ref` is a
 * schema ajv refuses, and the form is refused with 400 invalid_json_schema.
 */
// ajv-formats is CommonJS: its default export sits under .default when loaded as ESM.
const addFormats = ((formatsPlugin as unknown as { default?: (ajv: Ajv) => Ajv }).default ?? formatsPlugin) as unknown as (ajv: Ajv) => Ajv;

export type CompiledSchema = ValidateFunction;

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

/** The compiled validator, or the reason ajv refused the schema. */
export function compileSchema(schema: object): { validate: CompiledSchema } | { error: string } {
  if ((schema as { type?: unknown }).type !== 'object') return { error: 'the schema must describe an object (type: "object"): a submission is a JSON object' };
  try {
    return { validate: freshAjv().compile(schema) };
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
