import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { talentLimits, type TreeIndexMessage, type TreeListQuery, type TreeListReply, type TreeSummary } from './messages.js';

/**
 * The tenant's talent trees for the list (key = talentTreeIndexKey): one
 * record per tree with a summary of its versions, kept by the tree actors
 * (each change is a flow call they wait for). The list pages here and the
 * route reads the page's definitions from the tree actors. The cap on a
 * tenant's trees is held here: a tree's first version is refused (and the
 * tree actor rolls its create back) when the tenant has trees_per_tenant_max.
 * A tree whose versions were all deleted keeps a small record with its
 * revision (outbox deliveries may be reordered: an older upsert must not bring
 * it back); it does not count against the cap.
 */
export type TreeIndexState = Map<string, TreeSummary>;

export function loadTreeIndex(_key: string, records: Iterable<[string, unknown]>): TreeIndexState {
  const state: TreeIndexState = new Map();
  for (const [subkey, value] of records) state.set(subkey, value as TreeSummary);
  return state;
}

const liveTrees = (state: TreeIndexState) => [...state.values()].filter((summary) => summary.versions.length > 0).length;

export function listTrees(state: TreeIndexState, query: TreeListQuery): TreeListReply {
  const q = query.q?.toLowerCase() ?? null;
  const rows: { tree_id: string; version: number; name: string; created_at_ms: number }[] = [];
  for (const summary of state.values()) {
    for (const version of summary.versions) {
      if (query.active_only && version.version !== summary.latest_version) continue;
      if (q !== null && !version.name.toLowerCase().includes(q) && !version.description.toLowerCase().includes(q)) continue;
      rows.push({ tree_id: summary.tree_id, version: version.version, name: version.name, created_at_ms: version.created_at_ms });
    }
  }
  const direction = query.sort_order === 'asc' ? 1 : -1;
  rows.sort((a, b) => {
    const primary =
      query.sort_by === 'name' ? a.name.localeCompare(b.name) : query.sort_by === 'version' ? a.version - b.version : a.created_at_ms - b.created_at_ms;
    return (primary || a.tree_id.localeCompare(b.tree_id) || a.version - b.version) * direction;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: rows.length, items: rows.slice(start, start + query.page_size).map(({ tree_id, version }) => ({ tree_id, version })) };
}

export function stepTreeIndex(state: TreeIndexState, message: TreeIndexMessage | AlarmMessage, context: TurnContext): TurnResult<TreeIndexState, unknown> {
  switch (message.op) {
    case 'list':
      return { state, reply: listTrees(state, message.query) };
    case 'flow-call':
      return answerFlowCall((current: TreeIndexState, call: { op: 'upsert'; summary: TreeSummary }) => {
        const { summary } = call;
        const stored = current.get(summary.tree_id);
        // A late upsert (outbox deliveries may be reordered) never replaces a newer one.
        if (stored && stored.revision >= summary.revision) return { state: current, reply: null };
        const isNew = summary.versions.length > 0 && (stored === undefined || stored.versions.length === 0);
        if (isNew && liveTrees(current) >= talentLimits.trees_per_tenant_max) {
          throw new ServiceError('talent_tree_limit', `The tenant has ${talentLimits.trees_per_tenant_max} talent trees; delete one first.`);
        }
        // A tree with no version left keeps its record (no rows in the list), with the revision that
        // keeps an older upsert from bringing it back.
        current.set(summary.tree_id, summary);
        return { state: current, reply: null, writes: [{ subkey: summary.tree_id, value: summary }] };
      }, state, message, context);
    case '$alarm':
      return { state };
  }
}
