import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadAgent, stepAgent, type AgentState } from './agent-state.js';
import { loadDirectory, stepDirectory, type DirectoryState } from './directory-state.js';
import { AGENT_DIRECTORY_KIND, AGENT_KIND, type AgentDirectoryMessage, type AgentMessage } from './messages.js';

/** One agent (key = agent id): its definition, the previous ones kept for audit, and a change in progress. */
export const agentActor: RecordsActorDefinition<AgentState, AgentMessage, unknown> = {
  kind: AGENT_KIND,
  storage: 'records',
  load: loadAgent,
  step: stepAgent,
};

/** A tenant's agents (key = agentDirectoryKey(tenant)): keys, summaries, lists and lookups. */
export const agentDirectoryActor: RecordsActorDefinition<DirectoryState, AgentDirectoryMessage, unknown> = {
  kind: AGENT_DIRECTORY_KIND,
  storage: 'records',
  load: loadDirectory,
  step: stepDirectory,
};

export const agentActors = [agentActor, agentDirectoryActor];
