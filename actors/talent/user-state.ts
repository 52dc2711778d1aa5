import { isServiceError, ServiceError, type ActorSend, type AlarmMessage, type DeferredReply, type TurnContext, type TurnResult, ownEntry } from '../../runtime/index.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { addCosts, allocate, emptyAllocation, exclusiveSelections, highestTierUnlocked, migrate, nodeStatuses, respec, snapshotOf, type Allocation } from './allocation.js';
import { levelForXp, pointsForLevels, XP_TOTAL_MAX } from './curves.js';
import {
  TALENT_ANALYTICS_KIND,
  TALENT_CURVE_KIND,
  TALENT_TREE_KIND,
  TALENT_USER_KIND,
  talentAnalyticsKey,
  talentCurveKey,
  talentLimits,
  talentTreeKey,
  type AllocationStateView,
  type Curve,
  type TalentUserMessage,
  type TreeCurrentReply,
  type TreeStateView,
  type TreeVersion,
  type WalletView,
  type XpResult,
} from './messages.js';

/**
 * One user's talent state in one tenant (key = talentUserKey): the wallet
 * (point balances, XP per curve, the XP event ids seen) and the allocation in
 * each tree, with a copy of the tree version each allocation is in and of
 * every curve used. Every rule is checked here, in the turn that changes the
 * state, against those copies: no read elsewhere guards a write.
 *
 * Copies stay right without a read before the write:
 * - Curves are immutable, so the copy is fetched once (a flow call to the
 *   curve actor the first time a curve is used) and kept.
 * - Trees change (PUT adds a version, a version may be deleted), so every
 *   allocate, respec and state read is a small flow: this actor records the
 *   request as pending, asks the tree actor for its current version (sending
 *   the version it holds, so the definition comes only when it changed), and
 *   applies the request when the answer arrives, in that turn. An allocation
 *   in another version is migrated first (migrate(): refund everything, take
 *   the ranks again if the new version's migration chain carries them), so a
 *   user's state moves lazily, when it is next touched.
 * Every change of an allocation sends the before/after to the tree's
 * analytics actor through the outbox.
 *
 * Invariant, per currency: earned = balances + points spent in every tree +
 * respec fees paid.
 */
export interface UserTreeEntry {
  tree: TreeVersion;
  /** The tree's revision when this copy was answered (TreeCurrentReply.revision). */
  revision: number;
  allocation: Allocation;
}

type PendingMessage = Exclude<TalentUserMessage, { op: 'wallet' } | { op: 'flow-answer' }>;

export interface TalentUserState {
  earned: Record<string, number>;
  balances: Record<string, number>;
  fees_paid: Record<string, number>;
  xp: Record<string, { total_xp: number; current_level: number }>;
  curves: Record<string, Curve>;
  events: Record<string, { fingerprint: string; result: XpResult; at_ms: number }>;
  trees: Record<string, UserTreeEntry>;
  /** Requests waiting for a curve or tree answer: flow id -> the ask and the message. */
  pending: Record<string, { request_id: string | null; message: PendingMessage }>;
}

export function initialTalentUserState(): TalentUserState {
  return { earned: {}, balances: {}, fees_paid: {}, xp: {}, curves: {}, events: {}, trees: {}, pending: {} };
}

const keyParts = (key: string) => JSON.parse(key) as [tenant: string, user_id: string];
const toCosts = (amounts: Record<string, number>) => Object.entries(amounts).map(([currency, amount]) => ({ currency, amount }));

export function walletView(state: TalentUserState, user_id: string): WalletView {
  return {
    user_id,
    balances: state.balances,
    xp: Object.keys(state.xp)
      .sort()
      .map((curve_id) => ({ curve_id, current_level: state.xp[curve_id].current_level, total_xp: state.xp[curve_id].total_xp })),
  };
}

export function treeStateView(entry: UserTreeEntry, balances: Record<string, number>, user_id: string): TreeStateView {
  const { tree, allocation } = entry;
  const state: AllocationStateView = {
    exclusive_selections: exclusiveSelections(tree, allocation.ranks),
    highest_tier_unlocked: highestTierUnlocked(tree, allocation.ranks),
    points_spent: allocation.points_spent,
    ranks: allocation.ranks,
    tree_id: tree.tree_id,
    tree_version: tree.version,
    user_id,
  };
  return { nodes: nodeStatuses(tree, allocation.ranks, balances), state, tree_id: tree.tree_id, tree_version: tree.version };
}

const fingerprintOf = (curve_id: string, amount: number) => `${curve_id}:${amount}`;

/** A remembered XP event's first result, marked idempotent; refuses the same id with another request. */
function replayedEvent(state: TalentUserState, event_id: string | null, curve_id: string, amount: number): XpResult | null {
  const seen = event_id === null ? undefined : ownEntry(state.events, event_id);
  if (!seen) return null;
  if (seen.fingerprint !== fingerprintOf(curve_id, amount)) {
    throw new ServiceError('idempotency_key_reused', 'This XP event id was used with a different curve_id or amount.');
  }
  return { ...seen.result, idempotent: true };
}

/** Forgets event ids past their retention, and the oldest beyond the cap (room for one more). */
function prunedEvents(events: TalentUserState['events'], now: number): TalentUserState['events'] {
  const kept = Object.entries(events)
    .filter(([, event]) => event.at_ms > now - talentLimits.xp_event_retention_ms)
    .sort((a, b) => a[1].at_ms - b[1].at_ms);
  return Object.fromEntries(kept.slice(Math.max(0, kept.length - (talentLimits.xp_events_remembered_max - 1))));
}

/** Applies an XP event with the curve at hand. */
export function applyXp(state: TalentUserState, curve: Curve, message: { curve_id: string; amount: number; event_id: string | null }, now: number): { state: TalentUserState; reply: XpResult } {
  const replay = replayedEvent(state, message.event_id, message.curve_id, message.amount);
  if (replay) return { state, reply: replay };
  const before = state.xp[curve.curve_id] ?? { total_xp: 0, current_level: 1 };
  const total_xp = Math.min(XP_TOTAL_MAX, before.total_xp + message.amount);
  const new_level = Math.max(before.current_level, levelForXp(curve, total_xp));
  const granted = pointsForLevels(curve, before.current_level, new_level);
  const result: XpResult = { granted, idempotent: false, new_level, old_level: before.current_level, curve_id: curve.curve_id, total_xp, event_id: message.event_id };
  const events = message.event_id === null ? state.events : { ...prunedEvents(state.events, now), [message.event_id]: { fingerprint: fingerprintOf(message.curve_id, message.amount), result, at_ms: now } };
  return {
    state: {
      ...state,
      curves: { ...state.curves, [curve.curve_id]: curve },
      xp: { ...state.xp, [curve.curve_id]: { total_xp, current_level: new_level } },
      balances: addCosts(state.balances, toCosts(granted)),
      earned: addCosts(state.earned, toCosts(granted)),
      events,
    },
    reply: result,
  };
}

function analyticsDelta(tenant: string, user_id: string, tree_id: string, before: UserTreeEntry | undefined, after: UserTreeEntry | undefined): ActorSend[] {
  const from = before ? snapshotOf(before.tree, before.allocation) : null;
  const to = after ? snapshotOf(after.tree, after.allocation) : null;
  if (JSON.stringify(from) === JSON.stringify(to)) return [];
  return [{ kind: TALENT_ANALYTICS_KIND, key: talentAnalyticsKey(tenant, tree_id), message: { op: 'delta', user_id, from, to } }];
}

interface Applied {
  state: TalentUserState;
  sends: ActorSend[];
  outcome: { reply: unknown } | { error: FlowError };
}

const refusal = (error: unknown): { error: FlowError } => {
  if (!isServiceError(error)) throw error;
  return { error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) } };
};

/**
 * Applies a tree request with the tree actor's answer: first the allocation
 * moves to the current version if it is in another one (kept even when the
 * request is then refused), then the request runs against that version.
 */
export function applyTreeAnswer(state: TalentUserState, message: Extract<PendingMessage, { tree_id: string }>, answer: FlowAnswer, key: string): Applied {
  const [tenant, user_id] = keyParts(key);
  const before = ownEntry(state.trees, message.tree_id);
  if (!answer.ok) {
    const error: FlowError = { code: answer.error.code, message: answer.error.message };
    // The tree is gone (every version deleted): its points come back to the wallet, unless this
    // answer is older than the copy held (delivered late, before the tree was created again).
    const revision = (answer.error.details as { revision?: number } | undefined)?.revision ?? Number.MAX_SAFE_INTEGER;
    if (answer.error.code === 'talent_tree_not_found' && before && revision >= before.revision) {
      const trees = { ...state.trees };
      delete trees[message.tree_id];
      const balances = addCosts(state.balances, toCosts(before.allocation.points_spent));
      return { state: { ...state, trees, balances }, sends: analyticsDelta(tenant, user_id, message.tree_id, before, undefined), outcome: { error } };
    }
    return { state, sends: [], outcome: { error } };
  }
  const current = answer.reply as TreeCurrentReply;
  if (message.op === 'state' && !(message.viewer.admin || message.viewer.user_id === user_id || message.viewer.user_id === current.owner)) {
    return { state, sends: [], outcome: { error: { code: 'forbidden', message: "Only the user, the tree's owner and platform admins can read this state." } } };
  }
  // Answers may arrive out of order: one older than the copy held is stale, and the copy is used as it is.
  const stale = before !== undefined && current.revision < before.revision;
  const definition = stale ? before.tree : (current.definition ?? (before?.tree.version === current.version ? before.tree : null));
  if (!definition) {
    return { state, sends: [], outcome: { error: { code: 'conflict', message: 'The tree changed while this request waited; retry it.' } } };
  }

  let balances = state.balances;
  let entry: UserTreeEntry = before ?? { tree: definition, revision: current.revision, allocation: emptyAllocation() };
  if (before && !stale && before.tree.version !== current.version) {
    const moved = migrate(definition, before.allocation, balances, current.carry_from.includes(before.tree.version));
    entry = { tree: definition, revision: current.revision, allocation: moved.allocation };
    balances = moved.balances;
  } else if (before && !stale && before.revision !== current.revision) {
    // The same version, answered later: remember the revision, so an older answer arriving after this one is seen as stale.
    entry = { ...before, revision: current.revision };
  }
  let fees_paid = state.fees_paid;
  let outcome: Applied['outcome'];
  try {
    if (message.op === 'allocate') {
      const result = allocate(entry.tree, entry.allocation, balances, message.node_id);
      entry = { ...entry, allocation: result.allocation };
      balances = result.balances;
    } else if (message.op === 'respec') {
      const result = respec(entry.tree, entry.allocation, balances, message.node_ids);
      entry = { ...entry, allocation: result.allocation };
      balances = result.balances;
      fees_paid = addCosts(fees_paid, toCosts(result.fee));
    }
    outcome = { reply: treeStateView(entry, balances, user_id) };
  } catch (error) {
    outcome = refusal(error);
  }
  const keep = before !== undefined || Object.keys(entry.allocation.ranks).length > 0;
  const trees = keep ? { ...state.trees, [message.tree_id]: entry } : state.trees;
  const unchanged = keep && before === entry && balances === state.balances;
  return {
    state: unchanged || !keep ? state : { ...state, trees, balances, fees_paid },
    sends: analyticsDelta(tenant, user_id, message.tree_id, before, keep ? entry : undefined),
    outcome,
  };
}

/** Records the request as pending and sends the flow call whose answer will complete it. */
function waitFor(state: TalentUserState, message: PendingMessage, context: TurnContext, target: { kind: string; key: string; call: unknown; step: string }): TurnResult<TalentUserState, unknown> {
  const flow_id = context.newId('tfl_');
  return {
    state: { ...state, pending: { ...state.pending, [flow_id]: { request_id: context.request_id, message } } },
    sends: [flowCall(target.kind, target.key, target.call, { kind: TALENT_USER_KIND, key: context.key, flow_id, step: target.step })],
    defer: true,
  };
}

function answered(state: TalentUserState, answer: FlowAnswer, context: TurnContext): TurnResult<TalentUserState, unknown> {
  const waiting = state.pending[answer.flow_id];
  if (!waiting) return { state };
  const pending = { ...state.pending };
  delete pending[answer.flow_id];
  const rest = { ...state, pending };
  const message = waiting.message;
  const reply = (outcome: { reply: unknown } | { error: FlowError }): DeferredReply[] => (waiting.request_id === null ? [] : [{ request_id: waiting.request_id, ...outcome }]);

  if (message.op === 'xp') {
    if (!answer.ok) return { state: rest, replies: reply({ error: answer.error }) };
    try {
      const applied = applyXp(rest, answer.reply as Curve, message, context.now);
      return { state: applied.state, replies: reply({ reply: applied.reply }) };
    } catch (error) {
      return { state: rest, replies: reply(refusal(error)) };
    }
  }
  const applied = applyTreeAnswer(rest, message, answer, context.key);
  return { state: applied.state, sends: applied.sends, replies: reply(applied.outcome) };
}

export function stepTalentUser(state: TalentUserState, message: TalentUserMessage | AlarmMessage, context: TurnContext): TurnResult<TalentUserState, unknown> {
  const [tenant, user_id] = keyParts(context.key);
  switch (message.op) {
    case 'wallet':
      return { state, reply: walletView(state, user_id) };
    case 'xp': {
      const replay = replayedEvent(state, message.event_id, message.curve_id, message.amount);
      if (replay) return { state, reply: replay };
      const curve = ownEntry(state.curves, message.curve_id);
      if (curve) return applyXp(state, curve, message, context.now);
      return waitFor(state, message, context, { kind: TALENT_CURVE_KIND, key: talentCurveKey(tenant, message.curve_id), call: { op: 'get' }, step: 'curve' });
    }
    case 'allocate':
    case 'respec':
    case 'state': {
      const have_version = ownEntry(state.trees, message.tree_id)?.tree.version ?? -1;
      return waitFor(state, message, context, { kind: TALENT_TREE_KIND, key: talentTreeKey(tenant, message.tree_id), call: { op: 'current', have_version }, step: 'tree' });
    }
    case 'flow-answer':
      return answered(state, message, context);
    case '$alarm':
      return { state };
  }
}
