import safeRegex from 'safe-regex2';
import { linearRegExp } from './pattern-engine.js';

/**
 * The regular expressions of a form's JSON Schema (`pattern`, the keys of
 * `patternProperties`, and so `propertyNames: {pattern}` too), checked
 * before the form is stored: JavaScript's engine backtracks, so one pattern
 * like `^(a+)+$` run there and a 40-character anonymous submission would hold
 * the node's event loop for a minute, for every tenant
 * (docs/api/forms.md, "Schema").
 *
 * A pattern RE2 reads runs in linear time (pattern-engine.ts) and is always
 * accepted. One it does not (lookaround, backreferences) runs as a RegExp, and
 * is refused when safe-regex2 (the checker Fastify's router uses for its own
 * routes) finds a repetition inside a repetition (star height above 1:
 * `(?=x)(a+)+`) or more than `PATTERN_REPETITIONS_MAX` repetitions in all, or
 * cannot read the pattern.
 * The walk knows which keywords hold subschemas, so a `const`, `enum`,
 * `default` or `examples` value that happens to have a `pattern` key is data,
 * not a pattern.
 */

/** Quantifiers one pattern may hold (safe-regex2's default). */
export const PATTERN_REPETITIONS_MAX = 25;

export interface UnsafePattern {
  /**
   * Where the pattern is, from the schema's root: `properties.a.pattern`,
   * `patternProperties.^(a+)+$`; null for one only ajv's compilation found
   * (reached through a `$ref` into a keyword the walk reads as data).
   */
  path: string | null;
  pattern: string;
}

/** Keywords whose value is one subschema. */
const SCHEMA_KEYWORDS = ['not', 'if', 'then', 'else', 'items', 'additionalItems', 'contains', 'additionalProperties', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties', 'contentSchema'];
/** Keywords whose value is a list of subschemas. */
const SCHEMA_LIST_KEYWORDS = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];
/** Keywords whose value maps names to subschemas (`dependencies` also maps to lists of names, skipped). */
const SCHEMA_MAP_KEYWORDS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies'];

/**
 * True when the pattern cannot backtrack catastrophically: RE2 reads it (it then
 * runs in linear time, pattern-engine.ts), or, for lookaround and
 * backreferences, which RE2 lacks, safe-regex2 finds no nested repetition.
 */
export function isSafePattern(pattern: string): boolean {
  if (linearRegExp(pattern) !== null) return true;
  // safe-regex2's parser does not know lookbehind; a lookbehind nests quantifiers as a lookahead does, so it is read as one.
  return safeRegex(pattern.replace(/\(\?<([=!])/g, '(?$1'), { limit: PATTERN_REPETITIONS_MAX });
}

/**
 * Every pattern of the schema that may backtrack catastrophically (empty when
 * none). Iterative, so a deeply nested schema costs no stack; the schema's
 * 64 KiB bound bounds the walk.
 */
export function unsafePatterns(root: unknown): UnsafePattern[] {
  const unsafe: UnsafePattern[] = [];
  const check = (pattern: string, path: string) => {
    if (!isSafePattern(pattern)) unsafe.push({ path, pattern });
  };
  const pending: { node: unknown; path: string }[] = [{ node: root, path: '' }];
  while (pending.length > 0) {
    const { node, path } = pending.pop()!;
    if (node === null || typeof node !== 'object' || Array.isArray(node)) continue;
    const schema = node as Record<string, unknown>;
    const at = (key: string) => (path === '' ? key : `${path}.${key}`);
    if (typeof schema.pattern === 'string') check(schema.pattern, at('pattern'));
    const patternProperties = schema.patternProperties;
    if (patternProperties !== null && typeof patternProperties === 'object' && !Array.isArray(patternProperties)) {
      for (const pattern of Object.keys(patternProperties)) check(pattern, at(`patternProperties.${pattern}`));
    }
    for (const keyword of SCHEMA_KEYWORDS) pending.push({ node: schema[keyword], path: at(keyword) });
    for (const keyword of SCHEMA_LIST_KEYWORDS) {
      const list = schema[keyword];
      if (Array.isArray(list)) list.forEach((child, index) => pending.push({ node: child, path: at(`${keyword}.${index}`) }));
    }
    for (const keyword of SCHEMA_MAP_KEYWORDS) {
      const map = schema[keyword];
      if (map !== null && typeof map === 'object' && !Array.isArray(map)) {
        for (const [name, child] of Object.entries(map)) pending.push({ node: child, path: at(`${keyword}.${name}`) });
      }
    }
  }
  // By path, so the first one named does not depend on the walk's order.
  return unsafe.sort((a, b) => (a.path! < b.path! ? -1 : a.path! > b.path! ? 1 : 0));
}

/**
 * unsafePatterns, and besides them every pattern ajv compiled for the schema
 * (`compiled`, pattern-engine.ts capturingPatterns) that the walk did not
 * see: a `$ref` can make a `default` or `examples` value a subschema.
 */
export function unsafePatternsOf(root: unknown, compiled: readonly string[]): UnsafePattern[] {
  const unsafe = unsafePatterns(root);
  const named = new Set(unsafe.map((found) => found.pattern));
  for (const pattern of compiled) {
    if (!named.has(pattern) && !isSafePattern(pattern)) unsafe.push({ path: null, pattern });
  }
  return unsafe;
}
