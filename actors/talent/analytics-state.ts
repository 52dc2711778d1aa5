import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import type { AllocationSnapshot, AnalyticsMessage, AnalyticsView } from './messages.js';

/**
 * Allocation analytics of one tree (key = talentAnalyticsKey), per version:
 * total ranks per node and the population of each archetype (users with the
 * same exclusive selections). Kept incrementally: every change of a user's
 * allocation arrives from the user's actor through the outbox as a delta
 * (the allocation before and after), which is subtracted and added here, so
 * a read never scans users. Deltas commute, so their order does not matter.
 */
interface VersionStats {
  population: number;
  ranks: Record<string, number>;
  archetypes: Record<string, { population: number; selections: { group: string; node_id: string }[] }>;
}

export interface AnalyticsState {
  versions: Record<string, VersionStats>;
}

export const initialAnalyticsState = (): AnalyticsState => ({ versions: {} });

/** `group=node,...;group=node`, from the sorted selections; '' for a user with none. */
export function signatureOf(selections: { group: string; node_id: string }[]): string {
  const byGroup = new Map<string, string[]>();
  for (const selection of selections) byGroup.set(selection.group, [...(byGroup.get(selection.group) ?? []), selection.node_id]);
  return [...byGroup.keys()].sort().map((group) => `${group}=${byGroup.get(group)!.sort().join(',')}`).join(';');
}

function apply(versions: Record<string, VersionStats>, snapshot: AllocationSnapshot, sign: 1 | -1): Record<string, VersionStats> {
  const current = versions[snapshot.version] ?? { population: 0, ranks: {}, archetypes: {} };
  const ranks = { ...current.ranks };
  for (const [node_id, rank] of Object.entries(snapshot.ranks)) {
    const total = (ranks[node_id] ?? 0) + sign * rank;
    if (total === 0) delete ranks[node_id];
    else ranks[node_id] = total;
  }
  const archetypes = { ...current.archetypes };
  if (snapshot.selections.length > 0) {
    const signature = signatureOf(snapshot.selections);
    const population = (archetypes[signature]?.population ?? 0) + sign;
    if (population === 0) delete archetypes[signature];
    else archetypes[signature] = { population, selections: snapshot.selections };
  }
  const population = current.population + sign;
  const next = { ...versions };
  if (population === 0 && Object.keys(ranks).length === 0) delete next[snapshot.version];
  else next[snapshot.version] = { population, ranks, archetypes };
  return next;
}

export function analyticsView(state: AnalyticsState, version: number): AnalyticsView {
  const stats = state.versions[version] ?? { population: 0, ranks: {}, archetypes: {} };
  const archetypes = Object.entries(stats.archetypes)
    .map(([signature, archetype]) => ({ signature, population: archetype.population, selections: archetype.selections }))
    .sort((a, b) => b.population - a.population || a.signature.localeCompare(b.signature));
  return { version, population: stats.population, ranks: stats.ranks, archetypes };
}

export function stepAnalytics(state: AnalyticsState, message: AnalyticsMessage | AlarmMessage, _context: TurnContext): TurnResult<AnalyticsState, AnalyticsView | null> {
  switch (message.op) {
    case 'delta': {
      let versions = state.versions;
      if (message.from) versions = apply(versions, message.from, -1);
      if (message.to) versions = apply(versions, message.to, 1);
      return { state: { versions }, reply: null };
    }
    case 'read':
      return { state, reply: analyticsView(state, message.version) };
    case '$alarm':
      return { state };
  }
}
