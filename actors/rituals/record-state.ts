import type { RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { analyticsView, latenessEntry, latenessOf, type Outcome, type Totals } from './analytics.js';
import { ritualPolicy as policy, type AttemptView, type HistoryView, type RecordMessage } from './messages.js';

/**
 * A ritual definition's record: pure domain logic of the `ritual-record`
 * actor (storage `records`, key [tenant, def_id]). The attempts feed it
 * through the outbox, each delta exactly once in effect:
 *   - `attempt`: the attempt's newest view, for the history (an older view
 *     arriving late is ignored by its seq);
 *   - `outcome`: a terminal, non-rehearsal attempt: the counters and the
 *     lateness per part move, and the outcome joins the recent ones;
 *   - `late`: a late performance after the attempt failed: how late, and
 *     whether it was a near miss.
 * An analytics read is answered from these running figures (and, for a
 * `sample`, from the kept recent outcomes), never by reading attempts.
 *
 * Records:
 *   a:<attempt_id>   an attempt's view (the history)
 *   t                the running totals
 *   o:<seq, 12 digits>  a recent outcome (the newest recent_outcomes_kept)
 */
export const ATTEMPT_PREFIX = 'a:';
export const TOTALS_KEY = 't';
export const OUTCOME_PREFIX = 'o:';

export interface RecordState {
  attempts: Map<string, AttemptView>;
  totals: Totals;
  /** Recent outcomes by seq, oldest first. */
  recent: Map<number, Outcome>;
  next_seq: number;
}

type Result = TurnResult<RecordState, unknown>;

const outcomeKey = (seq: number) => OUTCOME_PREFIX + String(seq).padStart(12, '0');

export function loadRecord(_key: string, records: Iterable<[string, unknown]>): RecordState {
  const state: RecordState = { attempts: new Map(), totals: { completed: 0, failed: 0, parts: {} }, recent: new Map(), next_seq: 1 };
  for (const [subkey, value] of records) {
    if (subkey.startsWith(ATTEMPT_PREFIX)) state.attempts.set(subkey.slice(ATTEMPT_PREFIX.length), value as AttemptView);
    else if (subkey === TOTALS_KEY) state.totals = value as Totals;
    else if (subkey.startsWith(OUTCOME_PREFIX)) {
      const seq = Number(subkey.slice(OUTCOME_PREFIX.length));
      state.recent.set(seq, value as Outcome);
      state.next_seq = Math.max(state.next_seq, seq + 1);
    }
  }
  return state;
}

function findRecent(state: RecordState, attempt_id: string): [number, Outcome] | undefined {
  for (const entry of state.recent) if (entry[1].attempt_id === attempt_id) return entry;
  return undefined;
}

export function stepRecord(state: RecordState, message: RecordMessage, _context: TurnContext): Result {
  switch (message.op) {
    case 'attempt': {
      const current = state.attempts.get(message.view.attempt_id);
      if (current && current.seq >= message.view.seq) return { state };
      state.attempts.set(message.view.attempt_id, message.view);
      return { state, writes: [{ subkey: ATTEMPT_PREFIX + message.view.attempt_id, value: message.view }] };
    }
    case 'outcome': {
      const { delta } = message;
      if (findRecent(state, delta.attempt_id)) return { state };
      const totals = state.totals;
      if (delta.outcome === 'completed') totals.completed += 1;
      else totals.failed += 1;
      for (const part_id of delta.late_parts) latenessEntry(totals.parts, part_id).late_count += 1;
      const outcome: Outcome = {
        attempt_id: delta.attempt_id,
        outcome: delta.outcome,
        spread_ms: delta.spread_ms,
        late: Object.fromEntries(delta.late_parts.map((part_id) => [part_id, null])),
        near_misses: [],
      };
      const seq = state.next_seq++;
      state.recent.set(seq, outcome);
      const writes: RecordWrite[] = [{ subkey: TOTALS_KEY, value: totals }, { subkey: outcomeKey(seq), value: outcome }];
      while (state.recent.size > policy.recent_outcomes_kept) {
        const oldest = state.recent.keys().next().value as number;
        state.recent.delete(oldest);
        writes.push({ subkey: outcomeKey(oldest), value: undefined });
      }
      return { state, writes };
    }
    case 'late': {
      const part = latenessEntry(state.totals.parts, message.part_id);
      part.total_late_ms += message.late_by_ms;
      if (message.near_miss) part.near_miss_count += 1;
      const writes: RecordWrite[] = [{ subkey: TOTALS_KEY, value: state.totals }];
      const recent = findRecent(state, message.attempt_id);
      if (recent) {
        const [seq, outcome] = recent;
        outcome.late[message.part_id] = message.late_by_ms;
        if (message.near_miss) outcome.near_misses.push(message.part_id);
        writes.push({ subkey: outcomeKey(seq), value: outcome });
      }
      return { state, writes };
    }
    case 'history': {
      const matched = [...state.attempts.values()]
        .filter((view) => message.status === undefined || view.status === message.status)
        .sort((a, b) => b.armed_at_ms - a.armed_at_ms || (a.attempt_id < b.attempt_id ? -1 : 1));
      const start = (message.page - 1) * message.page_size;
      const view: HistoryView = { total: matched.length, attempts: matched.slice(start, start + message.page_size) };
      return { state, reply: view };
    }
    case 'analytics': {
      const all = [...state.recent.values()];
      if (message.sample === undefined) {
        const spreads = all.flatMap((o) => (o.outcome === 'completed' && o.spread_ms !== null ? [o.spread_ms] : []));
        return { state, reply: analyticsView(state.totals.completed, state.totals.failed, spreads, state.totals.parts, all.length, policy.lateness_leaders_max) };
      }
      const sample = message.sample === 0 ? [] : all.slice(-message.sample);
      const completed = sample.filter((o) => o.outcome === 'completed');
      const spreads = completed.flatMap((o) => (o.spread_ms !== null ? [o.spread_ms] : []));
      return { state, reply: analyticsView(completed.length, sample.length - completed.length, spreads, latenessOf(sample), sample.length, policy.lateness_leaders_max) };
    }
    default:
      return { state };
  }
}
