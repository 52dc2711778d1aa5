/**
 * The cli-login area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { CLI_LOGIN_KIND, CLI_POLL_INTERVAL_S, CLI_SESSION_TTL_MS } from './state.js';
export type { PollReply } from './state.js';
