import type { DefinitionFilter } from './messages.js';

/** List filters of ritual definitions: their values in the fields' types, pure. */

/** The filter's value in the field's type: numbers for version, epoch-ms (or RFC 3339) for created_at. */
export function operand(field: DefinitionFilter['field'], raw: string): string | number {
  if (field === 'version') return Number(raw);
  if (field === 'created_at') return /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
  return raw;
}

/**
 * Why a filter's value cannot be compared with its field (a version that is
 * not an integer, a created_at that is neither epoch-ms nor a date), or null.
 * Such a filter would match nothing and read as "none found"; it is a 400.
 */
export function filterValueProblem(filter: Pick<DefinitionFilter, 'field' | 'operator' | 'value'>): string | null {
  if (filter.operator === 'contains' || (filter.field !== 'version' && filter.field !== 'created_at')) return null;
  const values = filter.operator === 'in' ? filter.value.split('|') : [filter.value];
  for (const value of values) {
    const operandValue = operand(filter.field, value);
    const valid = filter.field === 'version' ? /^\d+$/.test(value) && Number.isSafeInteger(operandValue) : Number.isFinite(operandValue);
    if (!valid) return `${JSON.stringify(value)} is not ${filter.field === 'version' ? 'a version (a non-negative integer)' : 'a time (epoch-ms or RFC 3339)'}`;
  }
  return null;
}
