import { ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { unlockProgress } from './conditions.js';
import {
  ATTESTATION_INDEX_KIND,
  attestationIndexKey,
  vaultPolicy as policy,
  witnessMessage,
  verifyWitnessSignature,
  type AttestationCaller,
  type AttestationIndexMessage,
  type AttestationMessage,
  type AttestationRecord,
  type AttestationSummaryEntry,
  type EnterReply,
  type HistoryEvent,
  type WitnessReply,
} from './messages.js';

/**
 * One attestation: pure domain logic of the `attestation` actor (storage
 * `records`, key = attestation id). Records: `a` the attestation, `e:<seq>`
 * its history events (the first history_kept_max).
 *
 * The actor decides when the lock's condition holds and records every step
 * (witness signatures, lottery entries, the time reached by a durable alarm,
 * the unlock, each reveal). It never holds the content key in clear: the
 * edge sealed it at creation and unseals it only for a reveal this actor
 * allowed (docs/api/vault.md, "Who holds what").
 */
export const RECORD_SUBKEY = 'a';
export const EVENT_PREFIX = 'e:';
export const UNLOCK_ALARM = 'unlock_at';

export interface AttestationState {
  readonly id: string;
  record: AttestationRecord | null;
  events: HistoryEvent[];
}

type Result = TurnResult<AttestationState, unknown>;

export function eventSubkey(seq: number): string {
  return EVENT_PREFIX + String(seq).padStart(10, '0');
}

export function loadAttestation(key: string, records: Iterable<[string, unknown]>): AttestationState {
  const state: AttestationState = { id: key, record: null, events: [] };
  for (const [subkey, value] of records) {
    if (subkey === RECORD_SUBKEY) state.record = value as AttestationRecord;
    else if (subkey.startsWith(EVENT_PREFIX)) state.events.push(value as HistoryEvent);
  }
  return state;
}

export function stepAttestation(state: AttestationState, message: AttestationMessage | AlarmMessage, context: TurnContext): Result {
  if (message.op === 'create') return create(state, message.record, context);
  const record = state.record;
  if (!record) throw new ServiceError('not_found', 'No such attestation.');
  switch (message.op) {
    case '$alarm':
      return message.name === UNLOCK_ALARM ? timeReached(state, record, context) : { state };
    case 'status':
      requireReader(record, message.caller);
      return { state, reply: { record } };
    case 'history':
      requireReader(record, message.caller);
      return { state, reply: { record, events: state.events } };
    case 'witness':
      return witness(state, record, message, context);
    case 'enter':
      return enter(state, record, message.caller, message.entry_count, context);
    case 'unlock':
      return unlock(state, record, message.caller, context);
  }
}

/** The tenant's callers, platform admins and the lottery's winner read an attestation; to anyone else it does not exist. */
function requireReader(record: AttestationRecord, caller: AttestationCaller): void {
  if (caller.admin || caller.tenant === record.tenant || caller.user_id === record.lottery_winner) return;
  throw new ServiceError('not_found', 'No such attestation.');
}

function summaryOf(record: AttestationRecord): AttestationSummaryEntry {
  return {
    attestation_id: record.attestation_id,
    owner: record.owner,
    content_type: record.content_type,
    lock_type: record.lock.type,
    status: record.status,
    created_at_ms: record.created_at_ms,
    unlock_at_ms: record.lock.unlock_at_ms,
  };
}

function indexSend(record: AttestationRecord): ActorSend {
  return { kind: ATTESTATION_INDEX_KIND, key: attestationIndexKey(record.tenant), message: { op: 'upsert', entry: summaryOf(record) } satisfies AttestationIndexMessage };
}

/** Appends a history event (kept while under history_kept_max; always counted). */
function record_event(state: AttestationState, record: AttestationRecord, writes: RecordWrite[], event_type: string, actor: string, details: unknown, context: TurnContext): void {
  record.history_count += 1;
  if (state.events.length >= policy.history_kept_max) return;
  const event: HistoryEvent = { event_id: context.newId('evt_'), event_type, actor, timestamp_ms: context.now, details };
  state.events.push(event);
  writes.push({ subkey: eventSubkey(record.history_count), value: event });
}

/**
 * Re-evaluates the lock after a change: the status follows the progress, and
 * the first time the condition holds the attestation is unlocked (by `actor`).
 * Returns whether the status changed (the index must learn it).
 */
function settle(state: AttestationState, record: AttestationRecord, writes: RecordWrite[], actor: string, context: TurnContext): boolean {
  const before = record.status;
  const progress = unlockProgress(record, context.now);
  if (progress.holds && record.unlocked_at_ms === null) {
    record.unlocked_at_ms = context.now;
    record.unlock_method = unlockMethod(record);
    record_event(state, record, writes, 'unlocked', actor, { unlock_method: record.unlock_method }, context);
  }
  record.status = unlockProgress(record, context.now).status;
  return record.status !== before;
}

function unlockMethod(record: AttestationRecord): string {
  const parts: string[] = [];
  if (record.lock.unlock_at_ms !== null) parts.push('time_lock');
  if (record.lock.witnesses) parts.push('witness');
  if (record.lock.lottery) parts.push('lottery');
  return parts.length === 1 ? parts[0] : `combined:${parts.join('+')}`;
}

function finish(state: AttestationState, record: AttestationRecord, writes: RecordWrite[], changed: boolean, reply: unknown): Result {
  writes.push({ subkey: RECORD_SUBKEY, value: record });
  return { state, reply, writes, sends: changed ? [indexSend(record)] : [] };
}

function create(state: AttestationState, input: Extract<AttestationMessage, { op: 'create' }>['record'], context: TurnContext): Result {
  if (state.record) throw new ServiceError('conflict', 'An attestation with this id exists.');
  const record: AttestationRecord = {
    ...input,
    status: 'locked',
    witnesses: [],
    lottery_total_entries: 0,
    lottery_winner: null,
    unlocked_at_ms: null,
    unlock_method: null,
    history_count: 0,
  };
  state.record = record;
  const writes: RecordWrite[] = [];
  record_event(state, record, writes, 'created', record.owner, { lock_type: record.lock.type, merkle_root: record.lock_proof.merkle_root }, context);
  record.status = unlockProgress(record, context.now).status;
  writes.push({ subkey: RECORD_SUBKEY, value: record });
  const result: Result = { state, reply: { record }, writes, sends: [indexSend(record)] };
  if (record.lock.unlock_at_ms !== null) result.alarms = [{ name: UNLOCK_ALARM, due_ms: record.lock.unlock_at_ms }];
  return result;
}

/** The durable alarm at unlock_at: no request needed for a time lock to open. */
function timeReached(state: AttestationState, record: AttestationRecord, context: TurnContext): Result {
  const writes: RecordWrite[] = [];
  record_event(state, record, writes, 'time_reached', 'system', { unlock_at_ms: record.lock.unlock_at_ms }, context);
  const changed = settle(state, record, writes, 'system', context);
  return finish(state, record, writes, changed, undefined);
}

function witness(state: AttestationState, record: AttestationRecord, message: Extract<AttestationMessage, { op: 'witness' }>, context: TurnContext): Result {
  const witnesses = record.lock.witnesses;
  if (!witnesses) throw new ServiceError('invalid_configuration', 'This attestation names no witnesses.');
  const signer = witnesses.signers.find((candidate) => candidate.signer === message.signer);
  if (!signer) {
    throw new ServiceError('BAD_REQUEST', `${JSON.stringify(message.signer)} is not a signer of this attestation.`, { details: [{ field: 'body.signer', message: 'is not a signer of this attestation' }] });
  }
  const text = witnessMessage(record.attestation_id, record.content_hash, record.lock_proof.merkle_root);
  if (!verifyWitnessSignature(signer.public_key, text, message.signature)) {
    throw new ServiceError('invalid_signature', `The signature is not ${signer.signer}'s Ed25519 signature of this attestation's witness message.`, {
      details: [{ field: 'body.signature', message: 'does not verify', signature_valid: false }],
    });
  }
  const earlier = record.witnesses.find((item) => item.signer === signer.signer);
  // A signer counts once; signing again answers the first signature's time.
  if (earlier) return { state, reply: witnessReply(record, earlier.signed_at_ms, context) };
  record.witnesses.push({ signer: signer.signer, signed_at_ms: context.now, signature: message.signature });
  const writes: RecordWrite[] = [];
  record_event(state, record, writes, 'witnessed', signer.signer, { submitted_by: message.caller.user_id, collected: record.witnesses.length, required: witnesses.threshold }, context);
  const changed = settle(state, record, writes, signer.signer, context);
  return finish(state, record, writes, changed, witnessReply(record, context.now, context));
}

/**
 * The count and status as of this turn, copied: `record` is this actor's live
 * state, and later turns of the same batch (other signers) change it before
 * the reply is released after the batch's commit.
 */
function witnessReply(record: AttestationRecord, witnessed_at_ms: number, context: TurnContext): WitnessReply {
  return { record, signature_valid: true, witnessed_at_ms, signatures_collected: record.witnesses.length, status: unlockProgress(record, context.now).status };
}

/**
 * A lottery entry. Winning is one condition of the lock, like the time or the
 * witnesses: the win is recorded (the winner becomes a reader), but the
 * content key is revealed only when every condition holds in this turn
 * (`revealed`, a `content_revealed` event). Otherwise the attestation opens
 * later by the path that completes it (the unlock_at alarm, the last
 * signature, or an unlock once the time has come), once, and the winner
 * reads it with `unlock` like the tenant.
 */
function enter(state: AttestationState, record: AttestationRecord, caller: AttestationCaller, entry_count: number, context: TurnContext): Result {
  const lottery = record.lock.lottery;
  if (!lottery) throw new ServiceError('invalid_configuration', 'This attestation has no lottery.');
  if (record.lottery_winner !== null) throw new ServiceError('lottery_closed', 'The lottery has been won; it takes no more entries.');
  const left = lottery.max_entries - record.lottery_total_entries;
  if (left <= 0) throw new ServiceError('lottery_closed', `The lottery has sold all of its ${lottery.max_entries} entries.`);
  const first = record.lottery_total_entries;
  let bought = Math.min(entry_count, left);
  const winning = record.lottery_winning_entry;
  const won = winning !== null && winning >= first && winning < first + bought;
  // Nobody buys past the winning entry: the draw is over.
  if (won) bought = winning - first + 1;
  record.lottery_total_entries += bought;
  const writes: RecordWrite[] = [];
  record_event(state, record, writes, 'lottery_entered', caller.user_id, { entries: bought, total_entries: record.lottery_total_entries }, context);
  if (won) {
    record.lottery_winner = caller.user_id;
    record_event(state, record, writes, 'lottery_won', caller.user_id, { winning_entry: winning }, context);
  }
  const changed = settle(state, record, writes, caller.user_id, context);
  // Only the winning request may carry the key, and only if the lock holds now.
  const revealed = won && record.unlocked_at_ms !== null;
  if (revealed) record_event(state, record, writes, 'content_revealed', caller.user_id, null, context);
  const reply: EnterReply = { record, entries_purchased: bought, won, revealed, total_entries: record.lottery_total_entries, status: record.status };
  return finish(state, record, writes, changed || won, reply);
}

function unlock(state: AttestationState, record: AttestationRecord, caller: AttestationCaller, context: TurnContext): Result {
  requireReader(record, caller);
  const progress = unlockProgress(record, context.now);
  // Refused before anything changes (the turn contract).
  if (!progress.holds) {
    throw new ServiceError('attestation_locked', "The attestation's lock condition does not hold yet.", {
      details: [
        {
          status: progress.status,
          time_reached: progress.time_reached,
          unlock_at: record.lock.unlock_at_ms === null ? null : new Date(record.lock.unlock_at_ms).toISOString(),
          signatures_collected: progress.signatures_collected,
          signatures_required: progress.signatures_required,
          lottery_won: progress.lottery_won,
        },
      ],
    });
  }
  const writes: RecordWrite[] = [];
  // The time may have come before its alarm's turn: unlock now.
  const changed = settle(state, record, writes, caller.user_id, context);
  record_event(state, record, writes, 'content_revealed', caller.user_id, null, context);
  return finish(state, record, writes, changed, { record });
}
