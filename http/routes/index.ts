import type { FastifyInstance } from 'fastify';
import type { AppServices } from '../services.js';
import { apiKeyRoutes } from './api-keys.js';
import { adminUserRoutes } from './admin-users.js';
import { authRoutes } from './auth.js';
import { cliLoginRoutes } from './cli-login.js';
import { clusterRoutes } from './cluster.js';
import { emailVerificationRoutes } from './email-verification.js';
import { healthRoutes } from './health.js';
import { livenessRoutes } from './liveness.js';
import { lockRoutes } from './locks.js';
import { linkedAccountRoutes } from './linked-accounts.js';
import { scimRoutes } from './scim.js';
import { twoFactorRoutes } from './two-factor.js';
import { oauthRoutes } from './oauth.js';
import { organizationRoutes } from './organizations.js';
import { presenceRoutes } from './presence.js';
import { waitingRoomRoutes } from './waiting-rooms.js';

/** Every area's routes, in one list. Add an area by adding its function here. */
export const routeAreas: ((app: FastifyInstance, services: AppServices) => void)[] = [
  healthRoutes,
  clusterRoutes,
  authRoutes,
  twoFactorRoutes,
  linkedAccountRoutes,
  scimRoutes,
  oauthRoutes,
  emailVerificationRoutes, cliLoginRoutes,
  adminUserRoutes,
  organizationRoutes,
  apiKeyRoutes,
  lockRoutes,
  livenessRoutes,
  presenceRoutes,
  waitingRoomRoutes,
];
