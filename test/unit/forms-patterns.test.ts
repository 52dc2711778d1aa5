import { describe, expect, it } from 'vitest';
import { linearRegExp } from '../../actors/forms/pattern-engine.js';
import { isSafePattern, unsafePatterns } from '../../actors/forms/schema-patterns.js';
import { runWithin, TimeBoundExceeded } from '../../actors/forms/bounded-run.js';
import { compileSchema } from '../../actors/forms/schema-compiler.js';

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

describe('the time bound of a backtracking validation', () => {
  it('stops a regular expression deep in its backtracking, and leaves a quick task alone', () => {
    expect(runWithin(1_000, () => /^(?=.*[A-Z])(?=.*\d).{8,}$/.test('Password1'))).toBe(true);
    expect(() => runWithin(20, () => /^(?=a)(a|a)+$/.test(`${'a'.repeat(40)}!`))).toThrow(TimeBoundExceeded);
    // A bound passed inside an outer one: the inner task is stopped, the outer goes on.
    expect(runWithin(1_000, () => {
      try {
        runWithin(20, () => /^(a|a)+$/.test(`${'a'.repeat(40)}!`));
        return 'not stopped';
      } catch (error) {
        return error instanceof TimeBoundExceeded ? 'stopped' : 'other';
      }
    })).toBe('stopped');
  });

  it('compiles a schema with a lookaround pattern into a bounded validator, and one RE2 reads into a plain one', () => {
    const compiled = compileSchema({ type: 'object', properties: { a: { type: 'string', pattern: '^(?=a)(a|a)+$' }, b: { type: 'string', pattern: '^b+$' } } });
    if ('error' in compiled) throw new Error(compiled.error);
    expect(compiled.patterns.sort()).toEqual(['^(?=a)(a|a)+$', '^b+$']);
    expect(compiled.validate({ a: 'aa', b: 'bb' })).toBe(true);
    expect(compiled.validate({ a: 'aa', b: 'bc' })).toBe(false);
    expect(compiled.validate.errors?.[0]).toMatchObject({ instancePath: '/b', keyword: 'pattern' });
    expect(() => compiled.validate({ a: `${'a'.repeat(40)}!` })).toThrow(TimeBoundExceeded);
  });
});
