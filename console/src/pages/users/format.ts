/** An RFC 3339 time as the browser's local date and time; '-' for none. */
export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '-';
}

/** A query string from the fields that have a value. */
export function query(fields: Record<string, string | number | boolean | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && value !== '') params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

export interface Pagination {
  page: number;
  page_size: number;
  total: number;
  has_more: boolean;
}
