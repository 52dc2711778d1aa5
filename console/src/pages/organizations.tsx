import { useRoute } from '../route.js';
import { OrganizationDetail } from './organizations/organization-detail.js';
import { OrganizationList } from './organizations/organization-list.js';

/** #/organizations: the admin organization list; #/organizations/<id>: one with its members. */
export function OrganizationsPage() {
  const route = useRoute();
  const id = route.startsWith('/organizations/') ? decodeURIComponent(route.slice('/organizations/'.length)) : '';
  return id ? <OrganizationDetail id={id} /> : <OrganizationList />;
}
