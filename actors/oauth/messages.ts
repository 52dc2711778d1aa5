/**
 * The oauth area's public surface: the oauth-client kind, the messages it
 * takes and the views it answers with. Other layers import this file only.
 * Pure helpers others need (PKCE, scope lists) stay in their files and are
 * named here.
 */
import type { FlowAnswer } from '../flow-call.js';
import type { PkceMethod } from './pkce.js';

export { isValidChallenge, s256Challenge } from './pkce.js';
export type { PkceMethod } from './pkce.js';
export { scopeSubset, USER_ONLY_SCOPES } from './scope.js';

/** One actor per registered client; key = client_id. */
export const OAUTH_CLIENT_KIND = 'oauth-client';

export type GrantType = 'authorization_code' | 'refresh_token' | 'client_credentials';
export type AuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post';
export const GRANT_TYPES: readonly GrantType[] = ['authorization_code', 'refresh_token', 'client_credentials'];

/** A client as registered (the secret only as its hash). */
export interface ClientRegistration {
  client_name: string;
  redirect_uris: string[];
  grant_types: GrantType[];
  response_types: string[];
  token_endpoint_auth_method: AuthMethod;
  scope: string[];
  secret_hash: string | null;
  /** The user who registered the client with a bearer (required for client_credentials); null for an open registration. */
  owner_user_id?: string | null;
}

/** What anyone may learn about a client (no secret hash, no owner, no tombstone fields). */
export interface ClientView {
  client_id: string;
  client_name: string;
  redirect_uris: string[];
  grant_types: GrantType[];
  response_types: string[];
  token_endpoint_auth_method: AuthMethod;
  scope: string[];
  client_id_issued_at: number;
}

/** The reply of `delete`: the user sessions opened through the client, for the edge to end. */
export interface DeleteReply {
  sessions: { user_id: string; session_id: string }[];
}

export type RedeemReply =
  | { ok: true; user_id: string; scope: string[] }
  | { ok: false; reason: 'invalid_grant'; description: string; revoke?: { user_id: string; session_id: string } };

export type RotateReply =
  | { ok: true; user_id: string; scope: string[]; session_refresh_hash: string }
  | { ok: false; reused: boolean; user_id?: string }
  /** The requested scope is not within the granted one: nothing changed, the presented token still works. */
  | { ok: false; reused: false; invalid_scope: true };

/**
 * One request to the token endpoint (RFC 6749 §3.2), as the edge parsed it:
 * the client actor authenticates the client and decides every rule (which
 * grant the client may use, the code's PKCE and redirect_uri, the scope),
 * opens or rotates the user session through the user actor (a flow, see
 * actors/oauth/flows.ts) and answers with what the edge signs. Secrets are
 * drawn at the edge; only their sha256 travels. An absent or empty form
 * parameter is absent here.
 */
export interface TokenRequest {
  op: 'token';
  /** The client authentication the request used (RFC 6749 §2.3) and the hash of its secret (null: none). */
  auth_method: AuthMethod;
  secret_hash: string | null;
  grant_type?: string;
  /** authorization_code */
  code_hash?: string;
  redirect_uri?: string;
  code_verifier?: string;
  /** refresh_token: the parsed token, or null when one was sent but is not a refresh token of this server. */
  refresh_token?: { client_id: string; session_id: string; presented_hash: string } | null;
  /** The scope parameter, split, whenever it was sent (even empty); absent: the whole registered or granted scope. */
  scope?: string[];
  /** Hash of the client's next refresh token (authorization_code, refresh_token). */
  new_refresh_hash: string;
  /** Hash of the user session's next refresh secret, kept by the client actor and the user actor only. */
  new_session_refresh_hash: string;
  session: { ttl_seconds: number; ip_address: string; user_agent: string };
}

/** What the edge signs: a client token, or a user session's token (and the client's refresh token when `refresh`). */
export type TokenGrant =
  /** `owner_user_id`: the user who registered the client (null: an admin's client); the edge checks the account is still live. */
  | { grant: 'client_credentials'; client_id: string; scope: string[]; owner_user_id: string | null }
  | { grant: 'authorization_code' | 'refresh_token'; client_id: string; user_id: string; session_id: string; scope: string[]; refresh: boolean };

export type OAuthClientMessage =
  | { op: 'register'; client: ClientRegistration }
  | { op: 'delete'; deleted_by: string }
  | { op: 'get' }
  | { op: 'authenticate'; secret_hash: string | null }
  | {
      op: 'issue-code';
      code_hash: string;
      user_id: string;
      redirect_uri: string;
      /** The authorization request named it (else the client's only one was used): the token request must then name it too. */
      redirect_uri_given?: boolean;
      code_challenge: string;
      code_challenge_method: PkceMethod;
      scope: string[];
    }
  /** redirect_uri null: the token request left it out (allowed when the authorization request did too). */
  | { op: 'redeem-code'; code_hash: string; redirect_uri: string | null; code_verifier: string }
  | { op: 'bind-session'; code_hash: string; session_id: string; user_id: string; scope: string[]; refresh_hash: string; session_refresh_hash: string }
  | {
      op: 'rotate-refresh';
      session_id: string;
      presented_hash: string;
      new_hash: string;
      new_session_refresh_hash: string;
      /** The scope the client asks for (RFC 6749 §6); absent: the whole granted scope. */
      scope?: string[];
    }
  | TokenRequest
  /** The user actor's answer to a step of a token flow (actors/flow-call.ts). */
  | FlowAnswer;
