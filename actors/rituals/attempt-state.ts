import { ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { nextEscalationMs, nextSteps, type EscalationPart } from './escalation.js';
import {
  ritualPolicy as policy,
  ritualRecordKey,
  RITUAL_RECORD_KIND,
  TERMINAL_STATUSES,
  type AttemptMessage,
  type AttemptRecord,
  type AttemptReport,
  type AttemptView,
  type CheckinReply,
  type CountdownReply,
  type LateEntry,
  type PerformReply,
  type RecordMessage,
  type RitualCaller,
  type RitualEventType,
} from './messages.js';
import { notifySends, topicPublish } from './notify.js';
import { nearMissMs, orderViolation, partsSkipped, spreadOf } from './quorum.js';

/**
 * One ritual attempt: pure domain logic of the `ritual-attempt` actor
 * (storage `snapshot`, key [tenant, attempt_id]).
 *
 * States: armed -> (countdown) counting_down -> (first perform) performing
 * -> completed | failed. `armed` and `counting_down` also go straight to
 * failed at the deadline; a first perform from `armed` opens the window.
 * The window is [open, open + window_ms]: it opens at the countdown's
 * window_open_ms, or else at the first performance. The attempt completes in
 * the turn whose performance brings the count to quorum.required; it fails
 * when the window closes short of the quorum (`window_closed`) or at
 * `deadline_ms` (`deadline`). After a window_closed failure, a part that had
 * not performed may still perform until the deadline: it is recorded as late,
 * by how much, in the report, and does not change the outcome.
 *
 * Every time-based move is an alarm (`deadline`, `window`, `escalate`);
 * each turn first applies whatever is due (`advance`), so a message that
 * arrives before a due alarm sees the same state the alarm would leave.
 * Changes reach the definition's record actor (history, analytics) as outbox
 * sends; rehearsal attempts send their view (history) but no analytics.
 */
export interface AttemptState {
  record: AttemptRecord | null;
}

type Result = TurnResult<AttemptState, unknown>;

export const DEADLINE_ALARM = 'deadline';
export const WINDOW_ALARM = 'window';
export const ESCALATE_ALARM = 'escalate';

export function initialAttempt(): AttemptState {
  return { record: null };
}

function notFound(): ServiceError {
  return new ServiceError('not_found', 'No such ritual attempt.');
}

export function isTerminal(record: AttemptRecord): boolean {
  return TERMINAL_STATUSES.includes(record.status);
}

export function attemptView(record: AttemptRecord): AttemptView {
  const { tenant: _tenant, definition: _definition, ...view } = record;
  return structuredClone(view);
}

/** What one turn accumulates besides the record. */
interface Effects {
  sends: ActorSend[];
}

function partOf(record: AttemptRecord, part_id: string) {
  const part = record.definition.parts.find((candidate) => candidate.part_id === part_id);
  if (!part) throw new ServiceError('ritual_part_not_found', `The ritual has no part ${JSON.stringify(part_id)}.`, { details: { part_id } });
  return part;
}

function requireAssignee(record: AttemptRecord, part_id: string, caller: RitualCaller) {
  const part = partOf(record, part_id);
  if (part.assigned_to !== caller.user_id) {
    throw new ServiceError('ritual_not_assignee', `Part ${part_id} is assigned to another user; only its assignee may act for it.`, {
      details: { part_id, assigned_to: part.assigned_to },
    });
  }
  return part;
}

function event(record: AttemptRecord, context: TurnContext, type: RitualEventType, data: Record<string, unknown>) {
  return {
    id: context.newId('evt_'),
    type,
    timestamp_ms: context.now,
    data: { ritual_def_id: record.ritual_def_id, version: record.version, attempt_id: record.attempt_id, rehearsal: record.rehearsal, ...data },
  };
}

function escalationParts(record: AttemptRecord): EscalationPart[] {
  const performed = new Set(record.performances.map((p) => p.part_id));
  return record.checkins.map((c) => ({ part_id: c.part_id, last_checkin_ms: c.last_checkin_ms, steps_fired: c.steps_fired, performed: performed.has(c.part_id) }));
}

function end(record: AttemptRecord, outcome: 'completed' | 'failed', reason: AttemptReport['reason'], at_ms: number, effects: Effects, context: TurnContext): void {
  const definition = record.definition;
  const performedIds = new Set(record.performances.map((p) => p.part_id));
  const late: LateEntry[] =
    outcome === 'failed'
      ? definition.parts.filter((part) => !performedIds.has(part.part_id)).map((part) => ({ part_id: part.part_id, assigned_to: part.assigned_to, late_by_ms: null, performed: false }))
      : [];
  const report: AttemptReport = {
    outcome,
    reason,
    ended_at_ms: at_ms,
    window_open_ms: record.window_open_ms,
    window_close_ms: record.window_close_ms,
    performed: record.performances.length,
    required: definition.quorum.required,
    spread_ms: spreadOf(record.performances),
    on_time: record.performances.map((p) => ({ ...p, offset_ms: p.server_ts_ms - (record.window_open_ms ?? p.server_ts_ms) })),
    late,
    skipped: outcome === 'completed' ? definition.parts.filter((part) => !performedIds.has(part.part_id)).map((part) => part.part_id) : [],
  };
  record.status = outcome;
  record.report = report;
  record.ended_at_ms = at_ms;
  if (!record.rehearsal) {
    const delta: RecordMessage = {
      op: 'outcome',
      delta: { attempt_id: record.attempt_id, outcome, ended_at_ms: at_ms, spread_ms: outcome === 'completed' ? report.spread_ms : null, late_parts: late.map((entry) => entry.part_id) },
    };
    effects.sends.push({ kind: RITUAL_RECORD_KIND, key: ritualRecordKey(record.tenant, record.ritual_def_id), message: delta });
  }
  if (definition.on_complete) {
    const type = outcome === 'completed' ? 'ritual.completed' : 'ritual.failed';
    effects.sends.push(...notifySends(record.tenant, definition.on_complete, event(record, context, type, { report })));
  }
}

/** Apply every time-based move due at `now`, in time order: window close, deadline, escalations. */
function advance(record: AttemptRecord, now: number, effects: Effects, context: TurnContext): void {
  if (isTerminal(record)) return;
  const closes = record.window_close_ms !== null && record.window_close_ms < record.deadline_ms ? record.window_close_ms : null;
  // Escalations due before the attempt ends fire first (they were due then).
  const endAt = closes !== null && now > closes ? closes : now >= record.deadline_ms ? record.deadline_ms : null;
  fireEscalations(record, endAt ?? now, effects, context);
  if (closes !== null && now > closes) return end(record, 'failed', 'window_closed', closes, effects, context);
  if (now >= record.deadline_ms) return end(record, 'failed', 'deadline', record.deadline_ms, effects, context);
}

function fireEscalations(record: AttemptRecord, until_ms: number, effects: Effects, context: TurnContext): void {
  const definition = record.definition;
  const interval_ms = definition.checkin_interval_seconds * 1000;
  for (;;) {
    const due = nextSteps(record.armed_at_ms, interval_ms, definition.escalation, escalationParts(record))[0];
    if (!due || due.due_ms > until_ms) return;
    const step = definition.escalation[due.step]!;
    const part = partOf(record, due.part_id);
    const checkin = record.checkins.find((c) => c.part_id === due.part_id)!;
    checkin.steps_fired += 1;
    const notice = event(record, context, 'ritual.escalation', {
      part_id: part.part_id,
      assigned_to: part.assigned_to,
      step: due.step,
      after_missed_seconds: step.after_missed_seconds,
      missed_at_ms: due.missed_at_ms,
      last_checkin_ms: checkin.last_checkin_ms,
    });
    record.escalations.push({
      part_id: part.part_id,
      assigned_to: part.assigned_to,
      step: due.step,
      missed_at_ms: due.missed_at_ms,
      fired_at_ms: context.now,
      webhook_ids: [...step.webhook_ids],
      pubsub_channel: step.pubsub_channel,
      event_id: notice.id,
    });
    effects.sends.push(...notifySends(record.tenant, step, notice));
  }
}

function alarmsFor(record: AttemptRecord): AlarmChange[] {
  if (isTerminal(record)) {
    return [DEADLINE_ALARM, WINDOW_ALARM, ESCALATE_ALARM].map((name) => ({ name, due_ms: null }));
  }
  const definition = record.definition;
  return [
    { name: DEADLINE_ALARM, due_ms: record.deadline_ms },
    // One ms after the close: a performance at exactly the close still counts.
    { name: WINDOW_ALARM, due_ms: record.window_close_ms !== null && record.window_close_ms < record.deadline_ms ? record.window_close_ms + 1 : null },
    { name: ESCALATE_ALARM, due_ms: nextEscalationMs(record.armed_at_ms, definition.checkin_interval_seconds * 1000, definition.escalation, escalationParts(record)) },
  ];
}

/** The turn's result: the new record, its alarms, the history upsert and the effects. */
function changed(record: AttemptRecord, effects: Effects, reply: unknown): Result {
  record.seq += 1;
  const upsert: RecordMessage = { op: 'attempt', view: attemptView(record) };
  const sends = [...effects.sends, { kind: RITUAL_RECORD_KIND, key: ritualRecordKey(record.tenant, record.ritual_def_id), message: upsert }];
  return { state: { record }, reply, alarms: alarmsFor(record), sends };
}

function closed(record: AttemptRecord): ServiceError {
  return new ServiceError('ritual_attempt_closed', `The attempt has ended (${record.status}).`, { details: { status: record.status, report: record.report } });
}

export function stepAttempt(state: AttemptState, message: AttemptMessage | AlarmMessage, context: TurnContext): Result {
  if (message.op === 'arm') return arm(state, message, context);
  if (!state.record) {
    if (message.op === '$alarm') return { state };
    throw notFound();
  }
  if (message.op === 'get') {
    // A read shows what the alarms would have done by now, without writing.
    const preview = structuredClone(state.record);
    advance(preview, context.now, { sends: [] }, context);
    return { state, reply: attemptView(preview) };
  }
  const record = structuredClone(state.record);
  const effects: Effects = { sends: [] };
  const before = record.status;
  const escalationsBefore = record.escalations.length;
  advance(record, context.now, effects, context);
  const moved = record.status !== before || record.escalations.length !== escalationsBefore;
  switch (message.op) {
    case '$alarm':
      return moved ? changed(record, effects, undefined) : { state, alarms: alarmsFor(state.record) };
    case 'checkin':
      return checkin(record, effects, message.caller, message.part_id, context);
    case 'countdown':
      return countdown(record, effects, message, context);
    case 'perform':
      return perform(record, effects, message.caller, message.part_id, context);
    default:
      return { state };
  }
}

function arm(state: AttemptState, message: Extract<AttemptMessage, { op: 'arm' }>, context: TurnContext): Result {
  if (state.record) throw new ServiceError('conflict', 'This attempt id is taken.');
  const definition = message.definition;
  const attempt_id = JSON.parse(context.key)[1] as string;
  const record: AttemptRecord = {
    attempt_id,
    tenant: message.tenant,
    ritual_def_id: definition.ritual_def_id,
    version: definition.version,
    definition,
    armed_by: message.caller.user_id,
    armed_at_ms: context.now,
    deadline_ms: context.now + definition.arm_ttl_seconds * 1000,
    rehearsal: message.rehearsal,
    status: 'armed',
    countdown: null,
    window_open_ms: null,
    window_close_ms: null,
    performances: [],
    late_performances: [],
    checkins: definition.parts.map((part) => ({ part_id: part.part_id, last_checkin_ms: null, checkins: 0, steps_fired: 0 })),
    escalations: [],
    report: null,
    ended_at_ms: null,
    seq: 0,
  };
  return changed(record, { sends: [] }, attemptView(record));
}

function checkin(record: AttemptRecord, effects: Effects, caller: RitualCaller, part_id: string, context: TurnContext): Result {
  requireAssignee(record, part_id, caller);
  // A refusal throws: the turn, and what `advance` did in it, is dropped; the due alarm does the same next.
  if (isTerminal(record)) throw closed(record);
  if (record.performances.some((p) => p.part_id === part_id)) {
    throw new ServiceError('ritual_part_already_performed', `Part ${part_id} has already performed in this attempt.`, { details: { part_id } });
  }
  const entry = record.checkins.find((c) => c.part_id === part_id)!;
  entry.last_checkin_ms = context.now;
  entry.checkins += 1;
  entry.steps_fired = 0;
  const interval_ms = record.definition.checkin_interval_seconds * 1000;
  const next_deadline_ms = interval_ms > 0 ? Math.min(context.now + interval_ms, record.deadline_ms) : record.deadline_ms;
  const reply: CheckinReply = { attempt_id: record.attempt_id, part_id, next_deadline_ms, status: record.status };
  return changed(record, effects, reply);
}

function isParticipant(record: AttemptRecord, caller: RitualCaller): boolean {
  return caller.admin || record.definition.created_by === caller.user_id || record.definition.parts.some((part) => part.assigned_to === caller.user_id);
}

function countdown(record: AttemptRecord, effects: Effects, message: Extract<AttemptMessage, { op: 'countdown' }>, context: TurnContext): Result {
  if (!isParticipant(record, message.caller)) {
    throw new ServiceError('forbidden', "Only the ritual's creator, an assignee of one of its parts or a platform admin may start a countdown.");
  }
  if (isTerminal(record)) throw closed(record);
  if (record.status !== 'armed') {
    throw new ServiceError('ritual_attempt_state', `A countdown starts only from armed (the attempt is ${record.status}).`, { details: { status: record.status } });
  }
  const channel = message.channel ?? record.definition.announce_channel;
  if (channel === null) {
    throw new ServiceError('BAD_REQUEST', 'body.channel is required: the ritual has no announce_channel', { details: [{ field: 'body.channel', message: 'is required: the ritual has no announce_channel' }] });
  }
  const window_open_ms = context.now + message.seconds * 1000;
  if (window_open_ms >= record.deadline_ms) {
    throw new ServiceError('BAD_REQUEST', "body.seconds would open the window at or after the attempt's deadline", {
      details: [{ field: 'body.seconds', message: `must open the window before deadline_ms ${record.deadline_ms}` }],
    });
  }
  record.status = 'counting_down';
  record.countdown = { channel, seconds: message.seconds, announced_at_ms: context.now };
  record.window_open_ms = window_open_ms;
  record.window_close_ms = window_open_ms + record.definition.window_ms;
  const notice = event(record, context, 'ritual.countdown', {
    seconds: message.seconds,
    window_open_ms,
    window_close_ms: record.window_close_ms,
    deadline_ms: record.deadline_ms,
    ordering: record.definition.ordering,
    mode: record.definition.mode,
    parts: record.definition.parts.map((part) => ({ part_id: part.part_id, assigned_to: part.assigned_to })),
  });
  effects.sends.push(topicPublish(record.tenant, channel, notice));
  const reply: CountdownReply = { attempt_id: record.attempt_id, channel, seconds: message.seconds, window_open_ms, window_close_ms: record.window_close_ms, status: record.status };
  return changed(record, effects, reply);
}

function perform(record: AttemptRecord, effects: Effects, caller: RitualCaller, part_id: string, context: TurnContext): Result {
  const part = requireAssignee(record, part_id, caller);
  const now = context.now;
  const definition = record.definition;
  const already = record.performances.some((p) => p.part_id === part_id) || record.late_performances.some((p) => p.part_id === part_id);
  if (already) throw new ServiceError('ritual_part_already_performed', `Part ${part_id} has already performed in this attempt.`, { details: { part_id } });

  if (isTerminal(record)) {
    // A late performance after the window closed short of the quorum: recorded (by how much) until the deadline.
    const report = record.report!;
    if (report.reason !== 'window_closed' || now >= record.deadline_ms) throw closed(record);
    const late_by_ms = now - record.window_close_ms!;
    const near_miss = late_by_ms <= nearMissMs(definition.window_ms, policy.near_miss_ms_min);
    record.late_performances.push({ part_id, performed_by: caller.user_id, server_ts_ms: now, late_by_ms, near_miss });
    const entry = report.late.find((candidate) => candidate.part_id === part_id);
    if (entry) {
      entry.late_by_ms = late_by_ms;
      entry.performed = true;
    }
    if (!record.rehearsal) {
      const delta: RecordMessage = { op: 'late', attempt_id: record.attempt_id, part_id, late_by_ms, near_miss };
      effects.sends.push({ kind: RITUAL_RECORD_KIND, key: ritualRecordKey(record.tenant, record.ritual_def_id), message: delta });
    }
    return changed(record, effects, performReply(record, part_id, now, late_by_ms));
  }

  if (record.window_open_ms !== null && now < record.window_open_ms) {
    throw new ServiceError('ritual_window_not_open', `The countdown opens the window at ${record.window_open_ms}; performing before it does not count.`, {
      details: { window_open_ms: record.window_open_ms, now_ms: now },
    });
  }
  const blocking = orderViolation(definition, record.performances.map((p) => p.part_id), part_id);
  if (blocking !== null) {
    throw new ServiceError('ritual_out_of_order', `Part ${part_id} cannot perform after part ${blocking} in mode ${definition.mode}.`, {
      details: { part_id, performed_after: blocking, mode: definition.mode, ordering: definition.ordering },
    });
  }
  const skipped = partsSkipped(definition, record.performances.map((p) => p.part_id), part_id);
  const skippable = definition.quorum.of - definition.quorum.required;
  if (skipped.length > skippable) {
    throw new ServiceError('ritual_out_of_order', `Part ${part_id} cannot perform before ${skipped.join(', ')} in mode ${definition.mode}: with a quorum of ${definition.quorum.required} of ${definition.quorum.of}, at most ${skippable} part(s) may be skipped.`, {
      details: { part_id, skipped, mode: definition.mode, ordering: definition.ordering, quorum: definition.quorum },
    });
  }
  if (record.window_open_ms === null) {
    record.window_open_ms = now;
    record.window_close_ms = now + definition.window_ms;
  }
  record.status = 'performing';
  record.performances.push({ part_id: part.part_id, performed_by: caller.user_id, server_ts_ms: now });
  if (record.performances.length >= definition.quorum.required) end(record, 'completed', 'quorum_reached', now, effects, context);
  return changed(record, effects, performReply(record, part_id, now, null));
}

function performReply(record: AttemptRecord, part_id: string, now: number, late_by_ms: number | null): PerformReply {
  return {
    attempt_id: record.attempt_id,
    part_id,
    server_ts_ms: now,
    performed: record.performances.length,
    required: record.definition.quorum.required,
    late_by_ms,
    report: record.report,
    status: record.status,
  };
}
