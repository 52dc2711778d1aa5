import { describe, expect, it } from 'vitest';
import { isServiceError, type ActorSend, type RecordWrite } from '../../runtime/index.js';
import { loadDirectory, stepDirectory, type DirectoryMessage, type DirectoryState, type RoomListQuery } from '../../actors/waiting-rooms/directory.js';
import type { RoomSummary } from '../../actors/waiting-rooms/state.js';

/** The tenant directory (room index and global bans): pure step tests. */
const KEY = JSON.stringify(['tenant-1']);
const T0 = Date.UTC(2026, 0, 1);

class Directory {
  now = T0;
  state: DirectoryState = loadDirectory(KEY, []);
  records = new Map<string, unknown>();
  sent: ActorSend[] = [];
  send<Reply = any>(message: DirectoryMessage): Reply {
    const result = stepDirectory(this.state, message, { now: this.now, kind: 'waiting-room-directory', key: KEY, request_id: null, newId: () => 'id' });
    this.state = result.state;
    for (const write of (result.writes ?? []) as RecordWrite[]) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, write.value);
    }
    this.sent.push(...(result.sends ?? []));
    return result.reply as Reply;
  }
  reload(): void {
    this.state = loadDirectory(KEY, [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
  }
  take(): ActorSend[] {
    const sent = this.sent;
    this.sent = [];
    return sent;
  }
}

function summary(room_id: string, overrides: Partial<RoomSummary> = {}): RoomSummary {
  return { room_id, auto_admit: true, capacity: 100, created_at: T0, created_by: 'usr_a', queue_strategy: 'fifo', status: 'active', updated_at: T0, ...overrides };
}

const list = (d: Directory, query: Partial<RoomListQuery> = {}) =>
  d.send<{ total: number; rooms: RoomSummary[] }>({ op: 'list', query: { page: 1, page_size: 20, ...query } });
const ids = (view: { rooms: RoomSummary[] }) => view.rooms.map((r) => r.room_id);

describe('waiting room directory', () => {
  it('applies room changes in revision order, whatever order they arrive in', () => {
    const d = new Directory();
    d.send({ op: 'room-upsert', rev: 2, summary: summary('a', { capacity: 20 }) });
    d.send({ op: 'room-upsert', rev: 1, summary: summary('a', { capacity: 10 }) });
    expect(list(d).rooms[0].capacity).toBe(20);
    d.send({ op: 'room-remove', room_id: 'a', rev: 3 });
    d.send({ op: 'room-upsert', rev: 2, summary: summary('a') });
    expect(list(d).total).toBe(0);
    d.send({ op: 'room-upsert', rev: 4, summary: summary('a', { capacity: 40 }) });
    d.reload();
    expect(list(d).rooms).toEqual([summary('a', { capacity: 40 })]);
    expect(d.records.has('t:a')).toBe(false);
  });

  it('filters, searches, sorts and pages', () => {
    const d = new Directory();
    d.send({ op: 'room-upsert', rev: 1, summary: summary('launch-eu', { capacity: 500, created_at: T0 + 1, updated_at: T0 + 9 }) });
    d.send({ op: 'room-upsert', rev: 1, summary: summary('launch-us', { capacity: 50, created_at: T0 + 2, status: 'paused', created_by: 'usr_b' }) });
    d.send({ op: 'room-upsert', rev: 1, summary: summary('checkout', { capacity: 5, created_at: T0 + 3 }) });
    expect(ids(list(d))).toEqual(['checkout', 'launch-us', 'launch-eu']);
    expect(ids(list(d, { sort_order: 'asc' }))).toEqual(['launch-eu', 'launch-us', 'checkout']);
    expect(ids(list(d, { sort_by: 'capacity', sort_order: 'asc' }))).toEqual(['checkout', 'launch-us', 'launch-eu']);
    expect(ids(list(d, { sort_by: 'updated_at' }))[0]).toBe('launch-eu');
    expect(ids(list(d, { q: 'LAUNCH' }))).toEqual(['launch-us', 'launch-eu']);
    expect(ids(list(d, { filters: [{ field: 'status', operator: 'eq', value: 'paused' }] }))).toEqual(['launch-us']);
    expect(ids(list(d, { filters: [{ field: 'capacity', operator: 'gte', value: '50' }] }))).toEqual(['launch-us', 'launch-eu']);
    expect(ids(list(d, { filters: [{ field: 'capacity', operator: 'in', value: '5|500' }] }))).toEqual(['checkout', 'launch-eu']);
    expect(ids(list(d, { filters: [{ field: 'created_by', operator: 'ne', value: 'usr_b' }, { field: 'capacity', operator: 'lt', value: '100' }] }))).toEqual(['checkout']);
    expect(ids(list(d, { filters: [{ field: 'created_by', operator: 'contains', value: '_b' }] }))).toEqual(['launch-us']);
    const page = list(d, { page: 2, page_size: 2 });
    expect(page).toMatchObject({ total: 3 });
    expect(ids(page)).toEqual(['launch-eu']);
  });

  it('refuses unusable capacity filters with 400', () => {
    const d = new Directory();
    for (const filter of [
      { field: 'capacity', operator: 'gt', value: 'ten' },
      { field: 'capacity', operator: 'contains', value: '1' },
    ] as const) {
      try {
        list(d, { filters: [filter] });
        throw new Error('expected a failure');
      } catch (error) {
        expect(isServiceError(error) && error.code).toBe('BAD_REQUEST');
      }
    }
  });

  it('fans global bans out to the other rooms, and sends a new room every active global ban', () => {
    const d = new Directory();
    d.send({ op: 'room-upsert', rev: 1, summary: summary('a') });
    d.send({ op: 'room-upsert', rev: 1, summary: summary('b') });
    expect(d.take().map((s) => s.message)).toEqual([
      { op: 'global-bans-sync', bans: [] },
      { op: 'global-bans-sync', bans: [] },
    ]);
    d.send({ op: 'global-ban', member_id: 'x', origin_room_id: 'a', banned_until: null });
    d.send({ op: 'global-ban', member_id: 'y', origin_room_id: 'b', banned_until: T0 + 1000 });
    expect(d.take()).toEqual([
      { kind: 'waiting-room', key: JSON.stringify(['tenant-1', 'b']), message: { op: 'global-ban-apply', member_id: 'x', origin_room_id: 'a', banned_until: null } },
      { kind: 'waiting-room', key: JSON.stringify(['tenant-1', 'a']), message: { op: 'global-ban-apply', member_id: 'y', origin_room_id: 'b', banned_until: T0 + 1000 } },
    ]);
    expect(d.send({ op: 'global-bans', member_id: 'x' })).toEqual(['a']);
    d.now = T0 + 1000;
    d.send({ op: 'room-upsert', rev: 1, summary: summary('c') });
    expect(d.take()).toEqual([
      { kind: 'waiting-room', key: JSON.stringify(['tenant-1', 'c']), message: { op: 'global-bans-sync', bans: [{ member_id: 'x', origin_room_id: 'a', banned_until: null }] } },
    ]);
    // An update of a known room sends nothing.
    d.send({ op: 'room-upsert', rev: 2, summary: summary('c') });
    expect(d.take()).toEqual([]);
    expect(d.send({ op: 'global-bans', member_id: 'y' })).toEqual([]);
    expect(d.records.has('g:' + JSON.stringify(['y', 'b']))).toBe(false);
    d.reload();
    expect(d.send({ op: 'global-bans', member_id: 'x' })).toEqual(['a']);
    d.send({ op: 'global-unban', member_id: 'x', origin_room_id: 'a' });
    expect(d.take().map((s) => [s.key, s.message])).toEqual([
      [JSON.stringify(['tenant-1', 'b']), { op: 'global-ban-remove', member_id: 'x', origin_room_id: 'a' }],
      [JSON.stringify(['tenant-1', 'c']), { op: 'global-ban-remove', member_id: 'x', origin_room_id: 'a' }],
    ]);
    expect(d.send({ op: 'global-bans', member_id: 'x' })).toEqual([]);
  });
});
