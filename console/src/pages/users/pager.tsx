import type { Pagination } from './format.js';

/** "Page n of m" with previous/next buttons, for the admin lists' {pagination}. */
export function Pager({ pagination, onPage }: { pagination: Pagination | undefined; onPage: (page: number) => void }) {
  if (!pagination) return null;
  const pages = Math.max(1, Math.ceil(pagination.total / pagination.page_size));
  return (
    <div class="pager">
      <button type="button" disabled={pagination.page <= 1} onClick={() => onPage(pagination.page - 1)}>
        Previous
      </button>
      <span>
        Page {pagination.page} of {pages} ({pagination.total} in all)
      </span>
      <button type="button" disabled={!pagination.has_more} onClick={() => onPage(pagination.page + 1)}>
        Next
      </button>
    </div>
  );
}
