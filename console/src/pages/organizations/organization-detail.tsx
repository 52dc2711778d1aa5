import { useState } from 'preact/hooks';
import { api } from '../../api.js';
import { useLoad } from '../../hooks.js';
import { query, when, type Pagination } from '../users/format.js';
import { errorText } from '../../api.js';
import { Pager } from '../users/pager.js';
import type { Member, Organization } from './types.js';

/** One organization (GET /admin/auth/org/{id}) and its members (GET /admin/auth/org/{id}/members). */
export function OrganizationDetail({ id }: { id: string }) {
  const [page, setPage] = useState(1);
  const path = `/admin/auth/org/${encodeURIComponent(id)}`;
  const org = useLoad(() => api<Organization>('GET', path), [id]);
  const members = useLoad(
    () => api<{ pagination: Pagination; members: Member[] }>('GET', `${path}/members${query({ page, page_size: 25 })}`),
    [id, page],
  );
  const error = org.error ?? members.error;

  return (
    <section>
      <p>
        <a href="#/organizations">All organizations</a>
      </p>
      {error && (
        <p class="error" role="alert">
          {errorText(error)}
        </p>
      )}
      {org.data && (
        <>
          <h1>{org.data.name}</h1>
          <dl class="facts">
            <dt>Id</dt>
            <dd>
              <code>{org.data.org_id}</code>
            </dd>
            <dt>Slug</dt>
            <dd>{org.data.slug}</dd>
            <dt>Members</dt>
            <dd>{org.data.member_count}</dd>
            <dt>SSO</dt>
            <dd>
              {org.data.sso_enforced ? 'enforced' : 'off'}
              {org.data.sso_exempt_user_ids.length > 0 && ` (exempt: ${org.data.sso_exempt_user_ids.join(', ')})`}
            </dd>
            <dt>Created</dt>
            <dd>
              {when(org.data.created_at)} by <a href={`#/users/${encodeURIComponent(org.data.created_by)}`}>{org.data.created_by}</a>
            </dd>
            <dt>Updated</dt>
            <dd>{when(org.data.updated_at)}</dd>
            <dt>Coordination</dt>
            <dd>
              <a href={`#/coordination/${encodeURIComponent(org.data.org_id)}`}>Locks, waiting rooms, presence and liveness of this organization</a>
            </dd>
            <dt>Metadata</dt>
            <dd>
              <code>{JSON.stringify(org.data.metadata)}</code>
            </dd>
          </dl>
        </>
      )}
      <h2>Members</h2>
      <table aria-label="Members">
        <thead>
          <tr>
            <th>User</th>
            <th>Role</th>
            <th>Joined</th>
          </tr>
        </thead>
        <tbody>
          {members.data?.members.map((member) => (
            <tr key={member.user_id}>
              <td>
                <a href={`#/users/${encodeURIComponent(member.user_id)}`}>{member.user ? member.user.email : `${member.user_id} (deleted)`}</a>
              </td>
              <td>{member.role}</td>
              <td>{when(member.joined_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager pagination={members.data?.pagination} onPage={setPage} />
    </section>
  );
}
