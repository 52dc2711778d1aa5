/**
 * A request body example built from the route's JSON Schema, for operations whose docs page shows
 * none: the schema's own `examples`/`default`/`const`, else the first enum value, a plausible value
 * for the format or the field's name that meets the pattern and length bounds, a number inside its
 * range, the required fields of an object (all-optional objects show their first few fields).
 * Pure. Every example in /openapi.json is checked against its schema with ajv
 * (test/http/api-reference.test.ts); a schema this cannot satisfy fails there, not silently here.
 */

export type JsonSchema = Record<string, unknown>;

/** Optional fields shown for an object with no required ones (a PATCH body, say). */
const OPTIONAL_SHOWN = 3;
/** A fixed instant: examples do not change from one build of the document to the next. */
const EXAMPLE_TIME = '2026-01-01T12:00:00.000Z';

const FORMAT_VALUES: Record<string, string> = {
  email: 'user@example.com',
  'date-time': EXAMPLE_TIME,
  date: '2026-01-01',
  time: '12:00:00Z',
  uri: 'https://example.com/hook',
  url: 'https://example.com/hook',
  uuid: '3f2b8c1e-5d4a-4c6b-9e7f-1a2b3c4d5e6f',
  hostname: 'example.com',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
};

/** Candidate strings by what the field's name says it holds, tried before the generic ones. */
const NAMED_VALUES: [RegExp, string[]][] = [
  [/e-?mail/i, ['user@example.com']],
  [/password|secret/i, ['correct horse battery staple']],
  [/url|uri|endpoint|callback|webhook/i, ['https://example.com/hook']],
  [/domain|host/i, ['example.com']],
  [/currency/i, ['USD', 'usd']],
  [/username|login/i, ['alice']],
  [/amount|price|balance/i, ['10.50', '10']],
  [/^org_?id$|organization/i, ['org_example']],
  [/(^|_)(at|time|before|after|until|since)$/i, [EXAMPLE_TIME]],
  [/name|title|label/i, ['example']],
  [/description|reason|note|message|comment|text|body|content/i, ['An example.']],
  [/code/i, ['123456']],
  [/(^|_)ids?$/i, ['example-1']],
];

const GENERIC_VALUES = ['example', 'example-1', 'example.com', 'Example', 'EXAMPLE', 'ex', '1', '10', '10.5', 'a', 'A', 'org_example', 'https://example.com/hook', 'An example.'];

function stringFits(schema: JsonSchema, value: string): boolean {
  const length = [...value].length;
  if (typeof schema.minLength === 'number' && length < schema.minLength) return false;
  if (typeof schema.maxLength === 'number' && length > schema.maxLength) return false;
  // ajv compiles `pattern` with the u flag; so does this check.
  if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) return false;
  return true;
}

function exampleString(schema: JsonSchema, name: string): string {
  const format = typeof schema.format === 'string' ? FORMAT_VALUES[schema.format] : undefined;
  const named = NAMED_VALUES.filter(([test]) => test.test(name)).flatMap(([, values]) => values);
  const candidates = [...(format ? [format] : []), ...named, ...GENERIC_VALUES];
  for (const candidate of candidates) {
    if (stringFits(schema, candidate)) return candidate;
    // Too short for minLength: the candidate padded with a character the pattern takes.
    const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
    for (const pad of ['x', '1', 'X', '-']) {
      const padded = candidate + pad.repeat(Math.max(0, min - candidate.length));
      if (stringFits(schema, padded)) return padded;
    }
  }
  return 'example';
}

function exampleNumber(schema: JsonSchema, integer: boolean): number {
  let low = typeof schema.minimum === 'number' ? schema.minimum : -Infinity;
  let high = typeof schema.maximum === 'number' ? schema.maximum : Infinity;
  if (typeof schema.exclusiveMinimum === 'number') low = Math.max(low, schema.exclusiveMinimum + (integer ? 1 : Number.EPSILON * 8));
  if (typeof schema.exclusiveMaximum === 'number') high = Math.min(high, schema.exclusiveMaximum - (integer ? 1 : Number.EPSILON * 8));
  let value = integer ? 10 : 1.5;
  if (value < low) value = integer ? Math.ceil(low) : low;
  if (value > high) value = integer ? Math.floor(high) : high;
  const step = typeof schema.multipleOf === 'number' ? schema.multipleOf : undefined;
  if (step) value = Math.ceil(value / step) * step;
  return value;
}

function schemaTypes(schema: JsonSchema): string[] {
  if (Array.isArray(schema.type)) return schema.type as string[];
  if (typeof schema.type === 'string') return [schema.type];
  if (schema.properties || schema.additionalProperties || schema.patternProperties) return ['object'];
  if (schema.items) return ['array'];
  return [];
}

function exampleObject(schema: JsonSchema): Record<string, unknown> {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  const names = Object.keys(properties);
  const shown = required.length > 0 ? required.filter((key) => key in properties) : names.slice(0, OPTIONAL_SHOWN);
  const min = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  const max = typeof schema.maxProperties === 'number' ? schema.maxProperties : Infinity;
  for (const key of names) if (shown.length < min && !shown.includes(key)) shown.push(key);
  const object: Record<string, unknown> = {};
  for (const key of shown.slice(0, max)) object[key] = exampleFor(properties[key]!, key);
  // A map ("attributes": string to value): one entry shows its shape.
  const patterns = Object.entries((schema.patternProperties ?? {}) as Record<string, JsonSchema>);
  const extra = schema.additionalProperties;
  const entry: [JsonSchema, JsonSchema] | null =
    patterns.length > 0 ? [{ ...((schema.propertyNames ?? {}) as JsonSchema), pattern: patterns[0]![0] }, patterns[0]![1]]
    : typeof extra === 'object' && extra !== null ? [(schema.propertyNames ?? {}) as JsonSchema, extra as JsonSchema]
    : null;
  if (entry && Object.keys(object).length < max && (names.length === 0 || Object.keys(object).length < min)) {
    const [keySchema, valueSchema] = entry;
    object[stringFits(keySchema, 'key') ? 'key' : exampleString(keySchema, 'key')] = exampleFor(valueSchema, 'value');
  }
  return object;
}

/** An example value for `schema`; `name` is the field it fills (it picks plausible strings). */
export function exampleFor(schema: JsonSchema, name = ''): unknown {
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if (schema.example !== undefined) return schema.example;
  if (schema.const !== undefined) return schema.const;
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const union of ['anyOf', 'oneOf'] as const) {
    const members = schema[union];
    if (Array.isArray(members) && members.length > 0) {
      const member = (members as JsonSchema[]).find((m) => m.type !== 'null') ?? members[0];
      return exampleFor(member as JsonSchema, name);
    }
  }
  if (Array.isArray(schema.allOf)) {
    return Object.assign({}, ...(schema.allOf as JsonSchema[]).map((member) => exampleFor(member, name)));
  }
  const type = schemaTypes(schema).find((t) => t !== 'null') ?? (schemaTypes(schema).includes('null') ? 'null' : 'any');
  switch (type) {
    case 'object':
      return exampleObject(schema);
    case 'array': {
      const min = typeof schema.minItems === 'number' ? schema.minItems : 0;
      const max = typeof schema.maxItems === 'number' ? schema.maxItems : Infinity;
      const count = Math.min(Math.max(min, 1), max);
      const item = exampleFor((schema.items ?? {}) as JsonSchema, name.replace(/s$/, ''));
      return Array.from({ length: count }, () => item);
    }
    case 'string':
      return exampleString(schema, name);
    case 'integer':
      return exampleNumber(schema, true);
    case 'number':
      return exampleNumber(schema, false);
    case 'boolean':
      return false;
    case 'null':
      return null;
    default:
      // Any JSON value (a payload, metadata): an object with one field.
      return { example: true };
  }
}
