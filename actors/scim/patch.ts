import { ServiceError } from '../../runtime/index.js';

/**
 * SCIM PATCH documents (RFC 7644 §3.5.2), reduced to what this server
 * applies: a change of `displayName` and deactivation (`active` false).
 * Pure: turns a request body into the change to make, or refuses the whole
 * document (nothing is applied) with a scimType.
 *
 * Accepted forms, as Okta and Azure AD send them (op names and attribute
 * names case-insensitive, the core User URN prefix allowed):
 * - `{op: "replace", path: "active", value: false}` (also the strings "False"/"True")
 * - `{op: "replace", path: "displayName", value: "New Name"}`
 * - `{op: "replace", value: {active: false, displayName: "..."}}` (no path)
 * `add` on these single-valued attributes replaces them (RFC 7644 §3.5.2.1).
 * `active: true` is accepted (it may only keep an active user active; the
 * directory refuses a reactivation). Everything else is refused: `remove`,
 * other attributes (`mutability` for attributes the server knows but does not
 * change, `invalidPath` for unknown ones), malformed operations (`invalidSyntax`).
 */
export const PATCH_OP_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const PATCH_OPERATIONS_MAX = 50;
export const DISPLAY_NAME_LENGTH_MAX = 256;

const CORE_USER_URN = 'urn:ietf:params:scim:schemas:core:2.0:user:';
/** Attributes this server stores but never changes through PATCH/PUT. */
const READ_ONLY = new Set(['id', 'username', 'externalid', 'name', 'emails', 'meta', 'schemas', 'password']);

export interface ScimChange {
  displayName?: string;
  active?: boolean;
}

/** The registry's SCIM codes (runtime/errors.ts): each renders as its scimType on /scim/v2 (RFC 7644 §3.12). */
export type ScimErrorCode = 'scim_invalid_value' | 'scim_invalid_syntax' | 'scim_invalid_filter' | 'scim_invalid_path' | 'scim_mutability' | 'scim_uniqueness';

export function scimError(code: ScimErrorCode, detail: string): ServiceError {
  return new ServiceError(code, detail);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A boolean, also the strings "true"/"false" in any case (Azure AD sends "False"). */
export function scimBoolean(value: unknown, attribute: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string') {
    const lower = value.trim().toLowerCase();
    if (lower === 'true') return true;
    if (lower === 'false') return false;
  }
  throw scimError('scim_invalid_value', `${attribute} must be a boolean.`);
}

export function scimDisplayName(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > DISPLAY_NAME_LENGTH_MAX) {
    throw scimError('scim_invalid_value', `displayName must be a non-empty string of at most ${DISPLAY_NAME_LENGTH_MAX} characters.`);
  }
  return value.trim();
}

function attributeName(path: string): string {
  let lower = path.trim().toLowerCase();
  if (lower.startsWith(CORE_USER_URN)) lower = lower.slice(CORE_USER_URN.length);
  return lower;
}

function apply(change: ScimChange, path: string, value: unknown): void {
  const name = attributeName(path);
  if (name === 'active') {
    change.active = scimBoolean(value, 'active');
    return;
  }
  if (name === 'displayname') {
    change.displayName = scimDisplayName(value);
    return;
  }
  const root = name.split(/[.[]/)[0];
  if (READ_ONLY.has(root)) throw scimError('scim_mutability', `${path} cannot be changed here: only active (deactivation) and displayName are applied.`);
  throw scimError('scim_invalid_path', `Unsupported attribute path ${path}: only active and displayName can be patched.`);
}

/** The change a PATCH body asks for; throws (with a scimType) before anything is applied. */
export function parsePatch(body: unknown): ScimChange {
  if (!isObject(body)) throw scimError('scim_invalid_syntax', 'The PATCH body must be a JSON object.');
  const schemas = body.schemas;
  if (schemas !== undefined && (!Array.isArray(schemas) || !schemas.some((s) => typeof s === 'string' && s.toLowerCase() === PATCH_OP_SCHEMA.toLowerCase()))) {
    throw scimError('scim_invalid_syntax', `schemas must contain ${PATCH_OP_SCHEMA}.`);
  }
  const operations = body.Operations ?? body.operations;
  if (!Array.isArray(operations) || operations.length === 0) throw scimError('scim_invalid_syntax', 'Operations must be a non-empty array.');
  if (operations.length > PATCH_OPERATIONS_MAX) throw scimError('scim_invalid_syntax', `At most ${PATCH_OPERATIONS_MAX} operations per request.`);
  const change: ScimChange = {};
  for (const operation of operations) {
    if (!isObject(operation) || typeof operation.op !== 'string') throw scimError('scim_invalid_syntax', 'Each operation needs an op.');
    const op = operation.op.toLowerCase();
    const path = operation.path;
    if (path !== undefined && typeof path !== 'string') throw scimError('scim_invalid_path', 'path must be a string.');
    if (op === 'remove') {
      throw scimError('scim_mutability', `remove is not supported${path ? ` on ${path}` : ''}: only active (deactivation) and displayName are applied.`);
    }
    if (op !== 'replace' && op !== 'add') throw scimError('scim_invalid_syntax', `Unsupported op ${operation.op}: use replace.`);
    if (!('value' in operation)) throw scimError('scim_invalid_value', `The ${operation.op} operation needs a value.`);
    if (path !== undefined && path.trim() !== '') {
      apply(change, path, operation.value);
    } else {
      if (!isObject(operation.value)) throw scimError('scim_invalid_value', 'An operation without path needs an object value.');
      for (const [key, value] of Object.entries(operation.value)) apply(change, key, value);
    }
  }
  return change;
}
