import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import type { StatsCounts, StatsMessage } from './messages.js';

/**
 * A plan's totals: pure domain logic of the `throttle-stats` actor (storage
 * `snapshot`, key = throttleStatsKey(tenant, plan_id, generation)). Subject
 * actors add their counts through the outbox, so each count is added once
 * even across a crash; the totals lag the checks by about
 * throttlePolicy.stats_flush_ms.
 */
export type StatsState = StatsCounts;

export function initialStats(): StatsState {
  return { total_checks: 0, total_allowed: 0, total_denied: 0, total_refunded: 0 };
}

export function stepStats(state: StatsState, message: StatsMessage | AlarmMessage, _context: TurnContext): TurnResult<StatsState, StatsCounts | undefined> {
  switch (message.op) {
    case 'get':
      return { state, reply: state };
    case 'add': {
      const next: StatsState = {
        total_checks: state.total_checks + message.counts.total_checks,
        total_allowed: state.total_allowed + message.counts.total_allowed,
        total_denied: state.total_denied + message.counts.total_denied,
        total_refunded: state.total_refunded + message.counts.total_refunded,
      };
      return { state: next, reply: next };
    }
    default:
      return { state };
  }
}
