import { describe, expect, it } from 'vitest';
import type { TurnContext } from '../../runtime/index.js';
import type { FlowAnswer, FlowCall } from '../../actors/flow-call.js';
import { loadAgent, stepAgent, type AgentState } from '../../actors/agents/agent-state.js';
import { loadDirectory, stepDirectory, type DirectoryState } from '../../actors/agents/directory-state.js';
import { agentPolicy, canRead, checkToml, type AgentCaller, type AgentFields, type AgentView, type DirectoryCall } from '../../actors/agents/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure steps of the agent and its tenant directory (docs/api/agents.md). */
const owner: AgentCaller = { user_id: 'u1', tenant: 'u1', admin: false };
const fields = (over: Partial<AgentFields> = {}): AgentFields => ({
  key: 'support-bot',
  display_name: 'Support',
  description: 'Answers tickets',
  profile_url: '',
  status: 'active',
  visibility: 'private',
  prompt_text: 'You are helpful.',
  agent_toml: 'name = "support"',
  compaction_toml: '',
  intent_toml: '',
  memory_toml: '',
  rag_toml: '',
  shield_toml: '',
  procedures: null,
  ...over,
});
const asked = (now: number, request_id = 'req1'): TurnContext => ({ ...fixedContext(now, 'agent', 'agt1'), request_id });

/** Runs the directory on the agent's flow-call and hands its answer back: one outbox round trip. */
function roundTrip(agent: AgentState, directory: DirectoryState, sends: { message: unknown }[] | undefined, now: number) {
  const call = sends![0].message as FlowCall<DirectoryCall>;
  const answered = stepDirectory(directory, call, fixedContext(now, 'agent-directory', 'd'));
  const answer = answered.sends![0].message as FlowAnswer;
  return stepAgent(agent, answer, fixedContext(now, 'agent', agent.id));
}

function created(directory = loadDirectory('d', []), id = 'agt1', over: Partial<AgentFields> = {}) {
  const agent = loadAgent(id, []);
  const proposed = stepAgent(agent, { op: 'create', tenant: 'u1', org_id: null, caller: owner, fields: fields(over) }, asked(1000));
  expect(proposed.defer).toBe(true);
  expect(agent.def).toBeNull();
  const done = roundTrip(agent, directory, proposed.sends, 1000);
  return { agent, directory, done };
}

describe('agent create, update, delete through the directory', () => {
  it('applies a create only when the directory took the key, then answers the deferred ask', () => {
    const { agent, directory, done } = created();
    expect(agent.def).toMatchObject({ agent_id: 'agt1', key: 'support-bot', version: 1, owner_id: 'u1' });
    expect(done.replies).toEqual([{ request_id: 'req1', reply: agent.def }]);
    expect(directory.keys.get('support-bot')).toBe('agt1');
  });

  it('refuses a second agent with a taken key, leaving nothing behind', () => {
    const { directory } = created();
    const other = loadAgent('agt2', []);
    const proposed = stepAgent(other, { op: 'create', tenant: 'u1', org_id: null, caller: owner, fields: fields() }, asked(2000, 'req2'));
    const done = roundTrip(other, directory, proposed.sends, 2000);
    expect(done.replies).toEqual([{ request_id: 'req2', error: expect.objectContaining({ code: 'agent_key_taken' }) }]);
    expect(other.def).toBeNull();
    expect(other.pending).toBeNull();
    expect(directory.entries.size).toBe(1);
  });

  it('keeps each previous definition as a revision and moves the key in the directory', () => {
    const { agent, directory } = created();
    const proposed = stepAgent(agent, { op: 'update', caller: owner, changes: { key: 'helpdesk', prompt_text: 'v2' } }, asked(1000, 'req3'));
    roundTrip(agent, directory, proposed.sends, 1000);
    expect(agent.def).toMatchObject({ version: 2, key: 'helpdesk', prompt_text: 'v2' });
    expect(agent.def!.updated_at_ms).toBeGreaterThan(1000);
    expect(agent.revisions.get(1)).toMatchObject({ version: 1, key: 'support-bot', prompt_text: 'You are helpful.' });
    expect([...directory.keys.entries()]).toEqual([['helpdesk', 'agt1']]);
    const trail = stepAgent(agent, { op: 'revisions', caller: owner }, fixedContext(1000)).reply as { revisions: { version: number }[] };
    expect(trail.revisions.map((r) => r.version)).toEqual([2, 1]);
  });

  it('keeps only the newest revisions', () => {
    const { agent, directory } = created();
    for (let i = 0; i < agentPolicy.revisions_kept_max + 5; i++) {
      const proposed = stepAgent(agent, { op: 'update', caller: owner, changes: { description: `d${i}` } }, asked(2000 + i, `r${i}`));
      roundTrip(agent, directory, proposed.sends, 2000 + i);
    }
    expect(agent.revisions.size).toBe(agentPolicy.revisions_kept_max);
    expect(Math.min(...agent.revisions.keys())).toBe(agent.def!.version - agentPolicy.revisions_kept_max);
  });

  it('allows one change at a time and only to the owner or an admin', () => {
    const { agent } = created();
    stepAgent(agent, { op: 'update', caller: owner, changes: { description: 'x' } }, asked(3000, 'a'));
    expect(codeOf(() => stepAgent(agent, { op: 'update', caller: owner, changes: { description: 'y' } }, asked(3000, 'b')))).toBe('agent_change_in_progress');
    const { agent: fresh } = created(undefined, 'agt9', { visibility: 'organization' });
    expect(codeOf(() => stepAgent(fresh, { op: 'update', caller: { user_id: 'u2', tenant: 'u1', admin: false }, changes: {} }, asked(1)))).toBe('forbidden');
    expect(codeOf(() => stepAgent(fresh, { op: 'delete', caller: { user_id: 'u3', tenant: 'other', admin: false } }, asked(1)))).toBe('not_found');
  });

  it('a pending change survives a reload and is applied when the answer arrives', () => {
    const { agent, directory } = created();
    const proposed = stepAgent(agent, { op: 'delete', caller: owner }, asked(4000, 'del'));
    // The node restarts: the actor is rebuilt from its records (the ask is gone).
    const records: [string, unknown][] = [['def', agent.def], ['pending', proposed.writes!.find((w) => w.subkey === 'pending')!.value]];
    const reloaded = loadAgent('agt1', records);
    const done = roundTrip(reloaded, directory, proposed.sends, 4000);
    expect(reloaded.def).toBeNull();
    expect(done.replies).toEqual([]);
    expect(directory.entries.size).toBe(0);
    expect(directory.keys.size).toBe(0);
  });

  it('ignores an older directory upsert arriving late', () => {
    const directory = loadDirectory('d', []);
    const entry = { agent_id: 'a', key: 'k', display_name: 'n', description: '', profile_url: '', status: 'active' as const, visibility: 'private' as const, org_id: null, owner_id: 'u', created_at_ms: 1, updated_at_ms: 1, version: 2 };
    stepDirectory(directory, { op: 'upsert', entry }, fixedContext(1));
    stepDirectory(directory, { op: 'upsert', entry: { ...entry, key: 'old', version: 1 } }, fixedContext(1));
    expect(directory.entries.get('a')!.key).toBe('k');
  });
});

describe('directory list', () => {
  it('shows private agents to their owner and admins only; sorts, filters and pages', () => {
    const directory = loadDirectory('d', []);
    const add = (agent_id: string, owner_id: string, visibility: 'private' | 'organization', created: number) =>
      stepDirectory(directory, { op: 'upsert', entry: { agent_id, key: agent_id, display_name: agent_id.toUpperCase(), description: '', profile_url: '', status: 'active', visibility, org_id: null, owner_id, created_at_ms: created, updated_at_ms: created, version: 1 } }, fixedContext(1));
    add('a', 'u1', 'private', 3);
    add('b', 'u2', 'private', 2);
    add('c', 'u2', 'organization', 1);
    const list = (viewer: { user_id: string; admin: boolean }, extra = {}) =>
      (stepDirectory(directory, { op: 'list', query: { viewer, filters: [], page: 1, page_size: 10, ...extra } }, fixedContext(1)).reply as { agents: { agent_id: string }[]; total: number });
    expect(list({ user_id: 'u1', admin: false }).agents.map((a) => a.agent_id)).toEqual(['c', 'a']);
    expect(list({ user_id: 'x', admin: true }).total).toBe(3);
    expect(list({ user_id: 'x', admin: true }, { sort_by: 'key', sort_order: 'desc', page_size: 2 }).agents.map((a) => a.agent_id)).toEqual(['c', 'b']);
    expect(list({ user_id: 'x', admin: true }, { filters: [{ field: 'owner_id', operator: 'eq', value: 'u2' }] }).total).toBe(2);
    expect(codeOf(() => list({ user_id: 'x', admin: true }, { filters: [{ field: 'created_at', operator: 'gt', value: 'soon' }] }))).toBe('BAD_REQUEST');
  });
});

describe('read access', () => {
  const agent = (over: Partial<AgentView> = {}) => ({ owner_id: 'u1', visibility: 'private' as const, org_id: null, tenant: 'u1', ...over });
  it('owner and admins always; the tenant for organization agents; members from outside through the organization', () => {
    expect(canRead(agent(), owner).kind).toBe('allowed');
    expect(canRead(agent(), { user_id: 'x', tenant: 'x', admin: true }).kind).toBe('allowed');
    expect(canRead(agent(), { user_id: 'u2', tenant: 'u1', admin: false }).kind).toBe('denied');
    expect(canRead(agent({ visibility: 'organization', tenant: 'o1', org_id: 'o1' }), { user_id: 'u2', tenant: 'o1', admin: false }).kind).toBe('allowed');
    expect(canRead(agent({ visibility: 'organization', tenant: 'o1', org_id: 'o1' }), { user_id: 'u2', tenant: 'u2', admin: false })).toEqual({ kind: 'needs_membership', org_id: 'o1' });
    expect(canRead(agent({ visibility: 'organization' }), { user_id: 'u2', tenant: 'u2', admin: false }).kind).toBe('denied');
  });
});

describe('TOML payloads', () => {
  it('accepts documents (empty too) and names the line and column of an error', () => {
    expect(checkToml('body.agent_toml', '')).toBeNull();
    expect(checkToml('body.agent_toml', '[agent]\nname = "x"\ntools = ["a", "b"]\n')).toBeNull();
    expect(checkToml('body.rag_toml', 'a = 1\nb = [1,\nc =')).toMatchObject({ field: 'body.rag_toml', line: 3 });
    expect(checkToml('body.rag_toml', 'a = 1\na = 2')).toMatchObject({ line: 2 });
    expect(checkToml('body.rag_toml', '[[x]]\n'.repeat(1) + 'x = '.repeat(1))).not.toBeNull();
  });
});
