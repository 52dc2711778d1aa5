import type { ConditionalRule, FormStatus } from './messages.js';

/**
 * The pure rules of a form definition: the status state machine and the
 * conditional logic (when -> require). No I/O, no actor: the form actor and
 * the tests call these.
 */

/**
 * Which status may follow which (docs/api/forms.md, "Status"). Only `active`
 * takes submissions and drafts. `disabled` is final: a form switched off for
 * good keeps its submissions readable and can be copied into a new form.
 */
export const STATUS_TRANSITIONS: Record<FormStatus, readonly FormStatus[]> = {
  draft: ['active', 'disabled'],
  active: ['paused', 'deprecated', 'disabled'],
  paused: ['active', 'deprecated', 'disabled'],
  deprecated: ['active', 'disabled'],
  disabled: [],
};

/** True when `from` may move to `to`. Asking for the current status is allowed (nothing changes). */
export function canTransition(from: FormStatus, to: FormStatus): boolean {
  return from === to || STATUS_TRANSITIONS[from].includes(to);
}

export function takesSubmissions(status: FormStatus): boolean {
  return status === 'active';
}

export type ComparisonOperator = '==' | '!=' | '<' | '<=' | '>' | '>=';

/** A parsed `when`: `field` alone means present and not empty. */
export interface Condition {
  field: string;
  operator: ComparisonOperator | 'present';
  value: unknown;
}

const FIELD = '[A-Za-z_][A-Za-z0-9_.-]{0,127}';
const CONDITION = new RegExp(`^\\s*(${FIELD})\\s*(?:(==|!=|<=|>=|<|>)\\s*(.+?))?\\s*$`);

/** Parses a `when` expression, or returns the reason it is not one. */
export function parseCondition(when: string): Condition | { error: string } {
  if (when.length > 512) return { error: 'is longer than 512 characters' };
  const match = CONDITION.exec(when);
  if (!match) return { error: 'is not `<field>` or `<field> <op> <JSON literal>` (op: == != < <= > >=)' };
  const [, field, operator, literal] = match;
  if (!operator) return { field, operator: 'present', value: null };
  let value: unknown;
  try {
    value = JSON.parse(literal);
  } catch {
    return { error: `compares with ${literal}, which is not a JSON literal (quote strings: "yes")` };
  }
  if (value !== null && typeof value === 'object') return { error: 'compares with an object or array; only strings, numbers, booleans and null' };
  if ((operator === '<' || operator === '<=' || operator === '>' || operator === '>=') && typeof value !== 'number') {
    return { error: `orders with ${operator}, which needs a number` };
  }
  return { field, operator: operator as ComparisonOperator, value };
}

/** The value of a dotted path in the submission data (`address.country`). */
export function valueAt(data: Record<string, unknown>, path: string): unknown {
  let current: unknown = data;
  for (const part of path.split('.')) {
    // Own properties only: `meta.constructor` names nothing in `{meta: {}}`, not Object's constructor.
    if (current === null || typeof current !== 'object' || Array.isArray(current) || !Object.hasOwn(current, part)) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

export function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '' && !(Array.isArray(value) && value.length === 0);
}

export function conditionHolds(condition: Condition, data: Record<string, unknown>): boolean {
  const actual = valueAt(data, condition.field);
  switch (condition.operator) {
    case 'present':
      return isPresent(actual);
    case '==':
      return actual === condition.value;
    case '!=':
      return actual !== condition.value;
    default: {
      if (typeof actual !== 'number' || typeof condition.value !== 'number') return false;
      const limit = condition.value;
      return condition.operator === '<' ? actual < limit : condition.operator === '<=' ? actual <= limit : condition.operator === '>' ? actual > limit : actual >= limit;
    }
  }
}

/**
 * Checks the rules of a definition against the schema's top-level properties:
 * each `when` parses, and it and each required field name a property.
 * Returns one message per problem (empty when valid).
 */
export function ruleProblems(rules: ConditionalRule[], properties: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const known = (path: string) => properties.has(path.split('.')[0]);
  rules.forEach((rule, index) => {
    const parsed = parseCondition(rule.when);
    if ('error' in parsed) problems.push(`conditional_logic[${index}].when ${parsed.error}`);
    else if (!known(parsed.field)) problems.push(`conditional_logic[${index}].when names ${parsed.field}, which is not a property of the schema`);
    for (const field of rule.require) {
      if (!known(field)) problems.push(`conditional_logic[${index}].require names ${field}, which is not a property of the schema`);
    }
  });
  return problems;
}

/** The errors of the rules whose condition holds and whose required fields are missing (empty when satisfied). */
export function conditionalErrors(rules: ConditionalRule[], data: Record<string, unknown>): string[] {
  const errors: string[] = [];
  for (const rule of rules) {
    const parsed = parseCondition(rule.when);
    if ('error' in parsed || !conditionHolds(parsed, data)) continue;
    for (const field of rule.require) {
      if (!isPresent(valueAt(data, field))) errors.push(`/${field.replaceAll('.', '/')} is required when ${rule.when.trim()}`);
    }
  }
  return errors;
}

/** The schema's top-level property names (the fields conditional logic and `fields` may name). */
export function schemaProperties(schema: object): Set<string> {
  const properties = (schema as { properties?: unknown }).properties;
  return new Set(properties && typeof properties === 'object' && !Array.isArray(properties) ? Object.keys(properties) : []);
}
