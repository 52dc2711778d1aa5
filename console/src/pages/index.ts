import type { ComponentType } from 'preact';
import { ClusterPage } from './cluster.js';
import { HealthPage } from './health.js';
import { CoordinationPage } from './coordination.js';
import { OrganizationsPage } from './organizations.js';
import { UsersPage } from './users.js';
import { JobsPage } from './jobs.js';
import { MessageQueuesPage } from './message-queues.js';
import { WebhooksPage } from './webhooks.js';

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
  { path: 'cluster', title: 'Cluster', component: ClusterPage },
  { path: 'health', title: 'Health and throughput', component: HealthPage },
  { path: 'users', title: 'Users', component: UsersPage },
  { path: 'organizations', title: 'Organizations', component: OrganizationsPage },
  { path: 'coordination', title: 'Coordination', component: CoordinationPage },
  { path: 'jobs', title: 'Job queues', component: JobsPage },
  { path: 'message-queues', title: 'Message queues', component: MessageQueuesPage },
  { path: 'webhooks', title: 'Webhooks', component: WebhooksPage },
];
