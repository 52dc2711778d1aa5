import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query, when, type Pagination } from '../users/format.js';
import { errorText } from '../../api.js';
import { Pager } from '../users/pager.js';
import type { Organization } from './types.js';

/** GET /admin/auth/orgs: name or slug substring, SSO enforced or not, oldest first. */
export function OrganizationList() {
  const [draft, setDraft] = useState({ q: '', sso_enforced: '' });
  const [filters, setFilters] = useState(draft);
  const [page, setPage] = useState(1);
  const list = useLoad(
    () => api<{ pagination: Pagination; organizations: Organization[] }>('GET', `/admin/auth/orgs${query({ ...filters, page, page_size: 25 })}`),
    [filters, page],
  );

  function search(event: Event) {
    event.preventDefault();
    setFilters(draft);
    setPage(1);
  }

  return (
    <section>
      <h1>Organizations</h1>
      <form class="filters" onSubmit={search}>
        <label>
          Search
          <input name="q" type="search" placeholder="name or slug" maxLength={100} value={draft.q} onInput={(e) => setDraft({ ...draft, q: e.currentTarget.value })} />
        </label>
        <label>
          SSO
          <select name="sso_enforced" value={draft.sso_enforced} onChange={(e) => setDraft({ ...draft, sso_enforced: e.currentTarget.value })}>
            <option value="">any</option>
            <option value="true">enforced</option>
            <option value="false">not enforced</option>
          </select>
        </label>
        <button type="submit">Search</button>
      </form>
      {list.error && (
        <p class="error" role="alert">
          {errorText(list.error)}
        </p>
      )}
      <table aria-label="Organizations">
        <thead>
          <tr>
            <th>Name</th>
            <th>Slug</th>
            <th>Members</th>
            <th>SSO</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.organizations.map((org) => (
            <tr key={org.org_id}>
              <td>
                <a href={`#/organizations/${encodeURIComponent(org.org_id)}`}>{org.name}</a>
              </td>
              <td>{org.slug}</td>
              <td>{org.member_count}</td>
              <td>{org.sso_enforced ? 'enforced' : 'off'}</td>
              <td>{when(org.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data && list.data.organizations.length === 0 && <p>No organization matches.</p>}
      <Pager pagination={list.data?.pagination} onPage={setPage} />
    </section>
  );
}
