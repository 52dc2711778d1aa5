import { ServiceError } from '../../runtime/index.js';

/**
 * SCIM filter expressions (RFC 7644 §3.4.2.2), the subset this server
 * declares in its ServiceProviderConfig: `attr op value` with eq, ne, co, sw,
 * ew and `attr pr`, combined with `and`, `or`, `not (...)` and parentheses
 * (`and` binds tighter than `or`). Pure: parse to a small JSON AST (it may
 * travel in an actor message), then evaluate against a user.
 *
 * Attribute names are case-insensitive and may carry the core User schema URN.
 * String comparisons follow each attribute's caseExact (RFC 7643 §4.1):
 * userName, displayName and emails.value compare case-insensitively; id and
 * externalId exactly. Value paths (`emails[type eq "work"]`), gt/ge/lt/le and
 * other attributes are refused with scimType invalidFilter.
 */
export type FilterAttribute = 'id' | 'userName' | 'externalId' | 'displayName' | 'emails.value' | 'active';
export type CompareOperator = 'eq' | 'ne' | 'co' | 'sw' | 'ew';
export type FilterValue = string | boolean | number | null;

export type FilterNode =
  | { type: 'and' | 'or'; left: FilterNode; right: FilterNode }
  | { type: 'not'; expr: FilterNode }
  | { type: 'pr'; attr: FilterAttribute }
  | { type: 'cmp'; op: CompareOperator; attr: FilterAttribute; value: FilterValue };

/** What a filter is evaluated against. */
export interface FilterSubject {
  id: string;
  userName: string;
  externalId: string | null;
  displayName: string | null;
  emails: string[];
  active: boolean;
}

export const FILTER_LENGTH_MAX = 1000;
/** Nesting of parentheses and `not`: bounds the parser's recursion. */
export const FILTER_DEPTH_MAX = 32;

const CORE_USER_URN = 'urn:ietf:params:scim:schemas:core:2.0:user:';

/** A Map, not an object literal: `__proto__` or `constructor` must not find Object.prototype's members. */
const ATTRIBUTES = new Map<string, FilterAttribute>([
  ['id', 'id'],
  ['username', 'userName'],
  ['externalid', 'externalId'],
  ['displayname', 'displayName'],
  ['emails', 'emails.value'],
  ['emails.value', 'emails.value'],
  ['active', 'active'],
]);

const CASE_EXACT: Record<FilterAttribute, boolean> = {
  id: true,
  userName: false,
  externalId: true,
  displayName: false,
  'emails.value': false,
  active: true,
};

const COMPARE_OPERATORS = new Set<string>(['eq', 'ne', 'co', 'sw', 'ew']);
const UNSUPPORTED_OPERATORS = new Set<string>(['gt', 'ge', 'lt', 'le']);

export function invalidFilter(detail: string): ServiceError {
  return new ServiceError('scim_invalid_filter', detail);
}

type Token =
  | { kind: 'lparen' | 'rparen'; at: number }
  | { kind: 'word'; text: string; at: number }
  | { kind: 'string'; value: string; at: number };

function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
    } else if (c === '(' || c === ')') {
      tokens.push({ kind: c === '(' ? 'lparen' : 'rparen', at: i });
      i++;
    } else if (c === '"') {
      // A JSON string literal (RFC 7644: values are JSON), escapes included.
      const start = i;
      i++;
      while (i < input.length && input[i] !== '"') i += input[i] === '\\' ? 2 : 1;
      if (i >= input.length) throw invalidFilter(`Unterminated string starting at position ${start + 1}.`);
      i++;
      let value: unknown;
      try {
        value = JSON.parse(input.slice(start, i));
      } catch {
        throw invalidFilter(`Invalid string escape in the value at position ${start + 1}.`);
      }
      tokens.push({ kind: 'string', value: value as string, at: start });
    } else if (c === '[' || c === ']') {
      throw invalidFilter('Value paths (attr[...]) are not supported.');
    } else {
      const start = i;
      while (i < input.length && !' \t\n\r()"[]'.includes(input[i])) i++;
      tokens.push({ kind: 'word', text: input.slice(start, i), at: start });
    }
  }
  return tokens;
}

class Parser {
  private position = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): FilterNode {
    if (this.tokens.length === 0) throw invalidFilter('The filter is empty.');
    const node = this.orExpr(0);
    const extra = this.tokens[this.position];
    if (extra) throw invalidFilter(`Unexpected ${describe(extra)} at position ${extra.at + 1}.`);
    return node;
  }

  private peekKeyword(): string | null {
    const token = this.tokens[this.position];
    return token?.kind === 'word' ? token.text.toLowerCase() : null;
  }

  private orExpr(depth: number): FilterNode {
    let left = this.andExpr(depth);
    while (this.peekKeyword() === 'or') {
      this.position++;
      left = { type: 'or', left, right: this.andExpr(depth) };
    }
    return left;
  }

  private andExpr(depth: number): FilterNode {
    let left = this.unary(depth);
    while (this.peekKeyword() === 'and') {
      this.position++;
      left = { type: 'and', left, right: this.unary(depth) };
    }
    return left;
  }

  private unary(depth: number): FilterNode {
    if (depth >= FILTER_DEPTH_MAX) throw invalidFilter(`The filter nests deeper than ${FILTER_DEPTH_MAX} levels.`);
    const token = this.tokens[this.position];
    if (!token) throw invalidFilter('The filter ends where an expression was expected.');
    if (token.kind === 'word' && token.text.toLowerCase() === 'not') {
      this.position++;
      if (this.tokens[this.position]?.kind !== 'lparen') throw invalidFilter('`not` must be followed by a parenthesized expression.');
      return { type: 'not', expr: this.group(depth + 1) };
    }
    if (token.kind === 'lparen') return this.group(depth + 1);
    return this.attributeExpression();
  }

  private group(depth: number): FilterNode {
    this.position++; // (
    const inner = this.orExpr(depth);
    const close = this.tokens[this.position];
    if (close?.kind !== 'rparen') throw invalidFilter(close ? `Expected ) at position ${close.at + 1}.` : 'Missing closing parenthesis.');
    this.position++;
    return inner;
  }

  private attributeExpression(): FilterNode {
    const token = this.tokens[this.position];
    if (token.kind !== 'word') throw invalidFilter(`Expected an attribute name at position ${token.at + 1}, found ${describe(token)}.`);
    const attr = attributeOf(token.text);
    this.position++;
    const opToken = this.tokens[this.position];
    if (opToken?.kind !== 'word') throw invalidFilter(`Expected an operator after ${token.text}.`);
    const op = opToken.text.toLowerCase();
    this.position++;
    if (op === 'pr') return { type: 'pr', attr };
    if (UNSUPPORTED_OPERATORS.has(op)) throw invalidFilter(`The operator ${op} is not supported.`);
    if (!COMPARE_OPERATORS.has(op)) throw invalidFilter(`Unknown operator ${opToken.text}.`);
    const valueToken = this.tokens[this.position];
    if (!valueToken || valueToken.kind === 'lparen' || valueToken.kind === 'rparen') {
      throw invalidFilter(`Expected a value after ${token.text} ${op}.`);
    }
    this.position++;
    const value = valueOf(valueToken);
    checkComparison(attr, op as CompareOperator, value);
    return { type: 'cmp', op: op as CompareOperator, attr, value };
  }
}

function describe(token: Token): string {
  if (token.kind === 'word') return `"${token.text}"`;
  if (token.kind === 'string') return 'a string';
  return token.kind === 'lparen' ? '(' : ')';
}

function attributeOf(name: string): FilterAttribute {
  let lower = name.toLowerCase();
  if (lower.startsWith(CORE_USER_URN)) lower = lower.slice(CORE_USER_URN.length);
  const attr = ATTRIBUTES.get(lower);
  if (!attr) throw invalidFilter(`Filtering on ${name} is not supported (supported: userName, externalId, emails.value, active, id, displayName).`);
  return attr;
}

function valueOf(token: Token): FilterValue {
  if (token.kind === 'string') return token.value;
  if (token.kind !== 'word') throw invalidFilter('Expected a value.');
  const lower = token.text.toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  if (lower === 'null') return null;
  if (/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(token.text)) return Number(token.text);
  throw invalidFilter(`Invalid value ${token.text} at position ${token.at + 1}: strings must be quoted.`);
}

function checkComparison(attr: FilterAttribute, op: CompareOperator, value: FilterValue): void {
  if (attr === 'active') {
    if (typeof value !== 'boolean' || (op !== 'eq' && op !== 'ne')) {
      throw invalidFilter('active compares only with eq or ne against true or false.');
    }
    return;
  }
  if (typeof value !== 'string') throw invalidFilter(`${attr} is a string attribute: compare it with a quoted string.`);
}

/** Parses a filter; throws scim_invalid_filter (scimType invalidFilter). */
export function parseFilter(input: string): FilterNode {
  if (input.length > FILTER_LENGTH_MAX) throw invalidFilter(`The filter is longer than ${FILTER_LENGTH_MAX} characters.`);
  return new Parser(tokenize(input)).parse();
}

function valuesOf(subject: FilterSubject, attr: FilterAttribute): (string | boolean)[] {
  switch (attr) {
    case 'id':
      return [subject.id];
    case 'userName':
      return [subject.userName];
    case 'externalId':
      return subject.externalId === null ? [] : [subject.externalId];
    case 'displayName':
      return subject.displayName === null ? [] : [subject.displayName];
    case 'emails.value':
      return subject.emails;
    case 'active':
      return [subject.active];
  }
}

function compare(op: CompareOperator, actual: string | boolean, expected: FilterValue, caseExact: boolean): boolean {
  if (typeof actual === 'boolean' || typeof expected !== 'string') {
    return op === 'eq' ? actual === expected : op === 'ne' ? actual !== expected : false;
  }
  const a = caseExact ? actual : actual.toLowerCase();
  const e = caseExact ? expected : expected.toLowerCase();
  switch (op) {
    case 'eq':
      return a === e;
    case 'ne':
      return a !== e;
    case 'co':
      return a.includes(e);
    case 'sw':
      return a.startsWith(e);
    case 'ew':
      return a.endsWith(e);
  }
}

/** Whether `subject` matches the filter. A multi-valued attribute matches when any value does. */
export function matchesFilter(node: FilterNode, subject: FilterSubject): boolean {
  switch (node.type) {
    case 'and':
      return matchesFilter(node.left, subject) && matchesFilter(node.right, subject);
    case 'or':
      return matchesFilter(node.left, subject) || matchesFilter(node.right, subject);
    case 'not':
      return !matchesFilter(node.expr, subject);
    case 'pr':
      return valuesOf(subject, node.attr).some((v) => v !== '');
    case 'cmp': {
      const values = valuesOf(subject, node.attr);
      // ne on an absent attribute matches (it is not equal); the others need a value.
      if (values.length === 0) return node.op === 'ne' && node.value !== null;
      if (node.op === 'ne') return values.every((v) => compare('ne', v, node.value, CASE_EXACT[node.attr]));
      return values.some((v) => compare(node.op, v, node.value, CASE_EXACT[node.attr]));
    }
  }
}
