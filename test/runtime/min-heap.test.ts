import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MinHeap } from '../../runtime/index.js';

interface Entry {
  at: number;
  seq: number;
}
const before = (a: Entry, b: Entry) => a.at < b.at || (a.at === b.at && a.seq < b.seq);
const sorted = (entries: Entry[]) => entries.slice().sort((a, b) => a.at - b.at || a.seq - b.seq);
const drain = (heap: MinHeap<Entry>) => {
  const out: Entry[] = [];
  for (let entry = heap.pop(); entry; entry = heap.pop()) out.push(entry);
  return out;
};
const entries = fc.array(fc.record({ at: fc.integer({ min: 0, max: 50 }), seq: fc.nat() }), { maxLength: 200 });

describe('MinHeap', () => {
  it('pops in order whatever the pushes, with peek always the next pop', () => {
    fc.assert(
      fc.property(entries, (list) => {
        const heap = new MinHeap(before);
        list.forEach((entry) => heap.push(entry));
        expect(heap.size).toBe(list.length);
        expect(heap.peek()).toEqual(sorted(list)[0]);
        expect(drain(heap)).toEqual(sorted(list));
        expect(heap.pop()).toBeUndefined();
      }),
    );
  });

  it('rebuild replaces the content and keeps the order, also with pushes and pops after it', () => {
    fc.assert(
      fc.property(entries, entries, (first, second) => {
        const heap = new MinHeap(before);
        first.forEach((entry) => heap.push(entry));
        heap.rebuild(second);
        const extra = { at: 25, seq: -1 };
        heap.push(extra);
        expect(drain(heap)).toEqual(sorted([...second, extra]));
      }),
    );
  });

  it('rebuild copies its input', () => {
    const input = [{ at: 2, seq: 0 }, { at: 1, seq: 0 }];
    const heap = new MinHeap(before);
    heap.rebuild(input);
    heap.pop();
    expect(input).toHaveLength(2);
  });
});
