import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Fenwick } from '../../actors/waiting-rooms/fenwick.js';
import { WaitingQueue, type QueueEntry } from '../../actors/waiting-rooms/queue.js';
import { matchesRules, validateMatchRules } from '../../actors/waiting-rooms/rules.js';

/** The order-statistic line against a naive model (sort by boost desc, then join order). */
interface Entry extends QueueEntry {
  boost: number;
}

function entry(member_id: string, seq: number, group: string, boost: number): Entry {
  return { member_id, seq, group, boost, slot: -1, cls: null };
}

const GROUPS: [string, number][] = [
  ['default', 0],
  ['vip', 10],
  ['staff', 10],
  ['late', 0],
  ['press', 5],
];

function naiveOrder(live: Entry[]): Entry[] {
  return live.slice().sort((a, b) => b.boost - a.boost || a.seq - b.seq);
}

function checkAgainstModel(queue: WaitingQueue<Entry>, live: Entry[]): void {
  const order = naiveOrder(live);
  expect(queue.size).toBe(order.length);
  const positions = order.map((e) => queue.position(e));
  // Positions are exactly 1..n with no gaps, in service order.
  expect(positions).toEqual(order.map((_, i) => i + 1));
  for (let k = 1; k <= order.length; k++) expect(queue.at(k)).toBe(order[k - 1]);
  expect(queue.first()).toBe(order[0] ?? null);
  for (const [group, boost] of GROUPS) {
    const members = order.filter((e) => e.group === group);
    expect(queue.groupCount(group, boost)).toBe(members.length);
    expect(queue.groupPositionSum(group, boost)).toBe(members.reduce((sum, e) => sum + order.indexOf(e) + 1, 0));
    for (let k = 1; k <= members.length; k++) expect(queue.groupAt(group, boost, k)).toBe(members[k - 1]);
  }
}

describe('Fenwick', () => {
  it('appends, updates, sums and selects like a plain array', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(3), fc.nat(1000)), { maxLength: 300 }), (ops) => {
        const fenwick = new Fenwick(1);
        const plain: number[] = [];
        for (const [kind, n] of ops) {
          if (kind === 0 || plain.length === 0) {
            const value = n % 2;
            fenwick.push(value);
            plain.push(value);
          } else if (kind === 1) {
            const i = n % plain.length;
            const delta = plain[i] > 0 ? -1 : 1;
            fenwick.add(i, delta);
            plain[i] += delta;
          } else {
            const i = n % plain.length;
            expect(fenwick.prefix(i)).toBe(plain.slice(0, i + 1).reduce((a, b) => a + b, 0));
            const total = plain.reduce((a, b) => a + b, 0);
            const k = (n % (total + 1)) + 1;
            let acc = 0;
            let expected = -1;
            for (let j = 0; j < plain.length; j++) {
              acc += plain[j];
              if (acc >= k) {
                expected = j;
                break;
              }
            }
            expect(fenwick.findKth(k)).toBe(expected);
          }
        }
        expect(Fenwick.from(plain).prefix(plain.length - 1)).toBe(fenwick.prefix(plain.length - 1));
      }),
      { numRuns: 200 },
    );
  });
});

describe('waiting line (order statistics)', () => {
  it('keeps positions 1..n with no gaps, priority first, FIFO within a class, under random joins, leaves and admissions', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('join' as const), group: fc.nat(GROUPS.length - 1) }),
      fc.record({ kind: fc.constant('leave' as const), pick: fc.nat(10_000) }),
      fc.record({ kind: fc.constant('admit' as const), count: fc.integer({ min: 1, max: 5 }) }),
      fc.record({ kind: fc.constant('admit-group' as const), group: fc.nat(GROUPS.length - 1) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 250 }), (ops) => {
        const queue = new WaitingQueue<Entry>();
        let live: Entry[] = [];
        let seq = 0;
        for (const step of ops) {
          if (step.kind === 'join') {
            const [group, boost] = GROUPS[step.group];
            const e = entry(`m${seq}`, ++seq, group, boost);
            queue.add(e, boost);
            live.push(e);
          } else if (step.kind === 'leave' && live.length > 0) {
            const e = live[step.pick % live.length];
            queue.remove(e);
            live = live.filter((x) => x !== e);
          } else if (step.kind === 'admit') {
            for (let i = 0; i < step.count; i++) {
              const next = queue.first();
              if (!next) break;
              expect(next).toBe(naiveOrder(live)[0]);
              queue.remove(next);
              live = live.filter((x) => x !== next);
            }
          } else if (step.kind === 'admit-group') {
            const [group, boost] = GROUPS[step.group];
            const next = queue.groupAt(group, boost, 1);
            expect(next).toBe(naiveOrder(live).find((e) => e.group === group) ?? null);
            if (next) {
              queue.remove(next);
              live = live.filter((x) => x !== next);
            }
          }
        }
        checkAgainstModel(queue, live);
      }),
      { numRuns: 300 },
    );
  });

  it('stays exact across compaction of a long class', () => {
    const queue = new WaitingQueue<Entry>();
    let live: Entry[] = [];
    for (let i = 0; i < 5000; i++) {
      const [group, boost] = GROUPS[i % 2 === 0 ? 0 : 3];
      const e = entry(`m${i}`, i + 1, group, boost);
      queue.add(e, boost);
      live.push(e);
    }
    // Remove 3 of every 4 members, from the middle, so compaction runs several times.
    live = live.filter((e, i) => {
      if (i % 4 !== 0) {
        queue.remove(e);
        return false;
      }
      return true;
    });
    checkAgainstModel(queue, live);
    for (let i = 0; i < 1000; i++) {
      const next = queue.first()!;
      queue.remove(next);
    }
    live = live.slice(1000);
    checkAgainstModel(queue, live);
  });
});

describe('match rules', () => {
  it('implements equality, lists, operators and any-of lists', () => {
    expect(matchesRules({ tier: 'gold' }, { tier: 'gold' })).toBe(true);
    expect(matchesRules({ tier: 'gold' }, { tier: 'silver' })).toBe(false);
    expect(matchesRules({ tier: ['gold', 'platinum'] }, { tier: 'platinum' })).toBe(true);
    expect(matchesRules({ age: { gte: 18, lt: 65 } }, { age: 30 })).toBe(true);
    expect(matchesRules({ age: { gte: 18 } }, { age: '30' })).toBe(false);
    expect(matchesRules({ beta: { exists: true } }, {})).toBe(false);
    expect(matchesRules({ beta: { exists: false } }, {})).toBe(true);
    expect(matchesRules({ country: { nin: ['XX'] } }, { country: 'FR' })).toBe(true);
    expect(matchesRules([{ tier: 'gold' }, { staff: true }], { staff: true })).toBe(true);
    expect(matchesRules({}, null)).toBe(true);
    expect(matchesRules(null, { tier: 'gold' })).toBe(false);
  });

  it('rejects malformed rules with the failing field', () => {
    expect(validateMatchRules({ tier: { like: 'g%' } }, 'r')).toEqual([{ field: 'r.tier.like', message: expect.stringContaining('unknown operator') }]);
    expect(validateMatchRules('gold', 'r')[0].field).toBe('r');
    expect(validateMatchRules([], 'r')[0].field).toBe('r');
    expect(validateMatchRules({ tier: { nested: true } }, 'r').length).toBe(1);
    expect(validateMatchRules({ tier: [{}] }, 'r')[0].field).toBe('r.tier.0');
    expect(validateMatchRules({ age: { gt: true } }, 'r')[0].field).toBe('r.age.gt');
    expect(validateMatchRules({ tier: 'gold', n: { in: [1, 2] } }, 'r')).toEqual([]);
  });
});
