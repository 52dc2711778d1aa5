/**
 * The match-rule language of priority groups: which members a group takes
 * automatically, decided on the member's join metadata.
 *
 *   rules      := null | condition | [condition, ...]    (a list matches if ANY condition does)
 *   condition  := { <metadata key>: test, ... }          (ALL keys must pass; {} matches everyone)
 *   test       := scalar                                 equality: metadata[key] === scalar
 *               | [scalar, ...]                          membership: metadata[key] is one of them
 *               | { eq?, ne?, in?, nin?, gt?, gte?, lt?, lte?, exists? }   every operator given must pass
 *   scalar     := string | number | boolean | null
 *
 * Keys are top-level metadata keys (no paths). gt/gte/lt/lte compare two
 * numbers numerically or two strings lexicographically; any other pairing
 * fails. A missing key is `undefined`: it equals nothing, is in no list, and
 * passes `ne`, `nin` and `exists: false`.
 */
export type Scalar = string | number | boolean | null;
export type RuleTest = Scalar | Scalar[] | OperatorTest;
export interface OperatorTest {
  eq?: Scalar;
  ne?: Scalar;
  in?: Scalar[];
  nin?: Scalar[];
  gt?: number | string;
  gte?: number | string;
  lt?: number | string;
  lte?: number | string;
  exists?: boolean;
}
export type Condition = Record<string, RuleTest>;
export type MatchRules = Condition | Condition[] | null;

export interface RuleIssue {
  field: string;
  message: string;
}

export const ruleLimits = {
  alternatives_max: 16,
  keys_per_condition_max: 32,
  values_per_list_max: 100,
  string_length_max: 256,
} as const;

const OPERATORS = new Set(['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte', 'exists']);

function isScalar(value: unknown): value is Scalar {
  return value === null || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)) || typeof value === 'string';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkScalar(value: unknown, field: string, issues: RuleIssue[]): void {
  if (!isScalar(value)) issues.push({ field, message: 'must be a string, finite number, boolean or null' });
  else if (typeof value === 'string' && value.length > ruleLimits.string_length_max) {
    issues.push({ field, message: `must be at most ${ruleLimits.string_length_max} characters` });
  }
}

function checkList(value: unknown, field: string, issues: RuleIssue[]): void {
  if (!Array.isArray(value)) {
    issues.push({ field, message: 'must be an array of scalars' });
    return;
  }
  if (value.length > ruleLimits.values_per_list_max) {
    issues.push({ field, message: `must have at most ${ruleLimits.values_per_list_max} values` });
    return;
  }
  value.forEach((item, i) => checkScalar(item, `${field}.${i}`, issues));
}

function checkCondition(condition: unknown, field: string, issues: RuleIssue[]): void {
  if (!isPlainObject(condition)) {
    issues.push({ field, message: 'must be an object of metadata key -> test' });
    return;
  }
  const keys = Object.keys(condition);
  if (keys.length > ruleLimits.keys_per_condition_max) {
    issues.push({ field, message: `must test at most ${ruleLimits.keys_per_condition_max} keys` });
    return;
  }
  for (const key of keys) {
    const test = condition[key];
    const at = `${field}.${key}`;
    if (Array.isArray(test)) checkList(test, at, issues);
    else if (isPlainObject(test)) {
      const operators = Object.keys(test);
      if (operators.length === 0) issues.push({ field: at, message: 'must name at least one operator' });
      for (const operator of operators) {
        const operand = test[operator];
        const opField = `${at}.${operator}`;
        if (!OPERATORS.has(operator)) issues.push({ field: opField, message: `unknown operator (use ${[...OPERATORS].join(', ')})` });
        else if (operator === 'in' || operator === 'nin') checkList(operand, opField, issues);
        else if (operator === 'exists') {
          if (typeof operand !== 'boolean') issues.push({ field: opField, message: 'must be a boolean' });
        } else if (operator === 'eq' || operator === 'ne') checkScalar(operand, opField, issues);
        else if (!((typeof operand === 'number' && Number.isFinite(operand)) || typeof operand === 'string')) {
          issues.push({ field: opField, message: 'must be a finite number or a string' });
        } else checkScalar(operand, opField, issues);
      }
    } else checkScalar(test, at, issues);
  }
}

/** Checks a rules value; returns the problems (empty when valid). */
export function validateMatchRules(rules: unknown, field: string): RuleIssue[] {
  const issues: RuleIssue[] = [];
  if (rules === null || rules === undefined) return issues;
  if (Array.isArray(rules)) {
    if (rules.length === 0) issues.push({ field, message: 'must list at least one condition (use null for explicit-only groups)' });
    if (rules.length > ruleLimits.alternatives_max) {
      issues.push({ field, message: `must have at most ${ruleLimits.alternatives_max} conditions` });
      return issues;
    }
    rules.forEach((condition, i) => checkCondition(condition, `${field}.${i}`, issues));
  } else checkCondition(rules, field, issues);
  return issues;
}

function compare(value: unknown, operand: number | string, accept: (order: number) => boolean): boolean {
  if (typeof value === 'number' && typeof operand === 'number') return accept(value - operand);
  if (typeof value === 'string' && typeof operand === 'string') return accept(value < operand ? -1 : value > operand ? 1 : 0);
  return false;
}

function passes(value: unknown, test: RuleTest): boolean {
  if (Array.isArray(test)) return value !== undefined && test.includes(value as Scalar);
  if (test !== null && typeof test === 'object') {
    const op = test as OperatorTest;
    if ('eq' in op && value !== op.eq) return false;
    if ('ne' in op && value === op.ne) return false;
    if (op.in && !(value !== undefined && op.in.includes(value as Scalar))) return false;
    if (op.nin && value !== undefined && op.nin.includes(value as Scalar)) return false;
    if (op.gt !== undefined && !compare(value, op.gt, (o) => o > 0)) return false;
    if (op.gte !== undefined && !compare(value, op.gte, (o) => o >= 0)) return false;
    if (op.lt !== undefined && !compare(value, op.lt, (o) => o < 0)) return false;
    if (op.lte !== undefined && !compare(value, op.lte, (o) => o <= 0)) return false;
    if (op.exists !== undefined && (value !== undefined) !== op.exists) return false;
    return true;
  }
  return value === test;
}

function conditionMatches(condition: Condition, metadata: Record<string, unknown>): boolean {
  for (const key of Object.keys(condition)) {
    const value = Object.prototype.hasOwnProperty.call(metadata, key) ? metadata[key] : undefined;
    if (!passes(value, condition[key])) return false;
  }
  return true;
}

/** Whether `metadata` satisfies `rules`. Null rules match nobody automatically. */
export function matchesRules(rules: MatchRules, metadata: Record<string, unknown> | null): boolean {
  if (rules === null) return false;
  const data = metadata ?? {};
  if (Array.isArray(rules)) return rules.some((condition) => conditionMatches(condition, data));
  return conditionMatches(rules, data);
}
