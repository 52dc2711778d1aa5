import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { readConsumeToken, signConsumeToken, verifyConsumeToken } from './consume-token.js';
import { consume, FULL_BUCKET, levelled, msUntilFits, msUntilFull, refund, remaining, rescaled, type Bucket } from './gcra.js';
import {
  THROTTLE_STATS_KIND,
  throttlePolicy as policy,
  throttleStatsKey,
  type BucketView,
  type CheckView,
  type PlanRule,
  type RefundView,
  type StatsCounts,
  type StatsMessage,
  type SubjectMessage,
} from './messages.js';

/**
 * One subject's bucket under one plan: pure domain logic of the
 * `throttle-subject` actor (storage `snapshot`, key =
 * throttleSubjectKey(tenant, plan_id, generation, subject)).
 *
 * A check is one turn: it reads and moves the GCRA bucket (gcra.ts) and
 * signs a consume token, so concurrent checks of a subject are serialised by
 * the actor and a hot subject's checks are group-committed by the runtime.
 *
 * The plan's rule arrives with every message, tagged with the plan version
 * the edge read; the actor keeps the newest rule it has seen and applies it
 * to older-tagged messages too, so a node with a stale cached plan can never
 * move a subject back to an old limit.
 *
 * Counts for the plan's totals accumulate here and go to the plan's stats
 * actor through the outbox (exactly once) when the `flush` alarm fires, at
 * most stats_flush_ms after the first uncounted check. The same alarm
 * removes the record once the bucket is full again and no consume token can
 * still be refunded: an idle subject costs nothing on disk.
 */
export interface SubjectState {
  rule: PlanRule;
  bucket: Bucket;
  /** Signs this subject's consume tokens ('' until the first check). */
  secret: string;
  /** Checks made: the consume tokens' sequence numbers. */
  seq: number;
  /** Refunded tokens still within their refund window: [seq, refundable_until_ms]. */
  refunded: [number, number][];
  /** The latest end of a refund window of a token issued. */
  refundable_until_ms: number;
  /** Counts not yet sent to the plan's totals. */
  pending: StatsCounts;
  /** Due time of the `flush` alarm, null when none is set. */
  alarm_ms: number | null;
}

export const FLUSH_ALARM = 'flush';
type Reply = CheckView | BucketView | RefundView | { message: string } | undefined;
type Result = TurnResult<SubjectState | null, Reply>;

const NO_COUNTS: StatsCounts = { total_checks: 0, total_allowed: 0, total_denied: 0, total_refunded: 0 };

export function initialSubject(): SubjectState | null {
  return null;
}

function fresh(rule: PlanRule): SubjectState {
  return { rule, bucket: FULL_BUCKET, secret: '', seq: 0, refunded: [], refundable_until_ms: 0, pending: NO_COUNTS, alarm_ms: null };
}

/** The state under the newest of its own rule and the message's. */
function withRule(state: SubjectState | null, rule: PlanRule, now: number): SubjectState {
  if (!state) return fresh(rule);
  if (state.rule.version >= rule.version) return state;
  return { ...state, rule, bucket: rescaled(state.bucket, state.rule, rule, now) };
}

function bucketView(state: SubjectState, now: number): BucketView {
  const until_full_ms = msUntilFull(state.bucket, now);
  return {
    limit: state.rule.max_requests,
    remaining: remaining(state.bucket, state.rule, now),
    reset_after_seconds: Math.ceil(until_full_ms / 1000),
    reset_at: Math.ceil((now + until_full_ms) / 1000),
    window_seconds: state.rule.window_ms / 1000,
  };
}

/** The flush alarm due within stats_flush_ms (counts are waiting). */
function flushSoon(state: SubjectState, now: number): { state: SubjectState; alarms?: AlarmChange[] } {
  const due_ms = now + policy.stats_flush_ms;
  if (state.alarm_ms !== null && state.alarm_ms <= due_ms) return { state };
  return { state: { ...state, alarm_ms: due_ms }, alarms: [{ name: FLUSH_ALARM, due_ms }] };
}

function statsKeyOf(subjectKey: string): string {
  const [tenant, plan_id, generation] = JSON.parse(subjectKey) as [string, string, number, string];
  return throttleStatsKey(tenant, plan_id, generation);
}

export function stepSubject(state: SubjectState | null, message: SubjectMessage | AlarmMessage, context: TurnContext): Result {
  const now = context.now;
  switch (message.op) {
    case 'peek': {
      // Read-only: computed under the newest rule, nothing stored.
      return { state, reply: bucketView(withRule(state, message.rule, now), now) };
    }
    case 'check':
      return check(withRule(state, message.rule, now), message.cost, context);
    case 'refund':
      return refundToken(withRule(state, message.rule, now), message.consume_token, now);
    case 'reset': {
      const current = withRule(state, message.rule, now);
      return { state: { ...current, bucket: { tat_ms: now, tat_frac: 0 } }, reply: { message: 'The subject bucket is full again.' } };
    }
    case '$alarm':
      return message.name === FLUSH_ALARM && state ? flush(state, context) : { state };
  }
}

function check(state: SubjectState, cost: number, context: TurnContext): Result {
  const now = context.now;
  const rule = state.rule;
  if (cost > rule.max_requests) {
    throw new ServiceError('throttle_cost_exceeds_limit', `A cost of ${cost} can never fit in a bucket of ${rule.max_requests}.`);
  }
  // The hot path of the area (one hot subject takes tens of thousands a second): the new
  // state is written out field by field rather than spread, and nothing else is allocated.
  const secret = state.secret || context.newId();
  const seq = state.seq + 1;
  const taken = consume(state.bucket, rule, cost, now);
  const allowed = taken !== null;
  const refundable_until_ms = allowed ? now + rule.refund_window_ms : now;
  const pending = state.pending;
  const flush_due_ms = now + policy.stats_flush_ms;
  const alarm_ms = state.alarm_ms !== null && state.alarm_ms <= flush_due_ms ? state.alarm_ms : flush_due_ms;
  const next: SubjectState = {
    rule,
    bucket: taken ?? state.bucket,
    secret,
    seq,
    refunded: state.refunded,
    refundable_until_ms: Math.max(state.refundable_until_ms, refundable_until_ms),
    pending: {
      total_checks: pending.total_checks + 1,
      total_allowed: pending.total_allowed + (allowed ? 1 : 0),
      total_denied: pending.total_denied + (allowed ? 0 : 1),
      total_refunded: pending.total_refunded,
    },
    alarm_ms,
  };
  const until_full_ms = msUntilFull(next.bucket, now);
  const reply: CheckView = {
    limit: rule.max_requests,
    remaining: remaining(next.bucket, rule, now),
    reset_after_seconds: Math.ceil(until_full_ms / 1000),
    reset_at: Math.ceil((now + until_full_ms) / 1000),
    window_seconds: rule.window_ms / 1000,
    allowed,
    consume_token: signConsumeToken(secret, { seq, cost: allowed ? cost : 0, refundable_until_ms }),
    cost,
    reason: allowed ? 'within_limit' : 'limit_exceeded',
    retry_after_seconds: allowed ? 0 : Math.max(1, Math.ceil(msUntilFits(next.bucket, rule, cost, now) / 1000)),
  };
  return alarm_ms === state.alarm_ms ? { state: next, reply } : { state: next, reply, alarms: [{ name: FLUSH_ALARM, due_ms: alarm_ms }] };
}

function refundToken(state: SubjectState, token: string, now: number): Result {
  const claims = readConsumeToken(token);
  if (!claims) throw new ServiceError('throttle_consume_token_invalid', 'consume_token is not a consume token.');
  const refused = (reason: RefundView['reason']): Result => ({ state, reply: { refunded: false, cost_refunded: 0, reason } });
  // A token of a denied check, or past its window, is refused before its signature is read: there is nothing it could do.
  if (claims.cost === 0) return refused('nothing_consumed');
  if (claims.refundable_until_ms < now) return refused('refund_window_passed');
  if (!state.secret || claims.seq > state.seq || !verifyConsumeToken(state.secret, claims)) {
    throw new ServiceError('throttle_consume_token_invalid', 'consume_token was not issued for this plan and subject.');
  }
  const live = state.refunded.filter(([, until]) => until >= now);
  if (live.some(([seq]) => seq === claims.seq)) return refused('already_refunded');
  if (live.length >= policy.refunded_tokens_per_subject_max) {
    throw new ServiceError('throttle_refund_limit_reached', `At most ${policy.refunded_tokens_per_subject_max} refunds per subject within a refund window.`);
  }
  // A bucket never holds more than its capacity: what the refund gives back is what the bucket gains. A full
  // bucket gains nothing, and the token stays unused (it may give its units back once the bucket has room).
  const bucket = refund(state.bucket, state.rule, claims.cost, now);
  const given = remaining(bucket, state.rule, now) - remaining(levelled(state.bucket, now), state.rule, now);
  if (given <= 0) return refused('bucket_full');
  const pending: StatsCounts = { ...state.pending, total_refunded: state.pending.total_refunded + 1 };
  const next = flushSoon({ ...state, bucket, refunded: [...live, [claims.seq, claims.refundable_until_ms]], pending }, now);
  return { state: next.state, reply: { refunded: true, cost_refunded: Math.min(given, claims.cost), reason: 'refunded' }, alarms: next.alarms };
}

/** Sends the counts; then either forgets the subject (idle) or waits until it will be. */
function flush(state: SubjectState, context: TurnContext): Result {
  const now = context.now;
  const sends: ActorSend[] = [];
  const counts = state.pending;
  if (counts.total_checks + counts.total_refunded > 0) {
    sends.push({ kind: THROTTLE_STATS_KIND, key: statsKeyOf(context.key), message: { op: 'add', counts } satisfies StatsMessage });
  }
  const refunded = state.refunded.filter(([, until]) => until >= now);
  const idle_at_ms = Math.max(now + msUntilFull(levelled(state.bucket, now), now), state.refundable_until_ms + 1, ...refunded.map(([, until]) => until + 1));
  if (idle_at_ms <= now) return { state: null, sends };
  return {
    state: { ...state, pending: NO_COUNTS, refunded, alarm_ms: idle_at_ms },
    sends,
    alarms: [{ name: FLUSH_ALARM, due_ms: idle_at_ms }],
  };
}
