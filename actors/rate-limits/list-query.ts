import { ServiceError } from '../../runtime/index.js';
import type { ListFilter, ListQuery, ListView } from './messages.js';

/**
 * The admin lists' q, filter, sort and page over rows, pure. Each list says
 * what type each field has; a filter on a field is compared in that type
 * (times accept RFC 3339 or epoch seconds), `in` takes values separated by `|`.
 */
export type FieldType = 'text' | 'number' | 'time' | 'boolean';
export type Row = Record<string, string | number | boolean | null>;

function badFilter(filter: ListFilter, message: string): ServiceError {
  const item = `${filter.field}:${filter.operator}:${filter.value}`;
  return new ServiceError('BAD_REQUEST', `filter ${JSON.stringify(item)}: ${message}`, { details: [{ field: 'querystring.filter', message }] });
}

function parseValue(filter: ListFilter, type: FieldType, raw: string): string | number | boolean {
  switch (type) {
    case 'text':
      return raw;
    case 'number': {
      const value = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(value)) throw badFilter(filter, `${filter.field} takes a number`);
      return value;
    }
    case 'boolean':
      if (raw !== 'true' && raw !== 'false') throw badFilter(filter, `${filter.field} takes true or false`);
      return raw === 'true';
    case 'time': {
      const value = /^\d{1,12}$/.test(raw) ? Number(raw) * 1000 : Date.parse(raw);
      if (!Number.isFinite(value)) throw badFilter(filter, `${filter.field} takes an RFC 3339 time or epoch seconds`);
      return value;
    }
  }
}

function matches(row: Row, filter: ListFilter, type: FieldType): boolean {
  const actual = row[filter.field] ?? null;
  if (filter.operator === 'in') {
    const values = filter.value.split('|').map((value) => parseValue(filter, type, value));
    return values.some((value) => value === actual);
  }
  if (filter.operator === 'contains') {
    if (type !== 'text') throw badFilter(filter, 'contains applies to text fields only');
    return typeof actual === 'string' && actual.toLowerCase().includes(filter.value.toLowerCase());
  }
  const target = parseValue(filter, type, filter.value);
  if (filter.operator === 'eq') return actual === target;
  if (filter.operator === 'ne') return actual !== target;
  if (type === 'boolean') throw badFilter(filter, `${filter.operator} does not apply to ${filter.field}`);
  if (actual === null) return false;
  switch (filter.operator) {
    case 'lt':
      return actual < target;
    case 'lte':
      return actual <= target;
    case 'gt':
      return actual > target;
    case 'gte':
      return actual >= target;
  }
}

/**
 * Filters, sorts (by `sort_by`, then by `id_field` for a stable order) and
 * pages `rows`. `q` is a case-insensitive substring of any of `q_fields`.
 */
export function listRows<T>(
  items: readonly T[],
  toRow: (item: T) => Row,
  fields: Record<string, FieldType>,
  q_fields: readonly string[],
  id_field: string,
  default_sort: string,
  query: ListQuery,
): ListView<T> {
  for (const filter of query.filters) if (!(filter.field in fields)) throw badFilter(filter, `unknown field ${filter.field}`);
  const sort_by = query.sort_by ?? default_sort;
  if (!(sort_by in fields)) throw new ServiceError('BAD_REQUEST', `sort_by ${sort_by} is not a field of this list.`, { details: [{ field: 'querystring.sort_by', message: 'unknown field' }] });
  const q = query.q?.toLowerCase();
  const rows = items.map((item) => ({ item, row: toRow(item) }));
  const matched = rows.filter(
    ({ row }) =>
      (!q || q_fields.some((field) => typeof row[field] === 'string' && (row[field] as string).toLowerCase().includes(q))) &&
      query.filters.every((filter) => matches(row, filter, fields[filter.field]!)),
  );
  const direction = query.sort_order === 'desc' ? -1 : 1;
  matched.sort((a, b) => {
    const x = a.row[sort_by] ?? null;
    const y = b.row[sort_by] ?? null;
    if (x !== y) {
      if (x === null) return -direction;
      if (y === null) return direction;
      return (x < y ? -1 : 1) * direction;
    }
    return String(a.row[id_field]) < String(b.row[id_field]) ? -direction : direction;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, items: matched.slice(start, start + query.page_size).map(({ item }) => item) };
}
