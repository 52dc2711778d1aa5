import { describe, expect, it } from 'vitest';
import type { AdmitView, PositionView } from '../../actors/waiting-rooms/messages.js';
import { createRoom, RoomDriver, T0 } from './waiting-rooms-driver.js';

/** Pure step tests of one room: a fake clock, no runtime, no disk. */
const join = (d: RoomDriver, member_id: string, extra: Record<string, unknown> = {}) => d.send<PositionView>({ op: 'join', member_id, ...extra });
const position = (d: RoomDriver, member_id: string) => d.send<PositionView>({ op: 'position', member_id });

describe('room configuration', () => {
  it('creates a room with defaults and tells the tenant directory', () => {
    const d = new RoomDriver();
    const room = createRoom(d, { auto_admit: undefined, anti_gaming: undefined });
    expect(room).toMatchObject({
      room_id: 'room-1',
      capacity: 100,
      auto_admit: true,
      queue_strategy: 'fifo',
      status: 'active',
      session_ttl_seconds: 300,
      anti_gaming: { join_rate_limit_max_attempts: 10, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 30 },
      created_at: T0,
      created_by: 'usr_owner',
    });
    const [send] = d.takeSent();
    expect(send).toMatchObject({ kind: 'waiting-room-directory', key: JSON.stringify(['tenant-1']), message: { op: 'room-upsert', rev: 1 } });
    expect(d.error({ op: 'create', room_id: 'room-1', input: { capacity: 1, admission_rate: { batch_size: 1, interval_seconds: 1 } }, by: 'x' }).code).toBe('waiting_room_exists');
  });

  it.each([
    [{ capacity: 0 }, 'body.capacity'],
    [{ capacity: -5 }, 'body.capacity'],
    [{ admission_rate: { batch_size: -1, interval_seconds: 10 } }, 'body.admission_rate.batch_size'],
    [{ admission_rate: { batch_size: 1, interval_seconds: 0 } }, 'body.admission_rate.interval_seconds'],
    [{ session_ttl_seconds: -1 }, 'body.session_ttl_seconds'],
    [{ anti_gaming: { rejoin_cooldown_seconds: -3 } }, 'body.anti_gaming.rejoin_cooldown_seconds'],
    [{ queue_strategy: 'lifo' }, 'body.queue_strategy'],
    [{ status: 'closed' }, 'body.status'],
    [{ priority_groups: [{ name: 'vip', boost: -1 }] }, 'body.priority_groups.0.boost'],
    [{ priority_groups: [{ name: 'vip' }, { name: 'vip' }] }, 'body.priority_groups.1.name'],
    [{ priority_groups: [{ name: 'vip', match_rules: { tier: { like: 'g' } } }] }, 'body.priority_groups.0.match_rules.tier.like'],
    [{ priority_groups: [{ name: 'default', match_rules: { a: 1 } }] }, 'body.priority_groups.0.match_rules'],
  ])('refuses %j with 400 naming %s', (overrides, field) => {
    const d = new RoomDriver();
    const error = d.error({ op: 'create', room_id: 'room-1', input: { capacity: 10, admission_rate: { batch_size: 1, interval_seconds: 1 }, ...overrides }, by: 'u' });
    expect(error.code).toBe('BAD_REQUEST');
    expect(error.details).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
    expect(d.state.config).toBeNull();
    expect(d.records.size).toBe(0);
  });

  it('refuses a reserved room id and a missing capacity', () => {
    const reserved = new RoomDriver('t', 'global-bans');
    expect(reserved.error({ op: 'create', room_id: 'global-bans', input: { capacity: 1, admission_rate: { batch_size: 1, interval_seconds: 1 } }, by: 'u' }).code).toBe('BAD_REQUEST');
    const d = new RoomDriver();
    const error = d.error({ op: 'create', room_id: 'room-1', input: { admission_rate: { batch_size: 1, interval_seconds: 1 } }, by: 'u' });
    expect(error.details).toEqual([{ field: 'body.capacity', message: 'is required' }]);
  });

  it('answers 404 for every operation on a room that does not exist', () => {
    const d = new RoomDriver();
    for (const message of [{ op: 'get' }, { op: 'join', member_id: 'a' }, { op: 'admit' }, { op: 'delete' }] as const) {
      expect(d.error(message as never).code).toBe('not_found');
    }
  });

  it('replace merges fields, rebuilds the line when boosts change and moves members of removed groups to default', () => {
    const d = new RoomDriver();
    createRoom(d, { priority_groups: [{ name: 'vip', boost: 5 }, { name: 'late', boost: 0 }] });
    join(d, 'a');
    join(d, 'b', { priority_group: 'late' });
    join(d, 'v', { priority_group: 'vip' });
    expect(position(d, 'v').position).toBe(1);
    d.takeSent();
    d.skip(1000);
    const updated = d.send({ op: 'replace', input: { capacity: 7, priority_groups: [{ name: 'late', boost: 9 }] } });
    expect(updated).toMatchObject({ capacity: 7, admission_rate: { batch_size: 10, interval_seconds: 60 }, updated_at: T0 + 1000, created_at: T0 });
    expect(position(d, 'b')).toMatchObject({ position: 1, priority_effective: 9, priority_group: 'late' });
    expect(position(d, 'a').position).toBe(2);
    expect(position(d, 'v')).toMatchObject({ position: 3, priority_group: 'default', priority_effective: 0 });
    expect(d.takeSent()[0].message).toMatchObject({ op: 'room-upsert', rev: 2, summary: { capacity: 7 } });
    d.reload();
    expect(position(d, 'v')).toMatchObject({ position: 3, priority_group: 'default' });
  });
});

describe('joining and position', () => {
  it('serves first come first served and writes one record per join', () => {
    const d = new RoomDriver();
    createRoom(d);
    for (let i = 1; i <= 5; i++) {
      d.skip(1000);
      const view = join(d, `m${i}`);
      expect(view).toMatchObject({ status: 'waiting', position: i, ahead_count: i - 1, priority_group: 'default', joined_at: d.now });
      expect(d.lastWrites.map((w) => w.subkey)).toEqual([`m:m${i}`]);
    }
    expect(position(d, 'm3')).toMatchObject({ position: 3, ahead_count: 2 });
    expect(d.lastWrites).toEqual([]);
    d.send({ op: 'leave', member_id: 'm2' });
    expect(position(d, 'm3').position).toBe(2);
    expect(position(d, 'm5').position).toBe(4);
  });

  it('a repeat join returns the current entry unchanged', () => {
    const d = new RoomDriver();
    createRoom(d);
    join(d, 'a');
    join(d, 'b');
    d.skip(5000);
    expect(join(d, 'a', { metadata: { x: 1 } })).toMatchObject({ position: 1, joined_at: T0 });
  });

  it('orders by priority group boost, matching rules on metadata, FIFO within a boost', () => {
    const d = new RoomDriver();
    createRoom(d, {
      priority_groups: [
        { name: 'gold', boost: 10, match_rules: { tier: 'gold' } },
        { name: 'staff', boost: 10, match_rules: [{ role: 'staff' }, { role: { in: ['admin'] } }] },
        { name: 'press', boost: 5, match_rules: null },
      ],
    });
    expect(join(d, 'plain-1').priority_group).toBe('default');
    expect(join(d, 'gold-1', { metadata: { tier: 'gold' } })).toMatchObject({ priority_group: 'gold', position: 1 });
    expect(join(d, 'press-1', { priority_group: 'press' })).toMatchObject({ priority_group: 'press', position: 2 });
    expect(join(d, 'staff-1', { metadata: { role: 'admin' } })).toMatchObject({ priority_group: 'staff', position: 2 });
    expect(join(d, 'plain-2', { metadata: { tier: 'silver' } }).position).toBe(5);
    expect(position(d, 'gold-1')).toMatchObject({ position: 1, priority_effective: 10 });
    expect(position(d, 'press-1').position).toBe(3);
    expect(position(d, 'plain-1').position).toBe(4);
  });

  it('refuses an unknown priority group and a group whose rules the metadata fails', () => {
    const d = new RoomDriver();
    createRoom(d, { priority_groups: [{ name: 'gold', boost: 10, match_rules: { tier: 'gold' } }] });
    expect(d.error({ op: 'join', member_id: 'a', priority_group: 'platinum' })).toMatchObject({ code: 'BAD_REQUEST', details: [{ field: 'body.priority_group' }] });
    expect(d.error({ op: 'join', member_id: 'a', priority_group: 'gold', metadata: { tier: 'bronze' } }).code).toBe('BAD_REQUEST');
    expect(join(d, 'a', { priority_group: 'gold', metadata: { tier: 'gold' } }).priority_group).toBe('gold');
  });

  it('estimates the wait from the configured rate, then from the observed admission rate', () => {
    const d = new RoomDriver();
    createRoom(d, { admission_rate: { batch_size: 2, interval_seconds: 10 } });
    for (let i = 1; i <= 20; i++) join(d, `m${i}`);
    // Nothing admitted yet: the configured 2 per 10 s, so position 20 waits 100 s.
    expect(position(d, 'm20').estimated_wait_seconds).toBe(100);
    d.skip(60_000);
    d.send({ op: 'admit', count: 12 });
    // 12 admitted over the room's 60 s: 0.2/s; position 8 waits 40 s.
    expect(position(d, 'm20')).toMatchObject({ position: 8, estimated_wait_seconds: 40 });
    expect(d.send({ op: 'get' }).statistics.current_admission_rate).toBeCloseTo(0.2);
    // Ten minutes later the window no longer sees those admissions.
    d.skip(11 * 60_000);
    expect(position(d, 'm20').estimated_wait_seconds).toBe(40);
    expect(d.send({ op: 'get' }).statistics.current_admission_rate).toBe(0);
  });
});

describe('admission', () => {
  it('admits batch_size members every interval_seconds when auto_admit, with a durable alarm', () => {
    const d = new RoomDriver();
    createRoom(d, { auto_admit: true, capacity: 5, admission_rate: { batch_size: 2, interval_seconds: 10 } });
    expect(d.alarms.size).toBe(0);
    for (let i = 1; i <= 7; i++) join(d, `m${i}`);
    expect(d.alarms.get('tick')).toBe(T0 + 10_000);
    d.advance(10_000);
    expect(position(d, 'm1').status).toBe('active');
    expect(position(d, 'm2').status).toBe('active');
    expect(position(d, 'm3')).toMatchObject({ status: 'waiting', position: 1 });
    expect(d.alarms.get('tick')).toBe(T0 + 20_000);
    d.advance(20_000);
    // Capacity 5: the third tick admits one member only.
    const detail = d.send({ op: 'get' });
    expect(detail.statistics).toMatchObject({ active_count: 5, waiting_count: 2, total_admitted: 5 });
    expect(position(d, 'm6').position).toBe(1);
    // Still ticking while members wait (they are admitted as capacity frees up).
    expect(d.alarms.has('tick')).toBe(true);
  });

  it('stops ticking when the line is empty or the room is paused, and starts again on join / resume', () => {
    const d = new RoomDriver();
    createRoom(d, { auto_admit: true, admission_rate: { batch_size: 5, interval_seconds: 10 } });
    join(d, 'a');
    d.advance(10_000);
    expect(position(d, 'a').status).toBe('active');
    expect(d.alarms.has('tick')).toBe(false);
    d.send({ op: 'replace', input: { status: 'paused' } });
    join(d, 'b');
    expect(d.alarms.has('tick')).toBe(false);
    d.advance(60_000);
    expect(position(d, 'b').status).toBe('waiting');
    d.send({ op: 'replace', input: { status: 'active' } });
    expect(d.alarms.get('tick')).toBe(d.now + 10_000);
    d.advance(10_000);
    expect(position(d, 'b').status).toBe('active');
  });

  it('manual admit takes count (default batch_size) within capacity and reports capacity_reached', () => {
    const d = new RoomDriver();
    createRoom(d, { capacity: 3, admission_rate: { batch_size: 2, interval_seconds: 60 } });
    for (let i = 1; i <= 5; i++) join(d, `m${i}`);
    d.skip(30_000);
    const first = d.send<AdmitView>({ op: 'admit' });
    expect(first).toEqual({
      admitted: [
        { member_id: 'm1', admitted_at: d.now, wait_time_seconds: 30 },
        { member_id: 'm2', admitted_at: d.now, wait_time_seconds: 30 },
      ],
      capacity_reached: false,
      failed: [],
    });
    const second = d.send<AdmitView>({ op: 'admit', count: 10 });
    expect(second.admitted.map((a) => a.member_id)).toEqual(['m3']);
    expect(second.capacity_reached).toBe(true);
    expect(d.send<AdmitView>({ op: 'admit', member_ids: ['m4', 'm1', 'nobody'] }).failed).toEqual([
      { member_id: 'm4', reason: 'capacity_reached' },
      { member_id: 'm1', reason: 'not_waiting' },
      { member_id: 'nobody', reason: 'not_waiting' },
    ]);
    expect(d.error({ op: 'admit', count: 0 }).code).toBe('BAD_REQUEST');
  });

  it('an admit turn writes one batch record, which later member writes supersede and which goes when unused', () => {
    const d = new RoomDriver();
    createRoom(d, { session_ttl_seconds: 60 });
    for (const id of ['a', 'b', 'c', 'd']) join(d, id);
    d.skip(1000);
    d.send({ op: 'admit', count: 3 });
    const subkeys = d.lastWrites.map((w) => w.subkey);
    expect(subkeys.filter((k) => k.startsWith('m:'))).toEqual([]);
    const batches = subkeys.filter((k) => k.startsWith('a:'));
    expect(batches).toHaveLength(1);
    expect(d.records.get(batches[0])).toEqual({ admitted_at: T0 + 1000, expires_at: T0 + 61_000, members: [['a', 5], ['b', 6], ['c', 7]] });
    // The member records still say waiting; the batch overrides them on load.
    expect(d.records.get('m:a')).toMatchObject({ status: 'waiting' });
    d.reload();
    expect(position(d, 'a')).toMatchObject({ status: 'active', expires_at: T0 + 61_000 });
    expect(position(d, 'd')).toMatchObject({ status: 'waiting', position: 1 });
    d.skip(1000);
    d.send({ op: 'refresh', member_id: 'a' });
    expect(d.records.get('m:a')).toMatchObject({ status: 'active', expires_at: T0 + 62_000, seq: 5 });
    d.reload();
    expect(position(d, 'a').expires_at).toBe(T0 + 62_000);
    expect(position(d, 'b').expires_at).toBe(T0 + 61_000);
    // b and c expire; a (refreshed) no longer relies on the batch: it is deleted.
    d.advance(59_500);
    expect(d.records.has(batches[0])).toBe(false);
    expect(d.send({ op: 'get' }).statistics.active_count).toBe(1);
    d.reload();
    expect(d.send({ op: 'members', status: 'active' }).members.map((m: { member_id: string }) => m.member_id)).toEqual(['a']);
  });

  it('group admit takes the group members in line order, bypassing other groups', () => {
    const d = new RoomDriver();
    createRoom(d, { priority_groups: [{ name: 'vip', boost: 10 }, { name: 'late', boost: 0 }] });
    join(d, 'a');
    join(d, 'l1', { priority_group: 'late' });
    join(d, 'v1', { priority_group: 'vip' });
    join(d, 'l2', { priority_group: 'late' });
    const admitted = d.send<AdmitView>({ op: 'admit', group: 'late', count: 5 });
    expect(admitted.admitted.map((a) => a.member_id)).toEqual(['l1', 'l2']);
    expect(position(d, 'v1').position).toBe(1);
    expect(d.error({ op: 'admit', group: 'nope' }).code).toBe('not_found');
  });

  it('group status counts waiting and active members and averages their positions', () => {
    const d = new RoomDriver();
    createRoom(d, { capacity: 10, priority_groups: [{ name: 'late', boost: 0 }, { name: 'vip', boost: 3 }] });
    join(d, 'a'); // default
    join(d, 'l1', { priority_group: 'late' });
    join(d, 'b'); // default
    join(d, 'l2', { priority_group: 'late' });
    join(d, 'v', { priority_group: 'vip' });
    // Line: v(1) a(2) l1(3) b(4) l2(5)
    const status = d.send({ op: 'group-status', group_id: 'late' });
    expect(status).toMatchObject({ group_id: 'late', members_waiting: 2, members_active: 0, total_members: 2, average_position: 4, can_be_admitted: true });
    expect(status.members.map((m: { member_id: string; position: number }) => [m.member_id, m.position])).toEqual([['l1', 3], ['l2', 5]]);
    d.send({ op: 'admit', member_ids: ['l1'] });
    expect(d.send({ op: 'group-status', group_id: 'late' })).toMatchObject({ members_waiting: 1, members_active: 1, average_position: 4 });
    expect(d.send({ op: 'group-status', group_id: 'default' })).toMatchObject({ members_waiting: 2, average_position: 3 });
    expect(d.error({ op: 'group-status', group_id: 'ghost' }).code).toBe('not_found');
  });
});

describe('active sessions', () => {
  it('expire after session_ttl_seconds; reads are exact before the alarm fires', () => {
    const d = new RoomDriver();
    createRoom(d, { capacity: 1, session_ttl_seconds: 30 });
    join(d, 'a');
    join(d, 'b');
    d.send({ op: 'admit' });
    expect(d.alarms.get('sessions')).toBe(T0 + 30_000);
    expect(d.send<AdmitView>({ op: 'admit' }).admitted).toEqual([]);
    d.skip(30_000);
    // No alarm delivered: the read still sees the session over.
    expect(d.error({ op: 'position', member_id: 'a' }).code).toBe('not_found');
    expect(d.send({ op: 'get' }).statistics.active_count).toBe(0);
    expect(d.send<AdmitView>({ op: 'admit' }).admitted.map((x) => x.member_id)).toEqual(['b']);
  });

  it('the sessions alarm ends expired sessions without any other traffic', () => {
    const d = new RoomDriver();
    createRoom(d, { session_ttl_seconds: 30 });
    join(d, 'a');
    d.send({ op: 'admit' });
    d.advance(30_000);
    expect(d.records.get('m:a')).toMatchObject({ status: 'ended', expires_at: null });
    expect(d.alarms.has('sessions')).toBe(false);
    // The ledger stays while its join-rate window runs (60 s from the join), then housekeeping drops it.
    expect(d.alarms.has('gc')).toBe(true);
    d.advance(90_000);
    expect(d.records.has('m:a')).toBe(false);
    // What is left to purge is the hour of analytics, in 90 days.
    expect(d.alarms.get('gc')).toBeGreaterThan(d.now + 89 * 86_400_000);
  });

  it('refresh extends an active session; a waiting member gets 409, others 404', () => {
    const d = new RoomDriver();
    createRoom(d, { session_ttl_seconds: 30 });
    join(d, 'a');
    join(d, 'b');
    d.send({ op: 'admit', member_ids: ['a'] });
    d.skip(20_000);
    expect(d.send({ op: 'refresh', member_id: 'a' })).toEqual({ new_expiry: d.now + 30_000 });
    d.advance(20_000);
    expect(position(d, 'a')).toMatchObject({ status: 'active', expires_at: T0 + 50_000 });
    d.advance(10_000);
    expect(d.error({ op: 'position', member_id: 'a' }).code).toBe('not_found');
    expect(d.error({ op: 'refresh', member_id: 'b' }).code).toBe('waiting_room_member_not_active');
    expect(d.error({ op: 'refresh', member_id: 'zz' }).code).toBe('not_found');
  });
});

describe('anti-gaming', () => {
  it('rejoin cooldown after leave and after reject, with Retry-After', () => {
    const d = new RoomDriver();
    createRoom(d, { anti_gaming: { rejoin_cooldown_seconds: 60 } });
    join(d, 'a');
    join(d, 'b');
    d.send({ op: 'leave', member_id: 'a' });
    d.skip(10_000);
    const error = d.error({ op: 'join', member_id: 'a' });
    expect(error.code).toBe('waiting_room_rejoin_cooldown');
    expect(error.retryAfterSeconds).toBe(50);
    d.send({ op: 'reject', member_ids: ['b', 'ghost'], reason: 'bot' });
    expect(position(d, 'b')).toMatchObject({ status: 'rejected', rejection_reason: 'bot', position: 0 });
    expect(d.error({ op: 'join', member_id: 'b' }).code).toBe('waiting_room_rejoin_cooldown');
    d.skip(50_000);
    expect(join(d, 'a').status).toBe('waiting');
    d.skip(10_000);
    expect(join(d, 'b')).toMatchObject({ status: 'waiting', position: 2 });
  });

  it('limits join attempts per member per window', () => {
    const d = new RoomDriver();
    createRoom(d, { anti_gaming: { join_rate_limit_max_attempts: 3, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 0 } });
    join(d, 'a');
    d.skip(1000);
    join(d, 'a');
    d.send({ op: 'leave', member_id: 'a' });
    join(d, 'a');
    d.skip(1000);
    const error = d.error({ op: 'join', member_id: 'a' });
    expect(error.code).toBe('rate_limited');
    expect(error.retryAfterSeconds).toBe(58);
    // Other members are not affected; the window survives a reload.
    expect(join(d, 'b').position).toBe(2);
    d.reload();
    expect(d.error({ op: 'join', member_id: 'a' }).code).toBe('rate_limited');
    d.skip(58_000);
    expect(join(d, 'a').position).toBe(1);
  });
});

describe('bans', () => {
  it('a ban removes the member, blocks joins until it expires, and can be lifted', () => {
    const d = new RoomDriver();
    createRoom(d);
    join(d, 'a');
    join(d, 'b');
    const ban = d.send({ op: 'ban', member_id: 'a', reason: 'abuse', duration_seconds: 600, by: 'usr_mod' });
    expect(ban).toMatchObject({ member_id: 'a', room_id: 'room-1', reason: 'abuse', banned_by: 'usr_mod', banned_at: T0, banned_until: T0 + 600_000, global: false, active: true });
    expect(position(d, 'b').position).toBe(1);
    expect(d.error({ op: 'join', member_id: 'a' }).code).toBe('waiting_room_member_banned');
    expect(d.send({ op: 'list-bans', include_expired: false }).map((b: { member_id: string }) => b.member_id)).toEqual(['a']);
    d.skip(600_000);
    expect(d.send({ op: 'list-bans', include_expired: false })).toEqual([]);
    expect(d.send({ op: 'list-bans', include_expired: true })).toEqual([expect.objectContaining({ member_id: 'a', active: false })]);
    expect(d.send({ op: 'get-ban', member_id: 'a' })).toMatchObject({ active: false });
    expect(join(d, 'a').position).toBe(2);
    d.send({ op: 'ban', member_id: 'c', reason: 'spam', by: 'u' });
    expect(d.send({ op: 'get-ban', member_id: 'c' })).toMatchObject({ banned_until: null, active: true });
    d.send({ op: 'unban', member_id: 'c' });
    expect(d.send({ op: 'get-ban', member_id: 'c' })).toBeNull();
    expect(d.error({ op: 'unban', member_id: 'c' }).code).toBe('not_found');
  });

  it('holds at most bans_max bans per room (409 waiting_room_limit_reached); replacing a ban is always allowed', () => {
    const d = new RoomDriver();
    createRoom(d);
    for (let i = 0; i < 10_000; i++) d.send({ op: 'ban', member_id: `b${i}`, reason: 'r', by: 'u' });
    expect(d.error({ op: 'ban', member_id: 'one-more', reason: 'r', by: 'u' }).code).toBe('waiting_room_limit_reached');
    expect(d.send({ op: 'ban', member_id: 'b7', reason: 'new reason', by: 'u' })).toMatchObject({ reason: 'new reason' });
    d.send({ op: 'unban', member_id: 'b0' });
    expect(d.send({ op: 'ban', member_id: 'one-more', reason: 'r', by: 'u' }).member_id).toBe('one-more');
  });

  it('expired bans are purged by housekeeping after their retention', () => {
    const d = new RoomDriver();
    createRoom(d);
    d.send({ op: 'ban', member_id: 'a', reason: 'x', duration_seconds: 60, by: 'u' });
    expect(d.alarms.has('gc')).toBe(true);
    d.advance(31 * 86_400_000);
    expect(d.records.has('b:a')).toBe(false);
    expect(d.send({ op: 'list-bans', include_expired: true })).toEqual([]);
  });

  it('a global ban is sent to the directory, and bans from other rooms apply here', () => {
    const d = new RoomDriver();
    createRoom(d);
    d.takeSent();
    d.send({ op: 'ban', member_id: 'g', reason: 'fraud', global: true, by: 'u' });
    expect(d.takeSent()).toEqual([
      expect.objectContaining({ message: { op: 'global-ban', member_id: 'g', origin_room_id: 'room-1', banned_until: null } }),
    ]);
    d.send({ op: 'unban', member_id: 'g' });
    expect(d.takeSent()[0].message).toEqual({ op: 'global-unban', member_id: 'g', origin_room_id: 'room-1' });

    join(d, 'x');
    d.send({ op: 'admit' });
    d.send({ op: 'global-ban-apply', member_id: 'x', origin_room_id: 'other', banned_until: T0 + 60_000 });
    expect(position(d, 'x')).toMatchObject({ status: 'rejected', rejection_reason: 'banned (global ban from room other)' });
    expect(d.send({ op: 'get' }).statistics.active_count).toBe(0);
    expect(d.error({ op: 'join', member_id: 'x' }).code).toBe('waiting_room_member_banned');
    d.send({ op: 'global-ban-remove', member_id: 'x', origin_room_id: 'other' });
    expect(join(d, 'x').status).toBe('waiting');
    d.send({ op: 'global-bans-sync', bans: [{ member_id: 'x', origin_room_id: 'r9', banned_until: null }] });
    expect(position(d, 'x')).toMatchObject({ status: 'rejected' });
    d.reload();
    expect(d.error({ op: 'join', member_id: 'x' }).code).toBe('waiting_room_member_banned');
    d.send({ op: 'global-bans-sync', bans: [] });
    expect(d.records.has('g:' + JSON.stringify(['x', 'r9']))).toBe(false);
  });
});

describe('members, analytics, deletion and persistence', () => {
  it('lists waiting members in line order then active ones, with offset and limit', () => {
    const d = new RoomDriver();
    createRoom(d, { priority_groups: [{ name: 'vip', boost: 1 }] });
    join(d, 'a', { metadata: { k: 1 } });
    join(d, 'b');
    join(d, 'v', { priority_group: 'vip' });
    join(d, 'c');
    d.send({ op: 'admit', member_ids: ['b'] });
    const all = d.send({ op: 'members' });
    expect(all.total).toBe(4);
    expect(all.members.map((m: { member_id: string; position: number; status: string }) => [m.member_id, m.position, m.status])).toEqual([
      ['v', 1, 'waiting'],
      ['a', 2, 'waiting'],
      ['c', 3, 'waiting'],
      ['b', 0, 'active'],
    ]);
    expect(all.members[1]).toMatchObject({ metadata: { k: 1 }, group_id: 'default', priority: 0, room_id: 'room-1' });
    expect(d.send({ op: 'members', offset: 2, limit: 2 }).members.map((m: { member_id: string }) => m.member_id)).toEqual(['c', 'b']);
    expect(d.send({ op: 'members', status: 'active' })).toMatchObject({ total: 1, members: [{ member_id: 'b', admitted_at: T0 }] });
    expect(d.send({ op: 'members', status: 'waiting', offset: 1, limit: 1 })).toMatchObject({ total: 3, limit: 1, offset: 1, members: [{ member_id: 'a' }] });
  });

  it('records hourly analytics with a summary', () => {
    const d = new RoomDriver();
    createRoom(d, { capacity: 100 });
    for (const id of ['a', 'b', 'c', 'd', 'e']) join(d, id);
    d.skip(20_000);
    d.send({ op: 'admit', member_ids: ['a'] });
    d.skip(3_600_000);
    d.send({ op: 'admit', member_ids: ['b'] });
    d.send({ op: 'reject', member_ids: ['c'], reason: 'no' });
    d.send({ op: 'leave', member_id: 'd' });
    const report = d.send({ op: 'analytics', start_ms: T0, end_ms: d.now + 1 });
    expect(report.hourly_stats).toEqual([
      { hour: T0, admissions: 1, rejections: 0, abandonments: 0, average_wait_time_seconds: 20 },
      { hour: T0 + 3_600_000, admissions: 1, rejections: 1, abandonments: 1, average_wait_time_seconds: 3620 },
    ]);
    expect(report.summary).toEqual({
      abandonment_rate: 0.25,
      admission_rate: 0.5,
      average_wait_time_seconds: 1820,
      max_wait_time_seconds: 3620,
      min_wait_time_seconds: 20,
      rejection_rate: 0.25,
      total_abandonments: 1,
      total_admissions: 2,
      total_rejections: 1,
    });
    expect(d.send({ op: 'analytics', start_ms: T0, end_ms: d.now + 1, limit: 1 }).hourly_stats).toHaveLength(1);
    expect(d.error({ op: 'analytics', start_ms: d.now, end_ms: T0 }).code).toBe('BAD_REQUEST');
    expect(d.send({ op: 'get' }).statistics).toMatchObject({ total_admitted: 2, average_wait_seconds: 1820 });
  });

  it('delete removes every record but the revision, cancels alarms and tells the directory', () => {
    const d = new RoomDriver();
    createRoom(d, { auto_admit: true, session_ttl_seconds: 30 });
    join(d, 'a');
    join(d, 'b');
    d.send({ op: 'admit', count: 1 });
    d.send({ op: 'ban', member_id: 'z', reason: 'r', global: true, by: 'u' });
    d.takeSent();
    expect(d.alarms.size).toBeGreaterThan(0);
    d.send({ op: 'delete' });
    expect([...d.records.keys()]).toEqual(['c:rev']);
    expect(d.alarms.size).toBe(0);
    expect(d.takeSent().map((s) => s.message)).toEqual([
      { op: 'global-unban', member_id: 'z', origin_room_id: 'room-1' },
      { op: 'room-remove', room_id: 'room-1', rev: 2 },
    ]);
    expect(d.error({ op: 'get' }).code).toBe('not_found');
    createRoom(d);
    expect(d.takeSent()[0].message).toMatchObject({ op: 'room-upsert', rev: 3 });
    expect(d.send({ op: 'members' }).total).toBe(0);
  });

  it('delete also removes a member whose session ended in the same turn', () => {
    const d = new RoomDriver();
    createRoom(d, { session_ttl_seconds: 30 });
    join(d, 'a');
    d.send({ op: 'admit' });
    d.skip(61_000);
    d.send({ op: 'delete' });
    expect([...d.records.keys()]).toEqual(['c:rev']);
  });

  it('a reload from the stored records gives back the same room', () => {
    const d = new RoomDriver();
    createRoom(d, { capacity: 2, auto_admit: true, admission_rate: { batch_size: 1, interval_seconds: 10 }, priority_groups: [{ name: 'vip', boost: 2 }] });
    for (const id of ['a', 'b', 'c']) join(d, id);
    join(d, 'v', { priority_group: 'vip' });
    d.advance(10_000);
    d.send({ op: 'ban', member_id: 'c', reason: 'r', duration_seconds: 100, by: 'u' });
    const before = { members: d.send({ op: 'members' }), detail: d.send({ op: 'get' }), alarms: d.state.alarms };
    d.reload();
    expect(d.send({ op: 'members' })).toEqual(before.members);
    expect(d.send({ op: 'get' })).toEqual(before.detail);
    expect(d.state.alarms).toEqual(before.alarms);
    d.advance(10_000);
    expect(position(d, 'a').status).toBe('active');
  });
});
