import type { Options } from 'ajv';
import { RE2JS } from 're2js';

/**
 * The regular-expression engine a form's JSON Schema runs with. ajv would use
 * JavaScript's RegExp, which backtracks: one `pattern` like `^(a+)+$` and a
 * 40-character anonymous submission would hold the node's event loop for a
 * minute, for every tenant.
 *
 * A pattern RE2 reads (re2js, the pure-JavaScript port: time linear in the
 * input, whatever the pattern) runs there. RE2 has no lookaround and no
 * backreferences; a pattern with them runs as a RegExp, and is accepted only
 * when its shape cannot backtrack catastrophically (schema-patterns.ts,
 * checked before a form is stored).
 */
export function linearRegExp(pattern: string): RE2JS | null {
  try {
    return RE2JS.compile(pattern);
  } catch {
    return null;
  }
}

type RegExpEngine = NonNullable<NonNullable<Options['code']>['regExp']>;

export const formPatternEngine: RegExpEngine = Object.assign(
  (pattern: string, flags: string) => {
    const linear = linearRegExp(pattern);
    if (linear === null) return new RegExp(pattern, flags);
    // ajv keeps one compiled pattern per toString() of what this returns: each must name its own pattern.
    return { test: (text: string) => linear.matcher(text).find(), toString: () => `re2:/${pattern}/${flags}` };
  },
  { code: 'formPatternEngine' },
);
