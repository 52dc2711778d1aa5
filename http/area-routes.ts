import type { FastifyInstance } from 'fastify';
import type { AppServices } from './services.js';

/**
 * An area's routes: registers the area's handlers on the app. A handler
 * validates (through its schema), authorises, makes one ask or starts one
 * flow, and maps the reply (docs/architecture.md, "The area shape").
 */
export type AreaRoutes = (app: FastifyInstance, services: AppServices) => void;
