import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query, when, type Pagination } from './format.js';
import { errorText } from '../../api.js';
import { Pager } from './pager.js';
import type { User } from './types.js';

interface Filters {
  q: string;
  role: string;
  banned: string;
  email_verified: string;
}
const NO_FILTERS: Filters = { q: '', role: '', banned: '', email_verified: '' };

/** GET /admin/auth/users with its filters: e-mail/username/name substring, role, banned, verified. */
export function UserList() {
  const [draft, setDraft] = useState<Filters>(NO_FILTERS);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [page, setPage] = useState(1);
  const list = useLoad(
    () => api<{ pagination: Pagination; users: User[] }>('GET', `/admin/auth/users${query({ ...filters, page, page_size: 25 })}`),
    [filters, page],
  );
  const field = (name: keyof Filters) => (event: Event) => setDraft({ ...draft, [name]: (event.currentTarget as HTMLInputElement).value });

  function search(event: Event) {
    event.preventDefault();
    setFilters(draft);
    setPage(1);
  }

  return (
    <section>
      <h1>Users</h1>
      <form class="filters" onSubmit={search}>
        <label>
          Search
          <input name="q" type="search" placeholder="e-mail, username or name" maxLength={100} value={draft.q} onInput={field('q')} />
        </label>
        <label>
          Role
          <select name="role" value={draft.role} onChange={field('role')}>
            <option value="">any</option>
            <option value="user">user</option>
            <option value="admin">admin</option>
          </select>
        </label>
        <label>
          Banned
          <select name="banned" value={draft.banned} onChange={field('banned')}>
            <option value="">any</option>
            <option value="true">banned</option>
            <option value="false">not banned</option>
          </select>
        </label>
        <label>
          E-mail verified
          <select name="email_verified" value={draft.email_verified} onChange={field('email_verified')}>
            <option value="">any</option>
            <option value="true">verified</option>
            <option value="false">not verified</option>
          </select>
        </label>
        <button type="submit">Search</button>
      </form>
      {list.error && (
        <p class="error" role="alert">
          {errorText(list.error)}
        </p>
      )}
      <table aria-label="Users">
        <thead>
          <tr>
            <th>E-mail</th>
            <th>Username</th>
            <th>Name</th>
            <th>Role</th>
            <th>Status</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.users.map((user) => (
            <tr key={user.id}>
              <td>
                <a href={`#/users/${encodeURIComponent(user.id)}`}>{user.email}</a>
              </td>
              <td>{user.username}</td>
              <td>{user.display_name}</td>
              <td>{user.role}</td>
              <td>{user.banned ? <span class="badge bad">banned</span> : <span class="badge">active</span>}</td>
              <td>{when(user.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data && list.data.users.length === 0 && <p>No user matches.</p>}
      <Pager pagination={list.data?.pagination} onPage={setPage} />
    </section>
  );
}
