import type { ComponentType } from 'preact';
import { CoordinationPage } from './coordination.js';
import { OrganizationsPage } from './organizations.js';
import { UsersPage } from './users.js';

/**
 * The console's pages, in navigation order. A page is a component at a hash route
 * (`#/<path>`); it reads and acts only through api() (../api.ts), and asks confirm()
 * (../confirm.tsx) before anything destructive.
 */
export interface ConsolePage {
  path: string;
  title: string;
  component: ComponentType;
}

export const pages: ConsolePage[] = [
  { path: 'users', title: 'Users', component: UsersPage },
  { path: 'organizations', title: 'Organizations', component: OrganizationsPage },
  { path: 'coordination', title: 'Coordination', component: CoordinationPage },
];
