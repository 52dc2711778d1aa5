/**
 * The cli-login area's public surface: the kind, the messages the CLI login
 * actor takes and its replies. Other layers import this file only.
 */
export const CLI_LOGIN_KIND = 'cli-login';
export const CLI_SESSION_TTL_MS = 10 * 60_000;
export const CLI_POLL_INTERVAL_S = 5;

export type CliStatus = 'pending' | 'completed' | 'delivered';

export type CliMessage =
  | { op: 'create'; id: string; poll_hash: string; user_code: string }
  | { op: 'complete'; user_id: string }
  | { op: 'poll'; poll_hash: string }
  | { op: 'info' };

export type PollReply = { status: 'pending' } | { status: 'completed'; user_id: string };

