import {
  ServiceError,
  type ActorEvent,
  type ActorSend,
  type AlarmChange,
  type AlarmMessage,
  type RecordWrite,
  type TurnContext,
  type TurnResult,
} from '../../runtime/index.js';
import {
  ANOMALIES_KEPT,
  ANOMALY_EVENT,
  LIVENESS_INDEX_KIND,
  livenessIndexKey,
  livenessPolicy as policy,
  STATUS_CHANGED_EVENT,
  type AnomalyEntry,
  type BriefView,
  type HeartbeatAck,
  type IndexMessage,
  type LatencyWindow,
  type LivenessMessage,
  type LivenessReply,
  type StatusName,
  type StatusView,
  type UptimeFigures,
} from './messages.js';
import { isCatalogEvent, webhookPublish } from '../webhooks/messages.js';
import {
  addValue,
  aggregate,
  emptySummary,
  EntitySeries,
  HOUR_PREFIX,
  latencyOfDelay,
  MINUTE_PREFIX,
  RAW_PREFIX,
  sortableNumber,
  type CellRecord,
  type SeriesRecords,
} from './series.js';
import {
  emptyOutageLog,
  ONGOING,
  pruneOutages,
  roundTo,
  uptimeOver,
  upsertOutage,
  type OutageLog,
} from './uptime.js';

/**
 * One monitored entity of one tenant: pure domain logic of the `liveness`
 * actor (storage `records`).
 *
 * Records: `meta` (status, counters, what the index was told), `info`
 * (metadata and labels, written only when they change), `r:<n>` raw samples,
 * `m:<start>` / `h:<start>` rollup cells (see series.ts), `o:<start>` outages.
 *
 * Status: alive while now < last heartbeat + grace. The `status` alarm,
 * kept at (or before) last heartbeat + grace, turns the entity dead when it
 * falls due with no heartbeat since: that turn records the outage, publishes
 * `entity.status_changed` and tells the tenant index. The next heartbeat
 * turns it alive again. Reads compare with the clock, so they are right
 * before the alarm has run.
 */
export const STATUS_ALARM = 'status';
export const RETENTION_ALARM = 'retention';
export const META_SUBKEY = 'meta';
export const INFO_SUBKEY = 'info';
/** The newest anomalies and their count since first seen, written when one occurs. */
export const ANOMALIES_SUBKEY = 'anomalies';
export const OUTAGE_PREFIX = 'o:';
/** History's default window (spec: from one hour ago). */
const HISTORY_WINDOW_MS = 3600_000;

export interface EntityMeta {
  /** Distinguishes an entity from an earlier one of the same id that was deleted. */
  incarnation: string;
  first_seen_ms: number;
  /** The status last published (events, index). */
  status: StatusName;
  status_since_ms: number;
  grace_ms: number;
  /** Sequence number of the last message to the tenant index. */
  index_seq: number;
  /** null: the whole history since first_seen is known (see uptime.ts). */
  history_start_ms: number | null;
  /** The latest heartbeat as of this record's last write (raw samples may be newer). */
  last_seen_ms: number;
  last_delay_ms: number | null;
  heartbeat_count: number;
  /** The latest time retention was applied, if later than last_seen_ms. */
  pruned_at_ms: number | null;
}

export interface EntityInfo {
  metadata: Record<string, unknown>;
  labels: Record<string, string>;
}

export interface EntityState {
  readonly tenant: string;
  readonly entity_id: string;
  /** null: no such entity (never seen, or deleted). */
  meta: EntityMeta | null;
  info: EntityInfo;
  anomalies: AnomalyLog;
  series: EntitySeries;
  outages: OutageLog;
  /** The latest heartbeat (server time) and its network delay (NaN: none). */
  last_seen_ms: number;
  last_delay_ms: number;
  // In memory only: after an activation the first turn re-establishes them.
  status_alarm_ms: number | null;
  retention_alarm_ms: number | null;
  info_json: { metadata: string; labels: string };
}

export interface AnomalyLog {
  count: number;
  /** Newest first, at most ANOMALIES_KEPT. */
  latest: AnomalyEntry[];
}

// ---- activation ----

export function emptyEntity(tenant: string, entity_id: string): EntityState {
  return {
    tenant,
    entity_id,
    meta: null,
    info: { metadata: {}, labels: {} },
    anomalies: { count: 0, latest: [] },
    series: new EntitySeries(),
    outages: emptyOutageLog(),
    last_seen_ms: 0,
    last_delay_ms: NaN,
    status_alarm_ms: null,
    retention_alarm_ms: null,
    info_json: { metadata: '{}', labels: '{}' },
  };
}

export function parseEntityKey(key: string): { tenant: string; entity_id: string } {
  const [tenant, entity_id] = JSON.parse(key) as [string, string];
  return { tenant, entity_id };
}

export function loadEntity(key: string, records: Iterable<[string, unknown]>): EntityState {
  const { tenant, entity_id } = parseEntityKey(key);
  const state = emptyEntity(tenant, entity_id);
  let meta: EntityMeta | undefined;
  const seriesRecords: SeriesRecords = { raw: [], minutes: [], hours: [] };
  for (const [subkey, value] of records) {
    if (subkey === META_SUBKEY) meta = value as EntityMeta;
    else if (subkey === INFO_SUBKEY) state.info = value as EntityInfo;
    else if (subkey === ANOMALIES_SUBKEY) state.anomalies = value as AnomalyLog;
    else if (subkey.startsWith(RAW_PREFIX)) seriesRecords.raw.push([parseInt(subkey.slice(RAW_PREFIX.length), 36), value as [number, number | null]]);
    else if (subkey.startsWith(MINUTE_PREFIX)) seriesRecords.minutes.push([parseInt(subkey.slice(MINUTE_PREFIX.length), 36), value as CellRecord]);
    else if (subkey.startsWith(HOUR_PREFIX)) seriesRecords.hours.push([parseInt(subkey.slice(HOUR_PREFIX.length), 36), value as CellRecord]);
    else if (subkey.startsWith(OUTAGE_PREFIX)) {
      state.outages.pairs.push(parseInt(subkey.slice(OUTAGE_PREFIX.length), 36), (value as number | null) ?? ONGOING);
    }
  }
  if (!meta) return emptyEntity(tenant, entity_id);
  state.meta = meta;
  state.outages.history_start_ms = meta.history_start_ms ?? -Infinity;
  state.info_json = { metadata: JSON.stringify(state.info.metadata), labels: JSON.stringify(state.info.labels) };
  const newestRaw = seriesRecords.raw[seriesRecords.raw.length - 1];
  if (newestRaw && newestRaw[0] >= meta.heartbeat_count) {
    state.last_seen_ms = newestRaw[1][0];
    state.last_delay_ms = newestRaw[1][1] ?? NaN;
  } else {
    state.last_seen_ms = meta.last_seen_ms;
    state.last_delay_ms = meta.last_delay_ms ?? NaN;
  }
  const heartbeat_count = Math.max(meta.heartbeat_count, newestRaw ? newestRaw[0] : 0);
  state.series = EntitySeries.load(seriesRecords, {
    first_seen_ms: meta.first_seen_ms,
    last_seen_ms: state.last_seen_ms,
    heartbeat_count,
    pruned_at_ms: Math.max(state.last_seen_ms, meta.pruned_at_ms ?? -Infinity),
  });
  return state;
}

// ---- the step function ----

type Result = TurnResult<EntityState, LivenessReply>;

export function stepLiveness(state: EntityState, message: LivenessMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'heartbeat':
      return publishToWebhooks(state, heartbeat(state, message, context), context);
    case '$alarm':
      if (message.name === STATUS_ALARM) return publishToWebhooks(state, statusAlarm(state, context.now), context);
      if (message.name === RETENTION_ALARM) return retentionAlarm(state, context.now);
      return { state };
    case 'delete':
      return remove(state);
    default:
      return { state, reply: read(state, message, context.now) };
  }
}

/**
 * The turn's catalog events also go to the tenant's webhooks, durably: a
 * `publish` through the outbox to the tenant's webhook-subscriptions actor,
 * with the event id fixed here (the webhook-id of every delivery of it).
 * The `events` stay as they are (the node's event bus).
 */
function publishToWebhooks(state: EntityState, result: Result, context: TurnContext): Result {
  if (!result.events || result.events.length === 0) return result;
  const sends = [...(result.sends ?? [])];
  for (const event of result.events) {
    if (!isCatalogEvent(event.type)) continue;
    sends.push(webhookPublish(state.tenant, { id: context.newId('evt_'), type: event.type, timestamp_ms: context.now, data: event.data }));
  }
  return { ...result, sends };
}

function heartbeat(state: EntityState, message: Extract<LivenessMessage, { op: 'heartbeat' }>, context: TurnContext): Result {
  if (!Number.isInteger(message.grace_ms) || message.grace_ms < policy.grace_ms_min || message.grace_ms > policy.grace_ms_max) {
    throw new ServiceError('BAD_REQUEST', 'grace_ms is out of range.');
  }
  if (message.client_timestamp_ms !== undefined && (!Number.isSafeInteger(message.client_timestamp_ms) || message.client_timestamp_ms < 0)) {
    throw new ServiceError('BAD_REQUEST', 'client_timestamp_ms must be a non-negative integer.', {
      details: [{ field: 'body.client_timestamp_ms', message: 'must be a non-negative integer' }],
    });
  }
  const writes: RecordWrite[] = [];
  const events: ActorEvent[] = [];
  const sends: ActorSend[] = [];
  const alarms: AlarmChange[] = [];
  let meta = state.meta;
  // Server time never goes back within an entity's series.
  const now = meta ? Math.max(context.now, state.last_seen_ms) : context.now;
  let metaChanged = false;
  let indexDue = false;
  let indexOutage: [number, number] | undefined;

  // Metadata and labels first, so this heartbeat's events carry its labels.
  let infoChanged = false;
  if (message.metadata !== undefined) {
    const json = JSON.stringify(message.metadata);
    if (json !== state.info_json.metadata) {
      state.info = { ...state.info, metadata: message.metadata };
      state.info_json.metadata = json;
      infoChanged = true;
    }
  }
  if (message.labels !== undefined) {
    const json = JSON.stringify(message.labels);
    if (json !== state.info_json.labels) {
      state.info = { ...state.info, labels: message.labels };
      state.info_json.labels = json;
      infoChanged = true;
    }
  }
  if (infoChanged) writes.push({ subkey: INFO_SUBKEY, value: state.info });

  if (!meta) {
    meta = {
      incarnation: context.newId('lvi_'),
      first_seen_ms: now,
      status: 'alive',
      status_since_ms: now,
      grace_ms: message.grace_ms,
      index_seq: 0,
      history_start_ms: null,
      last_seen_ms: now,
      last_delay_ms: null,
      heartbeat_count: 0,
      pruned_at_ms: null,
    };
    state.meta = meta;
    events.push(statusEvent(state, 'unknown', 'alive', now, now));
    metaChanged = true;
    indexDue = true;
  } else if (meta.status === 'dead') {
    // The status alarm recorded an ongoing outage: this heartbeat ends it.
    const last = state.outages.pairs.length - 2;
    const start_ms = last >= 0 && state.outages.pairs[last + 1] === ONGOING ? state.outages.pairs[last] : state.last_seen_ms + meta.grace_ms;
    indexOutage = recordOutage(state, start_ms, now, writes);
    events.push(statusEvent(state, 'dead', 'alive', now, now));
    meta.status = 'alive';
    meta.status_since_ms = now;
    metaChanged = true;
    indexDue = true;
  } else if (now >= state.last_seen_ms + meta.grace_ms) {
    // Past the grace window but the alarm has not run yet (it was due while
    // the node was down, say): the gap is an outage all the same.
    const start_ms = state.last_seen_ms + meta.grace_ms;
    events.push(statusEvent(state, 'alive', 'dead', start_ms, state.last_seen_ms));
    indexOutage = recordOutage(state, start_ms, now, writes);
    events.push(statusEvent(state, 'dead', 'alive', now, now));
    meta.status_since_ms = now;
    metaChanged = true;
    indexDue = true;
  }

  if (pruneExpired(state, now, writes)) {
    metaChanged = true;
    indexDue = true;
  }

  const delay_ms = message.client_timestamp_ms === undefined ? NaN : now - message.client_timestamp_ms;
  const latency_ms = latencyOfDelay(delay_ms);
  if (!Number.isNaN(latency_ms)) {
    const anomaly = latencyAnomaly(state.series.recentLatencies(policy.anomaly_window_samples, policy.anomaly_scan_rows_max), latency_ms);
    if (anomaly) {
      events.push({ type: ANOMALY_EVENT, data: { entity_id: state.entity_id, tenant: state.tenant, labels: state.info.labels, timestamp_ms: now, ...anomaly } });
      state.anomalies = { count: state.anomalies.count + 1, latest: [{ timestamp_ms: now, ...anomaly }, ...state.anomalies.latest].slice(0, ANOMALIES_KEPT) };
      writes.push({ subkey: ANOMALIES_SUBKEY, value: state.anomalies });
    }
  }
  state.series.append(now, delay_ms, writes);
  state.last_seen_ms = now;
  state.last_delay_ms = delay_ms;

  if (message.grace_ms !== meta.grace_ms) {
    meta.grace_ms = message.grace_ms;
    metaChanged = true;
  }

  if (indexDue) {
    sends.push(indexUpsert(state, true, indexOutage));
    metaChanged = true;
  }
  if (metaChanged) writes.push(metaWrite(state));

  const deadline_ms = now + meta.grace_ms;
  if (state.status_alarm_ms === null || state.status_alarm_ms > deadline_ms) {
    alarms.push({ name: STATUS_ALARM, due_ms: deadline_ms });
    state.status_alarm_ms = deadline_ms;
  }

  const reply: HeartbeatAck = {
    alive: true,
    entity_id: state.entity_id,
    client_timestamp_ms: message.client_timestamp_ms ?? null,
    network_delay_ms: Number.isNaN(delay_ms) ? null : delay_ms,
    server_timestamp_ms: now,
  };
  return { state, reply, writes, events, sends, alarms };
}

/**
 * The status alarm. Kept lazily: a heartbeat does not move it, so when it
 * falls due early it re-arms at the current last_seen + grace. When it falls
 * due with no heartbeat in the grace window, the entity turns dead.
 */
function statusAlarm(state: EntityState, now: number): Result {
  state.status_alarm_ms = null;
  const meta = state.meta;
  if (!meta) return { state };
  const deadline_ms = state.last_seen_ms + meta.grace_ms;
  if (now < deadline_ms) {
    state.status_alarm_ms = deadline_ms;
    return { state, alarms: [{ name: STATUS_ALARM, due_ms: deadline_ms }] };
  }
  if (meta.status === 'dead') return { state };
  const writes: RecordWrite[] = [];
  const outage = recordOutage(state, deadline_ms, ONGOING, writes);
  meta.status = 'dead';
  meta.status_since_ms = deadline_ms;
  pruneExpired(state, now, writes);
  const sends = [indexUpsert(state, false, outage)];
  writes.push(metaWrite(state));
  const alarms = scheduleRetention(state, now);
  return { state, writes, sends, alarms, events: [statusEvent(state, 'alive', 'dead', deadline_ms, state.last_seen_ms)] };
}

/** Prunes expired data of a dead entity (an alive one prunes on every heartbeat). */
function retentionAlarm(state: EntityState, now: number): Result {
  state.retention_alarm_ms = null;
  const meta = state.meta;
  if (!meta) return { state };
  const writes: RecordWrite[] = [];
  const sends: ActorSend[] = [];
  if (pruneExpired(state, now, writes)) sends.push(indexUpsert(state, isAlive(state, now)));
  writes.push(metaWrite(state));
  const alarms = meta.status === 'dead' ? scheduleRetention(state, now) : [];
  return { state, writes, sends, alarms };
}

function scheduleRetention(state: EntityState, now: number): AlarmChange[] {
  let next_ms = state.series.nextExpiryMs();
  const pairs = state.outages.pairs;
  for (let i = 0; i < pairs.length; i += 2) {
    if (pairs[i + 1] !== ONGOING) {
      next_ms = Math.min(next_ms, pairs[i + 1] + policy.outage_retention_ms);
      break;
    }
  }
  if (next_ms === Infinity) return [];
  const due_ms = Math.max(next_ms, now + policy.retention_sweep_interval_ms);
  state.retention_alarm_ms = due_ms;
  return [{ name: RETENTION_ALARM, due_ms }];
}

function remove(state: EntityState): Result {
  const meta = state.meta;
  if (!meta) throw new ServiceError('not_found', 'No such entity.');
  const writes: RecordWrite[] = [
    { subkey: META_SUBKEY, value: undefined },
    { subkey: INFO_SUBKEY, value: undefined },
    { subkey: ANOMALIES_SUBKEY, value: undefined },
  ];
  state.series.deleteAll(writes);
  for (let i = 0; i < state.outages.pairs.length; i += 2) writes.push({ subkey: outageSubkey(state.outages.pairs[i]), value: undefined });
  const sends: ActorSend[] = [
    { kind: LIVENESS_INDEX_KIND, key: livenessIndexKey(state.tenant), message: { op: 'remove', entity_id: state.entity_id, incarnation: meta.incarnation } satisfies IndexMessage },
  ];
  const fresh = emptyEntity(state.tenant, state.entity_id);
  return {
    state: fresh,
    reply: { deleted: true },
    writes,
    sends,
    alarms: [
      { name: STATUS_ALARM, due_ms: null },
      { name: RETENTION_ALARM, due_ms: null },
    ],
  };
}

// ---- helpers of the turns ----

function outageSubkey(start_ms: number): string {
  return OUTAGE_PREFIX + sortableNumber(start_ms);
}

function recordOutage(state: EntityState, start_ms: number, end_ms: number, writes: RecordWrite[]): [number, number] {
  upsertOutage(state.outages, start_ms, end_ms);
  writes.push({ subkey: outageSubkey(start_ms), value: end_ms === ONGOING ? null : end_ms });
  return [start_ms, end_ms];
}

/** Applies retention to samples and outages. True when the history start moved. */
function pruneExpired(state: EntityState, now: number, writes: RecordWrite[]): boolean {
  state.series.prune(now, writes);
  if (now > state.last_seen_ms) state.meta!.pruned_at_ms = now;
  const history_before = state.outages.history_start_ms;
  for (const start_ms of pruneOutages(state.outages, now)) writes.push({ subkey: outageSubkey(start_ms), value: undefined });
  if (state.outages.history_start_ms === history_before) return false;
  state.meta!.history_start_ms = state.outages.history_start_ms;
  return true;
}

function metaWrite(state: EntityState): RecordWrite {
  const meta = state.meta!;
  meta.last_seen_ms = state.last_seen_ms;
  meta.last_delay_ms = Number.isNaN(state.last_delay_ms) ? null : state.last_delay_ms;
  meta.heartbeat_count = state.series.raw.newest_seq;
  return { subkey: META_SUBKEY, value: { ...meta } };
}

function indexUpsert(state: EntityState, alive: boolean, outage?: [number, number]): ActorSend {
  const meta = state.meta!;
  meta.index_seq += 1;
  const message: IndexMessage = {
    op: 'upsert',
    entity_id: state.entity_id,
    incarnation: meta.incarnation,
    seq: meta.index_seq,
    first_seen_ms: meta.first_seen_ms,
    last_seen_ms: state.last_seen_ms,
    alive,
    history_start_ms: meta.history_start_ms,
  };
  if (outage) message.outage = outage;
  return { kind: LIVENESS_INDEX_KIND, key: livenessIndexKey(state.tenant), message };
}

function statusEvent(
  state: EntityState,
  old_status: StatusName | 'unknown',
  new_status: StatusName,
  changed_at_ms: number,
  last_seen_ms: number,
): ActorEvent {
  return {
    type: STATUS_CHANGED_EVENT,
    data: {
      entity_id: state.entity_id,
      tenant: state.tenant,
      old_status,
      new_status,
      changed_at_ms,
      last_seen_ms,
      labels: state.info.labels,
    },
  };
}

export interface LatencyAnomaly {
  latency_ms: number;
  mean_ms: number;
  std_dev_ms: number;
  z_score: number;
  direction: 'high' | 'low';
  window_samples: number;
}

/**
 * The anomaly rule: with at least `anomaly_samples_min` of the entity's last
 * `anomaly_window_samples` latencies (before this one), a latency is an
 * anomaly when |latency - mean| > anomaly_z_max * max(std_dev,
 * anomaly_std_dev_floor_ms, anomaly_std_dev_floor_ratio * mean). The floor
 * keeps a very steady series from flagging jitter of a millisecond.
 */
export function latencyAnomaly(window: readonly number[], latency_ms: number): LatencyAnomaly | null {
  const count = window.length;
  if (count < policy.anomaly_samples_min) return null;
  let sum = 0;
  for (const value of window) sum += value;
  const mean = sum / count;
  let squares = 0;
  for (const value of window) squares += (value - mean) * (value - mean);
  const std_dev = Math.sqrt(squares / count);
  const scale = Math.max(std_dev, policy.anomaly_std_dev_floor_ms, policy.anomaly_std_dev_floor_ratio * Math.abs(mean));
  const z = (latency_ms - mean) / scale;
  if (Math.abs(z) <= policy.anomaly_z_max) return null;
  return {
    latency_ms,
    mean_ms: roundTo(mean, 3),
    std_dev_ms: roundTo(std_dev, 3),
    z_score: roundTo(z, 3),
    direction: z > 0 ? 'high' : 'low',
    window_samples: count,
  };
}

// ---- reads ----

function read(state: EntityState, message: Exclude<LivenessMessage, { op: 'heartbeat' | 'delete' }>, now: number): LivenessReply {
  const meta = state.meta;
  if (!meta) throw new ServiceError('not_found', 'No such entity.');
  switch (message.op) {
    case 'status':
      return statusView(state, meta, now);
    case 'brief':
      return { entity_id: state.entity_id, alive: isAlive(state, now), last_seen_ms: state.last_seen_ms };
    case 'anomalies':
      return {
        entity_id: state.entity_id,
        alive: isAlive(state, now),
        last_seen_ms: state.last_seen_ms,
        labels: state.info.labels,
        anomaly_count: state.anomalies.count,
        anomalies: state.anomalies.latest,
      };
    case 'history': {
      const to_ms = message.to_ms ?? now;
      const from_ms = message.from_ms ?? to_ms - HISTORY_WINDOW_MS;
      if (from_ms > to_ms) {
        throw new ServiceError('BAD_REQUEST', 'querystring.from must not be after to', { details: [{ field: 'querystring.from', message: 'must not be after to' }] });
      }
      return { entity_id: state.entity_id, ...state.series.history(from_ms, to_ms, message.limit) };
    }
    case 'aggregate': {
      const { bucket_ms, points } = state.series.buckets(message.series, now - message.range_ms, now, message.bucket_ms);
      return {
        entity_id: state.entity_id,
        aggregation: message.aggregation,
        series: message.series,
        bucket_ms,
        data: points.map((point) => ({ timestamp_ms: point.timestamp_ms, value: roundTo(aggregate(point.summary, message.aggregation), 3) })),
      };
    }
    case 'latency': {
      const from_ms = now - message.range_ms;
      const overall = state.series.buckets('latency', from_ms, now, Infinity).points[0]?.summary;
      const trend = state.series.buckets('latency', from_ms, now, message.bucket_ms);
      const current = latencyOfDelay(state.last_delay_ms);
      return {
        entity_id: state.entity_id,
        current_ms: Number.isNaN(current) ? null : Math.round(current),
        bucket_ms: trend.bucket_ms,
        stats: {
          avg: overall ? roundTo(aggregate(overall, 'avg'), 3) : null,
          max: overall ? overall.max : null,
          min: overall ? overall.min : null,
          std_dev: overall ? roundTo(aggregate(overall, 'std.p'), 3) : null,
        },
        trend: trend.points.map((point) => ({ timestamp_ms: point.timestamp_ms, avg: roundTo(aggregate(point.summary, 'avg'), 3) })),
      };
    }
    case 'uptime': {
      const uptime: Record<string, UptimeFigures> = {};
      const overdue = overdueFrom(state, meta, now);
      for (const window of message.windows) uptime[window.name] = uptimeOver(state.outages, meta.first_seen_ms, now, window.ms, overdue);
      return { entity_id: state.entity_id, uptime };
    }
    default:
      throw new ServiceError('BAD_REQUEST', 'Unknown liveness operation.');
  }
}

export function isAlive(state: EntityState, now: number): boolean {
  return state.meta !== null && now < state.last_seen_ms + state.meta.grace_ms;
}

/** Start of an outage the alarm has not recorded yet, or null. */
function overdueFrom(state: EntityState, meta: EntityMeta, now: number): number | null {
  const deadline_ms = state.last_seen_ms + meta.grace_ms;
  return meta.status === 'alive' && now >= deadline_ms ? deadline_ms : null;
}

function statusView(state: EntityState, meta: EntityMeta, now: number): StatusView {
  const alive = isAlive(state, now);
  const overdue = overdueFrom(state, meta, now);
  const latency = latencyOfDelay(state.last_delay_ms);
  const delay = state.last_delay_ms;
  return {
    alive,
    entity_id: state.entity_id,
    labels: state.info.labels,
    metadata: state.info.metadata,
    last_seen_server_ms: state.last_seen_ms,
    last_seen_client_ms: Number.isNaN(delay) ? null : state.last_seen_ms - delay,
    latency_ms: Number.isNaN(latency) ? null : Math.round(latency),
    network_delay_ms: Number.isNaN(delay) ? null : delay,
    summary: {
      status: alive ? 'alive' : 'dead',
      status_since_ms: overdue ?? meta.status_since_ms,
      first_seen_ms: meta.first_seen_ms,
      grace_ms: meta.grace_ms,
      dead_after_ms: state.last_seen_ms + meta.grace_ms,
      heartbeat_count: state.series.raw.newest_seq,
      interval_avg_ms: intervalAverage(state),
      uptime_24h: uptimeOver(state.outages, meta.first_seen_ms, now, 86_400_000, overdue),
      latency_recent: latencyWindow(state.series.recentLatencies(policy.summary_samples, policy.anomaly_scan_rows_max)),
    },
  };
}

function intervalAverage(state: EntityState): number | null {
  const raw = state.series.raw;
  const count = Math.min(raw.length, policy.summary_samples + 1);
  if (count < 2) return null;
  return roundTo((raw.time(raw.length - 1) - raw.time(raw.length - count)) / (count - 1), 3);
}

function latencyWindow(values: number[]): LatencyWindow {
  if (values.length === 0) return { samples: 0, avg_ms: null, min_ms: null, max_ms: null, std_dev_ms: null };
  const summary = emptySummary();
  for (let i = values.length - 1; i >= 0; i--) addValue(summary, values[i]);
  return {
    samples: summary.count,
    avg_ms: roundTo(aggregate(summary, 'avg'), 3),
    min_ms: summary.min,
    max_ms: summary.max,
    std_dev_ms: roundTo(aggregate(summary, 'std.p'), 3),
  };
}
