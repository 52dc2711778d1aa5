import { Ajv, type Options, type ValidateFunction } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import type { LazySchemas } from '../lazy-schemas.js';
import { validationDetails } from '../validation-details.js';

/**
 * Two validators: query strings, params and headers arrive as text and are
 * coerced to their schema types; bodies are JSON and validated strictly, so
 * `{"ttl_seconds": "30"}` is a 400, not a silent conversion. Unknown body
 * fields are ignored (the conventions), never an error.
 */
const shared: Options = { allErrors: false, useDefaults: true, removeAdditional: false, strict: false };

/**
 * Query strings are text: ajv's coercion turns `Infinity`, `-Infinity` and
 * `1e999` into a number that passes `type: integer` (Infinity % 1 is NaN) and
 * then breaks the response serialiser with a 500. So every numeric query or
 * path parameter is bounded once, here, as routes are added: a parameter
 * without its own `maximum`/`minimum` gets the safe-integer range
 * (|n| <= 2^53 - 1), which no non-finite value passes (docs/api/common.md).
 */
export function boundNumbers(schema: unknown): void {
  if (typeof schema !== 'object' || schema === null) return;
  const node = schema as Record<string, unknown>;
  if (node.type === 'integer' || node.type === 'number') {
    node.maximum ??= Number.MAX_SAFE_INTEGER;
    node.minimum ??= -Number.MAX_SAFE_INTEGER;
  }
  for (const key of ['properties', 'patternProperties']) {
    const children = node[key];
    if (children && typeof children === 'object') for (const child of Object.values(children)) boundNumbers(child);
  }
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const members = node[key];
    if (Array.isArray(members)) for (const member of members) boundNumbers(member);
  }
  if (node.items) boundNumbers(node.items);
}

/** ajv-formats' plugin. It is CommonJS; under NodeNext its default import is the module object. */
export const addFormats = (formatsPlugin as unknown as { default: (ajv: Ajv) => Ajv }).default ?? formatsPlugin;

/** An ajv as the edge validates bodies with (strict types, formats). */
export function bodyValidatorAjv(): Ajv {
  return addFormats(new Ajv({ ...shared, coerceTypes: false }));
}

let partsAjv: Ajv | undefined;

/**
 * A check of a part of a body that a route validates itself, as the edge
 * validates bodies (a batch's items, one by one, so one bad item fails
 * alone). Compiled on first use: start-up is part of a restarted node's
 * recovery (http/lazy-schemas.ts). Answers null, or the 400 the edge would
 * give that part as a body, its fields named under `field`.
 */
export function bodyPartCheck(schema: object): (value: unknown, field: string) => ServiceError | null {
  let validate: ValidateFunction | undefined;
  return (value, field) => {
    validate ??= (partsAjv ??= bodyValidatorAjv()).compile(schema);
    if (validate(value)) return null;
    const details = validationDetails(field, validate.errors ?? []);
    const first = details[0] ?? { field, message: 'is invalid' };
    return new ServiceError('BAD_REQUEST', `${first.field} ${first.message}`, { details });
  };
}

export function registerValidation(app: FastifyInstance, lazy: LazySchemas): void {
  app.addHook('onRoute', (route) => {
    const schema = route.schema as { querystring?: unknown; params?: unknown } | undefined;
    boundNumbers(schema?.querystring);
    boundNumbers(schema?.params);
  });
  const coercing = addFormats(new Ajv({ ...shared, coerceTypes: 'array' }));
  const strictTypes = bodyValidatorAjv();
  // Compiled on first use (http/lazy-schemas.ts): start-up is part of a restarted node's recovery.
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strictTypes : coercing;
    return lazy.validator(() => ajv.compile(schema));
  });
}
