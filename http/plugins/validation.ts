import { Ajv, type Options } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

/**
 * Two validators: query strings, params and headers arrive as text and are
 * coerced to their schema types; bodies are JSON and validated strictly, so
 * `{"ttl_seconds": "30"}` is a 400, not a silent conversion. Unknown body
 * fields are ignored (the conventions), never an error.
 */
const shared: Options = { allErrors: false, useDefaults: true, removeAdditional: false, strict: false };

export function registerValidation(app: FastifyInstance): void {
  const coercing = new Ajv({ ...shared, coerceTypes: 'array' });
  const strictTypes = new Ajv({ ...shared, coerceTypes: false });
  // ajv-formats is CommonJS; under NodeNext its default import is the module object.
  const addFormats = (formatsPlugin as unknown as { default: (ajv: Ajv) => Ajv }).default ?? formatsPlugin;
  for (const ajv of [coercing, strictTypes]) addFormats(ajv);
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strictTypes : coercing;
    return ajv.compile(schema);
  });
}
