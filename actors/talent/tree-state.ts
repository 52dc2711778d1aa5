import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall, flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import {
  TALENT_TREE_INDEX_KIND,
  TALENT_TREE_KIND,
  talentLimits,
  talentTreeIndexKey,
  type TreeCurrentCall,
  type TreeCurrentReply,
  type TreeInput,
  type TreeMessage,
  type TreeSummary,
  type TreeVersion,
  type TreeView,
  type ValidateReply,
} from './messages.js';
import { normaliseTree, treeIssues } from './tree-definition.js';

/**
 * One talent tree of a tenant (key = talentTreeKey): every stored version.
 * Versions are immutable; PUT adds one (numbers never reused, also after
 * every version was deleted). A change answers once the tenant's tree index
 * has acknowledged it (a flow call of step `index`), so a list right after
 * shows it. User actors ask `current` (a flow call) before they change or
 * show an allocation: the latest version, its definition when they hold
 * another, and the migration chain that carries allocations over.
 */
export interface TreeState {
  owner: string | null;
  created_at_ms: number;
  next_version: number;
  revision: number;
  versions: Record<string, TreeVersion>;
  /**
   * Changes waiting for the index's acknowledgement: flow id -> the ask, its
   * reply, and for a create what to restore if the index refuses it (the
   * tenant's tree cap).
   */
  awaiting: Record<string, { request_id: string | null; reply: unknown; undo: Pick<TreeState, 'owner' | 'created_at_ms' | 'versions'> | null }>;
}

export function initialTreeState(): TreeState {
  return { owner: null, created_at_ms: 0, next_version: 1, revision: 0, versions: {}, awaiting: {} };
}

const treeIdOf = (key: string) => (JSON.parse(key) as string[])[1];
const tenantOf = (key: string) => (JSON.parse(key) as string[])[0];
const storedVersions = (state: TreeState) => Object.keys(state.versions).map(Number).sort((a, b) => a - b);

export function latestVersion(state: TreeState): TreeVersion | null {
  const versions = storedVersions(state);
  return versions.length === 0 ? null : state.versions[versions[versions.length - 1]];
}

/** Versions whose allocations carry over to `version`: its migration.from_version, that one's, and so on. */
export function carryFrom(state: TreeState, version: TreeVersion): number[] {
  const chain: number[] = [];
  let current: TreeVersion | undefined = version;
  while (current?.migration && !chain.includes(current.migration.from_version)) {
    chain.push(current.migration.from_version);
    current = state.versions[current.migration.from_version];
  }
  return chain;
}

export function treeView(state: TreeState, tree: TreeVersion): TreeView {
  return { tree, latest_version: latestVersion(state)?.version ?? tree.version, created_at_ms: state.created_at_ms, updated_at_ms: tree.created_at_ms };
}

function notFound(): never {
  throw new ServiceError('talent_tree_not_found', 'No talent tree with this tree_id.');
}

/** The definition as stored, or the issues that refuse it. */
function checked(state: TreeState, input: TreeInput, version: number, by: string, now: number, migration: { from_version: number } | null): { tree: TreeVersion; issues: string[] } {
  const tree = normaliseTree(input, version, by, now, migration);
  return { tree, issues: treeIssues(tree, storedVersions(state)) };
}

function refuseIssues(issues: string[]): never {
  throw new ServiceError('talent_definition_invalid', `The tree definition has ${issues.length} issue(s): ${issues.slice(0, 3).join('; ')}${issues.length > 3 ? '; ...' : ''}`, { details: { issues } });
}

/** Commits a change and answers it once the index has it. */
function changed(state: TreeState, context: TurnContext, reply: unknown, undo: Pick<TreeState, 'owner' | 'created_at_ms' | 'versions'> | null = null): TurnResult<TreeState, unknown> {
  const revision = state.revision + 1;
  const latest = latestVersion(state);
  const summary: TreeSummary = {
    tree_id: treeIdOf(context.key),
    revision,
    latest_version: latest?.version ?? 0,
    created_at_ms: state.created_at_ms,
    versions: storedVersions(state).map((version) => {
      const tree = state.versions[version];
      return { version, name: tree.name, description: tree.description, created_at_ms: tree.created_at_ms };
    }),
  };
  const flow_id = context.newId('tix_');
  return {
    state: { ...state, revision, awaiting: { ...state.awaiting, [flow_id]: { request_id: context.request_id, reply, undo } } },
    sends: [flowCall(TALENT_TREE_INDEX_KIND, talentTreeIndexKey(tenantOf(context.key)), { op: 'upsert', summary }, { kind: TALENT_TREE_KIND, key: context.key, flow_id, step: 'index' })],
    defer: true,
  };
}

function current(state: TreeState, call: TreeCurrentCall): TurnResult<TreeState, TreeCurrentReply> {
  const latest = latestVersion(state);
  // The revision tells the user actor whether this refusal is newer than the copy it holds.
  if (!latest) throw new ServiceError('talent_tree_not_found', 'No talent tree with this tree_id.', { details: { revision: state.revision } });
  return {
    state,
    reply: {
      tree_id: latest.tree_id,
      version: latest.version,
      definition: call.have_version === latest.version ? null : latest,
      carry_from: carryFrom(state, latest),
      owner: state.owner ?? '',
      revision: state.revision,
    },
  };
}

export function stepTree(state: TreeState, message: TreeMessage | AlarmMessage, context: TurnContext): TurnResult<TreeState, unknown> {
  const now = context.now;
  switch (message.op) {
    case 'create': {
      if (latestVersion(state)) throw new ServiceError('talent_tree_exists', `A talent tree with tree_id ${message.tree.tree_id} already exists; PUT creates a new version.`);
      const { tree, issues } = checked(state, message.tree, state.next_version, message.by, now, null);
      if (issues.length > 0) refuseIssues(issues);
      const next: TreeState = { ...state, owner: message.by, created_at_ms: now, next_version: tree.version + 1, versions: { [tree.version]: tree } };
      return changed(next, context, treeView(next, tree), { owner: state.owner, created_at_ms: state.created_at_ms, versions: state.versions });
    }
    case 'put': {
      if (!latestVersion(state)) notFound();
      if (Object.keys(state.versions).length >= talentLimits.tree_versions_max) {
        throw new ServiceError('talent_version_limit', `The tree stores ${talentLimits.tree_versions_max} versions; delete an old one first.`);
      }
      const { tree, issues } = checked(state, message.tree, state.next_version, message.by, now, message.migration);
      if (issues.length > 0) refuseIssues(issues);
      const next: TreeState = { ...state, next_version: tree.version + 1, versions: { ...state.versions, [tree.version]: tree } };
      return changed(next, context, treeView(next, tree));
    }
    case 'validate': {
      const { issues } = checked(state, message.tree, state.next_version, '', now, message.migration);
      const reply: ValidateReply = { issues, valid: issues.length === 0 };
      return { state, reply };
    }
    case 'get': {
      if (!latestVersion(state)) notFound();
      const tree = message.version === null ? latestVersion(state)! : state.versions[message.version];
      if (!tree) throw new ServiceError('talent_version_not_found', `The tree has no version ${message.version}.`);
      return { state, reply: treeView(state, tree) };
    }
    case 'delete_version': {
      if (!latestVersion(state)) notFound();
      if (!state.versions[message.version]) throw new ServiceError('talent_version_not_found', `The tree has no version ${message.version}.`);
      const versions = { ...state.versions };
      delete versions[message.version];
      return changed({ ...state, versions }, context, { tree_id: treeIdOf(context.key), version: message.version });
    }
    case 'flow-call':
      return answerFlowCall((s: TreeState, call: TreeCurrentCall) => current(s, call), state, message, context);
    case 'flow-answer':
      return acknowledged(state, message);
    case '$alarm':
      return { state };
  }
}

function acknowledged(state: TreeState, answer: FlowAnswer): TurnResult<TreeState, unknown> {
  const waiting = state.awaiting[answer.flow_id];
  if (!waiting || answer.step !== 'index') return { state };
  const awaiting = { ...state.awaiting };
  delete awaiting[answer.flow_id];
  const replies = (outcome: { reply: unknown } | { error: FlowError }) => (waiting.request_id === null ? [] : [{ request_id: waiting.request_id, ...outcome }]);
  if (!answer.ok) {
    // Only a create can be refused (the tenant's tree cap): it is undone, its version number stays used.
    return { state: { ...state, ...(waiting.undo ?? {}), awaiting }, replies: replies({ error: answer.error }) };
  }
  return { state: { ...state, awaiting }, replies: replies({ reply: waiting.reply }) };
}
