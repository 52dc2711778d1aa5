import { afterEach, describe, expect, it } from 'vitest';
import { isServiceError } from '../../runtime/index.js';
import { waitingRoomActor, waitingRoomDirectoryActor } from '../../actors/waiting-rooms/actor.js';
import { waitingRoomDirectoryKey, waitingRoomKey, type AdmitView, type PositionView, type RoomMessage } from '../../actors/waiting-rooms/messages.js';
import { settle, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

/**
 * Scenarios through the real runtime on LMDB (manual clock): priority
 * ordering, capacity, bans across rooms, rejoin cooldown, and a restart that
 * keeps the line, the sessions and the admission alarm.
 */
let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.destroy();
  rt = undefined;
});

const TENANT = 'usr_scenario';
const ask = <R = any>(room_id: string, message: RoomMessage) => rt!.runtime.ask<R>('waiting-room', waitingRoomKey(TENANT, room_id), message);
const list = () => rt!.runtime.ask<{ total: number; rooms: { room_id: string }[] }>('waiting-room-directory', waitingRoomDirectoryKey(TENANT), { op: 'list', query: { page: 1, page_size: 50 } });
const globalBans = (member_id: string) => rt!.runtime.ask<string[]>('waiting-room-directory', waitingRoomDirectoryKey(TENANT), { op: 'global-bans', member_id });

async function fails(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (isServiceError(error)) return error.code;
    throw error;
  }
  throw new Error('expected the request to fail');
}

/**
 * Moves the manual clock in steps of at most `step_ms`. After each step a
 * round trip to every room makes sure the alarm turns that fell due have
 * committed (and re-armed their next alarm) before time moves on.
 */
async function advance(ms: number, rooms: string[], step_ms = 10_000): Promise<void> {
  for (let left = ms; left > 0; left -= step_ms) {
    rt!.clock.advance(Math.min(step_ms, left));
    await settle();
    for (const room_id of rooms) await ask(room_id, { op: 'get' });
  }
}

/** Waits (bounded, in real time) for outbox deliveries between actors to commit. */
async function until(condition: () => Promise<boolean>, what: string, timeout_ms = 5_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function banned(room_id: string, member_id: string): Promise<boolean> {
  try {
    await ask(room_id, { op: 'join', member_id });
    // A ban may land between the two: then the member is already out.
    await fails(ask(room_id, { op: 'leave', member_id })).catch(() => undefined);
    return false;
  } catch (error) {
    if (isServiceError(error) && error.code === 'waiting_room_member_banned') return true;
    throw error;
  }
}

function create(room_id: string, input: Record<string, unknown>) {
  return ask(room_id, {
    op: 'create',
    room_id,
    by: 'usr_scenario',
    input: { capacity: 100, admission_rate: { batch_size: 10, interval_seconds: 60 }, auto_admit: false, ...input },
  });
}

describe('waiting room scenarios', () => {
  it('a launch: VIPs first, FIFO otherwise, admissions bounded by capacity and freed by session expiry', async () => {
    rt = await startTestRuntime([waitingRoomActor, waitingRoomDirectoryActor]);
    await create('launch', {
      capacity: 3,
      session_ttl_seconds: 120,
      auto_admit: true,
      admission_rate: { batch_size: 2, interval_seconds: 30 },
      priority_groups: [{ name: 'vip', boost: 100, match_rules: { plan: { in: ['pro', 'enterprise'] } } }],
    });
    const joins = await Promise.all(
      ['u1', 'u2', 'p1', 'u3', 'p2', 'u4'].map((member_id) =>
        ask<PositionView>('launch', { op: 'join', member_id, metadata: { plan: member_id.startsWith('p') ? 'pro' : 'free' } }),
      ),
    );
    expect(joins.map((j) => j.priority_group)).toEqual(['default', 'default', 'vip', 'default', 'vip', 'default']);
    const line = await ask<{ members: { member_id: string }[] }>('launch', { op: 'members', status: 'waiting' });
    expect(line.members.map((m) => m.member_id)).toEqual(['p1', 'p2', 'u1', 'u2', 'u3', 'u4']);

    await advance(30_000, ['launch']); // tick 1: p1, p2
    await advance(30_000, ['launch']); // tick 2: u1 only (capacity 3)
    const active = await ask<{ members: { member_id: string }[] }>('launch', { op: 'members', status: 'active' });
    expect(active.members.map((m) => m.member_id)).toEqual(['p1', 'p2', 'u1']);
    expect((await ask<PositionView>('launch', { op: 'position', member_id: 'u2' })).position).toBe(1);

    // p1 and p2 were admitted at 30 s with a 120 s session: they end at 150 s, and the tick then admits two more.
    await advance(90_000, ['launch']);
    const after = await ask<{ members: { member_id: string }[] }>('launch', { op: 'members', status: 'active' });
    expect(after.members.map((m) => m.member_id)).toEqual(['u1', 'u2', 'u3']);
    const detail = await ask<{ statistics: Record<string, number> }>('launch', { op: 'get' });
    expect(detail.statistics).toMatchObject({ active_count: 3, waiting_count: 1, total_admitted: 5 });
  });

  it('bans: a room ban keeps a member out; a global ban reaches every room of the tenant, also rooms created later', async () => {
    rt = await startTestRuntime([waitingRoomActor, waitingRoomDirectoryActor]);
    const open = { anti_gaming: { join_rate_limit_max_attempts: 0, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 0 } };
    await create('a', open);
    await create('b', open);
    await until(async () => (await list()).total === 2, 'both rooms in the directory');
    expect((await list()).rooms.map((r) => r.room_id).sort()).toEqual(['a', 'b']);

    await ask('a', { op: 'join', member_id: 'troll' });
    await ask('b', { op: 'join', member_id: 'troll' });
    await ask('a', { op: 'ban', member_id: 'troll', reason: 'abuse', by: 'mod' });
    expect(await fails(ask('a', { op: 'join', member_id: 'troll' }))).toBe('waiting_room_member_banned');
    expect((await ask<PositionView>('b', { op: 'position', member_id: 'troll' })).status).toBe('waiting');
    expect(await globalBans('troll')).toEqual([]);

    await ask('a', { op: 'ban', member_id: 'troll', reason: 'abuse everywhere', global: true, by: 'mod' });
    await until(async () => (await ask<PositionView>('b', { op: 'position', member_id: 'troll' })).status === 'rejected', 'the global ban in room b');
    expect(await globalBans('troll')).toEqual(['a']);
    expect(await fails(ask('b', { op: 'join', member_id: 'troll' }))).toBe('waiting_room_member_banned');

    await create('c', open);
    await until(() => banned('c', 'troll'), 'the global ban synced to the new room c');

    await ask('a', { op: 'unban', member_id: 'troll' });
    await until(async () => !(await banned('c', 'troll')), 'the global ban lifted in room c');
    expect(await globalBans('troll')).toEqual([]);
    expect((await ask<PositionView>('c', { op: 'join', member_id: 'troll' })).status).toBe('waiting');

    // Deleting a room lifts its global bans and drops it from the list.
    await ask('a', { op: 'ban', member_id: 'bot', reason: 'bot', global: true, by: 'mod' });
    await until(() => banned('b', 'bot'), 'the second global ban in room b');
    await ask('a', { op: 'delete' });
    await until(async () => !(await banned('b', 'bot')), 'the global ban lifted by deleting room a');
    await until(async () => (await list()).total === 2, 'room a gone from the directory');
    expect((await list()).rooms.map((r) => r.room_id).sort()).toEqual(['b', 'c']);
  });

  it('rejoin cooldown: leaving or being rejected keeps a member out for rejoin_cooldown_seconds', async () => {
    rt = await startTestRuntime([waitingRoomActor, waitingRoomDirectoryActor]);
    await create('r', { anti_gaming: { rejoin_cooldown_seconds: 120, join_rate_limit_max_attempts: 100, join_rate_limit_window_seconds: 60 } });
    for (const member_id of ['a', 'b', 'c']) await ask('r', { op: 'join', member_id });
    await ask('r', { op: 'leave', member_id: 'a' });
    await ask('r', { op: 'reject', member_ids: ['b'], reason: 'duplicate account' });
    expect(await fails(ask('r', { op: 'join', member_id: 'a' }))).toBe('waiting_room_rejoin_cooldown');
    expect(await fails(ask('r', { op: 'join', member_id: 'b' }))).toBe('waiting_room_rejoin_cooldown');
    expect((await ask<PositionView>('r', { op: 'position', member_id: 'c' })).position).toBe(1);
    await advance(119_000, ['r']);
    expect(await fails(ask('r', { op: 'join', member_id: 'a' }))).toBe('waiting_room_rejoin_cooldown');
    await advance(1_000, ['r']);
    // Back at the end of the line.
    expect((await ask<PositionView>('r', { op: 'join', member_id: 'b' })).position).toBe(2);
    expect((await ask<PositionView>('r', { op: 'join', member_id: 'a' })).position).toBe(3);
  });

  it('a restart keeps the line, the sessions, the cooldowns and the admission alarm', async () => {
    rt = await startTestRuntime([waitingRoomActor, waitingRoomDirectoryActor]);
    await create('persist', {
      capacity: 10,
      auto_admit: true,
      session_ttl_seconds: 300,
      admission_rate: { batch_size: 2, interval_seconds: 60 },
      anti_gaming: { rejoin_cooldown_seconds: 600, join_rate_limit_max_attempts: 10, join_rate_limit_window_seconds: 60 },
      priority_groups: [{ name: 'vip', boost: 1 }],
    });
    for (const member_id of ['m1', 'm2', 'm3', 'm4', 'm5']) await ask('persist', { op: 'join', member_id });
    await ask('persist', { op: 'join', member_id: 'v1', priority_group: 'vip' });
    await ask('persist', { op: 'leave', member_id: 'm5' });
    await advance(60_000, ['persist']); // v1, m1 admitted
    const before = await ask('persist', { op: 'members' });

    rt = await rt.restart();
    expect(rt.runtime.pendingAlarmCount()).toBeGreaterThanOrEqual(2);
    expect(await ask('persist', { op: 'members' })).toEqual(before);
    expect(await fails(ask('persist', { op: 'join', member_id: 'm5' }))).toBe('waiting_room_rejoin_cooldown');
    // The admission alarm fires after the restart (a step of the clock, no admit request).
    await advance(60_000, ['persist'], 60_000);
    const admitted = await ask<{ members: { member_id: string }[] }>('persist', { op: 'members', status: 'active' });
    expect(admitted.members.map((m) => m.member_id)).toEqual(['v1', 'm1', 'm2', 'm3']);
    // And the session expiry alarm: v1 and m1 end at 360 s.
    await advance(240_000, ['persist']);
    const detail = await ask<{ statistics: Record<string, number> }>('persist', { op: 'get' });
    expect(detail.statistics.active_count).toBe(3);
    expect(detail.statistics.waiting_count).toBe(0);
  });

  it('an admit turn commits every admitted member before it answers', async () => {
    rt = await startTestRuntime([waitingRoomActor, waitingRoomDirectoryActor]);
    await create('big', { capacity: 10_000 });
    await Promise.all(Array.from({ length: 2000 }, (_, i) => ask('big', { op: 'join', member_id: `m${i}` })));
    const admitted = await ask<AdmitView>('big', { op: 'admit', count: 1000 });
    expect(admitted.admitted).toHaveLength(1000);
    expect(admitted.admitted[999].member_id).toBe('m999');
    rt = await rt.restart();
    const detail = await ask<{ statistics: Record<string, number> }>('big', { op: 'get' });
    expect(detail.statistics).toMatchObject({ active_count: 1000, waiting_count: 1000, total_admitted: 1000 });
    expect((await ask<PositionView>('big', { op: 'position', member_id: 'm1000' })).position).toBe(1);
  });
});
