import { describe, expect, it } from 'vitest';
import { ProbationQueue } from '../../runtime/probation.js';

const entry = (name: string) => ({ name, probation: false });

describe('ProbationQueue', () => {
  it('gives the oldest still on probation, skipping those promoted or dropped', () => {
    const queue = new ProbationQueue<ReturnType<typeof entry>>();
    const [a, b, c] = [entry('a'), entry('b'), entry('c')];
    for (const x of [a, b, c]) queue.add(x);
    expect(queue.size).toBe(3);
    expect(a.probation).toBe(true);
    queue.release(a);
    queue.release(a); // twice: counted once
    expect(queue.size).toBe(2);
    expect(queue.oldest()).toBe(b);
    queue.requeueOldest();
    expect(queue.oldest()).toBe(c);
    queue.release(c);
    expect(queue.oldest()).toBe(b);
    queue.release(b);
    expect(queue.oldest()).toBeUndefined();
    expect(queue.size).toBe(0);
  });

  it('does not hold on to entries that left probation (the queue is compacted)', () => {
    const queue = new ProbationQueue<ReturnType<typeof entry>>();
    const kept = entry('kept');
    queue.add(kept);
    for (let i = 0; i < 100_000; i++) {
      const x = entry(`x${i}`);
      queue.add(x);
      queue.release(x);
    }
    expect(queue.size).toBe(1);
    expect((queue as unknown as { entries: unknown[]; head: number }).entries.length).toBeLessThan(2_100);
    expect(queue.oldest()).toBe(kept);
  });

  it('lets go of what the head has passed: a stream trimmed at the head keeps the queue bounded', () => {
    // The fresh-key load: new actors join at the back while the trim drops the oldest. The passed
    // prefix once stayed in the array, holding every activation ever trimmed.
    const queue = new ProbationQueue<ReturnType<typeof entry>>();
    const internals = queue as unknown as { entries: unknown[]; head: number };
    for (let i = 0; i < 200_000; i++) {
      queue.add(entry(`x${i}`));
      if (queue.size > 5_000) queue.release(queue.oldest()!);
    }
    expect(queue.size).toBe(5_000);
    expect(internals.entries.length).toBeLessThan(2 * 5_000 + 2_100);
    expect(internals.entries.slice(0, internals.head).every((slot) => slot === undefined)).toBe(true);
    expect(queue.oldest()).toMatchObject({ name: 'x195000' });
  });
});
