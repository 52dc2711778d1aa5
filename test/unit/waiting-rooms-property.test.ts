import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { MembersView, PositionView } from '../../actors/waiting-rooms/messages.js';
import { createRoom, RoomDriver } from './waiting-rooms-driver.js';

/**
 * Property: whatever sequence of joins, leaves, admissions (all, per group,
 * by id), rejections, refreshes, time passing (sessions expiring) and
 * reloads happens, the waiting members' positions are exactly 1..n with no
 * gaps, in priority-then-join order, and a reload from the records agrees.
 */
const GROUPS = [
  { name: 'vip', boost: 10, match_rules: { tier: 'gold' } },
  { name: 'staff', boost: 10, match_rules: null },
  { name: 'late', boost: 0, match_rules: null },
];
const BOOST: Record<string, number> = { default: 0, vip: 10, staff: 10, late: 0 };

const op = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('join' as const), member: fc.nat(30), group: fc.constantFrom('none', 'gold-metadata', 'staff', 'late') }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('leave' as const), member: fc.nat(30) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('admit' as const), count: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('admit-group' as const), group: fc.constantFrom('default', 'vip', 'staff', 'late') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('admit-ids' as const), members: fc.array(fc.nat(30), { maxLength: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reject' as const), members: fc.array(fc.nat(30), { minLength: 1, maxLength: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('refresh' as const), member: fc.nat(30) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('time' as const), ms: fc.integer({ min: 1, max: 40_000 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reload' as const }) },
);

function attempt(fn: () => unknown): void {
  try {
    fn();
  } catch (error) {
    if (!(error instanceof Error) || error.name !== 'ServiceError') throw error;
  }
}

function checkLine(d: RoomDriver): MembersView {
  const view = d.send<MembersView>({ op: 'members', status: 'waiting', limit: 1000 });
  const positions = view.members.map((m) => m.position);
  expect(positions).toEqual(positions.map((_, i) => i + 1));
  expect(view.total).toBe(view.members.length);
  // Priority first, then join order within a boost.
  for (let i = 1; i < view.members.length; i++) {
    const [a, b] = [view.members[i - 1], view.members[i]];
    expect(a.priority >= b.priority).toBe(true);
    if (a.priority === b.priority) expect(a.joined_at <= b.joined_at).toBe(true);
    expect(b.priority).toBe(BOOST[b.group_id]);
  }
  for (const member of view.members) {
    const position = d.send<PositionView>({ op: 'position', member_id: member.member_id });
    expect(position).toMatchObject({ status: 'waiting', position: member.position, ahead_count: member.position - 1 });
  }
  const active = d.send<MembersView>({ op: 'members', status: 'active', limit: 1000 });
  expect(active.total).toBeLessThanOrEqual(5);
  return view;
}

/** Admission batch records: each one stored is relied on by a member, and each member relying on one has it stored. */
function checkBatches(d: RoomDriver): void {
  const stored = [...d.records.keys()].filter((k) => k.startsWith('a:')).map((k) => Number(k.slice(2)));
  const reliedOn = new Set<number>();
  for (const member of d.state.members.values()) {
    if (member.batch !== null) {
      expect(member.status).toBe('active');
      reliedOn.add(member.batch);
    }
  }
  expect(stored.sort()).toEqual([...reliedOn].sort());
}

describe('waiting room positions (property)', () => {
  it('always form 1..n with no gaps, in service order, and survive a reload', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        const d = new RoomDriver();
        createRoom(d, { capacity: 5, session_ttl_seconds: 30, priority_groups: GROUPS });
        for (const step of ops) {
          const id = (n: number) => `m${n}`;
          switch (step.kind) {
            case 'join': {
              const extra =
                step.group === 'gold-metadata' ? { metadata: { tier: 'gold' } } : step.group === 'none' ? {} : { priority_group: step.group };
              attempt(() => d.send({ op: 'join', member_id: id(step.member), ...extra }));
              d.skip(1);
              break;
            }
            case 'leave':
              attempt(() => d.send({ op: 'leave', member_id: id(step.member) }));
              break;
            case 'admit':
              d.send({ op: 'admit', count: step.count });
              break;
            case 'admit-group':
              d.send({ op: 'admit', group: step.group });
              break;
            case 'admit-ids':
              if (step.members.length > 0) d.send({ op: 'admit', member_ids: step.members.map(id) });
              break;
            case 'reject':
              d.send({ op: 'reject', member_ids: step.members.map(id), reason: 'property' });
              break;
            case 'refresh':
              attempt(() => d.send({ op: 'refresh', member_id: id(step.member) }));
              break;
            case 'time':
              d.advance(step.ms);
              break;
            case 'reload':
              d.reload();
              break;
          }
          checkLine(d);
        }
        checkBatches(d);
        const before = checkLine(d);
        const activeBefore = d.send({ op: 'members', status: 'active', limit: 1000 });
        d.reload();
        expect(checkLine(d)).toEqual(before);
        expect(d.send({ op: 'members', status: 'active', limit: 1000 })).toEqual(activeBefore);
      }),
      { numRuns: 150 },
    );
  });
});
