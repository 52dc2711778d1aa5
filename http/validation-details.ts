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
  // The values each field may take, from its const and enum issues.
  const allowed = new Map<string, unknown[]>();
  for (const issue of issues) {
    const values = issue.keyword === 'const' ? [issue.params?.allowedValue] : issue.keyword === 'enum' ? (issue.params?.allowedValues as unknown[] | undefined) : undefined;
    if (!values) continue;
    const field = fieldOf(context, issue.instancePath, issue.params);
    const list = allowed.get(field) ?? [];
    for (const value of values) if (!list.includes(value)) list.push(value);
    allowed.set(field, list);
  }
  const details: ValidationDetail[] = [];
  const seen = new Set<string>();
  for (const issue of issues) {
    const field = fieldOf(context, issue.instancePath, issue.params);
    const values = allowed.get(field);
    const enumeration = values !== undefined && (issue.keyword === 'const' || issue.keyword === 'enum' || UNION_KEYWORDS.has(issue.keyword ?? ''));
    const message = enumeration ? `must be one of: ${values.map((v) => JSON.stringify(v)).join(', ')}` : (FIELD_MESSAGES[issue.keyword ?? ''] ?? issue.message ?? 'is invalid');
    const key = `${field}\n${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    details.push({ field, message });
  }
  return details;
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
