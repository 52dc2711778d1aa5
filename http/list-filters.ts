import { ServiceError } from '../runtime/index.js';

/**
 * The conventions' list filters: `filter` items of the form
 * `field:operator:value` (the value may itself contain ':'). An unknown field
 * or operator is 400 BAD_REQUEST naming the item; each area passes the
 * fields and operators it supports.
 */
export function parseListFilters<Field extends string, Operator extends string>(
  items: string[] | undefined,
  fields: readonly Field[],
  operators: readonly Operator[],
): { field: Field; operator: Operator; value: string }[] {
  const filters: { field: Field; operator: Operator; value: string }[] = [];
  for (const item of items ?? []) {
    const first = item.indexOf(':');
    const second = first < 0 ? -1 : item.indexOf(':', first + 1);
    const fail = (message: string) =>
      new ServiceError('BAD_REQUEST', `filter ${JSON.stringify(item)}: ${message}`, { details: [{ field: 'querystring.filter', message }] });
    if (first < 0 || second < 0) throw fail('must have the form field:operator:value');
    const field = item.slice(0, first);
    const operator = item.slice(first + 1, second);
    if (!(fields as readonly string[]).includes(field)) throw fail(`unknown field ${field} (use ${fields.join(', ')})`);
    if (!(operators as readonly string[]).includes(operator)) throw fail(`unknown operator ${operator} (use ${operators.join(', ')})`);
    filters.push({ field: field as Field, operator: operator as Operator, value: item.slice(second + 1) });
  }
  return filters;
}
