import { useRoute } from '../route.js';
import { UserDetail } from './users/user-detail.js';
import { UserList } from './users/user-list.js';

/** #/users: the admin user list; #/users/<id>: one user with its sessions. */
export function UsersPage() {
  const route = useRoute();
  const id = route.startsWith('/users/') ? decodeURIComponent(route.slice('/users/'.length)) : '';
  return id ? <UserDetail id={id} /> : <UserList />;
}
