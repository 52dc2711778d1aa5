import { MinHeap, ServiceError, type ActorSend, type AlarmChange, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  addToRate,
  analyticsReport,
  emptyHour,
  HOUR_MS,
  hourOf,
  observedRate,
  recordAdmission,
  type HourStats,
  type RateBuckets,
  type Totals,
} from './analytics.js';
import {
  badRequest,
  boostOf,
  buildConfig,
  DEFAULT_GROUP,
  groupExists,
  jsonSize,
} from './config.js';
import {
  WAITING_ROOM_DIRECTORY_KIND,
  waitingRoomDirectoryKey,
  waitingRoomLimits as limits,
  type AdmitView,
  type AnalyticsView,
  type Ban,
  type BanView,
  type GlobalBanEntry,
  type GroupStatusView,
  type MembersView,
  type MemberView,
  type PositionView,
  type RoomConfig,
  type RoomDetailView,
  type RoomMessage,
  type RoomStatistics,
  type RoomSummary,
} from './messages.js';
import { WaitingQueue, type PriorityClass, type QueueEntry } from './queue.js';
import { matchesRules } from './rules.js';

/**
 * One waiting room: pure domain logic of a `records` actor.
 *
 * Records (one per subkey; a turn writes only what it changed):
 *   c:config  the room configuration          c:rev     index revision (kept after delete)
 *   c:totals  lifetime counters               c:rate    admissions per minute, last 10 minutes
 *   c:alarms  which durable alarms are armed  h:<hour>  hourly analytics (epoch-ms of the hour)
 *   m:<member_id>  a member: waiting, active, or departed (left / rejected / ended) while a
 *                  cooldown, join-rate window or rejection notice still needs it
 *   a:<batch>      an admission batch: the members one admit turn made active, with their
 *                  admission seq. One record instead of one per member (member records are
 *                  spread over the key space; rewriting 1,000 of them costs ~1,000 B-tree
 *                  pages). A member record written later (seq >= the entry's) supersedes
 *                  the entry; a batch no member relies on any more is deleted.
 *   b:<member_id>  a ban issued in this room
 *   g:["<member_id>","<origin room>"]  a tenant-wide ban issued in another room
 *
 * In memory the waiting line is an order-statistic structure (queue.ts), the
 * active sessions and departed ledgers are min-heaps by expiry. Time-driven
 * changes (session expiry) are applied at the start of every turn, so reads
 * are exact before any alarm fires; their records are flushed with the first
 * turn that succeeds.
 */
export type MemberStatus = 'waiting' | 'active' | 'left' | 'rejected' | 'ended';

export interface Member extends QueueEntry {
  readonly member_id: string;
  status: MemberStatus;
  /** Waiting: join order (the order within a priority class). Active: admission order. */
  seq: number;
  group: string;
  metadata: Record<string, unknown> | null;
  joined_at: number;
  admitted_at: number | null;
  expires_at: number | null;
  /** Join-rate window: start (epoch-ms) and attempts counted in it. */
  window_start: number;
  attempts: number;
  /** No new join before this time (epoch-ms; 0: none). */
  cooldown_until: number;
  departed_at: number | null;
  reason: string | null;
  slot: number;
  cls: PriorityClass<QueueEntry> | null;
  /** The admission batch whose record holds this member's latest state (null: its own record does). */
  batch: number | null;
}

type MemberRecord = Omit<Member, 'member_id' | 'slot' | 'cls' | 'batch'>;

/** The record of one admission batch; every member shares admitted_at and expires_at. */
/**
 * A member's time in a schedule (session expiry, purge after departure). Entries are never
 * updated in place: a new entry is pushed, and one whose time no longer matches its member is
 * stale when it surfaces (lazy deletion); the heap is rebuilt when stale entries dominate.
 */
interface TimedId {
  at: number;
  id: string;
}

const earlierAt = (a: TimedId, b: TimedId) => a.at < b.at;

interface AdmissionBatch {
  admitted_at: number;
  expires_at: number;
  /** [member_id, admission seq] */
  members: [string, number][];
}

interface AlarmsArmed {
  tick: number | null;
  sessions: number | null;
  gc: number | null;
}

export interface RoomState {
  tenant: string;
  room_id: string;
  config: RoomConfig | null;
  rev: number;
  nextSeq: number;
  nextBatch: number;
  /** Live admission batches: how many members still rely on each; the record until flushed. */
  batches: Map<number, { count: number; record: AdmissionBatch | null }>;
  /** The batch the current turn admits into. */
  openBatch: number | null;
  members: Map<string, Member>;
  queue: WaitingQueue<Member>;
  /** Active members in admission order. */
  active: Map<string, Member>;
  activeByGroup: Map<string, number>;
  sessions: MinHeap<TimedId>;
  departed: MinHeap<TimedId>;
  bans: Map<string, Ban>;
  /** member_id -> origin room -> banned_until (null: permanent). */
  globalBans: Map<string, Map<string, number | null>>;
  totals: Totals;
  rate: RateBuckets;
  hours: Map<number, HourStats>;
  alarms: AlarmsArmed;
  /** Earliest time housekeeping may have something to purge (a lower bound). */
  gcEarliest: number;
  /** Set by the tick handler: when the next tick is due. */
  nextTick: number | null;
  /** Subkeys changed since the last flushed turn. */
  dirty: Set<string>;
}

const TICK = 'tick';
const SESSIONS = 'sessions';
const GC = 'gc';
const DEFAULT_MEMBERS_LIMIT = 100;

export function emptyRoom(key: string): RoomState {
  const [tenant, room_id] = JSON.parse(key) as [string, string];
  return {
    tenant,
    room_id,
    config: null,
    rev: 0,
    nextSeq: 1,
    nextBatch: 1,
    batches: new Map(),
    openBatch: null,
    members: new Map(),
    queue: new WaitingQueue<Member>(),
    active: new Map(),
    activeByGroup: new Map(),
    sessions: new MinHeap<TimedId>(earlierAt),
    departed: new MinHeap<TimedId>(earlierAt),
    bans: new Map(),
    globalBans: new Map(),
    totals: { admitted: 0, rejected: 0, abandoned: 0, wait_ms_sum: 0 },
    rate: [],
    hours: new Map(),
    alarms: { tick: null, sessions: null, gc: null },
    gcEarliest: Infinity,
    nextTick: null,
    dirty: new Set(),
  };
}

// ---- loading and flushing ----

function memberFromRecord(member_id: string, record: MemberRecord): Member {
  return { member_id, ...record, slot: -1, cls: null, batch: null };
}

function memberRecord(member: Member): MemberRecord {
  return {
    status: member.status,
    seq: member.seq,
    group: member.group,
    metadata: member.metadata,
    joined_at: member.joined_at,
    admitted_at: member.admitted_at,
    expires_at: member.expires_at,
    window_start: member.window_start,
    attempts: member.attempts,
    cooldown_until: member.cooldown_until,
    departed_at: member.departed_at,
    reason: member.reason,
  };
}

export function loadRoom(key: string, records: Iterable<[string, unknown]>): RoomState {
  const state = emptyRoom(key);
  const waiting: Member[] = [];
  const active: Member[] = [];
  /** The newest admission entry of each member: [batch, seq, batch record]. */
  const admissions = new Map<string, [number, number, AdmissionBatch]>();
  for (const [subkey, value] of records) {
    const kind = subkey.slice(0, 2);
    const rest = subkey.slice(2);
    if (kind === 'a:') {
      const batch = Number(rest);
      const record = value as AdmissionBatch;
      state.batches.set(batch, { count: 0, record: null });
      if (batch >= state.nextBatch) state.nextBatch = batch + 1;
      for (const [member_id, seq] of record.members) {
        const known = admissions.get(member_id);
        if (!known || known[1] < seq) admissions.set(member_id, [batch, seq, record]);
        if (seq >= state.nextSeq) state.nextSeq = seq + 1;
      }
    } else if (kind === 'c:') {
      if (rest === 'config') state.config = value as RoomConfig;
      else if (rest === 'rev') state.rev = value as number;
      else if (rest === 'totals') state.totals = value as Totals;
      else if (rest === 'rate') state.rate = value as RateBuckets;
      else if (rest === 'alarms') state.alarms = value as AlarmsArmed;
    } else if (kind === 'm:') {
      const member = memberFromRecord(rest, value as MemberRecord);
      const admitted = admissions.get(rest);
      if (admitted && admitted[1] > member.seq) {
        // The batch is newer than the member's own record: the member is active from it.
        const [batch, seq, record] = admitted;
        Object.assign(member, { status: 'active', seq, admitted_at: record.admitted_at, expires_at: record.expires_at, batch });
        state.batches.get(batch)!.count++;
      }
      state.members.set(rest, member);
      if (member.status === 'waiting') waiting.push(member);
      else if (member.status === 'active') active.push(member);
      if (member.seq >= state.nextSeq) state.nextSeq = member.seq + 1;
    } else if (kind === 'b:') state.bans.set(rest, value as Ban);
    else if (kind === 'g:') {
      const [member_id, origin] = JSON.parse(rest) as [string, string];
      setGlobalBan(state, member_id, origin, value as number | null);
    } else if (kind === 'h:') state.hours.set(Number(rest), value as HourStats);
  }
  // A batch no member relies on any more goes with the next flushed turn.
  for (const [batch, entry] of state.batches) {
    if (entry.count === 0) {
      state.batches.delete(batch);
      state.dirty.add('a:' + batch);
    }
  }
  const config = state.config;
  if (config) {
    waiting.sort((a, b) => a.seq - b.seq);
    for (const member of waiting) state.queue.add(member, boostOf(config, member.group));
    active.sort((a, b) => a.seq - b.seq);
    for (const member of active) {
      state.active.set(member.member_id, member);
      bumpGroup(state, member.group, 1);
    }
    state.sessions.rebuild(active.map((member) => ({ at: member.expires_at!, id: member.member_id })));
    const departed: { at: number; id: string }[] = [];
    for (const member of state.members.values()) {
      if (member.status !== 'waiting' && member.status !== 'active') departed.push({ at: purgeAt(config, member), id: member.member_id });
    }
    state.departed.rebuild(departed);
    recomputeGcEarliest(state);
  }
  return state;
}

function valueOf(state: RoomState, subkey: string): unknown {
  const kind = subkey.slice(0, 2);
  const rest = subkey.slice(2);
  if (kind === 'm:') {
    const member = state.members.get(rest);
    return member ? memberRecord(member) : undefined;
  }
  if (kind === 'h:') return state.hours.get(Number(rest));
  if (kind === 'a:') return state.batches.get(Number(rest))?.record ?? undefined;
  if (kind === 'b:') return state.bans.get(rest);
  if (kind === 'g:') {
    const [member_id, origin] = JSON.parse(rest) as [string, string];
    const origins = state.globalBans.get(member_id);
    return origins && origins.has(origin) ? origins.get(origin) : undefined;
  }
  if (rest === 'rev') return state.rev;
  if (!state.config) return undefined;
  if (rest === 'config') return state.config;
  if (rest === 'totals') return state.totals;
  if (rest === 'rate') return state.rate;
  if (rest === 'alarms') return state.alarms;
  return undefined;
}

function flush(state: RoomState): RecordWrite[] {
  const writes: RecordWrite[] = [];
  for (const subkey of state.dirty) writes.push({ subkey, value: valueOf(state, subkey) });
  state.dirty.clear();
  if (state.openBatch !== null) {
    // Written: the batch's content need not stay in memory.
    const open = state.batches.get(state.openBatch);
    if (open) open.record = null;
    state.openBatch = null;
  }
  return writes;
}

// ---- small helpers ----

function requireRoom(state: RoomState): RoomConfig {
  if (!state.config) throw new ServiceError('not_found', `Waiting room ${state.room_id} not found.`);
  return state.config;
}

/** The member's own record is (re)written: it no longer relies on an admission batch. */
function markMember(state: RoomState, member: Member): void {
  state.dirty.add('m:' + member.member_id);
  const id = member.batch;
  if (id !== null) {
    member.batch = null;
    const batch = state.batches.get(id);
    if (batch && --batch.count === 0) {
      state.batches.delete(id);
      state.dirty.add('a:' + id);
    }
  }
}

function bumpGroup(state: RoomState, group: string, delta: number): void {
  const next = (state.activeByGroup.get(group) ?? 0) + delta;
  if (next <= 0) state.activeByGroup.delete(group);
  else state.activeByGroup.set(group, next);
}

function noteGc(state: RoomState, at: number): void {
  if (at < state.gcEarliest) state.gcEarliest = at;
}

function hourStats(state: RoomState, now: number): HourStats {
  const hour = hourOf(now);
  let stats = state.hours.get(hour);
  if (!stats) {
    stats = emptyHour();
    state.hours.set(hour, stats);
    noteGc(state, hour + limits.analytics_retention_hours * HOUR_MS);
  }
  state.dirty.add('h:' + hour);
  return stats;
}

function setGlobalBan(state: RoomState, member_id: string, origin: string, until: number | null): void {
  let origins = state.globalBans.get(member_id);
  if (!origins) state.globalBans.set(member_id, (origins = new Map()));
  origins.set(origin, until);
}

function deleteGlobalBan(state: RoomState, member_id: string, origin: string): boolean {
  const origins = state.globalBans.get(member_id);
  if (!origins || !origins.delete(origin)) return false;
  if (origins.size === 0) state.globalBans.delete(member_id);
  state.dirty.add('g:' + JSON.stringify([member_id, origin]));
  return true;
}

function banActive(until: number | null, now: number): boolean {
  return until === null || until > now;
}

/** The active ban keeping `member_id` out of this room, if any. */
function activeBan(state: RoomState, member_id: string, now: number): { origin: string; reason: string | null } | null {
  const ban = state.bans.get(member_id);
  if (ban && banActive(ban.banned_until, now)) return { origin: state.room_id, reason: ban.reason };
  const origins = state.globalBans.get(member_id);
  if (origins) for (const [origin, until] of origins) if (banActive(until, now)) return { origin, reason: null };
  return null;
}

/** When a departed member's ledger can go: cooldown, join-rate window and rejection notice all over. */
function purgeAt(config: RoomConfig, member: Member): number {
  let at = Math.max(member.cooldown_until, member.window_start + config.anti_gaming.join_rate_limit_window_seconds * 1000);
  if (member.status === 'rejected' && member.departed_at !== null) at = Math.max(at, member.departed_at + limits.rejection_visible_ms);
  return at;
}

function admissionRate(state: RoomState, config: RoomConfig, now: number): number {
  const observed = observedRate(state.rate, now, config.created_at, config.admission_rate.interval_seconds);
  return observed > 0 ? observed : config.admission_rate.batch_size / config.admission_rate.interval_seconds;
}

function checkMemberIds(member_ids: string[], field: string): string[] {
  if (!Array.isArray(member_ids) || member_ids.length === 0 || member_ids.length > limits.member_ids_per_request_max) {
    throw badRequest([{ field, message: `must list 1 to ${limits.member_ids_per_request_max} member ids` }]);
  }
  return [...new Set(member_ids)];
}

function checkReason(reason: string, field: string): void {
  if (typeof reason !== 'string' || reason.length === 0 || reason.length > limits.reason_length_max) {
    throw badRequest([{ field, message: `must be 1 to ${limits.reason_length_max} characters` }]);
  }
}

function checkLimit(value: number | undefined, field: string, max: number): void {
  if (value !== undefined && (!Number.isInteger(value) || value < 0 || value > max)) {
    throw badRequest([{ field, message: `must be an integer from 0 to ${max}` }]);
  }
}

// ---- member transitions ----

/** Moves a member that is no longer waiting or active to its ledger (or forgets it). */
function depart(state: RoomState, config: RoomConfig, member: Member, now: number): void {
  member.departed_at = now;
  const at = purgeAt(config, member);
  if (at <= now) state.members.delete(member.member_id);
  else {
    state.departed.push({ at, id: member.member_id });
    noteGc(state, at);
  }
  markMember(state, member);
}

function cooldownFor(config: RoomConfig, status: MemberStatus, now: number): number {
  return status === 'left' || status === 'rejected' ? now + config.anti_gaming.rejoin_cooldown_seconds * 1000 : 0;
}

function removeWaiting(state: RoomState, config: RoomConfig, member: Member, status: 'left' | 'rejected', now: number, reason: string | null): void {
  state.queue.remove(member);
  member.status = status;
  member.cooldown_until = cooldownFor(config, status, now);
  member.reason = reason;
  const hour = hourStats(state, now);
  if (status === 'left') {
    hour.abandonments++;
    state.totals.abandoned++;
  } else {
    hour.rejections++;
    state.totals.rejected++;
  }
  state.dirty.add('c:totals');
  depart(state, config, member, now);
}

function endActive(state: RoomState, config: RoomConfig, member: Member, status: 'left' | 'rejected' | 'ended', now: number, reason: string | null): void {
  state.active.delete(member.member_id);
  bumpGroup(state, member.group, -1);
  member.status = status;
  member.admitted_at = null;
  member.expires_at = null;
  member.cooldown_until = cooldownFor(config, status, now);
  member.reason = reason;
  depart(state, config, member, now);
}

/** Ends every active session whose time is up (before any read or change). */
function expireSessions(state: RoomState, now: number): void {
  const config = state.config;
  if (!config) return;
  for (let top = state.sessions.peek(); top && top.at <= now; top = state.sessions.peek()) {
    state.sessions.pop();
    const member = state.active.get(top.id);
    if (member && member.expires_at === top.at) endActive(state, config, member, 'ended', now, null);
  }
  if (state.sessions.size > 2 * state.active.size + 1024) {
    state.sessions.rebuild([...state.active.values()].map((member) => ({ at: member.expires_at!, id: member.member_id })));
  }
}

/** Records an admission in this turn's batch record instead of rewriting the member's record. */
function addToBatch(state: RoomState, member: Member): void {
  if (member.batch !== null) markMember(state, member);
  let open = state.openBatch === null ? undefined : state.batches.get(state.openBatch);
  if (!open || !open.record) {
    const id = state.nextBatch++;
    open = { count: 0, record: { admitted_at: member.admitted_at!, expires_at: member.expires_at!, members: [] } };
    state.batches.set(id, open);
    state.openBatch = id;
    state.dirty.add('a:' + id);
  }
  open.record!.members.push([member.member_id, member.seq]);
  open.count++;
  member.batch = state.openBatch;
}

function admitMember(state: RoomState, config: RoomConfig, member: Member, now: number, into: AdmitView['admitted']): void {
  state.queue.remove(member);
  member.status = 'active';
  // For an active member seq is its admission order (active members are listed in it).
  member.seq = state.nextSeq++;
  member.admitted_at = now;
  member.expires_at = now + config.session_ttl_seconds * 1000;
  state.active.set(member.member_id, member);
  bumpGroup(state, member.group, 1);
  state.sessions.push({ at: member.expires_at, id: member.member_id });
  const wait_ms = Math.max(0, now - member.joined_at);
  state.totals.admitted++;
  state.totals.wait_ms_sum += wait_ms;
  recordAdmission(hourStats(state, now), wait_ms);
  addToBatch(state, member);
  into.push({ member_id: member.member_id, admitted_at: now, wait_time_seconds: Math.round(wait_ms / 1000) });
}

function finishAdmission(state: RoomState, config: RoomConfig, now: number, admitted: AdmitView['admitted'], failed: AdmitView['failed']): AdmitView {
  if (admitted.length > 0) {
    state.rate = addToRate(state.rate, now, admitted.length);
    state.dirty.add('c:rate');
    state.dirty.add('c:totals');
  }
  return { admitted, capacity_reached: state.active.size >= config.capacity, failed };
}

/** Admits up to `count` members in line order (or of one group), within capacity. */
function admitCount(state: RoomState, config: RoomConfig, count: number, group: string | null, now: number): AdmitView {
  const admitted: AdmitView['admitted'] = [];
  const free = config.capacity - state.active.size;
  const boost = group === null ? 0 : boostOf(config, group);
  for (let i = 0; i < Math.min(count, free); i++) {
    const next = group === null ? state.queue.first() : state.queue.groupAt(group, boost, 1);
    if (!next) break;
    admitMember(state, config, next, now, admitted);
  }
  return finishAdmission(state, config, now, admitted, []);
}

/** Removes a banned member from the room: out of the line (a rejection) or out of its session. */
function enforceBan(state: RoomState, config: RoomConfig, member_id: string, now: number, reason: string): void {
  const member = state.members.get(member_id);
  if (!member) return;
  if (member.status === 'waiting') removeWaiting(state, config, member, 'rejected', now, reason);
  else if (member.status === 'active') endActive(state, config, member, 'rejected', now, reason);
}

// ---- views ----

function positionView(state: RoomState, config: RoomConfig, member: Member, now: number): PositionView {
  const base = {
    room_id: state.room_id,
    member_id: member.member_id,
    joined_at: member.joined_at,
    priority_group: member.group,
    priority_effective: boostOf(config, member.group),
    expires_at: member.expires_at,
    rejection_reason: null as string | null,
  };
  if (member.status === 'waiting') {
    const position = state.queue.position(member);
    return {
      ...base,
      status: 'waiting',
      position,
      ahead_count: position - 1,
      estimated_wait_seconds: Math.ceil(position / admissionRate(state, config, now)),
    };
  }
  if (member.status === 'active') return { ...base, status: 'active', position: 0, ahead_count: 0, estimated_wait_seconds: 0 };
  return { ...base, status: 'rejected', position: 0, ahead_count: 0, estimated_wait_seconds: 0, rejection_reason: member.reason };
}

function memberView(state: RoomState, config: RoomConfig, member: Member, position: number): MemberView {
  return {
    room_id: state.room_id,
    member_id: member.member_id,
    status: member.status as 'waiting' | 'active',
    group_id: member.group,
    priority: boostOf(config, member.group),
    position,
    joined_at: member.joined_at,
    admitted_at: member.admitted_at,
    expires_at: member.expires_at,
    metadata: member.metadata ?? {},
  };
}

function banView(state: RoomState, ban: Ban, now: number): BanView {
  return { ...ban, room_id: state.room_id, active: banActive(ban.banned_until, now) };
}

function statistics(state: RoomState, config: RoomConfig, now: number): RoomStatistics {
  return {
    active_count: state.active.size,
    average_wait_seconds: state.totals.admitted > 0 ? state.totals.wait_ms_sum / state.totals.admitted / 1000 : 0,
    current_admission_rate: observedRate(state.rate, now, config.created_at, config.admission_rate.interval_seconds),
    total_admitted: state.totals.admitted,
    waiting_count: state.queue.size,
  };
}

function summaryOf(config: RoomConfig): RoomSummary {
  return {
    room_id: config.room_id,
    auto_admit: config.auto_admit,
    capacity: config.capacity,
    created_at: config.created_at,
    created_by: config.created_by,
    queue_strategy: config.queue_strategy,
    status: config.status,
    updated_at: config.updated_at,
  };
}

// ---- housekeeping and alarms ----

function recomputeGcEarliest(state: RoomState): void {
  let earliest = state.departed.peek()?.at ?? Infinity;
  for (const ban of state.bans.values()) {
    if (ban.banned_until !== null) earliest = Math.min(earliest, ban.banned_until + limits.expired_ban_retention_ms);
  }
  for (const origins of state.globalBans.values()) {
    for (const until of origins.values()) if (until !== null) earliest = Math.min(earliest, until);
  }
  for (const hour of state.hours.keys()) earliest = Math.min(earliest, hour + limits.analytics_retention_hours * HOUR_MS);
  state.gcEarliest = earliest;
}

function runGc(state: RoomState, config: RoomConfig, now: number): void {
  let budget: number = limits.gc_batch_max;
  for (let top = state.departed.peek(); top && top.at <= now && budget > 0; top = state.departed.peek()) {
    state.departed.pop();
    const member = state.members.get(top.id);
    if (!member || member.status === 'waiting' || member.status === 'active') continue;
    const at = purgeAt(config, member);
    if (at <= now) {
      state.members.delete(member.member_id);
      markMember(state, member);
      budget--;
    } else if (at > top.at) {
      // Later than planned (a longer join-rate window since): plan it again.
      state.departed.push({ at, id: member.member_id });
    }
  }
  const departedCount = state.members.size - state.queue.size - state.active.size;
  if (state.departed.size > 2 * departedCount + 1024) {
    const entries: { at: number; id: string }[] = [];
    for (const member of state.members.values()) {
      if (member.status !== 'waiting' && member.status !== 'active') entries.push({ at: purgeAt(config, member), id: member.member_id });
    }
    state.departed.rebuild(entries);
  }
  for (const [member_id, ban] of state.bans) {
    if (budget <= 0) break;
    if (ban.banned_until !== null && ban.banned_until + limits.expired_ban_retention_ms <= now) {
      state.bans.delete(member_id);
      state.dirty.add('b:' + member_id);
      budget--;
    }
  }
  for (const [member_id, origins] of [...state.globalBans]) {
    for (const [origin, until] of [...origins]) {
      if (until !== null && until <= now && budget-- > 0) deleteGlobalBan(state, member_id, origin);
    }
  }
  for (const hour of [...state.hours.keys()]) {
    if (hour + limits.analytics_retention_hours * HOUR_MS <= now && budget-- > 0) {
      state.hours.delete(hour);
      state.dirty.add('h:' + hour);
    }
  }
  recomputeGcEarliest(state);
  // Whatever the budget left for later is due now: try again next period.
  if (budget <= 0) state.gcEarliest = Math.min(state.gcEarliest, now);
}

function alarmChanges(state: RoomState, now: number): AlarmChange[] {
  const config = state.config;
  let tick: number | null = null;
  if (config && config.auto_admit && config.status === 'active' && state.queue.size > 0) {
    tick = state.alarms.tick ?? state.nextTick ?? now + config.admission_rate.interval_seconds * 1000;
  }
  state.nextTick = null;
  let sessions: number | null = null;
  const earliestSession = state.sessions.peek()?.at;
  if (config && state.active.size > 0 && earliestSession !== undefined) {
    sessions = state.alarms.sessions !== null && state.alarms.sessions <= earliestSession ? state.alarms.sessions : earliestSession;
  }
  let gc: number | null = null;
  if (config && state.gcEarliest < Infinity) {
    const period = limits.gc_period_ms;
    const due = Math.ceil(Math.max(state.gcEarliest, now + 1) / period) * period;
    gc = state.alarms.gc !== null && state.alarms.gc <= due ? state.alarms.gc : due;
  }
  const changes: AlarmChange[] = [];
  const wanted: AlarmsArmed = { tick, sessions, gc };
  for (const name of [TICK, SESSIONS, GC] as const) {
    if (state.alarms[name] !== wanted[name]) changes.push({ name, due_ms: wanted[name] });
  }
  if (changes.length > 0) {
    state.alarms = wanted;
    state.dirty.add('c:alarms');
  }
  return changes;
}

// ---- the step ----

export function stepRoom(state: RoomState, message: RoomMessage | AlarmMessage, context: TurnContext): TurnResult<RoomState, unknown> {
  const now = context.now;
  expireSessions(state, now);
  const sends: ActorSend[] = [];
  const reply = handle(state, message, now, sends);
  const alarms = alarmChanges(state, now);
  const writes = flush(state);
  return { state, reply, writes, alarms, sends };
}

function toDirectory(state: RoomState, sends: ActorSend[], message: unknown): void {
  sends.push({ kind: WAITING_ROOM_DIRECTORY_KIND, key: waitingRoomDirectoryKey(state.tenant), message });
}

function handle(state: RoomState, message: RoomMessage | AlarmMessage, now: number, sends: ActorSend[]): unknown {
  switch (message.op) {
    case '$alarm': {
      const config = state.config;
      if (message.name === TICK) {
        state.alarms.tick = null;
        if (config && config.auto_admit && config.status === 'active') {
          admitCount(state, config, config.admission_rate.batch_size, null, now);
          const interval_ms = config.admission_rate.interval_seconds * 1000;
          const next = message.due_ms + interval_ms;
          state.nextTick = next > now ? next : now + interval_ms;
        }
      } else if (message.name === SESSIONS) state.alarms.sessions = null;
      else if (message.name === GC) {
        state.alarms.gc = null;
        if (config) runGc(state, config, now);
      }
      return undefined;
    }

    case 'create': {
      if (state.config) throw new ServiceError('waiting_room_exists', `Waiting room ${state.room_id} already exists.`);
      if (message.room_id !== state.room_id) throw badRequest([{ field: 'body.room_id', message: 'does not match the addressed room' }]);
      const config = buildConfig(null, state.room_id, message.input, now, message.by);
      state.config = config;
      state.rev++;
      state.dirty.add('c:config').add('c:rev').add('c:totals');
      toDirectory(state, sends, { op: 'room-upsert', rev: state.rev, summary: summaryOf(config) });
      return config;
    }

    case 'global-bans-sync': {
      const config = requireRoom(state);
      const wanted = new Map<string, GlobalBanEntry>();
      for (const entry of message.bans) if (entry.origin_room_id !== state.room_id) wanted.set(JSON.stringify([entry.member_id, entry.origin_room_id]), entry);
      for (const [member_id, origins] of [...state.globalBans]) {
        for (const origin of [...origins.keys()]) {
          if (!wanted.has(JSON.stringify([member_id, origin]))) deleteGlobalBan(state, member_id, origin);
        }
      }
      for (const entry of wanted.values()) applyGlobalBan(state, config, entry, now);
      return undefined;
    }

    case 'global-ban-apply': {
      const config = requireRoom(state);
      if (message.origin_room_id !== state.room_id) applyGlobalBan(state, config, message, now);
      return undefined;
    }

    case 'global-ban-remove': {
      requireRoom(state);
      deleteGlobalBan(state, message.member_id, message.origin_room_id);
      return undefined;
    }

    default:
      return handleRoomOp(state, requireRoom(state), message, now, sends);
  }
}

function applyGlobalBan(state: RoomState, config: RoomConfig, entry: GlobalBanEntry, now: number): void {
  setGlobalBan(state, entry.member_id, entry.origin_room_id, entry.banned_until);
  state.dirty.add('g:' + JSON.stringify([entry.member_id, entry.origin_room_id]));
  if (entry.banned_until !== null) noteGc(state, entry.banned_until);
  if (banActive(entry.banned_until, now)) enforceBan(state, config, entry.member_id, now, `banned (global ban from room ${entry.origin_room_id})`);
}

function handleRoomOp(
  state: RoomState,
  config: RoomConfig,
  message: Exclude<RoomMessage, { op: 'create' | 'global-bans-sync' | 'global-ban-apply' | 'global-ban-remove' }>,
  now: number,
  sends: ActorSend[],
): unknown {
  switch (message.op) {
    case 'get':
      return { room: config, statistics: statistics(state, config, now) } satisfies RoomDetailView;

    case 'replace': {
      const next = buildConfig(config, state.room_id, message.input, now, config.created_by);
      const names = new Set([DEFAULT_GROUP, ...config.priority_groups.map((g) => g.name), ...next.priority_groups.map((g) => g.name)]);
      let regroup = false;
      for (const name of names) {
        if (boostOf(config, name) !== boostOf(next, name) || groupExists(config, name) !== groupExists(next, name)) regroup = true;
      }
      state.config = next;
      if (regroup) regroupMembers(state, next);
      state.rev++;
      state.dirty.add('c:config').add('c:rev');
      toDirectory(state, sends, { op: 'room-upsert', rev: state.rev, summary: summaryOf(next) });
      return next;
    }

    case 'delete': {
      for (const [member_id, ban] of state.bans) {
        if (ban.global) toDirectory(state, sends, { op: 'global-unban', member_id, origin_room_id: state.room_id });
      }
      // Records already changed this turn (a session that just ended and was forgotten) go too.
      const subkeys = [...state.dirty, 'c:config', 'c:totals', 'c:rate', 'c:alarms', 'c:rev'];
      for (const member_id of state.members.keys()) subkeys.push('m:' + member_id);
      for (const member_id of state.bans.keys()) subkeys.push('b:' + member_id);
      for (const [member_id, origins] of state.globalBans) for (const origin of origins.keys()) subkeys.push('g:' + JSON.stringify([member_id, origin]));
      for (const hour of state.hours.keys()) subkeys.push('h:' + hour);
      for (const batch of state.batches.keys()) subkeys.push('a:' + batch);
      const rev = state.rev + 1;
      const alarms = state.alarms;
      Object.assign(state, emptyRoom(JSON.stringify([state.tenant, state.room_id])));
      state.rev = rev;
      state.alarms = alarms;
      for (const subkey of subkeys) state.dirty.add(subkey);
      toDirectory(state, sends, { op: 'room-remove', room_id: state.room_id, rev });
      return undefined;
    }

    case 'join':
      return join(state, config, message, now);

    case 'position': {
      const member = state.members.get(message.member_id);
      if (!member || (member.status !== 'waiting' && member.status !== 'active' && member.status !== 'rejected')) {
        throw new ServiceError('not_found', `Member ${message.member_id} is not in waiting room ${state.room_id}.`);
      }
      return positionView(state, config, member, now);
    }

    case 'leave': {
      const member = state.members.get(message.member_id);
      if (member?.status === 'waiting') removeWaiting(state, config, member, 'left', now, null);
      else if (member?.status === 'active') endActive(state, config, member, 'left', now, null);
      else throw new ServiceError('not_found', `Member ${message.member_id} is not in waiting room ${state.room_id}.`);
      return undefined;
    }

    case 'refresh': {
      const member = state.members.get(message.member_id);
      if (member?.status === 'waiting') throw new ServiceError('waiting_room_member_not_active', `Member ${message.member_id} is still waiting; only an admitted session can be refreshed.`);
      if (member?.status !== 'active') throw new ServiceError('not_found', `Member ${message.member_id} has no active session in waiting room ${state.room_id}.`);
      member.expires_at = now + config.session_ttl_seconds * 1000;
      state.sessions.push({ at: member.expires_at, id: member.member_id });
      markMember(state, member);
      return { new_expiry: member.expires_at };
    }

    case 'admit': {
      const group = message.group ?? null;
      if (group !== null && !groupExists(config, group)) throw new ServiceError('not_found', `Priority group ${group} not found in waiting room ${state.room_id}.`);
      if (message.count !== undefined && (!Number.isInteger(message.count) || message.count < 1 || message.count > limits.admit_count_max)) {
        throw badRequest([{ field: 'body.count', message: `must be an integer from 1 to ${limits.admit_count_max}` }]);
      }
      if (message.member_ids !== undefined) {
        const ids = checkMemberIds(message.member_ids, 'body.member_ids');
        const admitted: AdmitView['admitted'] = [];
        const failed: AdmitView['failed'] = [];
        for (const member_id of ids) {
          const member = state.members.get(member_id);
          if (!member || member.status !== 'waiting' || (group !== null && member.group !== group)) failed.push({ member_id, reason: 'not_waiting' });
          else if (state.active.size >= config.capacity) failed.push({ member_id, reason: 'capacity_reached' });
          else admitMember(state, config, member, now, admitted);
        }
        return finishAdmission(state, config, now, admitted, failed);
      }
      return admitCount(state, config, message.count ?? config.admission_rate.batch_size, group, now);
    }

    case 'reject': {
      const ids = checkMemberIds(message.member_ids, 'body.member_ids');
      checkReason(message.reason, 'body.reason');
      for (const member_id of ids) {
        const member = state.members.get(member_id);
        if (member?.status === 'waiting') removeWaiting(state, config, member, 'rejected', now, message.reason);
      }
      return undefined;
    }

    case 'ban': {
      checkReason(message.reason, 'body.reason');
      const duration = message.duration_seconds;
      if (duration !== undefined && (!Number.isInteger(duration) || duration < 1 || duration > limits.ban_duration_seconds_max)) {
        throw badRequest([{ field: 'body.duration_seconds', message: `must be an integer from 1 to ${limits.ban_duration_seconds_max}` }]);
      }
      const previous = state.bans.get(message.member_id);
      if (!previous && state.bans.size >= limits.bans_max) {
        throw new ServiceError('waiting_room_limit_reached', `Waiting room ${state.room_id} already holds ${limits.bans_max} bans.`);
      }
      const ban: Ban = {
        member_id: message.member_id,
        reason: message.reason,
        banned_at: now,
        banned_by: message.by,
        banned_until: duration === undefined ? null : now + duration * 1000,
        global: message.global ?? false,
      };
      state.bans.set(ban.member_id, ban);
      state.dirty.add('b:' + ban.member_id);
      if (ban.banned_until !== null) noteGc(state, ban.banned_until + limits.expired_ban_retention_ms);
      if (ban.global) toDirectory(state, sends, { op: 'global-ban', member_id: ban.member_id, origin_room_id: state.room_id, banned_until: ban.banned_until });
      else if (previous?.global) toDirectory(state, sends, { op: 'global-unban', member_id: ban.member_id, origin_room_id: state.room_id });
      enforceBan(state, config, ban.member_id, now, `banned: ${ban.reason}`);
      return banView(state, ban, now);
    }

    case 'get-ban': {
      const ban = state.bans.get(message.member_id);
      return ban ? banView(state, ban, now) : null;
    }

    case 'list-bans': {
      const bans = [...state.bans.values()]
        .filter((ban) => message.include_expired || banActive(ban.banned_until, now))
        .sort((a, b) => a.banned_at - b.banned_at || (a.member_id < b.member_id ? -1 : 1));
      return bans.map((ban) => banView(state, ban, now));
    }

    case 'unban': {
      const ban = state.bans.get(message.member_id);
      if (!ban) throw new ServiceError('not_found', `Member ${message.member_id} is not banned in waiting room ${state.room_id}.`);
      state.bans.delete(message.member_id);
      state.dirty.add('b:' + message.member_id);
      if (ban.global) toDirectory(state, sends, { op: 'global-unban', member_id: message.member_id, origin_room_id: state.room_id });
      return undefined;
    }

    case 'group-status': {
      const group = message.group_id;
      if (!groupExists(config, group)) throw new ServiceError('not_found', `Priority group ${group} not found in waiting room ${state.room_id}.`);
      checkLimit(message.limit, 'querystring.limit', limits.members_page_max);
      const limit = message.limit ?? DEFAULT_MEMBERS_LIMIT;
      const boost = boostOf(config, group);
      const waiting = state.queue.groupCount(group, boost);
      const activeCount = state.activeByGroup.get(group) ?? 0;
      const members: GroupStatusView['members'] = [];
      for (let k = 1; k <= waiting && members.length < limit; k++) {
        const member = state.queue.groupAt(group, boost, k)!;
        members.push({ member_id: member.member_id, joined_at: member.joined_at, position: state.queue.position(member), status: 'waiting' });
      }
      if (members.length < limit && activeCount > 0) {
        for (const member of state.active.values()) {
          if (members.length >= limit) break;
          if (member.group === group) members.push({ member_id: member.member_id, joined_at: member.joined_at, position: 0, status: 'active' });
        }
      }
      return {
        group_id: group,
        average_position: waiting > 0 ? Math.round(state.queue.groupPositionSum(group, boost) / waiting) : 0,
        can_be_admitted: waiting > 0 && state.active.size < config.capacity,
        members,
        members_active: activeCount,
        members_waiting: waiting,
        total_members: waiting + activeCount,
      } satisfies GroupStatusView;
    }

    case 'members': {
      checkLimit(message.limit, 'querystring.limit', limits.members_page_max);
      checkLimit(message.offset, 'querystring.offset', Number.MAX_SAFE_INTEGER);
      const limit = message.limit ?? DEFAULT_MEMBERS_LIMIT;
      const offset = message.offset ?? 0;
      const wantWaiting = message.status !== 'active';
      const wantActive = message.status !== 'waiting';
      const waitingTotal = wantWaiting ? state.queue.size : 0;
      const total = waitingTotal + (wantActive ? state.active.size : 0);
      const members: MemberView[] = [];
      let index = offset;
      for (; index < waitingTotal && members.length < limit; index++) {
        members.push(memberView(state, config, state.queue.at(index + 1)!, index + 1));
      }
      if (wantActive && members.length < limit) {
        let skip = Math.max(0, index - waitingTotal);
        for (const member of state.active.values()) {
          if (members.length >= limit) break;
          if (skip > 0) {
            skip--;
            continue;
          }
          members.push(memberView(state, config, member, 0));
        }
      }
      return { total, limit, offset, members } satisfies MembersView;
    }

    case 'analytics': {
      const end_ms = message.end_ms ?? now;
      const start_ms = message.start_ms ?? end_ms - 24 * HOUR_MS;
      if (start_ms > end_ms) throw badRequest([{ field: 'querystring.start_time', message: 'must not be after end_time' }]);
      checkLimit(message.limit, 'querystring.limit', Number.MAX_SAFE_INTEGER);
      const limit = Math.min(message.limit || limits.analytics_retention_hours, limits.analytics_retention_hours);
      // Walk only hours that can hold data: retained ones, up to the current hour.
      const walk_end_ms = Math.min(end_ms, hourOf(now) + HOUR_MS);
      const walk_start_ms = Math.min(Math.max(start_ms, hourOf(now) - limits.analytics_retention_hours * HOUR_MS), walk_end_ms);
      const report = analyticsReport(state.hours, walk_start_ms, walk_end_ms, limit);
      return { ...report, start_ms, end_ms, room_id: state.room_id } satisfies AnalyticsView;
    }
  }
}

function join(state: RoomState, config: RoomConfig, message: Extract<RoomMessage, { op: 'join' }>, now: number): PositionView {
  const { member_id } = message;
  const metadata = message.metadata ?? null;
  if (metadata !== null && jsonSize(metadata) > limits.member_metadata_bytes_max) {
    throw badRequest([{ field: 'body.metadata', message: `must serialise to at most ${limits.member_metadata_bytes_max} bytes` }]);
  }
  let group = DEFAULT_GROUP;
  if (message.priority_group !== undefined) {
    group = message.priority_group;
    if (!groupExists(config, group)) throw badRequest([{ field: 'body.priority_group', message: `unknown priority group ${group}` }]);
    const rules = config.priority_groups.find((candidate) => candidate.name === group)?.match_rules ?? null;
    if (rules !== null && !matchesRules(rules, metadata)) {
      throw badRequest([{ field: 'body.priority_group', message: `the member's metadata does not match the rules of group ${group}` }]);
    }
  } else {
    const candidates = config.priority_groups
      .map((candidate, index) => ({ candidate, index }))
      .filter(({ candidate }) => candidate.match_rules !== null)
      .sort((a, b) => b.candidate.boost - a.candidate.boost || a.index - b.index);
    for (const { candidate } of candidates) {
      if (matchesRules(candidate.match_rules, metadata)) {
        group = candidate.name;
        break;
      }
    }
  }
  const ban = activeBan(state, member_id, now);
  if (ban) {
    throw new ServiceError('waiting_room_member_banned', ban.origin === state.room_id ? `Member ${member_id} is banned from this waiting room.` : `Member ${member_id} is banned from every waiting room of this tenant.`);
  }
  const member = state.members.get(member_id);
  const { join_rate_limit_max_attempts: maxAttempts, join_rate_limit_window_seconds: window_s } = config.anti_gaming;
  let window_start = member?.window_start ?? now;
  let attempts = member?.attempts ?? 0;
  if (now >= window_start + window_s * 1000) {
    window_start = now;
    attempts = 0;
  }
  if (maxAttempts > 0 && attempts >= maxAttempts) {
    throw new ServiceError('rate_limited', `Too many join attempts for member ${member_id}; retry later.`, {
      retryAfterSeconds: Math.max(1, Math.ceil((window_start + window_s * 1000 - now) / 1000)),
    });
  }
  if (member && (member.status === 'waiting' || member.status === 'active')) {
    member.window_start = window_start;
    member.attempts = attempts + 1;
    markMember(state, member);
    return positionView(state, config, member, now);
  }
  if (member && member.cooldown_until > now) {
    throw new ServiceError('waiting_room_rejoin_cooldown', `Member ${member_id} left or was rejected recently; rejoin after the cooldown.`, {
      retryAfterSeconds: Math.max(1, Math.ceil((member.cooldown_until - now) / 1000)),
    });
  }
  if (state.queue.size >= limits.waiting_members_max) {
    throw new ServiceError('waiting_room_limit_reached', `Waiting room ${state.room_id} already holds ${limits.waiting_members_max} waiting members.`);
  }
  const joined: Member = member ?? {
    member_id,
    status: 'waiting',
    seq: 0,
    group,
    metadata,
    joined_at: now,
    admitted_at: null,
    expires_at: null,
    window_start,
    attempts: 0,
    cooldown_until: 0,
    departed_at: null,
    reason: null,
    slot: -1,
    cls: null,
    batch: null,
  };
  joined.status = 'waiting';
  joined.seq = state.nextSeq++;
  joined.group = group;
  joined.metadata = metadata;
  joined.joined_at = now;
  joined.admitted_at = null;
  joined.expires_at = null;
  joined.window_start = window_start;
  joined.attempts = attempts + 1;
  joined.cooldown_until = 0;
  joined.departed_at = null;
  joined.reason = null;
  state.members.set(member_id, joined);
  state.queue.add(joined, boostOf(config, group));
  markMember(state, joined);
  return positionView(state, config, joined, now);
}

/** After a change of groups or boosts: members of removed groups join default, and the line is rebuilt in order. */
function regroupMembers(state: RoomState, config: RoomConfig): void {
  const waiting: Member[] = [];
  state.activeByGroup.clear();
  for (const member of state.members.values()) {
    if (member.status !== 'waiting' && member.status !== 'active') continue;
    if (!groupExists(config, member.group)) {
      member.group = DEFAULT_GROUP;
      markMember(state, member);
    }
    if (member.status === 'waiting') waiting.push(member);
    else bumpGroup(state, member.group, 1);
  }
  state.queue.clear();
  waiting.sort((a, b) => a.seq - b.seq);
  for (const member of waiting) {
    member.cls = null;
    member.slot = -1;
    state.queue.add(member, boostOf(config, member.group));
  }
}
