import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import type { SubjectContextEntry, SubjectIndexState, SubjectMessage } from './messages.js';
import { ownEntry } from '../../runtime/index.js';

/**
 * The subject index: one small actor per (tenant, subject id) that knows
 * when the subject was last seen in each presence context. Context actors
 * keep it up to date through their outbox (at-least-once, de-duplicated by
 * the runtime): when a session opens, changes state, leaves or expires, and
 * at most every 30 s while a session keeps heartbeating. Reports can arrive
 * out of order (an outbox retry), so each entry keeps the newest report by
 * `reported_ms` and the latest last-seen time ever reported.
 */

/** Contexts remembered per subject; the one seen longest ago is dropped first. */
export const SUBJECT_CONTEXTS_MAX = 100;

export function initialSubjectIndex(): SubjectIndexState {
  return { subject_kind: null, contexts: {} };
}

export function stepSubjectIndex(
  state: SubjectIndexState,
  message: SubjectMessage | AlarmMessage,
  _context: TurnContext,
): TurnResult<SubjectIndexState, SubjectIndexState | undefined> {
  switch (message.op) {
    case 'get':
      return { state, reply: state };
    case 'seen': {
      // Own entries only: a context id such as `constructor` has none before its first report.
      const previous = ownEntry(state.contexts, message.context_id);
      let entry: SubjectContextEntry;
      if (previous && previous.reported_ms > message.reported_ms) {
        // An older report arriving late: it can only move last_seen forward.
        if (message.last_seen_ms <= previous.last_seen_ms) return { state };
        entry = { ...previous, last_seen_ms: message.last_seen_ms };
      } else {
        entry = {
          context_kind: message.context_kind,
          last_seen_ms: Math.max(message.last_seen_ms, previous?.last_seen_ms ?? 0),
          last_state: message.last_state,
          online: message.online,
          reported_ms: message.reported_ms,
        };
      }
      const contexts = { ...state.contexts, [message.context_id]: entry };
      const ids = Object.keys(contexts);
      if (ids.length > SUBJECT_CONTEXTS_MAX) {
        let oldest = ids[0];
        for (const id of ids) if (contexts[id].last_seen_ms < contexts[oldest].last_seen_ms) oldest = id;
        delete contexts[oldest];
      }
      return { state: { subject_kind: message.subject_kind, contexts } };
    }
    case '$alarm':
      return { state };
  }
}
