import type { Options } from 'ajv';
import { RE2JS } from 're2js';

/** Compiled patterns (null: RE2 cannot read it), the oldest dropped first; an RE2JS is immutable, so one serves every schema. */
const compiled = new Map<string, RE2JS | null>();
/**
 * At most this many kept, none longer than the length below. The cache only has to span one
 * schema's acceptance (its check, then ajv's compile), so it is small: what a tenant's patterns
 * compile to stays bounded by the forms that use them, as it was without it.
 */
const COMPILED_MAX = 64;
const COMPILED_PATTERN_LENGTH_MAX = 1024;

/**
 * The regular-expression engine a form's JSON Schema runs with. ajv would use
 * JavaScript's RegExp, which backtracks: one `pattern` like `^(a+)+$` and a
 * 40-character anonymous submission would hold the node's event loop for a
 * minute, for every tenant.
 *
 * A pattern RE2 reads (re2js, the pure-JavaScript port: time linear in the
 * input, whatever the pattern) runs there. RE2 has no lookaround and no
 * backreferences; a pattern with them runs as a RegExp. It is accepted only
 * when its shape cannot backtrack catastrophically (schema-patterns.ts,
 * checked before a form is stored), and a validation that runs one is
 * bounded in time besides (schema-compiler.ts, bounded-run.ts): a shape the
 * checker passes can still backtrack polynomially, or exponentially through
 * alternatives (`(a|a)+`).
 */
export function linearRegExp(pattern: string): RE2JS | null {
  // A schema's patterns are compiled twice when it is accepted (the safety check, then ajv): the second is this lookup.
  const known = compiled.get(pattern);
  if (known !== undefined) return known;
  let linear: RE2JS | null;
  try {
    linear = RE2JS.compile(pattern);
  } catch {
    linear = null;
  }
  if (pattern.length > COMPILED_PATTERN_LENGTH_MAX) return linear;
  if (compiled.size >= COMPILED_MAX) compiled.delete(compiled.keys().next().value!);
  compiled.set(pattern, linear);
  return linear;
}

type RegExpEngine = NonNullable<NonNullable<Options['code']>['regExp']>;

/** Set while a schema compiles: every pattern ajv compiles for it, whatever led there (a `$ref` included). */
let compiling: Set<string> | null = null;

/**
 * Runs `compile` and returns, beside its result, every pattern ajv asked this
 * engine for meanwhile: the patterns the compiled schema will run, found by
 * ajv itself, so none hides from the safety check behind a `$ref` into a
 * keyword the schema walk reads as data.
 */
export function capturingPatterns<T>(compile: () => T): { result: T; patterns: string[] } {
  const seen = new Set<string>();
  compiling = seen;
  try {
    return { result: compile(), patterns: [...seen] };
  } finally {
    compiling = null;
  }
}

export const formPatternEngine: RegExpEngine = Object.assign(
  (pattern: string, flags: string) => {
    compiling?.add(pattern);
    const linear = linearRegExp(pattern);
    if (linear === null) return new RegExp(pattern, flags);
    // ajv keeps one compiled pattern per toString() of what this returns: each must name its own pattern.
    return { test: (text: string) => linear.matcher(text).find(), toString: () => `re2:/${pattern}/${flags}` };
  },
  { code: 'formPatternEngine' },
);
