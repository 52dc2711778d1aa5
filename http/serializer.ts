import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import type { LazySchemas } from './lazy-schemas.js';

/**
 * The response serialiser: Fastify's own (fast-json-stringify), given a copy
 * of each response schema in which "this type, or null" is written
 * `nullable: true` instead of `anyOf: [this type, null]`.
 *
 * Why: the routes declare nullable fields with TypeBox's
 * `Type.Union([X, Type.Null()])`, an `anyOf`, and fast-json-stringify picks
 * an `anyOf` branch by validating the value against each branch with ajv, on
 * every response: a lock status read spent a fifth of its JavaScript checking
 * its nullable `date-time` strings against ajv-formats' regexes. `nullable`
 * is the same contract (JSON Schema as OpenAPI 3.0 writes it) and
 * fast-json-stringify serialises it without validating. Only the serialiser
 * sees the copy: /openapi.json keeps the schemas as the routes wrote them.
 */
type Schema = Record<string, unknown>;

const PRIMITIVE_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array']);

function isNull(schema: unknown): boolean {
  return typeof schema === 'object' && schema !== null && (schema as Schema).type === 'null' && Object.keys(schema).length === 1;
}

/** `anyOf: [X, null]` (either order) with X of one plain type: X, nullable. Otherwise undefined. */
function asNullable(schema: Schema): Schema | undefined {
  const anyOf = schema.anyOf;
  if (!Array.isArray(anyOf) || anyOf.length !== 2) return undefined;
  const [a, b] = anyOf as unknown[];
  const other = isNull(a) ? b : isNull(b) ? a : undefined;
  if (typeof other !== 'object' || other === null) return undefined;
  const type = (other as Schema).type;
  if (typeof type !== 'string' || !PRIMITIVE_TYPES.has(type)) return undefined;
  if ('anyOf' in other || 'oneOf' in other || 'allOf' in other || 'nullable' in other || '$ref' in other) return undefined;
  const { anyOf: _anyOf, ...rest } = schema;
  return { ...rest, ...(other as Schema), nullable: true };
}

/** A copy of `schema` with every `anyOf [X, null]` written `X, nullable: true` (recursively). */
export function nullableForSerializer(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(nullableForSerializer);
  if (typeof schema !== 'object' || schema === null) return schema;
  const nullable = asNullable(schema as Schema);
  const source = nullable ?? (schema as Schema);
  const copy: Schema = {};
  for (const [key, value] of Object.entries(source)) {
    // Keywords holding schemas (or maps or lists of them) are rewritten; others (enum, const, examples) are kept as they are.
    copy[key] = SCHEMA_KEYWORDS.has(key) ? nullableForSerializer(value) : MAP_KEYWORDS.has(key) ? mapOf(value) : value;
  }
  return copy;
}

const SCHEMA_KEYWORDS = new Set(['items', 'additionalProperties', 'anyOf', 'oneOf', 'allOf', 'not', 'if', 'then', 'else', 'contains', 'additionalItems']);
const MAP_KEYWORDS = new Set(['properties', 'patternProperties', 'definitions', '$defs']);

function mapOf(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, nullableForSerializer(schema)]));
}

type BuildSerializer = ReturnType<typeof SerializerSelector>;

/**
 * Fastify's `schemaController.compilersFactory.buildSerializer`: the default
 * one, fed the rewritten schemas, each compiled on first use (http/lazy-schemas.ts).
 */
export function serializerFactory(lazy: LazySchemas): BuildSerializer {
  return (externalSchemas, serializerOptions) => {
    const compile = SerializerSelector()(externalSchemas, serializerOptions);
    return (route) => lazy.serializer(() => compile({ ...route, schema: nullableForSerializer(route.schema) }));
  };
}
