/**
 * A 400's `details` from the schema validator's issues: one `{field, message}`
 * per distinct problem.
 *
 * Enumerations are unions of constants in the route schemas, and ajv reports
 * a value outside one as an issue per constant ("must be equal to constant")
 * plus one for the union ("must match a schema in anyOf"), none naming what
 * is allowed. Those collapse into one entry per field, "must be one of: ...",
 * listing the allowed values; any other issue is kept once. A missing field
 * "is required", an unknown one where none may be "is not allowed".
 */
export interface ValidationIssue {
  keyword?: string;
  instancePath: string;
  params?: Record<string, unknown>;
  message?: string;
}

export interface ValidationDetail {
  field: string;
  message: string;
}

/** `body.owner_id`, `querystring.page`: the request part, then the path in it (and the missing or unknown property). */
export function fieldOf(context: string | undefined, instancePath: string, params: Record<string, unknown> = {}): string {
  // A JSON pointer: '/' in a key is ~1 and '~' is ~0 (RFC 6901); the field names the key as sent.
  let path = instancePath
    .replace(/^\//, '')
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
  if (typeof params.missingProperty === 'string') path = path ? `${path}.${params.missingProperty}` : params.missingProperty;
  if (typeof params.additionalProperty === 'string') path = path ? `${path}.${params.additionalProperty}` : params.additionalProperty;
  return path ? `${context ?? 'body'}.${path}` : (context ?? 'body');
}

const UNION_KEYWORDS = new Set(['anyOf', 'oneOf']);

/**
 * ajv words these about the object that holds the field ("must have required
 * property 'owner_id'"); the detail names the field itself, so its message is
 * about the field: `body.owner_id is required`, not `body.owner_id must have
 * required property 'owner_id'`.
 */
const FIELD_MESSAGES: Record<string, string> = { required: 'is required', additionalProperties: 'is not allowed' };

export function validationDetails(context: string | undefined, issues: readonly ValidationIssue[]): ValidationDetail[] {
  // Per field: the values it may take (its const and enum issues), the types its union's branches
  // wanted, and whether a branch of the right type refused it for something else (a format, a length).
  const allowed = new Map<string, unknown[]>();
  const unionTypes = new Map<string, string[]>();
  const specific = new Set<string>();
  const fields = issues.map((issue) => fieldOf(context, issue.instancePath, issue.params));
  issues.forEach((issue, i) => {
    const field = fields[i]!;
    const values = issue.keyword === 'const' ? [issue.params?.allowedValue] : issue.keyword === 'enum' ? (issue.params?.allowedValues as unknown[] | undefined) : undefined;
    if (values) {
      const list = allowed.get(field) ?? [];
      for (const value of values) if (!list.includes(value)) list.push(value);
      allowed.set(field, list);
    } else if (UNION_KEYWORDS.has(issue.keyword ?? '')) {
      if (!unionTypes.has(field)) unionTypes.set(field, []);
    } else if (issue.keyword !== 'type') specific.add(field);
  });
  issues.forEach((issue, i) => {
    const types = issue.keyword === 'type' ? unionTypes.get(fields[i]!) : undefined;
    const type = issue.params?.type;
    if (types) for (const name of Array.isArray(type) ? type : [type]) if (typeof name === 'string' && !types.includes(name)) types.push(name);
  });
  const details: ValidationDetail[] = [];
  const seen = new Set<string>();
  issues.forEach((issue, i) => {
    const field = fields[i]!;
    const message = messageOf(issue, allowed.get(field), unionTypes.get(field), specific.has(field));
    const key = `${field}\n${message}`;
    if (message === undefined || seen.has(key)) return;
    seen.add(key);
    details.push({ field, message });
  });
  return details;
}

/**
 * One issue's message, or undefined when another issue of its field says it
 * better. A union's branches each report why they refused the value ("must be
 * string", "must be null", then "must match a schema in anyOf"): a field of
 * a union gets one message, naming the constants or the types it may take,
 * unless a branch of the value's type refused it for a reason of its own (a
 * date that is not a date-time), which is then what the field's detail says.
 */
function messageOf(issue: ValidationIssue, values: unknown[] | undefined, unionTypes: string[] | undefined, hasSpecific: boolean): string | undefined {
  const keyword = issue.keyword ?? '';
  const shape = keyword === 'const' || keyword === 'enum' || keyword === 'type' || UNION_KEYWORDS.has(keyword);
  if (values !== undefined && shape && (keyword !== 'type' || unionTypes !== undefined)) {
    const nullable = unionTypes?.includes('null') ? ', null' : '';
    return `must be one of: ${values.map((v) => JSON.stringify(v)).join(', ')}${nullable}`;
  }
  if (unionTypes !== undefined && shape) {
    if (hasSpecific) return undefined;
    // A union of objects or arrays wants no plain type: ajv's own words ("must match a schema in anyOf").
    if (unionTypes.length === 0) return issue.message ?? 'is invalid';
    return `must be ${unionTypes.join(' or ')}`;
  }
  return FIELD_MESSAGES[keyword] ?? issue.message ?? 'is invalid';
}

const PARTS = ['body.', 'querystring.', 'params.', 'headers.'];

/**
 * A handler's details name a field as the route's code knows it (`name`,
 * `custom_limits.gold`); the conventions name the request part too. A field
 * without one gets the part that holds its first segment (the path
 * parameters, the body, the query string, in that order); one that none
 * holds (a missing field) is the body's, or the query string's when the
 * request has no body.
 */
export function qualifiedDetails(details: unknown, request: { params?: unknown; query?: unknown; body?: unknown }): unknown {
  if (!Array.isArray(details)) return details;
  const holds = (part: unknown, name: string) => part !== null && typeof part === 'object' && Object.hasOwn(part, name);
  return details.map((detail: unknown) => {
    if (detail === null || typeof detail !== 'object') return detail;
    const field = (detail as { field?: unknown }).field;
    if (typeof field !== 'string' || field === '' || PARTS.some((part) => field.startsWith(part)) || ['body', 'querystring', 'params', 'headers'].includes(field)) return detail;
    const first = field.split(/[.[]/, 1)[0];
    const hasBody = request.body !== undefined && request.body !== null;
    const part = holds(request.params, first) ? 'params' : holds(request.body, first) ? 'body' : holds(request.query, first) ? 'querystring' : hasBody ? 'body' : 'querystring';
    return { ...detail, field: `${part}.${field}` };
  });
}
