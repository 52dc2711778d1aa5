import { type Role } from '../../actors/accounts/messages.js';

/**
 * Who is calling. `tenant` scopes every stateful resource: the
 * organization of the credential when it has one, otherwise the user.
 * An API key's principal has `session_id` '' (a key has no session).
 */
export interface Principal {
  user_id: string;
  session_id: string;
  role: Role;
  org_id: string | null;
  tenant: string;
  /** How the caller authenticated. */
  credential: 'access_token' | 'api_key';
  /** What the credential may do: `['*']` for an access token, the key's scopes for an API key. */
  scopes: string[];
  /** The API key's id when `credential` is `api_key`, otherwise null. */
  api_key_id: string | null;
  /**
   * The admin's user id when the session was opened by an admin impersonation
   * (docs/api/admin.md), otherwise null. Such a session may not create or
   * change credentials (see refuseImpersonation in plugins/authenticate.ts).
   */
  impersonated_by: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}
