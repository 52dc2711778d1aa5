import { describe, expect, it } from 'vitest';
import { linearRegExp } from '../../actors/forms/pattern-engine.js';
import { isSafePattern, unsafePatterns } from '../../actors/forms/schema-patterns.js';

/** The ReDoS check of a form schema's regular expressions (actors/forms/schema-patterns.ts; docs/api/forms.md, "Schema"). */
describe('schema patterns', () => {
  it('accepts what RE2 reads (linear time, nested repetitions too); of the rest, refuses nested repetitions and reads lookbehind, Unicode classes and named groups', () => {
    for (const pattern of ['^(a+)+$', '(a*)*', '^(\\w+\\s?)*$', '^(a|a)*$']) expect(isSafePattern(pattern), pattern).toBe(true);
    for (const pattern of ['^(?=a)(a+)+$', '(?!x)(a*)*', '(\\w)\\1(\\w+\\s?)*$', '(?<=(a+)+)b', '[']) expect(isSafePattern(pattern), pattern).toBe(false);
    for (const pattern of ['^\\d{3}-\\d{4}$', "^[\\p{L} '-]+$", '(?<year>\\d{4})-(?<month>\\d{2})', '(?<=\\$)\\d+', '(?<!x)y', '^[^@]+@[^@]+\\.[a-z]{2,}$']) expect(isSafePattern(pattern), pattern).toBe(true);
  });

  it('finds every pattern where a subschema may hold one, and none in data keywords', () => {
    const bad = '(?=x)(a+)+';
    const schema = {
      type: 'object',
      properties: { a: { type: 'string', pattern: bad }, b: { type: 'array', items: { pattern: bad }, prefixItems: [{ pattern: bad }] }, c: { const: { pattern: bad }, enum: [{ pattern: bad }], default: { pattern: bad }, examples: [{ pattern: bad }] } },
      patternProperties: { [bad]: { not: { pattern: bad } } },
      propertyNames: { pattern: bad },
      additionalProperties: { allOf: [{ pattern: bad }], anyOf: [{ pattern: 'ok' }], oneOf: [{ if: { pattern: bad }, then: { pattern: bad }, else: { pattern: bad } }] },
      $defs: { d: { contains: { pattern: bad } } },
      definitions: { e: { dependentSchemas: { x: { pattern: bad } } } },
      dependencies: { f: ['a'], g: { pattern: bad } },
    };
    expect(unsafePatterns(schema).map((found) => found.path)).toEqual([
      '$defs.d.contains.pattern',
      'additionalProperties.allOf.0.pattern',
      'additionalProperties.oneOf.0.else.pattern',
      'additionalProperties.oneOf.0.if.pattern',
      'additionalProperties.oneOf.0.then.pattern',
      'definitions.e.dependentSchemas.x.pattern',
      'dependencies.g.pattern',
      `patternProperties.${bad}`,
      `patternProperties.${bad}.not.pattern`,
      'properties.a.pattern',
      'properties.b.items.pattern',
      'properties.b.prefixItems.0.pattern',
      'propertyNames.pattern',
    ]);
  });

  it('walks a deeply nested schema without recursion', () => {
    let schema: Record<string, unknown> = { pattern: '(?=x)(a+)+' };
    for (let depth = 0; depth < 20_000; depth++) schema = { not: schema };
    expect(unsafePatterns(schema)).toHaveLength(1);
  });
});

describe('the pattern engine', () => {
  it('compiles a pattern once for the safety check and ajv, and remembers what RE2 cannot read', () => {
    const pattern = `^(ab|cd)+[0-9]{2}$-${Math.random()}`;
    const first = linearRegExp(pattern);
    expect(first).not.toBeNull();
    expect(linearRegExp(pattern)).toBe(first);
    expect(first!.matcher('abcd12').find()).toBe(false);
    expect(linearRegExp('^(ab|cd)+[0-9]{2}$')!.matcher('abcd12').find()).toBe(true);
    expect(linearRegExp('(?<=a)b')).toBeNull();
    expect(linearRegExp('(?<=a)b')).toBeNull();
    // A long pattern is compiled, not kept: still answered.
    const long = `^a{1}${'b'.repeat(2_000)}$`;
    expect(linearRegExp(long)).not.toBe(linearRegExp(long));
    expect(linearRegExp(long)!.matcher(`a${'b'.repeat(2_000)}`).find()).toBe(true);
  });
});
