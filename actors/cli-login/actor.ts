import type { SnapshotActorDefinition } from '../../runtime/index.js';
import { CLI_LOGIN_KIND, type CliMessage } from './messages.js';
import { initialCliState, stepCli, type CliState } from './state.js';

/** One CLI login session (key = session id), a snapshot that expires by alarm. */
export const cliLoginActor: SnapshotActorDefinition<CliState, CliMessage, unknown> = {
  kind: CLI_LOGIN_KIND,
  storage: 'snapshot',
  initial: initialCliState,
  step: stepCli,
};
