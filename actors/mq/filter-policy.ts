import { ServiceError, ownEntry } from '../../runtime/index.js';

/**
 * SNS-style subscription filter policies over message attributes, pure.
 *
 * A policy maps attribute names to a list of conditions: the names are ANDed,
 * the conditions of one name ORed (as SNS). A condition is
 *   - an exact value: a string, a number (numeric equality) or a boolean;
 *   - {prefix: str}, {suffix: str}, {"equals-ignore-case": str};
 *   - {numeric: [op, n]} or {numeric: [op, n, op, n]} with op in =, <, <=, >, >=
 *     (a range: the first op a lower bound, the second an upper one);
 *   - {"anything-but": value | [values] | {prefix: str} | {suffix: str}};
 *   - {exists: true | false}.
 * Every condition but {exists: false} needs the attribute to be present.
 * Numeric conditions match number attributes only; string conditions string
 * attributes only (as SNS's String and Number types).
 */
export type Scalar = string | number | boolean;

export type Condition =
  | { type: 'exact'; value: Scalar }
  | { type: 'prefix'; value: string }
  | { type: 'suffix'; value: string }
  | { type: 'equals-ignore-case'; value: string }
  | { type: 'numeric'; lower: Bound | null; upper: Bound | null; equals: number | null }
  | { type: 'anything-but'; values: Scalar[] | null; prefix: string | null; suffix: string | null }
  | { type: 'exists'; value: boolean };

interface Bound {
  value: number;
  inclusive: boolean;
}

/** The policy as the client gave it (stored and shown as is) and its parsed form. */
export type FilterPolicy = Record<string, unknown[]>;

export const filterPolicyLimits = {
  attribute_names_max: 5,
  conditions_per_name_max: 150,
} as const;

function invalid(message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `filter_policy: ${message}`, { details: [{ field: 'body.filter_policy', message }] });
}

const isScalar = (value: unknown): value is Scalar =>
  typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function onlyKey(value: Record<string, unknown>): [string, unknown] {
  const entries = Object.entries(value);
  if (entries.length !== 1) throw invalid('a condition object has exactly one operator');
  return entries[0];
}

function parseNumeric(spec: unknown): Condition {
  if (!Array.isArray(spec) || (spec.length !== 2 && spec.length !== 4)) throw invalid('numeric takes [op, n] or [op, n, op, n]');
  const pairs: [string, number][] = [];
  for (let i = 0; i < spec.length; i += 2) {
    const op = spec[i];
    const n = spec[i + 1];
    if (typeof op !== 'string' || !['=', '<', '<=', '>', '>='].includes(op)) throw invalid(`numeric operator ${JSON.stringify(op)} is not one of =, <, <=, >, >=`);
    if (typeof n !== 'number' || !Number.isFinite(n)) throw invalid('numeric operands are finite numbers');
    pairs.push([op, n]);
  }
  if (pairs.length === 1) {
    const [[op, n]] = pairs;
    if (op === '=') return { type: 'numeric', lower: null, upper: null, equals: n };
    if (op === '>' || op === '>=') return { type: 'numeric', lower: { value: n, inclusive: op === '>=' }, upper: null, equals: null };
    return { type: 'numeric', lower: null, upper: { value: n, inclusive: op === '<=' }, equals: null };
  }
  const [[lowOp, low], [highOp, high]] = pairs;
  if (!(lowOp === '>' || lowOp === '>=') || !(highOp === '<' || highOp === '<=')) throw invalid('a numeric range is [">" or ">=", n, "<" or "<=", m]');
  if (low >= high) throw invalid('a numeric range needs its lower bound below its upper bound');
  return { type: 'numeric', lower: { value: low, inclusive: lowOp === '>=' }, upper: { value: high, inclusive: highOp === '<=' }, equals: null };
}

function parseAnythingBut(spec: unknown): Condition {
  if (isScalar(spec)) return { type: 'anything-but', values: [spec], prefix: null, suffix: null };
  if (Array.isArray(spec)) {
    if (spec.length === 0 || !spec.every(isScalar)) throw invalid('anything-but takes a value, a non-empty list of values, {prefix} or {suffix}');
    return { type: 'anything-but', values: spec, prefix: null, suffix: null };
  }
  if (isObject(spec)) {
    const [op, operand] = onlyKey(spec);
    if ((op === 'prefix' || op === 'suffix') && typeof operand === 'string' && operand.length > 0) {
      return { type: 'anything-but', values: null, prefix: op === 'prefix' ? operand : null, suffix: op === 'suffix' ? operand : null };
    }
  }
  throw invalid('anything-but takes a value, a non-empty list of values, {prefix} or {suffix}');
}

export function parseCondition(raw: unknown): Condition {
  if (isScalar(raw)) return { type: 'exact', value: raw };
  if (!isObject(raw)) throw invalid(`condition ${JSON.stringify(raw)} is not a value or an operator object`);
  const [op, operand] = onlyKey(raw);
  switch (op) {
    case 'prefix':
    case 'suffix':
    case 'equals-ignore-case':
      if (typeof operand !== 'string' || operand.length === 0) throw invalid(`${op} takes a non-empty string`);
      return { type: op, value: operand };
    case 'numeric':
      return parseNumeric(operand);
    case 'anything-but':
      return parseAnythingBut(operand);
    case 'exists':
      if (typeof operand !== 'boolean') throw invalid('exists takes true or false');
      return { type: 'exists', value: operand };
    default:
      throw invalid(`unknown operator ${JSON.stringify(op)} (use prefix, suffix, equals-ignore-case, numeric, anything-but, exists)`);
  }
}

export type ParsedPolicy = [name: string, conditions: Condition[]][];

/** Checks a client's policy; throws 400 BAD_REQUEST naming what is wrong. Returns it parsed. */
export function parseFilterPolicy(raw: unknown): ParsedPolicy {
  if (!isObject(raw)) throw invalid('must be an object of attribute names to lists of conditions');
  const entries = Object.entries(raw);
  if (entries.length === 0) throw invalid('must name at least one attribute');
  if (entries.length > filterPolicyLimits.attribute_names_max) throw invalid(`names at most ${filterPolicyLimits.attribute_names_max} attributes`);
  return entries.map(([name, conditions]) => {
    if (!Array.isArray(conditions) || conditions.length === 0) throw invalid(`${name}: a non-empty list of conditions`);
    if (conditions.length > filterPolicyLimits.conditions_per_name_max) throw invalid(`${name}: at most ${filterPolicyLimits.conditions_per_name_max} conditions`);
    return [name, conditions.map(parseCondition)];
  });
}

function matchesNumeric(condition: Extract<Condition, { type: 'numeric' }>, value: number): boolean {
  if (condition.equals !== null) return value === condition.equals;
  const { lower, upper } = condition;
  if (lower && (lower.inclusive ? value < lower.value : value <= lower.value)) return false;
  if (upper && (upper.inclusive ? value > upper.value : value >= upper.value)) return false;
  return true;
}

export function matchesCondition(condition: Condition, value: Scalar | undefined): boolean {
  if (condition.type === 'exists') return condition.value === (value !== undefined);
  if (value === undefined) return false;
  switch (condition.type) {
    case 'exact':
      return value === condition.value;
    case 'prefix':
      return typeof value === 'string' && value.startsWith(condition.value);
    case 'suffix':
      return typeof value === 'string' && value.endsWith(condition.value);
    case 'equals-ignore-case':
      return typeof value === 'string' && value.toLowerCase() === condition.value.toLowerCase();
    case 'numeric':
      return typeof value === 'number' && matchesNumeric(condition, value);
    case 'anything-but':
      if (condition.values) return !condition.values.includes(value);
      if (typeof value !== 'string') return false;
      if (condition.prefix !== null) return !value.startsWith(condition.prefix);
      return !value.endsWith(condition.suffix!);
  }
}

/** Whether a message with these attributes passes the policy (null: no policy, everything passes). */
export function matchesFilterPolicy(policy: ParsedPolicy | null, attributes: Record<string, Scalar>): boolean {
  if (!policy) return true;
  return policy.every(([name, conditions]) => {
    const value = ownEntry(attributes, name);
    return conditions.some((condition) => matchesCondition(condition, value));
  });
}
