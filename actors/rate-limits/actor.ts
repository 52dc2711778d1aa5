import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { RATE_LIMIT_RULES_KIND, RATE_LIMIT_WINDOW_KIND, type ReserveReply, type RulesMessage, type WindowMessage } from './messages.js';
import { loadRulesState, stepRules, type RulesState } from './rules-state.js';
import { initialWindowState, stepWindow, type WindowStateOrNone } from './window-state.js';

/** The platform's rule set: one actor, one record per tier or user setting. */
export const rateLimitRulesActor: RecordsActorDefinition<RulesState, RulesMessage, unknown> = {
  kind: RATE_LIMIT_RULES_KIND,
  storage: 'records',
  load: loadRulesState,
  step: stepRules,
};

/** One caller's window for one limit: a small snapshot of its leases (deleted once nothing in it counts). */
export const rateLimitWindowActor: SnapshotActorDefinition<WindowStateOrNone, WindowMessage, ReserveReply | null> = {
  kind: RATE_LIMIT_WINDOW_KIND,
  storage: 'snapshot',
  initial: initialWindowState,
  step: stepWindow,
};
