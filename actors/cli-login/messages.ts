/**
 * The cli-login area's public surface: the kind, the messages the CLI login
 * actor takes and its replies. Other layers import this file only.
 */
import type { FlowAnswer } from '../flow-call.js';

export const CLI_LOGIN_KIND = 'cli-login';
export const CLI_SESSION_TTL_MS = 10 * 60_000;
export const CLI_POLL_INTERVAL_S = 5;

export type CliStatus = 'pending' | 'completed' | 'delivered';

export type CliMessage =
  | { op: 'create'; id: string; poll_hash: string; user_code: string }
  /** `session_id`: the approving session; the CLI's session opens only while it is still live. */
  | { op: 'complete'; user_id: string; session_id: string }
  /**
   * With `session` (what opening one needs: the hash of the edge's refresh
   * secret, its lifetime, the client), a completed login opens the user's
   * session (a flow-call to the user actor, actors/flow-call.ts) and answers
   * once it is open (one ask).
   */
  | { op: 'poll'; poll_hash: string; session?: CliSessionRequest }
  | { op: 'info' }
  /** The user actor's answer to the session it was asked to open (flow_id: this login's id, step `open-session`). */
  | FlowAnswer;

export interface CliSessionRequest {
  refresh_hash: string;
  ttl_seconds: number;
  ip_address: string;
  user_agent: string;
}

/** `session_id` and `user` (the accounts area's PublicUser) when the poll asked for the session. */
export type PollReply = { status: 'pending' } | { status: 'completed'; user_id: string; session_id?: string; user?: unknown };

