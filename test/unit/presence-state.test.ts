import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isServiceError, type TurnResult } from '../../runtime/index.js';
import {
  PRESENCE_CONTEXT_KIND,
  PRESENCE_DIRECTORY_KIND,
  presenceDirectoryKey,
  PRESENCE_SUBJECT_KIND,
  presenceContextKey,
  presenceLimits,
  presenceSubjectKey,
  type ContextInput,
  type ContextView,
  type CountReply,
  type HeartbeatInput,
  type HeartbeatReply,
  type LeaveReply,
  type ListReply,
  type NearbyReply,
  type PresenceDirectoryMessage,
  type PresenceMessage,
  type PresenceReply,
  type StateReply,
  type SubjectPresenceReply,
  type SubjectSeenMessage,
  type SweepReply,
} from '../../actors/presence/messages.js';
import { ALARM_NAME, loadPresenceState, stepPresence, type PresenceState } from '../../actors/presence/state.js';

/**
 * The presence context's pure step with a fixed clock: no runtime, no disk.
 * A tiny in-memory "store" applies each turn's writes (cloned, as storage
 * would serialise them) so reloads can be checked against the live state.
 */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const S = 1000;

function harness(options: { tenant?: string; id?: string } = {}) {
  const tenant = options.tenant ?? 'tenant-a';
  const key = presenceContextKey(tenant, options.id ?? 'room-1');
  const records = new Map<string, unknown>();
  let state: PresenceState = loadPresenceState(key, []);
  let idCounter = 0;
  let alarm: number | null = null;
  const sends: SubjectSeenMessage[] = [];
  const sendKeys: string[] = [];
  const directoryAdds: { key: string; message: PresenceDirectoryMessage }[] = [];

  function turn<R extends PresenceReply>(message: PresenceMessage | { op: '$alarm'; name: string; due_ms: number }, now: number): TurnResult<PresenceState, R> & { reply: R } {
    const result = stepPresence(state, message, { now, kind: PRESENCE_CONTEXT_KIND, key, request_id: null, newId: (prefix = '') => `${prefix}${++idCounter}` });
    state = result.state;
    for (const write of result.writes ?? []) {
      if (write.value === undefined) records.delete(write.subkey);
      else records.set(write.subkey, structuredClone(write.value));
    }
    for (const change of result.alarms ?? []) {
      expect(change.name).toBe(ALARM_NAME);
      alarm = change.due_ms;
    }
    for (const send of result.sends ?? []) {
      if (send.kind === PRESENCE_DIRECTORY_KIND) {
        directoryAdds.push(send as { key: string; message: PresenceDirectoryMessage });
        continue;
      }
      expect(send.kind).toBe(PRESENCE_SUBJECT_KIND);
      sends.push(send.message as SubjectSeenMessage);
      sendKeys.push(send.key);
    }
    return result as TurnResult<PresenceState, R> & { reply: R };
  }

  return {
    tenant,
    records,
    sends,
    sendKeys,
    directoryAdds,
    get state() {
      return state;
    },
    get alarm() {
      return alarm;
    },
    turn,
    create: (context: Partial<ContextInput> = {}, now = T0) => turn<ContextView>({ op: 'create', context: { id: 'room-1', kind: 'room', ...context } }, now).reply,
    heartbeat: (heartbeat: HeartbeatInput, now: number) => turn<HeartbeatReply>({ op: 'heartbeat', heartbeat }, now),
    list: (now: number, filters = {}) => turn<ListReply>({ op: 'list', filters }, now).reply,
    count: (now: number) => turn<CountReply>({ op: 'count' }, now).reply,
    sweep: (now: number) => turn<SweepReply>({ op: 'sweep' }, now),
    /** Delivers the alarm if it is due by `now` (as the runtime would, with context.now = now). */
    fireAlarm(now: number) {
      if (alarm === null || alarm > now) return undefined;
      const due_ms = alarm;
      alarm = null; // the runtime removes the alarm it delivers
      return turn({ op: '$alarm', name: ALARM_NAME, due_ms }, now);
    },
    reload() {
      state = loadPresenceState(key, [...records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    },
  };
}

function expectServiceError(fn: () => unknown, code: string): any {
  try {
    fn();
  } catch (error) {
    expect(isServiceError(error), String(error)).toBe(true);
    expect((error as { code: string }).code).toBe(code);
    return error;
  }
  throw new Error(`expected ${code}`);
}

const user = (id: string) => ({ id, kind: 'user' as const });
const agent = (id: string) => ({ id, kind: 'agent' as const });

describe('context create and update', () => {
  it('applies documented defaults and stores one record', () => {
    const h = harness();
    const view = h.create();
    expect(view.context).toMatchObject({
      id: 'room-1',
      kind: 'room',
      resource_id: 'room-1',
      heartbeat: { ttl_seconds: 90, idle_after_seconds: 30, stale_after_seconds: 60 },
      capacity: { max_active: 10_000, soft_limit: 8000, overflow_policy: 'reject' },
      geo: { enabled: false, precision: 'exact' },
      metadata_schema: { allowed_keys: [] },
      created_ms: T0,
      updated_ms: T0,
      version: 1,
    });
    expect(view.occupancy).toMatchObject({ active: 0, total: 0, occupancy_state: 'open', capacity_remaining: 10_000 });
    expect([...h.records.keys()]).toEqual(['context', 'listed']);
    // The creation tells the tenant's directory, once.
    expect(h.directoryAdds).toEqual([{ kind: PRESENCE_DIRECTORY_KIND, key: presenceDirectoryKey('tenant-a'), message: { op: 'add', context_id: 'room-1' } }]);
    h.heartbeat({ subject: { id: 'u', kind: 'user' } }, T0);
    expect(h.directoryAdds).toHaveLength(1);
  });

  it('a context created before the directory existed is listed at its next change, not on a read', () => {
    const h = harness();
    h.create({}, T0);
    h.records.delete('listed');
    h.reload();
    h.count(T0);
    expect(h.directoryAdds).toHaveLength(1);
    h.heartbeat({ subject: { id: 'u', kind: 'user' } }, T0);
    expect(h.directoryAdds).toHaveLength(2);
    expect(h.records.has('listed')).toBe(true);
  });

  it('refuses a second create of the same id', () => {
    const h = harness();
    h.create();
    expectServiceError(() => h.create({ kind: 'other' }), 'presence_context_exists');
  });

  it('rejects settings that contradict each other, before storing anything', () => {
    const h = harness();
    const error = expectServiceError(() => h.create({ heartbeat: { idle_after_seconds: 50, stale_after_seconds: 40, ttl_seconds: 60 } }), 'BAD_REQUEST');
    expect(error.details[0].field).toBe('body.heartbeat.idle_after_seconds');
    expectServiceError(() => h.create({ heartbeat: { stale_after_seconds: 100, ttl_seconds: 90 } }), 'BAD_REQUEST');
    expectServiceError(() => h.create({ capacity: { max_active: 5, soft_limit: 6 } }), 'BAD_REQUEST');
    expectServiceError(() => h.create({ capacity: { max_active: 0 } }), 'BAD_REQUEST');
    expect(h.records.size).toBe(0);
    expect(h.state.context).toBeNull();
  });

  it('update merges nested settings and bumps version only on a change', () => {
    const h = harness();
    h.create({ capacity: { max_active: 10 } });
    const same = h.turn<ContextView>({ op: 'update', changes: { capacity: { max_active: 10 } } }, T0 + S).reply;
    expect(same.context.version).toBe(1);
    const changed = h.turn<ContextView>({ op: 'update', changes: { capacity: { max_active: 4 }, heartbeat: { ttl_seconds: 120 } } }, T0 + 2 * S).reply;
    expect(changed.context).toMatchObject({
      version: 2,
      updated_ms: T0 + 2 * S,
      created_ms: T0,
      capacity: { max_active: 4, soft_limit: 4, overflow_policy: 'reject' },
      heartbeat: { ttl_seconds: 120, idle_after_seconds: 30, stale_after_seconds: 60 },
    });
    expectServiceError(() => h.turn({ op: 'update', changes: { heartbeat: { ttl_seconds: 10 } } }, T0 + 3 * S), 'BAD_REQUEST');
    expect((h.records.get('context') as { version: number }).version).toBe(2);
  });

  it('every operation on a context that was never created is 404', () => {
    const h = harness();
    for (const message of [
      { op: 'get' },
      { op: 'heartbeat', heartbeat: { subject: user('u') } },
      { op: 'state', session_id: 'x', state: 'busy' },
      { op: 'leave', session_id: 'x' },
      { op: 'list', filters: {} },
      { op: 'count' },
      { op: 'nearby', lat: 0, lon: 0, radius_meters: 1 },
      { op: 'sweep' },
    ] as PresenceMessage[]) {
      expectServiceError(() => h.turn(message, T0), 'not_found');
    }
    expect(h.records.size).toBe(0);
  });
});

describe('heartbeats and sessions', () => {
  it('opens a session (one record), refreshes it (the same record), and reports to the subject index', () => {
    const h = harness();
    h.create();
    const opened = h.heartbeat({ subject: user('alice'), device_id: 'phone' }, T0 + 250);
    expect(opened.reply).toMatchObject({ opened: true, admission: 'admitted', activity: 'active', state: 'available', observer: false, expires_ms: T0 + 250 + 90 * S });
    expect(opened.writes).toHaveLength(1);
    expect(opened.reply.occupancy).toMatchObject({ active: 1, total: 1 });
    // One alarm for the next transition, rounded up to the second.
    expect(h.alarm).toBe(T0 + 31 * S);
    expect(h.sends).toHaveLength(1);
    expect(h.sendKeys[0]).toBe(presenceSubjectKey('tenant-a', 'alice'));
    expect(h.sends[0]).toMatchObject({ op: 'seen', context_id: 'room-1', context_kind: 'room', subject_kind: 'user', last_seen_ms: T0 + 250, online: true });

    const id = opened.reply.session_id;
    const refreshed = h.heartbeat({ session_id: id, state: 'thinking' }, T0 + 10 * S);
    expect(refreshed.reply).toMatchObject({ session_id: id, opened: false, state: 'thinking' });
    expect(refreshed.writes).toEqual([{ subkey: `s/${id}`, value: expect.objectContaining({ last_heartbeat_ms: T0 + 10 * S, state: 'thinking', device_id: 'phone' }) }]);
    // An earlier alarm is kept (it re-arms itself when it fires): no alarm write per heartbeat.
    expect(refreshed.alarms).toBeUndefined();
    // State changed: reported. A plain heartbeat soon after: not reported; 30 s later: reported.
    expect(h.sends).toHaveLength(2);
    h.heartbeat({ session_id: id }, T0 + 20 * S);
    expect(h.sends).toHaveLength(2);
    h.heartbeat({ session_id: id }, T0 + 41 * S);
    expect(h.sends).toHaveLength(3);
    expect(h.sends[2].last_seen_ms).toBe(T0 + 41 * S);
  });

  it('requires a subject to open, and the same subject to refresh', () => {
    const h = harness();
    h.create();
    expectServiceError(() => h.heartbeat({}, T0), 'BAD_REQUEST');
    const id = h.heartbeat({ subject: user('alice') }, T0).reply.session_id;
    expectServiceError(() => h.heartbeat({ session_id: id, subject: user('bob') }, T0 + S), 'conflict');
    expectServiceError(() => h.heartbeat({ session_id: 'nope' }, T0 + S), 'presence_session_not_found');
  });

  it('a session past its ttl cannot be refreshed, even before the alarm removed it', () => {
    const h = harness();
    h.create();
    const id = h.heartbeat({ subject: user('alice') }, T0).reply.session_id;
    expect(h.heartbeat({ session_id: id }, T0 + 90 * S - 1).reply.opened).toBe(false);
    expectServiceError(() => h.heartbeat({ session_id: id }, T0 + 180 * S - 1), 'presence_session_not_found');
    expect(h.state.sessions.has(id)).toBe(true);
    expect(h.list(T0 + 180 * S - 1).sessions).toEqual([]);
  });

  it('metadata is limited to allowed_keys when the list is not empty', () => {
    const h = harness();
    h.create({ metadata_schema: { allowed_keys: ['role', 'team'] } });
    const error = expectServiceError(() => h.heartbeat({ subject: user('a'), metadata: { role: 'dev', secret: 1 } }, T0), 'BAD_REQUEST');
    expect(error.details).toEqual([{ field: 'body.metadata.secret', message: expect.stringContaining('not an allowed key') }]);
    expect(h.state.sessions.size).toBe(0);
    const ok = h.heartbeat({ subject: user('a'), metadata: { role: 'dev' } }, T0);
    expect(h.list(T0).sessions[0].metadata).toEqual({ role: 'dev' });
    // A refresh with metadata replaces it.
    h.heartbeat({ session_id: ok.reply.session_id, metadata: { team: 'x' } }, T0 + S);
    expect(h.list(T0 + S).sessions[0].metadata).toEqual({ team: 'x' });

    const open = harness();
    open.create();
    open.heartbeat({ subject: user('a'), metadata: { anything: true } }, T0);
    expectServiceError(() => open.heartbeat({ subject: user('b'), metadata: { big: 'x'.repeat(5000) } }, T0), 'BAD_REQUEST');
  });

  it('geo is refused when the context has it off', () => {
    const h = harness();
    h.create();
    const error = expectServiceError(() => h.heartbeat({ subject: user('a'), geo: { lat: 1, lon: 2 } }, T0), 'BAD_REQUEST');
    expect(error.details[0].field).toBe('body.geo');
    expectServiceError(() => h.turn({ op: 'nearby', lat: 0, lon: 0, radius_meters: 10 }, T0), 'BAD_REQUEST');
  });

  it('bounds the sessions of one subject', () => {
    const h = harness();
    h.create();
    for (let i = 0; i < presenceLimits.sessions_per_subject_max; i++) h.heartbeat({ subject: user('a') }, T0);
    expectServiceError(() => h.heartbeat({ subject: user('a') }, T0), 'presence_capacity_full');
    h.heartbeat({ subject: user('b') }, T0);
  });
});

describe('activity: idle, stale, expiry (fixed clock)', () => {
  const settings = { heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } };

  it('reads are exact before any reconciliation; sweep records the transitions', () => {
    const h = harness();
    h.create(settings);
    const start = T0 + 250;
    const a = h.heartbeat({ subject: user('a') }, start).reply.session_id;
    const b = h.heartbeat({ subject: user('b') }, start + 5 * S).reply.session_id;

    expect(h.count(start + 10 * S - 1).occupancy).toMatchObject({ active: 2, idle: 0 });
    expect(h.count(start + 10 * S).occupancy).toMatchObject({ active: 1, idle: 1 });
    expect(h.list(start + 10 * S, { activity: 'idle' }).sessions.map((s) => s.session_id)).toEqual([a]);

    // Nothing recorded yet: the sweep records it and reports it, once.
    const sweep = h.sweep(start + 10 * S);
    expect(sweep.reply).toEqual({ reconciled: 1, transitions: { [a]: 'idle' }, expired: [], remaining: false });
    expect(sweep.writes).toEqual([{ subkey: `s/${a}`, value: expect.objectContaining({ activity: 'idle' }) }]);
    expect(h.sweep(start + 10 * S).reply.reconciled).toBe(0);

    // a: stale at 20 s; b: idle at 15 s, stale at 25 s.
    expect(h.sweep(start + 20 * S).reply.transitions).toEqual({ [a]: 'stale', [b]: 'idle' });
    expect(h.count(start + 25 * S).occupancy).toMatchObject({ active: 0, idle: 0, stale: 2, total: 2 });

    // a expires at 30 s: removed, record deleted, the subject index told it is gone.
    h.sends.length = 0;
    const expiry = h.sweep(start + 30 * S);
    expect(expiry.reply).toEqual({ reconciled: 2, transitions: { [b]: 'stale' }, expired: [a], remaining: false });
    expect(h.records.has(`s/${a}`)).toBe(false);
    expect(h.sends).toEqual([expect.objectContaining({ context_id: 'room-1', last_seen_ms: start, online: false })]);
    expect(h.count(start + 30 * S).occupancy).toMatchObject({ stale: 1, total: 1 });
    expect(h.count(start + 35 * S).occupancy).toMatchObject({ stale: 0, total: 0 });
  });

  it('a session overdue twice moves straight to its current activity in one sweep', () => {
    const h = harness();
    h.create(settings);
    const a = h.heartbeat({ subject: user('a') }, T0).reply.session_id;
    expect(h.sweep(T0 + 25 * S).reply.transitions).toEqual({ [a]: 'stale' });
    const b = h.heartbeat({ subject: user('b') }, T0 + 26 * S).reply.session_id;
    expect(h.sweep(T0 + 26 * S + 40 * S).reply).toMatchObject({ transitions: {}, expired: [a, b] });
    expect([...h.records.keys()]).toEqual(['context', 'listed']);
  });

  it('a heartbeat makes an idle or stale session active again', () => {
    const h = harness();
    h.create(settings);
    const a = h.heartbeat({ subject: user('a') }, T0).reply.session_id;
    h.sweep(T0 + 21 * S);
    expect(h.list(T0 + 21 * S).sessions[0].activity).toBe('stale');
    const refreshed = h.heartbeat({ session_id: a }, T0 + 22 * S);
    expect(refreshed.reply.activity).toBe('active');
    expect(h.state.queues.active.has(a)).toBe(true);
    expect(h.list(T0 + 22 * S).sessions[0]).toMatchObject({ activity: 'active', expires_ms: T0 + 52 * S });
  });

  it('one alarm per context, for the next transition, rounded up to the second; each alarm turn re-arms', () => {
    const h = harness();
    h.create(settings);
    const start = T0 + 250;
    const a = h.heartbeat({ subject: user('a') }, start).reply.session_id;
    h.heartbeat({ subject: user('b') }, start + 3 * S);
    expect(h.alarm).toBe(T0 + 11 * S);
    // The transition is due at start + 10 s; the alarm fires within the next second.
    let fired = h.fireAlarm(T0 + 11 * S)!;
    expect(fired.writes).toHaveLength(1);
    expect(h.state.sessions.get(a)!.activity).toBe('idle');
    expect(h.alarm).toBe(T0 + 14 * S); // b goes idle at start + 13 s
    fired = h.fireAlarm(T0 + 14 * S)!;
    expect(h.alarm).toBe(T0 + 21 * S); // a goes stale at start + 20 s
    h.fireAlarm(T0 + 21 * S);
    h.fireAlarm(T0 + 24 * S);
    expect(h.alarm).toBe(T0 + 31 * S); // a expires at start + 30 s
    h.fireAlarm(T0 + 31 * S);
    expect(h.state.sessions.has(a)).toBe(false);
    h.fireAlarm(T0 + 34 * S);
    expect(h.state.sessions.size).toBe(0);
    // Nothing left: the alarm was not re-armed.
    expect(h.alarm).toBeNull();
    expect([...h.records.keys()]).toEqual(['context', 'listed']);
  });

  it('leaves a heartbeat-driven context with at most one alarm write per wake-up', () => {
    const h = harness();
    h.create(settings);
    const ids = [0, 1, 2].map((i) => h.heartbeat({ subject: user(`u${i}`) }, T0).reply.session_id);
    let alarmWrites = 0;
    for (let t = 1; t <= 60; t++) {
      const now = T0 + t * S;
      for (const id of ids) {
        const result = h.heartbeat({ session_id: id }, now);
        alarmWrites += result.alarms?.length ?? 0;
      }
      const fired = h.fireAlarm(now);
      if (fired) alarmWrites += fired.alarms?.length ?? 0;
    }
    // Heartbeats every second keep everyone active; the alarm wakes about once per idle period.
    expect(alarmWrites).toBeLessThanOrEqual(8);
    expect(h.count(T0 + 60 * S).occupancy.active).toBe(3);
  });

  it('changing the heartbeat settings re-arms the alarm', () => {
    const h = harness();
    h.create(settings);
    h.heartbeat({ subject: user('a') }, T0);
    expect(h.alarm).toBe(T0 + 10 * S);
    h.turn({ op: 'update', changes: { heartbeat: { idle_after_seconds: 15 } } }, T0 + S);
    expect(h.alarm).toBe(T0 + 15 * S);
  });
});

describe('cognitive state', () => {
  it('state returns previous_state, refreshes the session, and 404s on an unknown session', () => {
    const h = harness();
    h.create();
    const id = h.heartbeat({ subject: agent('bot') }, T0).reply.session_id;
    const r1 = h.turn<StateReply>({ op: 'state', session_id: id, state: 'busy' }, T0 + 40 * S).reply;
    expect(r1).toEqual({ session_id: id, state: 'busy', previous_state: 'available' });
    const r2 = h.turn<StateReply>({ op: 'state', session_id: id, state: 'thinking' }, T0 + 41 * S).reply;
    expect(r2.previous_state).toBe('busy');
    expect(h.list(T0 + 41 * S).sessions[0]).toMatchObject({ state: 'thinking', last_heartbeat_ms: T0 + 41 * S, activity: 'active' });
    expect(h.count(T0 + 41 * S).by_state).toEqual({ available: 0, thinking: 1, busy: 0, offline: 0 });
    expectServiceError(() => h.turn({ op: 'state', session_id: 'missing', state: 'busy' }, T0), 'presence_session_not_found');
  });

  it('available_agents counts active, available agents only', () => {
    const h = harness();
    h.create({ heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    const a1 = h.heartbeat({ subject: agent('a1') }, T0).reply.session_id;
    h.heartbeat({ subject: agent('a2'), state: 'busy' }, T0);
    h.heartbeat({ subject: user('u1') }, T0);
    h.heartbeat({ subject: agent('a3'), observer: true }, T0);
    expect(h.count(T0).occupancy.available_agents).toBe(1);
    h.heartbeat({ subject: agent('a4') }, T0 + 5 * S);
    expect(h.count(T0 + 5 * S).occupancy.available_agents).toBe(2);
    // a1 goes idle at 10 s.
    expect(h.count(T0 + 10 * S).occupancy.available_agents).toBe(1);
    h.turn({ op: 'state', session_id: a1, state: 'available' }, T0 + 11 * S);
    expect(h.count(T0 + 11 * S).occupancy.available_agents).toBe(2);
  });
});

describe('capacity and observers', () => {
  it('soft_limit makes the context busy, max_active full, and reject answers 409 with admission rejected', () => {
    const h = harness();
    h.create({ capacity: { max_active: 3, soft_limit: 2, overflow_policy: 'reject' } });
    expect(h.heartbeat({ subject: user('a') }, T0).reply.occupancy).toMatchObject({ occupancy_state: 'open', capacity_remaining: 2 });
    expect(h.heartbeat({ subject: user('b') }, T0).reply.occupancy).toMatchObject({ occupancy_state: 'busy', capacity_remaining: 1 });
    const third = h.heartbeat({ subject: user('c') }, T0).reply;
    expect(third.occupancy).toMatchObject({ occupancy_state: 'full', capacity_remaining: 0, active: 3 });
    const error = expectServiceError(() => h.heartbeat({ subject: user('d') }, T0), 'presence_capacity_full');
    expect(error.details).toMatchObject({ admission: 'rejected', occupancy: { active: 3, occupancy_state: 'full' } });
    expect(h.state.sessions.size).toBe(3);
    // Existing sessions keep their seats; observers do not need one and are not counted as active.
    h.heartbeat({ session_id: third.session_id }, T0 + S);
    const watcher = h.heartbeat({ subject: user('w'), observer: true }, T0 + S).reply;
    expect(watcher).toMatchObject({ observer: true, admission: 'admitted' });
    expect(watcher.occupancy).toMatchObject({ active: 3, observers: 1, total: 4 });
    // An observer asking to participate needs a seat.
    expectServiceError(() => h.heartbeat({ session_id: watcher.session_id, observer: false }, T0 + S), 'presence_capacity_full');
    // A seat frees when a participant leaves.
    h.turn({ op: 'leave', session_id: third.session_id }, T0 + 2 * S);
    const promoted = h.heartbeat({ session_id: watcher.session_id, observer: false }, T0 + 2 * S).reply;
    expect(promoted).toMatchObject({ observer: false, admission: 'admitted' });
    expect(promoted.occupancy).toMatchObject({ active: 3, observers: 0, occupancy_state: 'full' });
  });

  it('a participant that turns observer frees its seat', () => {
    const h = harness();
    h.create({ capacity: { max_active: 1 } });
    const a = h.heartbeat({ subject: user('a') }, T0).reply.session_id;
    expectServiceError(() => h.heartbeat({ subject: user('b') }, T0), 'presence_capacity_full');
    const watching = h.heartbeat({ session_id: a, observer: true }, T0 + S).reply;
    expect(watching).toMatchObject({ observer: true, admission: 'admitted' });
    expect(watching.occupancy).toMatchObject({ active: 0, observers: 1, capacity_remaining: 1 });
    expect(h.heartbeat({ subject: user('b') }, T0 + S).reply.admission).toBe('admitted');
    expect(h.heartbeat({ session_id: a }, T0 + 2 * S).reply.observer).toBe(true);
  });

  it('overflow_policy observe admits the overflow as an observer (admission downgraded)', () => {
    const h = harness();
    h.create({ capacity: { max_active: 1, overflow_policy: 'observe' } });
    h.heartbeat({ subject: user('a') }, T0);
    const second = h.heartbeat({ subject: user('b') }, T0).reply;
    expect(second).toMatchObject({ admission: 'downgraded', observer: true });
    expect(second.occupancy).toMatchObject({ active: 1, observers: 1, total: 2, occupancy_state: 'full' });
  });

  it('idle and stale sessions hold their seat until they expire', () => {
    const h = harness();
    h.create({ capacity: { max_active: 1 }, heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    h.heartbeat({ subject: user('a') }, T0);
    expectServiceError(() => h.heartbeat({ subject: user('b') }, T0 + 25 * S), 'presence_capacity_full');
    // At ttl the seat is free, even before any sweep or alarm ran.
    expect(h.heartbeat({ subject: user('b') }, T0 + 30 * S).reply.admission).toBe('admitted');
  });
});

describe('leave, list, count', () => {
  function populated() {
    const h = harness();
    h.create({ heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    const ids = {
      a1: h.heartbeat({ subject: user('alice'), device_id: 'laptop' }, T0).reply.session_id,
      a2: h.heartbeat({ subject: user('alice'), device_id: 'phone', state: 'busy' }, T0 + 12 * S).reply.session_id,
      b: h.heartbeat({ subject: agent('bot'), state: 'thinking' }, T0 + 12 * S).reply.session_id,
      w: h.heartbeat({ subject: { id: 'tv', kind: 'device' }, observer: true }, T0 + 12 * S).reply.session_id,
    };
    return { h, ids };
  }

  it('list filters by state, activity and kind; aggregate_by_subject keeps the most recent session per subject', () => {
    const { h, ids } = populated();
    const now = T0 + 12 * S;
    expect(h.list(now).sessions.map((s) => s.session_id)).toEqual([ids.a1, ids.a2, ids.b, ids.w]);
    expect(h.list(now, { activity: 'idle' }).sessions.map((s) => s.session_id)).toEqual([ids.a1]);
    expect(h.list(now, { state: 'busy' }).sessions.map((s) => s.session_id)).toEqual([ids.a2]);
    expect(h.list(now, { kind: 'agent' }).sessions.map((s) => s.session_id)).toEqual([ids.b]);
    expect(h.list(now, { kind: 'user', activity: 'active' }).sessions.map((s) => s.session_id)).toEqual([ids.a2]);
    const aggregated = h.list(now, { aggregate_by_subject: true });
    expect(aggregated.total).toBe(3);
    expect(aggregated.sessions.map((s) => [s.subject.id, s.session_id, s.session_count])).toEqual([
      ['alice', ids.a2, 2],
      ['bot', ids.b, 1],
      ['tv', ids.w, 1],
    ]);
    const page = h.list(now, { limit: 2, offset: 1 });
    expect(page.total).toBe(4);
    expect(page.sessions.map((s) => s.session_id)).toEqual([ids.a2, ids.b]);
    expect(h.list(now, { limit: 0 }).sessions).toHaveLength(4);
    // a1 expires at 30 s; listing never shows an expired session.
    expect(h.list(T0 + 30 * S).sessions.map((s) => s.session_id)).toEqual([ids.a2, ids.b, ids.w]);
  });

  it('count gives participants by state, and observers apart', () => {
    const { h } = populated();
    const counted = h.count(T0 + 12 * S);
    expect(counted.by_state).toEqual({ available: 1, thinking: 1, busy: 1, offline: 0 });
    expect(counted.occupancy).toMatchObject({ active: 2, idle: 1, stale: 0, observers: 1, total: 4 });
  });

  it('leave by session or by subject removes records and tells the subject index', () => {
    const { h, ids } = populated();
    h.sends.length = 0;
    const bySession = h.turn<LeaveReply>({ op: 'leave', session_id: ids.b }, T0 + 13 * S);
    expect(bySession.reply.removed_sessions).toBe(1);
    expect(bySession.writes).toEqual([{ subkey: `s/${ids.b}`, value: undefined }]);
    expect(h.sends).toEqual([expect.objectContaining({ subject_kind: 'agent', online: false, last_seen_ms: T0 + 13 * S })]);
    expect(h.turn<LeaveReply>({ op: 'leave', session_id: ids.b }, T0 + 13 * S).reply.removed_sessions).toBe(0);
    expect(h.turn<LeaveReply>({ op: 'leave', subject_id: 'alice' }, T0 + 14 * S).reply.removed_sessions).toBe(2);
    expect(h.list(T0 + 14 * S).sessions.map((s) => s.session_id)).toEqual([ids.w]);
    expect([...h.records.keys()].sort()).toEqual(['context', 'listed', `s/${ids.w}`]);
  });

  it('subject_presence answers the exact last heartbeat of a live subject', () => {
    const { h } = populated();
    expect(h.turn<SubjectPresenceReply>({ op: 'subject_presence', subject_id: 'alice' }, T0 + 13 * S).reply)
      .toEqual({ last_seen_ms: T0 + 12 * S, last_state: 'busy', online: true });
    expect(h.turn<SubjectPresenceReply>({ op: 'subject_presence', subject_id: 'nobody' }, T0 + 13 * S).reply.online).toBe(false);
  });
});

describe('nearby', () => {
  it('finds live sessions within the radius, nearest first, and snaps coordinates to the precision', () => {
    const h = harness();
    h.create({ geo: { enabled: true } });
    const paris = { lat: 48.8566, lon: 2.3522 };
    const near = h.heartbeat({ subject: user('near'), geo: { lat: 48.8606, lon: 2.3376 } }, T0).reply.session_id; // ~1.2 km
    const far = h.heartbeat({ subject: user('far'), geo: { lat: 51.5074, lon: -0.1278 } }, T0).reply.session_id; // London ~344 km
    h.heartbeat({ subject: user('nogeo') }, T0);
    const reply = h.turn<NearbyReply>({ op: 'nearby', ...paris, radius_meters: 5000 }, T0).reply;
    expect(reply.total).toBe(1);
    expect(reply.sessions[0]).toMatchObject({ session_id: near, subject: { id: 'near', kind: 'user' } });
    expect(reply.sessions[0].distance_meters).toBeGreaterThan(1000);
    expect(reply.sessions[0].distance_meters).toBeLessThan(1300);
    const wide = h.turn<NearbyReply>({ op: 'nearby', ...paris, radius_meters: 400_000 }, T0).reply;
    expect(wide.sessions.map((s) => s.session_id)).toEqual([near, far]);
    expect(h.turn<NearbyReply>({ op: 'nearby', ...paris, radius_meters: 400_000, limit: 1 }, T0).reply).toMatchObject({ total: 2, sessions: [{ session_id: near }] });
    // Moving updates the index; expired sessions are not found.
    h.heartbeat({ session_id: far, geo: paris }, T0 + S);
    expect(h.turn<NearbyReply>({ op: 'nearby', ...paris, radius_meters: 10, limit: 5 }, T0 + S).reply.sessions.map((s) => s.session_id)).toEqual([far]);
    expect(h.turn<NearbyReply>({ op: 'nearby', ...paris, radius_meters: 400_000 }, T0 + 90 * S).reply.total).toBe(1);

    const coarse = harness();
    coarse.create({ geo: { enabled: true, precision: 'city' } });
    coarse.heartbeat({ subject: user('x'), geo: { lat: 48.8606, lon: 2.3376 } }, T0);
    const stored = coarse.list(T0).sessions[0].geo!;
    expect(stored).not.toEqual({ lat: 48.8606, lon: 2.3376 });
    expect(Math.abs(stored.lat - 48.8606)).toBeLessThan(0.03);
    expect(Math.abs(stored.lon - 2.3376)).toBeLessThan(0.03);
  });

  it('rejects bad coordinates and a negative radius', () => {
    const h = harness();
    h.create({ geo: { enabled: true } });
    expectServiceError(() => h.turn({ op: 'nearby', lat: 91, lon: 0, radius_meters: 1 }, T0), 'BAD_REQUEST');
    expectServiceError(() => h.turn({ op: 'nearby', lat: 0, lon: -181, radius_meters: 1 }, T0), 'BAD_REQUEST');
    expectServiceError(() => h.turn({ op: 'nearby', lat: 0, lon: 0, radius_meters: -1 }, T0), 'BAD_REQUEST');
    expectServiceError(() => h.heartbeat({ subject: user('a'), geo: { lat: 0, lon: 200 } }, T0), 'BAD_REQUEST');
  });
});

describe('reload from records', () => {
  it('a reloaded context answers exactly like the live one', () => {
    const h = harness();
    h.create({ geo: { enabled: true }, heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 } });
    h.heartbeat({ subject: user('a'), geo: { lat: 10, lon: 10 } }, T0);
    h.heartbeat({ subject: agent('b'), state: 'busy', geo: { lat: 10.001, lon: 10 } }, T0 + 5 * S);
    h.heartbeat({ subject: user('c'), observer: true }, T0 + 15 * S);
    h.sweep(T0 + 16 * S);
    const now = T0 + 22 * S;
    const before = { list: h.list(now), count: h.count(now), nearby: h.turn({ op: 'nearby', lat: 10, lon: 10, radius_meters: 1000 }, now).reply };
    h.reload();
    expect(h.list(now)).toEqual(before.list);
    expect(h.count(now)).toEqual(before.count);
    expect(h.turn({ op: 'nearby', lat: 10, lon: 10, radius_meters: 1000 }, now).reply).toEqual(before.nearby);
    // The reloaded queues still drive the right transitions.
    // a (last heartbeat 22 s ago) goes stale; b (17 s ago) stays idle.
    expect(h.sweep(now).reply.transitions).toEqual({ [h.list(now).sessions[0].session_id]: 'stale' });
  });
});

describe('property: counts always match a brute-force recount', () => {
  type Step =
    | { kind: 'open'; subject: number; agent: boolean; observer: boolean; state: number }
    | { kind: 'beat'; pick: number; state: number | null }
    | { kind: 'leave'; pick: number }
    | { kind: 'advance'; ms: number }
    | { kind: 'sweep' }
    | { kind: 'alarm' }
    | { kind: 'reload' };
  const states = ['available', 'thinking', 'busy', 'offline'] as const;
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.record({ kind: fc.constant('open' as const), subject: fc.nat(5), agent: fc.boolean(), observer: fc.boolean(), state: fc.nat(3) }),
    fc.record({ kind: fc.constant('beat' as const), pick: fc.nat(), state: fc.option(fc.nat(3)) }),
    fc.record({ kind: fc.constant('leave' as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 15_000 }) }),
    fc.constant({ kind: 'sweep' as const }),
    fc.constant({ kind: 'alarm' as const }),
    fc.constant({ kind: 'reload' as const }),
  );

  it('occupancy, by_state and list agree with each other and with the heartbeat arithmetic', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const h = harness();
        h.create({ capacity: { max_active: 6, overflow_policy: 'observe' }, heartbeat: { idle_after_seconds: 5, stale_after_seconds: 12, ttl_seconds: 20 } });
        let now = T0 + 123;
        /** The model: session -> last heartbeat, observer, state, kind. */
        const model = new Map<string, { last: number; observer: boolean; state: string; agent: boolean }>();
        for (const s of steps) {
          const live = [...model.entries()].filter(([, m]) => now - m.last < 20_000);
          switch (s.kind) {
            case 'open': {
              const r = h.heartbeat({ subject: s.agent ? agent(`s${s.subject}`) : user(`s${s.subject}`), observer: s.observer, state: states[s.state] }, now).reply;
              model.set(r.session_id, { last: now, observer: r.observer, state: states[s.state], agent: s.agent });
              break;
            }
            case 'beat': {
              if (live.length === 0) break;
              const [id, m] = live[s.pick % live.length];
              h.heartbeat({ session_id: id, ...(s.state !== null ? { state: states[s.state] } : {}) }, now);
              m.last = now;
              if (s.state !== null) m.state = states[s.state];
              break;
            }
            case 'leave': {
              if (live.length === 0) break;
              const [id] = live[s.pick % live.length];
              h.turn({ op: 'leave', session_id: id }, now);
              model.delete(id);
              break;
            }
            case 'advance':
              now += s.ms;
              break;
            case 'sweep':
              h.sweep(now);
              break;
            case 'alarm':
              h.fireAlarm(now);
              break;
            case 'reload':
              h.reload();
              break;
          }
          for (const [id, m] of model) if (now - m.last >= 20_000) model.delete(id);
          // The model's view of now.
          const activityOf = (last: number) => (now - last < 5000 ? 'active' : now - last < 12_000 ? 'idle' : 'stale');
          const participants = [...model.values()].filter((m) => !m.observer);
          const counted = h.count(now);
          expect(counted.occupancy.active).toBe(participants.filter((m) => activityOf(m.last) === 'active').length);
          expect(counted.occupancy.idle).toBe(participants.filter((m) => activityOf(m.last) === 'idle').length);
          expect(counted.occupancy.stale).toBe(participants.filter((m) => activityOf(m.last) === 'stale').length);
          expect(counted.occupancy.observers).toBe(model.size - participants.length);
          expect(counted.occupancy.total).toBe(model.size);
          expect(counted.occupancy.available_agents).toBe(participants.filter((m) => m.agent && m.state === 'available' && activityOf(m.last) === 'active').length);
          for (const state of states) expect(counted.by_state[state]).toBe(participants.filter((m) => m.state === state).length);
          expect(participants.length).toBeLessThanOrEqual(6);
          const listed = h.list(now, { limit: 1000 });
          expect(new Set(listed.sessions.map((v) => v.session_id))).toEqual(new Set(model.keys()));
          for (const v of listed.sessions) expect(v.activity).toBe(activityOf(model.get(v.session_id)!.last));
          // The alarm is never later than the next transition (rounded up to the second).
          const next = Math.min(...[...h.state.sessions.values()].map((x) => x.last_heartbeat_ms + ({ active: 5000, idle: 12_000, stale: 20_000 } as const)[x.activity]));
          if (h.state.sessions.size > 0 && h.alarm !== null) expect(h.alarm).toBeLessThanOrEqual(Math.ceil(next / 1000) * 1000);
          if (h.state.sessions.size > 0 && h.state.alarmDueMs !== null) expect(h.alarm).toBe(h.state.alarmDueMs);
        }
      }),
      { numRuns: 150 },
    );
  });
});
