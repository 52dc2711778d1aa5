import type { FastifyInstance } from 'fastify';
import type { AppServices } from '../services.js';
import { authRoutes } from './auth.js';
import { healthRoutes } from './health.js';
import { lockRoutes } from './locks.js';

/** Every area's routes, in one list. Add an area by adding its function here. */
export const routeAreas: ((app: FastifyInstance, services: AppServices) => void)[] = [
  healthRoutes,
  authRoutes,
  lockRoutes,
];
