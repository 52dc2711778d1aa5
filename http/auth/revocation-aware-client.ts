import { isServiceError, type ActorClient, type AskOptions } from '../../runtime/index.js';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { API_KEY_KIND, USER_API_KEYS_KIND } from '../../actors/api-keys/messages.js';

/**
 * The user actor's operations that can end a session or change what a
 * session may do (a ban, a deletion, a logout, an admin ending a session, a
 * role change, a refresh token presented twice, a new password).
 */
const REVOKING_OPS = new Set(['end-session', 'admin-end-session', 'ban', 'admin-delete', 'admin-patch', 'refresh', 'password-change', 'password-reset-complete']);

/**
 * The API key a message changes or deletes, if any: an update of the key
 * (revocation, new scopes, a rename) or its deletion (a flow of the owner's
 * index, which names the key in the message).
 */
function changedApiKey(kind: string, key: string, message: unknown): string | undefined {
  const m = message as { op?: unknown; api_key_id?: unknown } | null;
  if (kind === API_KEY_KIND && (m?.op === 'update' || m?.op === 'delete')) return key;
  if (kind === USER_API_KEYS_KIND && m?.op === 'delete' && typeof m.api_key_id === 'string') return m.api_key_id;
  return undefined;
}

/**
 * The edge's ActorClient, wrapped: after one of REVOKING_OPS, the user's
 * cached session checks are dropped on every node (`dropEverywhere`) before
 * the caller gets the reply, so "a banned user's tokens stop working at
 * once" holds with the cache (http/auth/session-cache.ts). Every route goes
 * through services.actors, so no route can forget it.
 *
 * A flow revokes through the outbox (SCIM deactivation and deprovisioning,
 * an OAuth code or refresh token presented twice): its answer names the users
 * whose sessions it ended under `revoked_user_ids` (in the reply, or in an
 * error's details), and they are dropped the same way before it is released.
 *
 * An API key's revocation, change or deletion likewise drops this node's
 * last positive check of that key on every node (`dropApiKeyEverywhere`)
 * before the reply is released; a ban, deletion or role change of its owner
 * drops it with the owner's sessions (session-cache.ts).
 */
export class RevocationAwareActorClient implements ActorClient {
  constructor(
    private readonly inner: ActorClient,
    private readonly dropEverywhere: (user_id: string) => Promise<void>,
    private readonly dropApiKeyEverywhere: (api_key_id: string) => Promise<void>,
  ) {}

  ask<Reply = unknown>(kind: string, key: string, message: unknown, options?: AskOptions): Promise<Reply> {
    const op = kind === USER_KIND ? (message as { op?: unknown } | null)?.op : undefined;
    const revoking = typeof op === 'string' && REVOKING_OPS.has(op);
    const apiKey = changedApiKey(kind, key, message);
    if (revoking || apiKey !== undefined) return this.askRevoking(kind, key, message, options, revoking, op, apiKey);
    // Every other message (nearly all): nothing to drop unless the answer names revoked users.
    return this.inner.ask<Reply>(kind, key, message, options).then(this.afterReply, this.afterFailure) as Promise<Reply>;
  }

  // Made once, not per ask: two closures less for every message the edge sends.
  private readonly afterReply = (reply: unknown): unknown => (namesRevokedUsers(reply) ? this.dropNamed(reply).then(() => reply) : reply);

  private readonly afterFailure = (error: unknown): unknown => {
    if (isServiceError(error) && namesRevokedUsers(error.details)) return this.dropNamed(error.details).then(() => Promise.reject(error));
    throw error;
  };

  private async askRevoking<Reply>(kind: string, key: string, message: unknown, options: AskOptions | undefined, revoking: boolean, op: unknown, apiKey: string | undefined): Promise<Reply> {
    let reply: Reply;
    try {
      reply = await this.inner.ask<Reply>(kind, key, message, options);
    } catch (error) {
      // Outcome unknown (a 5xx): it may have happened. A refusal (4xx) changed nothing.
      const unknown = !isServiceError(error) || error.statusCode >= 500;
      if (revoking && unknown) await this.dropEverywhere(key);
      if (apiKey !== undefined && unknown) await this.dropApiKeyEverywhere(apiKey);
      if (isServiceError(error)) await this.dropNamed(error.details);
      throw error;
    }
    // A refresh revokes only when it caught a reused token (and ended that session).
    if (revoking && (op !== 'refresh' || (reply as { reused?: unknown } | null)?.reused === true)) await this.dropEverywhere(key);
    if (apiKey !== undefined) await this.dropApiKeyEverywhere(apiKey);
    await this.dropNamed(reply);
    return reply;
  }

  /** A flow's answer naming the users whose sessions it ended (`revoked_user_ids`). */
  private async dropNamed(answer: unknown): Promise<void> {
    const named = (answer as { revoked_user_ids?: unknown } | null | undefined)?.revoked_user_ids;
    if (!Array.isArray(named)) return;
    for (const user_id of named) if (typeof user_id === 'string') await this.dropEverywhere(user_id);
  }

  tell(kind: string, key: string, message: unknown): void {
    this.inner.tell(kind, key, message);
  }
}

function namesRevokedUsers(answer: unknown): boolean {
  return Array.isArray((answer as { revoked_user_ids?: unknown } | null | undefined)?.revoked_user_ids);
}
