/**
 * The api-keys area's public surface: the kinds (api-key, user-api-keys), the
 * messages they take and the views they answer with. Other layers import
 * this file only.
 *
 * Creating and deleting a key are flows coordinated by the owner's index
 * (actors/api-keys/index-state.ts): the index reserves (or frees) its entry in
 * the same turn that checks the cap, and calls the key actor with a flow-call
 * (actors/flow-call.ts); the route's one ask is answered when the key actor's
 * flow-answer is in.
 */
import type { FlowAnswer, FlowCall } from '../flow-call.js';

export const API_KEY_KIND = 'api-key';
export const USER_API_KEYS_KIND = 'user-api-keys';
/** `last_used_at` is written at most once per this interval per key. */
export const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export interface ApiKeyRecord {
  api_key_id: string;
  user_id: string;
  /**
   * The organization the key acts for (its tenant), or null: the key acts for
   * its user. Fixed at creation; absent on keys stored before it existed (null).
   */
  org_id?: string | null;
  name: string;
  scopes: string[];
  key_hash: string;
  key_prefix: string;
  created_at_ms: number;
  expires_at_ms: number | null;
  last_used_at_ms: number | null;
  revoked: boolean;
  updated_at_ms: number;
}

/** What the owner sees: everything but the hash. */
export type ApiKeyView = Omit<ApiKeyRecord, 'key_hash'>;

/** The reply of a successful `verify`. */
export interface VerifiedKey {
  api_key_id: string;
  user_id: string;
  org_id: string | null;
  scopes: string[];
  /**
   * When the key expires (null: never), so that the edge's last positive
   * check of it (http/auth/session-cache.ts) never outlives it. Absent in
   * the replies of nodes older than it: such a check is then not kept.
   */
  expires_at_ms?: number | null;
}

/** What a new key is made of (the edge makes the secret and hashes it). */
export interface NewKey {
  /** Checked by the edge: the user is a member of it. */
  org_id: string | null;
  name: string;
  scopes: string[];
  key_hash: string;
  key_prefix: string;
  expires_at_ms: number | null;
}

export type ApiKeyMessage =
  /** Answers the new key's view (a retry of the same key: the same view; another key under this id: 409). */
  | ({ op: 'create'; user_id: string } & NewKey)
  | { op: 'get'; user_id: string }
  | { op: 'update'; user_id: string; name?: string; scopes?: string[]; revoked?: boolean }
  /** Answers the deleted key's view (404 if not the user's). */
  | { op: 'delete'; user_id: string }
  | { op: 'verify'; key_hash: string }
  /** A step of the owner's index (create, delete), answered to it through the outbox. */
  | FlowCall<ApiKeyMessage>;

export interface IndexPage {
  api_key_ids: string[];
  total: number;
}

export type UserApiKeysMessage =
  /** Create flow: checks the cap and reserves the entry in this turn, then creates the key; answers with its ApiKeyView. */
  | { op: 'create'; api_key_id: string; limit: number; key: NewKey }
  /** Delete flow: deletes the key (404 if not the user's), then drops the entry; answers with the deleted key's view. */
  | { op: 'delete'; api_key_id: string }
  /** The key actor's answer to a create or delete (flow_id: the flow's, step: its op): the key's view, or why not. */
  | FlowAnswer
  | { op: 'list'; page: number; page_size: number }
  /** How many keys the user holds (for an admin's UserDetail.api_key_count). */
  | { op: 'count' };
