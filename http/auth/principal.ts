import type { Role } from '../../actors/account/user-state.js';

/**
 * Who is calling. `tenant` scopes every stateful resource: the
 * organization of the credential when it has one, otherwise the user.
 */
export interface Principal {
  user_id: string;
  session_id: string;
  role: Role;
  org_id: string | null;
  tenant: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}
