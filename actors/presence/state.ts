import { isAlarm, isServiceError, ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult, serialisedBytes } from '../../runtime/index.js';
import { GeoIndex, isValidPoint, RADIUS_METERS_MAX, snapToCell, type GeoPoint } from './geo.js';
import {
  activities,
  geoPrecisions,
  overflowPolicies,
  PRESENCE_DIRECTORY_KIND,
  presenceDirectoryKey,
  PRESENCE_SUBJECT_KIND,
  type PresenceDirectoryMessage,
  PRESENCE_MULTIPLEX_KIND,
  presenceLimits,
  presenceSubjectKey,
  type Activity,
  type Admission,
  type CapacitySettings,
  type CognitiveState,
  type ContextChanges,
  type ContextInput,
  type CountReply,
  type GeoPrecision,
  type HeartbeatInput,
  type HeartbeatReply,
  type ListFilters,
  type ListReply,
  type MultiplexHeartbeatMessage,
  type MultiplexItemResult,
  type MultiplexMessage,
  type NearbyReply,
  type OccupancyView,
  type OverflowPolicy,
  type PresenceContextConfig,
  type PresenceMessage,
  type PresenceReply,
  type SessionView,
  type Subject,
  type SubjectSeenMessage,
  type SweepReply,
} from './messages.js';

/**
 * One presence context (spec doc 1 §2 Presence, §3 Presence session, §4.9):
 * pure domain logic of the context actor. Storage is `records`: one record
 * for the configuration and one per session, so a heartbeat writes one record.
 *
 * Activity of a session, from the time since its last heartbeat (elapsed):
 *   active   elapsed <  idle_after_seconds
 *   idle     idle_after_seconds  <= elapsed < stale_after_seconds
 *   stale    stale_after_seconds <= elapsed < ttl_seconds
 *   expired  elapsed >= ttl_seconds: the session is removed.
 * Every read computes activity from `now`, so reads are exact at any time.
 * The recorded activity (stored with the session) is reconciled by `sweep`
 * and by one durable alarm per context, set for the next transition due
 * (rounded up to ALARM_RESOLUTION_MS, so transitions due within the same
 * second share one wake-up). Sessions sit in three queues, one per recorded
 * activity, each ordered by last heartbeat: the next transition is always at
 * the front of a queue, and reconciling costs O(transitions), not O(sessions).
 */

export const ALARM_NAME = 'activity';
export const ALARM_RESOLUTION_MS = 1000;
const CONTEXT_SUBKEY = 'context';
/** Present once the tenant's presence directory was told of the context. */
const LISTED_SUBKEY = 'listed';
const SESSION_SUBKEY_PREFIX = 's/';

export const contextDefaults = {
  heartbeat: { ttl_seconds: 90, idle_after_seconds: 30, stale_after_seconds: 60 },
  capacity: { max_active: 10_000, overflow_policy: 'reject' as OverflowPolicy },
  geo: { enabled: false, precision: 'exact' as GeoPrecision },
} as const;

// ---- configuration ----

interface FieldProblem {
  field: string;
  message: string;
}

function badRequest(problems: FieldProblem[]): ServiceError {
  return new ServiceError('BAD_REQUEST', `${problems[0].field} ${problems[0].message}`, { details: problems });
}

function settingsProblems(config: Omit<PresenceContextConfig, 'created_ms' | 'updated_ms' | 'version'>): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const { ttl_seconds, idle_after_seconds, stale_after_seconds } = config.heartbeat;
  for (const [name, value] of Object.entries(config.heartbeat)) {
    if (!Number.isInteger(value) || value < 1 || value > 86_400) problems.push({ field: `body.heartbeat.${name}`, message: 'must be an integer from 1 to 86400' });
  }
  if (problems.length === 0) {
    if (idle_after_seconds > stale_after_seconds) problems.push({ field: 'body.heartbeat.idle_after_seconds', message: 'must not exceed stale_after_seconds' });
    if (stale_after_seconds > ttl_seconds) problems.push({ field: 'body.heartbeat.stale_after_seconds', message: 'must not exceed ttl_seconds' });
  }
  const { max_active, soft_limit } = config.capacity;
  if (!Number.isInteger(max_active) || max_active < 1 || max_active > presenceLimits.sessions_per_context_max) {
    problems.push({ field: 'body.capacity.max_active', message: `must be an integer from 1 to ${presenceLimits.sessions_per_context_max}` });
  } else if (!Number.isInteger(soft_limit) || soft_limit < 1 || soft_limit > max_active) {
    problems.push({ field: 'body.capacity.soft_limit', message: 'must be an integer from 1 to max_active' });
  }
  if (!(overflowPolicies as readonly string[]).includes(config.capacity.overflow_policy)) {
    problems.push({ field: 'body.capacity.overflow_policy', message: `must be one of ${overflowPolicies.join(', ')}` });
  }
  if (!Object.hasOwn(geoPrecisions, config.geo.precision)) {
    problems.push({ field: 'body.geo.precision', message: `must be one of ${Object.keys(geoPrecisions).join(', ')}` });
  }
  if (config.metadata_schema.allowed_keys.length > presenceLimits.allowed_keys_max) {
    problems.push({ field: 'body.metadata_schema.allowed_keys', message: `must have at most ${presenceLimits.allowed_keys_max} keys` });
  }
  return problems;
}

/** Applies defaults to a create input and checks the settings against each other. */
export function resolveContext(input: ContextInput, now: number): PresenceContextConfig {
  const heartbeat = { ...contextDefaults.heartbeat, ...input.heartbeat };
  const max_active = input.capacity?.max_active ?? contextDefaults.capacity.max_active;
  const config: PresenceContextConfig = {
    id: input.id,
    kind: input.kind,
    resource_id: input.resource_id ?? input.id,
    heartbeat,
    capacity: {
      max_active,
      // Without a soft limit, the context is 'busy' from 80% of max_active.
      soft_limit: input.capacity?.soft_limit ?? Math.max(1, Math.ceil(max_active * 0.8)),
      overflow_policy: input.capacity?.overflow_policy ?? contextDefaults.capacity.overflow_policy,
    },
    geo: { ...contextDefaults.geo, ...input.geo },
    metadata_schema: { allowed_keys: dedupe(input.metadata_schema?.allowed_keys ?? []) },
    created_ms: now,
    updated_ms: now,
    version: 1,
  };
  const problems = settingsProblems(config);
  if (problems.length > 0) throw badRequest(problems);
  return config;
}

/** The configuration after an update, or the same object when nothing changes. */
export function applyContextChanges(current: PresenceContextConfig, changes: ContextChanges, now: number): PresenceContextConfig {
  const capacityInput = changes.capacity ?? {};
  const max_active = capacityInput.max_active ?? current.capacity.max_active;
  let soft_limit = capacityInput.soft_limit ?? current.capacity.soft_limit;
  // Lowering max_active below the old soft limit pulls an unspecified soft limit down with it.
  if (capacityInput.soft_limit === undefined && soft_limit > max_active) soft_limit = max_active;
  const next: PresenceContextConfig = {
    ...current,
    kind: changes.kind ?? current.kind,
    resource_id: changes.resource_id ?? current.resource_id,
    heartbeat: { ...current.heartbeat, ...changes.heartbeat },
    capacity: { max_active, soft_limit, overflow_policy: capacityInput.overflow_policy ?? current.capacity.overflow_policy },
    geo: { ...current.geo, ...changes.geo },
    metadata_schema: { allowed_keys: dedupe(changes.metadata_schema?.allowed_keys ?? current.metadata_schema.allowed_keys) },
  };
  const problems = settingsProblems(next);
  if (problems.length > 0) throw badRequest(problems);
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const unchanged = next.kind === current.kind && next.resource_id === current.resource_id && same(next.heartbeat, current.heartbeat)
    && same(next.capacity, current.capacity) && same(next.geo, current.geo) && same(next.metadata_schema, current.metadata_schema);
  if (unchanged) return current;
  return { ...next, updated_ms: now, version: current.version + 1 };
}

function dedupe(keys: string[]): string[] {
  return [...new Set(keys)];
}

// ---- sessions ----

/** The stored record of one session (also its in-memory form). */
export interface Session {
  session_id: string;
  subject: Subject;
  device_id: string | null;
  connection_id: string | null;
  state: CognitiveState;
  metadata: Record<string, unknown>;
  geo: GeoPoint | null;
  observer: boolean;
  opened_ms: number;
  last_heartbeat_ms: number;
  /** Recorded activity: what the last reconciliation (sweep or alarm) or heartbeat set. */
  activity: Activity;
}

interface ActivityCounts {
  active: number;
  idle: number;
  stale: number;
}

/** Counts over recorded activity; reads adjust them for transitions due but not yet recorded. */
interface Counters {
  participants: ActivityCounts;
  observers: ActivityCounts;
  /** Participants whose subject kind is agent and whose state is available. */
  availableAgents: ActivityCounts;
  /** Participants by cognitive state. */
  byState: Record<CognitiveState, number>;
}

export interface PresenceState {
  tenant: string;
  context: PresenceContextConfig | null;
  /** Every live session, in opening order. */
  sessions: Map<string, Session>;
  /** One queue per recorded activity, each ordered by last heartbeat (oldest first). */
  queues: Record<Activity, SessionQueue>;
  bySubject: Map<string, Set<Session>>;
  counters: Counters;
  geoIndex: GeoIndex<Session>;
  /** When each subject was last reported to the subject index (memory only). */
  lastReportedMs: Map<string, number>;
  /** The durable alarm this actor last set (null: none, or unknown after a load). */
  alarmDueMs: number | null;
  /** Highest time seen: turns use max(now, clockMs) so queue order survives a clock step back. */
  clockMs: number;
  /** The tenant's presence directory was told of this context (record `listed`). */
  listed: boolean;
}

interface QueueNode {
  session: Session;
  prev: QueueNode | null;
  next: QueueNode | null;
}

/**
 * A FIFO of sessions with O(1) append, removal by id and access to the front:
 * an intrusive doubly-linked list plus an id index. (A JS Map used as a queue
 * keeps deleted entries as holes at its front until it rehashes, so finding
 * its first live entry is not O(1) under heartbeat churn.)
 */
export class SessionQueue {
  private readonly nodes = new Map<string, QueueNode>();
  private head: QueueNode | null = null;
  private tail: QueueNode | null = null;

  get size(): number {
    return this.nodes.size;
  }

  has(session_id: string): boolean {
    return this.nodes.has(session_id);
  }

  first(): Session | undefined {
    return this.head?.session;
  }

  /** Appends at the back (moving the session there if it is already queued). */
  set(session_id: string, session: Session): void {
    this.delete(session_id);
    const node: QueueNode = { session, prev: this.tail, next: null };
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    this.nodes.set(session_id, node);
  }

  delete(session_id: string): boolean {
    const node = this.nodes.get(session_id);
    if (!node) return false;
    this.nodes.delete(session_id);
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    return true;
  }

  /** Front to back. The session being visited may be removed during the visit. */
  *values(): IterableIterator<Session> {
    let node = this.head;
    while (node) {
      const next = node.next;
      yield node.session;
      node = next;
    }
  }
}

function zeroCounts(): ActivityCounts {
  return { active: 0, idle: 0, stale: 0 };
}

function zeroCounters(): Counters {
  return {
    participants: zeroCounts(),
    observers: zeroCounts(),
    availableAgents: zeroCounts(),
    byState: { available: 0, thinking: 0, busy: 0, offline: 0 },
  };
}

function copyCounters(c: Counters): Counters {
  return {
    participants: { ...c.participants },
    observers: { ...c.observers },
    availableAgents: { ...c.availableAgents },
    byState: { ...c.byState },
  };
}

/** Adds (sign 1) or removes (sign -1) a session with the given activity to counters. */
function countSession(counters: Counters, session: Session, activity: Activity, sign: 1 | -1): void {
  if (session.observer) {
    counters.observers[activity] += sign;
    return;
  }
  counters.participants[activity] += sign;
  counters.byState[session.state] += sign;
  if (session.subject.kind === 'agent' && session.state === 'available') counters.availableAgents[activity] += sign;
}

export function emptyPresenceState(tenant: string): PresenceState {
  return {
    tenant,
    context: null,
    sessions: new Map(),
    queues: { active: new SessionQueue(), idle: new SessionQueue(), stale: new SessionQueue() },
    bySubject: new Map(),
    counters: zeroCounters(),
    geoIndex: new GeoIndex(),
    lastReportedMs: new Map(),
    alarmDueMs: null,
    clockMs: 0,
    listed: false,
  };
}

function tenantOfKey(key: string): string {
  try {
    const parsed = JSON.parse(key) as unknown;
    if (Array.isArray(parsed) && typeof parsed[0] === 'string') return parsed[0];
  } catch {
    // fall through
  }
  return '';
}

function addSession(st: PresenceState, session: Session): void {
  st.sessions.set(session.session_id, session);
  st.queues[session.activity].set(session.session_id, session);
  let mine = st.bySubject.get(session.subject.id);
  if (!mine) st.bySubject.set(session.subject.id, (mine = new Set()));
  mine.add(session);
  countSession(st.counters, session, session.activity, 1);
  if (session.geo) st.geoIndex.insert(session, session.geo);
}

function removeSession(st: PresenceState, session: Session): void {
  st.sessions.delete(session.session_id);
  st.queues[session.activity].delete(session.session_id);
  const mine = st.bySubject.get(session.subject.id);
  if (mine) {
    mine.delete(session);
    if (mine.size === 0) st.bySubject.delete(session.subject.id);
  }
  countSession(st.counters, session, session.activity, -1);
  if (session.geo) st.geoIndex.remove(session, session.geo);
}

/** Rebuilds the state from the stored records (config + one per session). */
export function loadPresenceState(key: string, records: Iterable<[string, unknown]>): PresenceState {
  const st = emptyPresenceState(tenantOfKey(key));
  const sessions: Session[] = [];
  for (const [subkey, value] of records) {
    if (subkey === CONTEXT_SUBKEY) st.context = value as PresenceContextConfig;
    else if (subkey === LISTED_SUBKEY) st.listed = true;
    else if (subkey.startsWith(SESSION_SUBKEY_PREFIX)) sessions.push(value as Session);
  }
  // Opening order for listing; queue order (by last heartbeat) follows from
  // inserting each queue's members in heartbeat order.
  sessions.sort((a, b) => a.opened_ms - b.opened_ms || (a.session_id < b.session_id ? -1 : 1));
  for (const session of sessions) {
    st.sessions.set(session.session_id, session);
    let mine = st.bySubject.get(session.subject.id);
    if (!mine) st.bySubject.set(session.subject.id, (mine = new Set()));
    mine.add(session);
    countSession(st.counters, session, session.activity, 1);
    if (session.geo) st.geoIndex.insert(session, session.geo);
    if (session.last_heartbeat_ms > st.clockMs) st.clockMs = session.last_heartbeat_ms;
  }
  const byHeartbeat = [...sessions].sort((a, b) => a.last_heartbeat_ms - b.last_heartbeat_ms);
  for (const session of byHeartbeat) st.queues[session.activity].set(session.session_id, session);
  return st;
}

// ---- activity arithmetic ----

function effectiveActivity(config: PresenceContextConfig, session: Session, now: number): Activity | 'expired' {
  const elapsed_ms = now - session.last_heartbeat_ms;
  const hb = config.heartbeat;
  if (elapsed_ms >= hb.ttl_seconds * 1000) return 'expired';
  if (elapsed_ms >= hb.stale_after_seconds * 1000) return 'stale';
  if (elapsed_ms >= hb.idle_after_seconds * 1000) return 'idle';
  return 'active';
}

function expiresAt(config: PresenceContextConfig, session: Session): number {
  return session.last_heartbeat_ms + config.heartbeat.ttl_seconds * 1000;
}

function isLive(config: PresenceContextConfig, session: Session, now: number): boolean {
  return now < expiresAt(config, session);
}

/** When the session at the front of the queue for `activity` leaves it. */
function transitionDueMs(config: PresenceContextConfig, activity: Activity, session: Session): number {
  const hb = config.heartbeat;
  const after_s = activity === 'active' ? hb.idle_after_seconds : activity === 'idle' ? hb.stale_after_seconds : hb.ttl_seconds;
  return session.last_heartbeat_ms + after_s * 1000;
}

function nextTransitionMs(st: PresenceState): number | null {
  if (!st.context) return null;
  let next: number | null = null;
  for (const activity of activities) {
    const front = st.queues[activity].first();
    if (!front) continue;
    const due = transitionDueMs(st.context, activity, front);
    if (next === null || due < next) next = due;
  }
  return next;
}

/** Counters as of `now`: recorded counts adjusted for the transitions due and not yet recorded. */
function countersAt(st: PresenceState, now: number): Counters {
  const counters = copyCounters(st.counters);
  const config = st.context!;
  for (const activity of activities) {
    for (const session of st.queues[activity].values()) {
      const actual = effectiveActivity(config, session, now);
      // Queues are ordered by last heartbeat: the first session still current ends the overdue prefix.
      if (actual === activity) break;
      countSession(counters, session, activity, -1);
      if (actual !== 'expired') countSession(counters, session, actual, 1);
    }
  }
  return counters;
}

function occupancyOf(config: PresenceContextConfig, counters: Counters): OccupancyView {
  const p = counters.participants;
  const seats = p.active + p.idle + p.stale;
  const observers = counters.observers.active + counters.observers.idle + counters.observers.stale;
  const { max_active, soft_limit } = config.capacity;
  return {
    active: p.active,
    idle: p.idle,
    stale: p.stale,
    observers,
    total: seats + observers,
    // Agents ready to take work: available and active.
    available_agents: counters.availableAgents.active,
    capacity_remaining: Math.max(0, max_active - seats),
    occupancy_state: seats >= max_active ? 'full' : seats >= soft_limit ? 'busy' : 'open',
    max_active,
    soft_limit,
  };
}

function seatsOf(counters: Counters): number {
  const p = counters.participants;
  return p.active + p.idle + p.stale;
}

function sessionView(config: PresenceContextConfig, session: Session, activity: Activity): SessionView {
  return {
    session_id: session.session_id,
    subject: { id: session.subject.id, kind: session.subject.kind },
    device_id: session.device_id,
    connection_id: session.connection_id,
    state: session.state,
    activity,
    observer: session.observer,
    metadata: { ...session.metadata },
    geo: session.geo ? { lat: session.geo.lat, lon: session.geo.lon } : null,
    opened_ms: session.opened_ms,
    last_heartbeat_ms: session.last_heartbeat_ms,
    expires_ms: expiresAt(config, session),
  };
}

function contextNotFound(): ServiceError {
  return new ServiceError('not_found', 'No such presence context.');
}

function sessionNotFound(): ServiceError {
  return new ServiceError('presence_session_not_found', 'No live session with this session_id in this context (it left or expired).');
}

function requireContext(st: PresenceState): PresenceContextConfig {
  if (!st.context) throw contextNotFound();
  return st.context;
}

/** The live session, or a presence_session_not_found error. */
function liveSession(st: PresenceState, config: PresenceContextConfig, session_id: string, now: number): Session {
  const session = st.sessions.get(session_id);
  if (!session || !isLive(config, session, now)) throw sessionNotFound();
  return session;
}

function checkMetadata(config: PresenceContextConfig, metadata: Record<string, unknown>): void {
  const keys = Object.keys(metadata);
  if (keys.length > presenceLimits.metadata_keys_max) {
    throw badRequest([{ field: 'body.metadata', message: `must have at most ${presenceLimits.metadata_keys_max} keys` }]);
  }
  const allowed = config.metadata_schema.allowed_keys;
  if (allowed.length > 0) {
    const unknown = keys.filter((key) => !allowed.includes(key));
    if (unknown.length > 0) {
      throw badRequest(unknown.map((key) => ({ field: `body.metadata.${key}`, message: `is not an allowed key (allowed: ${allowed.join(', ')})` })));
    }
  }
  if (serialisedBytes(metadata) > presenceLimits.metadata_bytes_max) {
    throw badRequest([{ field: 'body.metadata', message: `must serialise to at most ${presenceLimits.metadata_bytes_max} bytes` }]);
  }
}

function storedPoint(config: PresenceContextConfig, point: GeoPoint): GeoPoint {
  const length = geoPrecisions[config.geo.precision];
  return length === null ? { lat: point.lat, lon: point.lon } : snapToCell(point, length);
}

function sessionWrite(session: Session): RecordWrite {
  return { subkey: SESSION_SUBKEY_PREFIX + session.session_id, value: session };
}

function sessionDelete(session: Session): RecordWrite {
  return { subkey: SESSION_SUBKEY_PREFIX + session.session_id, value: undefined };
}

/** Moves a session to the back of the active queue after a heartbeat. */
function touch(st: PresenceState, session: Session, now: number): void {
  countSession(st.counters, session, session.activity, -1);
  st.queues[session.activity].delete(session.session_id);
  session.last_heartbeat_ms = now;
  session.activity = 'active';
  st.queues.active.set(session.session_id, session);
  countSession(st.counters, session, 'active', 1);
}

/** What the subject index should know about a subject in this context, as of now. */
function subjectReport(st: PresenceState, subject: Subject, now: number, fallback_ms: number, fallbackState: CognitiveState): ActorSend {
  const config = st.context!;
  let last_seen_ms = fallback_ms;
  let last_state = fallbackState;
  let newest = -1;
  let online = false;
  for (const session of st.bySubject.get(subject.id) ?? []) {
    if (!isLive(config, session, now)) continue;
    online = true;
    if (session.last_heartbeat_ms > newest) {
      newest = session.last_heartbeat_ms;
      last_state = session.state;
    }
    if (session.last_heartbeat_ms > last_seen_ms) last_seen_ms = session.last_heartbeat_ms;
  }
  st.lastReportedMs.set(subject.id, now);
  if (!online) st.lastReportedMs.delete(subject.id);
  const message: SubjectSeenMessage = {
    op: 'seen',
    context_id: config.id,
    context_kind: config.kind,
    subject_kind: subject.kind,
    last_seen_ms,
    last_state,
    online,
    reported_ms: now,
  };
  return { kind: PRESENCE_SUBJECT_KIND, key: presenceSubjectKey(st.tenant, subject.id), message };
}

/** Sets the alarm when the next transition is due earlier than the alarm already set. */
function alarmChanges(st: PresenceState): TurnResult<PresenceState, PresenceReply>['alarms'] {
  const next = nextTransitionMs(st);
  if (next === null) {
    if (st.alarmDueMs === null) return undefined;
    st.alarmDueMs = null;
    return [{ name: ALARM_NAME, due_ms: null }];
  }
  const due_ms = Math.ceil(next / ALARM_RESOLUTION_MS) * ALARM_RESOLUTION_MS;
  // An earlier alarm stays: when it fires it reconciles and re-arms for the true next transition.
  if (st.alarmDueMs !== null && st.alarmDueMs <= due_ms) return undefined;
  st.alarmDueMs = due_ms;
  return [{ name: ALARM_NAME, due_ms }];
}

// ---- the step ----

/** The messages that may change a context: the turns that make sure the directory lists it. */
const CHANGING_OPS: ReadonlySet<string> = new Set(['create', 'update', 'heartbeat', 'multiplex_heartbeat', 'state', 'leave', 'sweep']);

/**
 * A context's turn, plus its one message to the tenant's presence directory (through the
 * outbox, with the `listed` record in the same commit): at creation, or for a context created
 * before the directory existed, at its first change since.
 */
export function stepPresence(st: PresenceState, message: PresenceMessage | AlarmMessage, context: TurnContext): TurnResult<PresenceState, PresenceReply> {
  const result = stepContextTurn(st, message, context);
  if (st.listed || !st.context || !CHANGING_OPS.has(message.op)) return result;
  st.listed = true;
  const context_id = (JSON.parse(context.key) as [string, string])[1];
  const add: PresenceDirectoryMessage = { op: 'add', context_id };
  return {
    ...result,
    writes: [...(result.writes ?? []), { subkey: LISTED_SUBKEY, value: 1 }],
    sends: [...(result.sends ?? []), { kind: PRESENCE_DIRECTORY_KIND, key: presenceDirectoryKey(st.tenant), message: add }],
  };
}

function stepContextTurn(st: PresenceState, message: PresenceMessage | AlarmMessage, context: TurnContext): TurnResult<PresenceState, PresenceReply> {
  if (context.now > st.clockMs) st.clockMs = context.now;
  const now = st.clockMs;
  if (isAlarm(message)) {
    // The runtime removed the alarm that woke us.
    st.alarmDueMs = null;
    if (!st.context) return { state: st };
    const { writes, sends, reply } = reconcile(st, now);
    if (reply.remaining) {
      st.alarmDueMs = now;
      return { state: st, writes, sends, alarms: [{ name: ALARM_NAME, due_ms: now }] };
    }
    return { state: st, writes, sends, alarms: alarmChanges(st) };
  }

  switch (message.op) {
    case 'create': {
      if (st.context) throw new ServiceError('presence_context_exists', 'A presence context with this id already exists.');
      const config = resolveContext(message.context, now);
      st.context = config;
      return {
        state: st,
        reply: { context: config, occupancy: occupancyOf(config, st.counters) },
        writes: [{ subkey: CONTEXT_SUBKEY, value: config }],
      };
    }

    case 'update': {
      const current = requireContext(st);
      const config = applyContextChanges(current, message.changes, now);
      if (config === current) return { state: st, reply: { context: config, occupancy: occupancyOf(config, countersAt(st, now)) } };
      st.context = config;
      // New heartbeat settings move every due time: re-arm from scratch.
      const rearm = st.alarmDueMs;
      st.alarmDueMs = null;
      const alarms = alarmChanges(st) ?? (rearm !== null ? [{ name: ALARM_NAME, due_ms: null }] : undefined);
      return {
        state: st,
        reply: { context: config, occupancy: occupancyOf(config, countersAt(st, now)) },
        writes: [{ subkey: CONTEXT_SUBKEY, value: config }],
        alarms,
      };
    }

    case 'get': {
      const config = requireContext(st);
      return { state: st, reply: { context: config, occupancy: occupancyOf(config, countersAt(st, now)) } };
    }

    case 'heartbeat':
      return heartbeat(st, message.heartbeat, now, context);

    case 'multiplex_heartbeat':
      return multiplexHeartbeat(st, message, now, context);

    case 'state': {
      const config = requireContext(st);
      const session = liveSession(st, config, message.session_id, now);
      const previous_state = session.state;
      countSession(st.counters, session, session.activity, -1);
      session.state = message.state;
      countSession(st.counters, session, session.activity, 1);
      // Setting the state is a sign of life: it refreshes the session like a heartbeat.
      touch(st, session, now);
      const sends = previous_state !== message.state ? [subjectReport(st, session.subject, now, now, session.state)] : undefined;
      return {
        state: st,
        reply: { session_id: session.session_id, state: session.state, previous_state },
        writes: [sessionWrite(session)],
        sends,
        alarms: alarmChanges(st),
      };
    }

    case 'leave': {
      requireContext(st);
      const leaving: Session[] = [];
      if (message.session_id !== undefined) {
        const session = st.sessions.get(message.session_id);
        if (session) leaving.push(session);
      } else if (message.subject_id !== undefined) {
        leaving.push(...(st.bySubject.get(message.subject_id) ?? []));
      }
      const writes: RecordWrite[] = [];
      const subjects = new Map<string, { subject: Subject; state: CognitiveState }>();
      for (const session of leaving) {
        removeSession(st, session);
        writes.push(sessionDelete(session));
        subjects.set(session.subject.id, { subject: session.subject, state: session.state });
      }
      // Leaving is the subject's last moment here: last seen = now.
      const sends = [...subjects.values()].map(({ subject, state }) => subjectReport(st, subject, now, now, state));
      return { state: st, reply: { removed_sessions: leaving.length }, writes, sends, alarms: alarmChanges(st) };
    }

    case 'list':
      return { state: st, reply: list(st, requireContext(st), message.filters, now) };

    case 'count': {
      const config = requireContext(st);
      const counters = countersAt(st, now);
      return { state: st, reply: { by_state: counters.byState, occupancy: occupancyOf(config, counters) } };
    }

    case 'nearby':
      return { state: st, reply: nearby(st, requireContext(st), message, now) };

    case 'sweep': {
      requireContext(st);
      const { writes, sends, reply } = reconcile(st, now);
      if (reply.remaining) {
        st.alarmDueMs = now;
        return { state: st, reply, writes, sends, alarms: [{ name: ALARM_NAME, due_ms: now }] };
      }
      return { state: st, reply, writes, sends, alarms: alarmChanges(st) };
    }

    case 'subject_presence': {
      if (!st.context) return { state: st, reply: { last_seen_ms: null, last_state: null, online: false } };
      let newest: Session | null = null;
      for (const session of st.bySubject.get(message.subject_id) ?? []) {
        if (!isLive(st.context, session, now)) continue;
        if (!newest || session.last_heartbeat_ms > newest.last_heartbeat_ms) newest = session;
      }
      return {
        state: st,
        reply: newest ? { last_seen_ms: newest.last_heartbeat_ms, last_state: newest.state, online: true } : { last_seen_ms: null, last_state: null, online: false },
      };
    }
  }
}

function heartbeat(st: PresenceState, input: HeartbeatInput, now: number, context: TurnContext): TurnResult<PresenceState, PresenceReply> {
  const config = requireContext(st);
  // ---- checks (nothing changes until they all pass) ----
  if (input.metadata !== undefined) checkMetadata(config, input.metadata);
  if (input.geo !== undefined) {
    if (!config.geo.enabled) throw badRequest([{ field: 'body.geo', message: 'is not accepted: geo is not enabled for this context' }]);
    if (!isValidPoint(input.geo)) throw badRequest([{ field: 'body.geo', message: 'must have lat in [-90, 90] and lon in [-180, 180]' }]);
  }
  let session: Session | undefined;
  if (input.session_id !== undefined) {
    session = liveSession(st, config, input.session_id, now);
    if (input.subject && (input.subject.id !== session.subject.id || input.subject.kind !== session.subject.kind)) {
      throw new ServiceError('conflict', 'This session belongs to another subject.');
    }
  } else if (!input.subject) {
    throw badRequest([{ field: 'body.subject', message: 'is required to open a session (send session_id to refresh one)' }]);
  }

  const counters = countersAt(st, now);
  const seats = seatsOf(counters);
  const wantsObserver = input.observer ?? session?.observer ?? false;
  let admission: Admission = 'admitted';
  let observer = wantsObserver;
  // A participant seat is needed when opening as a participant or when an observer asks to participate.
  const needsSeat = !wantsObserver && (!session || session.observer);
  if (needsSeat && seats >= config.capacity.max_active) {
    if (config.capacity.overflow_policy === 'reject') {
      throw new ServiceError('presence_capacity_full', `The context is full (max_active ${config.capacity.max_active}).`, {
        details: { admission: 'rejected', occupancy: occupancyOf(config, counters) },
      });
    }
    admission = 'downgraded';
    observer = true;
  }
  if (!session) {
    const live = counters.participants.active + counters.participants.idle + counters.participants.stale
      + counters.observers.active + counters.observers.idle + counters.observers.stale;
    if (live >= presenceLimits.sessions_per_context_max) {
      throw new ServiceError('presence_capacity_full', `The context holds the most sessions it can (${presenceLimits.sessions_per_context_max}).`, {
        details: { admission: 'rejected', occupancy: occupancyOf(config, counters) },
      });
    }
    let subjectSessions = 0;
    for (const other of st.bySubject.get(input.subject!.id) ?? []) if (isLive(config, other, now)) subjectSessions++;
    if (subjectSessions >= presenceLimits.sessions_per_subject_max) {
      throw new ServiceError('presence_capacity_full', `This subject already has ${presenceLimits.sessions_per_subject_max} live sessions in the context.`, {
        details: { admission: 'rejected', occupancy: occupancyOf(config, counters) },
      });
    }
  }

  // ---- changes ----
  const sends: ActorSend[] = [];
  let opened = false;
  const geo = input.geo !== undefined ? storedPoint(config, input.geo) : undefined;
  if (!session) {
    opened = true;
    session = {
      session_id: context.newId('ps_'),
      subject: { id: input.subject!.id, kind: input.subject!.kind },
      device_id: input.device_id ?? null,
      connection_id: input.connection_id ?? null,
      state: input.state ?? 'available',
      metadata: input.metadata ?? {},
      geo: geo ?? null,
      observer,
      opened_ms: now,
      last_heartbeat_ms: now,
      activity: 'active',
    };
    addSession(st, session);
    sends.push(subjectReport(st, session.subject, now, now, session.state));
  } else {
    const previousState = session.state;
    countSession(st.counters, session, session.activity, -1);
    if (input.state !== undefined) session.state = input.state;
    session.observer = observer;
    if (input.device_id !== undefined) session.device_id = input.device_id;
    if (input.connection_id !== undefined) session.connection_id = input.connection_id;
    if (input.metadata !== undefined) session.metadata = input.metadata;
    countSession(st.counters, session, session.activity, 1);
    if (geo !== undefined) {
      if (session.geo) st.geoIndex.move(session, session.geo, geo);
      else st.geoIndex.insert(session, geo);
      session.geo = geo;
    }
    touch(st, session, now);
    const lastReported = st.lastReportedMs.get(session.subject.id);
    if (session.state !== previousState || lastReported === undefined || now - lastReported >= presenceLimits.last_seen_report_interval_ms) {
      sends.push(subjectReport(st, session.subject, now, now, session.state));
    }
  }

  const reply: HeartbeatReply = {
    session_id: session.session_id,
    opened,
    admission,
    activity: 'active',
    state: session.state,
    observer: session.observer,
    last_heartbeat_ms: now,
    expires_ms: expiresAt(config, session),
    occupancy: occupancyOf(config, countersAt(st, now)),
  };
  return { state: st, reply, writes: [sessionWrite(session)], sends: sends.length > 0 ? sends : undefined, alarms: alarmChanges(st) };
}

/**
 * One item of a multiplex flow (actors/presence/flows.ts), delivered through
 * the outbox (so applied once): the heartbeat above, whose result, success or
 * rejection, goes back to the coordinator through the outbox. heartbeat()
 * checks everything before it changes anything, so a rejection leaves the
 * context as it was.
 */
function multiplexHeartbeat(st: PresenceState, message: MultiplexHeartbeatMessage, now: number, context: TurnContext): TurnResult<PresenceState, PresenceReply> {
  const answer = (result: MultiplexItemResult): ActorSend => ({
    kind: PRESENCE_MULTIPLEX_KIND,
    key: message.flow,
    message: { op: 'multiplex_result', index: message.index, result } satisfies MultiplexMessage,
  });
  try {
    const applied = heartbeat(st, message.heartbeat, now, context);
    const reply = applied.reply as HeartbeatReply;
    return { ...applied, reply: undefined, sends: [...(applied.sends ?? []), answer({ success: true, heartbeat: reply })] };
  } catch (error) {
    if (!isServiceError(error)) throw error;
    return { state: st, sends: [answer({ success: false, error: error.code, message: error.message, status: error.statusCode })] };
  }
}

/** Applies every transition due at `now` (up to the per-turn bound) to the recorded activity. */
function reconcile(st: PresenceState, now: number): { writes: RecordWrite[]; sends: ActorSend[]; reply: SweepReply } {
  const config = st.context!;
  const writes: RecordWrite[] = [];
  const transitions: Record<string, Activity> = {};
  const expired: string[] = [];
  const endedSubjects = new Map<string, { subject: Subject; last_seen_ms: number; state: CognitiveState }>();
  let budget: number = presenceLimits.reconcile_per_turn_max;
  let remaining = false;
  // Active before idle before stale: a session due twice moves along the queues in one pass,
  // and each queue stays ordered by last heartbeat (it receives sessions in that order).
  for (const activity of activities) {
    const queue = st.queues[activity];
    for (const session of queue.values()) {
      const actual = effectiveActivity(config, session, now);
      if (actual === activity) break;
      if (budget === 0) {
        remaining = true;
        break;
      }
      budget--;
      if (actual === 'expired' && activity === 'stale') {
        removeSession(st, session);
        writes.push(sessionDelete(session));
        delete transitions[session.session_id];
        expired.push(session.session_id);
        const ended = endedSubjects.get(session.subject.id);
        if (!ended || session.last_heartbeat_ms >= ended.last_seen_ms) {
          endedSubjects.set(session.subject.id, { subject: session.subject, last_seen_ms: session.last_heartbeat_ms, state: session.state });
        }
        continue;
      }
      // One step along active -> idle -> stale; a session further along moves on in the next queue's pass.
      const next: Activity = activity === 'active' ? 'idle' : 'stale';
      countSession(st.counters, session, activity, -1);
      queue.delete(session.session_id);
      session.activity = next;
      st.queues[next].set(session.session_id, session);
      countSession(st.counters, session, next, 1);
      transitions[session.session_id] = next;
      writes.push(sessionWrite(session));
    }
  }
  // A session written and then deleted in this turn: only the delete matters (later writes win).
  const sends = [...endedSubjects.values()].map(({ subject, last_seen_ms, state }) => subjectReport(st, subject, now, last_seen_ms, state));
  const reconciled = Object.keys(transitions).length + expired.length;
  return { writes, sends, reply: { reconciled, transitions, expired, remaining } };
}

function list(st: PresenceState, config: PresenceContextConfig, filters: ListFilters, now: number): ListReply {
  const matched: SessionView[] = [];
  for (const session of st.sessions.values()) {
    const activity = effectiveActivity(config, session, now);
    if (activity === 'expired') continue;
    if (filters.state !== undefined && session.state !== filters.state) continue;
    if (filters.activity !== undefined && activity !== filters.activity) continue;
    if (filters.kind !== undefined && session.subject.kind !== filters.kind) continue;
    matched.push(sessionView(config, session, activity));
  }
  let entries = matched;
  if (filters.aggregate_by_subject) {
    // One entry per subject: its most recently seen matching session (which is also its most active one).
    const bySubject = new Map<string, SessionView>();
    for (const view of matched) {
      const current = bySubject.get(view.subject.id);
      if (!current) bySubject.set(view.subject.id, { ...view, session_count: 1 });
      else {
        const count = current.session_count! + 1;
        if (view.last_heartbeat_ms > current.last_heartbeat_ms) bySubject.set(view.subject.id, { ...view, session_count: count });
        else current.session_count = count;
      }
    }
    entries = [...bySubject.values()];
  }
  const limit = Math.min(filters.limit || presenceLimits.list_limit_default, presenceLimits.list_limit_max);
  const offset = filters.offset ?? 0;
  return { total: entries.length, sessions: entries.slice(offset, offset + limit) };
}

function nearby(st: PresenceState, config: PresenceContextConfig, query: { lat: number; lon: number; radius_meters: number; limit?: number }, now: number): NearbyReply {
  if (!config.geo.enabled) throw badRequest([{ field: 'querystring', message: 'nearby needs geo: geo is not enabled for this context' }]);
  const problems: FieldProblem[] = [];
  if (!Number.isFinite(query.lat) || query.lat < -90 || query.lat > 90) problems.push({ field: 'querystring.lat', message: 'must be between -90 and 90' });
  if (!Number.isFinite(query.lon) || query.lon < -180 || query.lon > 180) problems.push({ field: 'querystring.lon', message: 'must be between -180 and 180' });
  if (!Number.isFinite(query.radius_meters) || query.radius_meters < 0 || query.radius_meters > RADIUS_METERS_MAX) {
    problems.push({ field: 'querystring.radius_meters', message: `must be between 0 and ${Math.floor(RADIUS_METERS_MAX)}` });
  }
  if (problems.length > 0) throw badRequest(problems);
  const hits = st.geoIndex.search(
    { lat: query.lat, lon: query.lon },
    query.radius_meters,
    (session) => session.geo!,
    (session) => isLive(config, session, now),
  );
  const limit = Math.min(query.limit || presenceLimits.nearby_limit_default, presenceLimits.nearby_limit_max);
  return {
    total: hits.length,
    sessions: hits.slice(0, limit).map(({ item, distance_m }) => ({
      session_id: item.session_id,
      subject: { id: item.subject.id, kind: item.subject.kind },
      geo: { lat: item.geo!.lat, lon: item.geo!.lon },
      distance_meters: distance_m,
      observer: item.observer,
      activity: effectiveActivity(config, item, now) as Activity,
      state: item.state,
    })),
  };
}
