import type { AgentCaller, AgentSummaryEntry } from './messages.js';

/**
 * Who may read an agent (docs/api/agents.md, "Visibility"): its owner and
 * platform admins always; anyone acting for the agent's tenant when its
 * visibility is `organization`; and, from outside the tenant, a member of the
 * agent's organization when it is `organization`: the edge checks that
 * membership with the organizations area (`needs_membership`). A private
 * agent is nobody else's business: the others get 404, as for an unknown id.
 */
export type ReadAccess = { kind: 'allowed' } | { kind: 'denied' } | { kind: 'needs_membership'; org_id: string };

export function canRead(agent: Pick<AgentSummaryEntry, 'owner_id' | 'visibility' | 'org_id'> & { tenant: string }, caller: AgentCaller): ReadAccess {
  if (caller.admin || agent.owner_id === caller.user_id) return { kind: 'allowed' };
  if (agent.visibility !== 'organization') return { kind: 'denied' };
  if (agent.tenant === caller.tenant) return { kind: 'allowed' };
  return agent.org_id === null ? { kind: 'denied' } : { kind: 'needs_membership', org_id: agent.org_id };
}
